/* SPDX-License-Identifier: GPL-2.0 */
/*
 * CFS bandwidth throttling as the cause of a wait, read in the kernel.
 * A group whose quota ran out stops on a CPU: its cfs_rq there is
 * throttled, and every cfs_rq below it is in a throttled hierarchy (its
 * throttle_count). stalltop keeps, per CPU, spans of the throttled cfs_rqs
 * it saw: a span opens when a task of a throttled hierarchy leaves that CPU
 * (a context switch) or is woken onto it (a group throttled as the task is
 * enqueued, on a CPU where none of its tasks ran: no switch shows that),
 * and closes at the first switch there after its cfs_rq is unthrottled.
 * A wait that spans of its task's hierarchy covered for at least half, on
 * the CPU where it ended and on those it was moved from (weighed at each
 * move, on the CPU left), was a throttle, not a neighbour nor an idle CPU.
 *
 * Kernel addresses kept between events are read with probe reads: the
 * cgroup may be gone by then.
 */
#ifndef STALLTOP_THROTTLE_BPF_H
#define STALLTOP_THROTTLE_BPF_H

#include "common.bpf.h"

/* Priorities below this are real-time (and deadline) tasks: no CFS quota
 * throttles them. */
#define MAX_RT_PRIO 100
/* Cgroup levels walked up from a task's cfs_rq. */
#define THROTTLE_DEPTH 8
/* A span open this long is stale (its cgroup went away while throttled;
 * the longest CFS period is 1 s): it explains nothing. */
#define THROTTLE_SPAN_MAX_NS 2000000000ULL

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); /* user space sets the number of possible CPUs */
	__type(key, __u32);
	__type(value, struct cpu_throttles);
} throttle_spans SEC(".maps");

static __always_inline struct cpu_throttles *throttles_of(__u32 cpu)
{
	return bpf_map_lookup_elem(&throttle_spans, &cpu);
}

/* `throttled` is an int in older kernels, a one-bit field in newer ones:
 * declared here as the int, libbpf relocates the read to either (clang 14
 * cannot take the bit field's field info from vmlinux.h's layout). */
struct cfs_rq___throttled {
	int throttled;
} __attribute__((preserve_access_index));

static __always_inline bool cfs_rq_is_throttled(struct cfs_rq *cfs_rq)
{
	struct cfs_rq___throttled *c = (void *)cfs_rq;

	return BPF_CORE_READ_BITFIELD_PROBED(c, throttled);
}

/* Whether `cfs_rq` is in a throttled hierarchy: throttled
 * itself or below a throttled one. False without CONFIG_CFS_BANDWIDTH. */
static __always_inline bool in_throttled_hierarchy(bool btf, struct cfs_rq *cfs_rq)
{
	if (!cfs_rq || !bpf_core_field_exists(struct cfs_rq, throttle_count))
		return false;
	return FIELD(btf, cfs_rq, throttle_count) > 0;
}

/* The cfs_rq task `t` is queued on (NULL without CONFIG_FAIR_GROUP_SCHED). */
static __always_inline struct cfs_rq *task_cfs_rq(bool btf, struct task_struct *t)
{
	if (!bpf_core_field_exists(t->se.cfs_rq))
		return NULL;
	return FIELD(btf, t, se.cfs_rq);
}

/* The addresses a walk up from task `t` starts from, as numbers (a global
 * function takes no kernel pointers): its cfs_rq and its group's entity. */
static __always_inline __u64 task_leaf(struct task_struct *t)
{
	if (!bpf_core_field_exists(t->se.cfs_rq))
		return 0;
	return (__u64)BPF_CORE_READ(t, se.cfs_rq);
}

static __always_inline __u64 task_group_entity(struct task_struct *t)
{
	if (!bpf_core_field_exists(t->se.parent))
		return 0;
	return (__u64)BPF_CORE_READ(t, se.parent);
}

/* The CPU of the run queue `cfs_rq` belongs to. */
static __always_inline __u32 cfs_rq_cpu(bool btf, struct cfs_rq *cfs_rq)
{
	struct rq *rq = FIELD(btf, cfs_rq, rq);

	return rq ? FIELD(btf, rq, cpu) : 0;
}

/* A task queued on the cfs_rq at `leaf` on CPU `cpu`, whose group's entity
 * is at `group_se`, is in a throttled hierarchy there: open a span on that
 * CPU for the throttled cfs_rq among the ancestors, unless one is open for
 * it already. The caller holds that CPU's run-queue lock. (A global
 * function: the verifier checks it once; such a function must return a
 * scalar, here always 0.) */
__noinline int throttle_span_open(__u32 cpu, __u64 leaf, __u64 group_se, __u64 now)
{
	struct cpu_throttles *ct = throttles_of(cpu);
	struct sched_entity *e = (void *)group_se;
	struct cfs_rq *cfs_rq = (void *)leaf;
	struct throttle_span *span;
	__u32 i, depth;

	if (!ct || !cfs_rq)
		return 0;
	for (depth = 0; depth < THROTTLE_DEPTH; depth++) {
		if (cfs_rq_is_throttled(cfs_rq))
			break;
		if (!e)
			return 0;
		cfs_rq = BPF_CORE_READ(e, cfs_rq);
		if (!cfs_rq)
			return 0;
		e = BPF_CORE_READ(e, parent);
	}
	if (depth == THROTTLE_DEPTH)
		return 0;
	for (i = 0; i < THROTTLE_SPANS; i++)
		if (ct->spans[i].cfs_rq == (__u64)cfs_rq && !ct->spans[i].end)
			return 0;
	span = &ct->spans[ct->next++ & (THROTTLE_SPANS - 1)];
	if (span->cfs_rq && !span->end && ct->open)
		ct->open--; /* an open span is overwritten */
	span->cfs_rq = (__u64)cfs_rq;
	span->cgroup = BPF_CORE_READ(cfs_rq, tg, css.cgroup, kn, id);
	span->start = now;
	span->end = 0;
	ct->open++;
	return 0;
}

/* CPU `cpu`'s open spans whose cfs_rq is throttled no more end now; stale
 * ones end where they began. Run by that CPU's switches. */
__noinline int throttle_spans_close(__u32 cpu, __u64 now)
{
	struct cpu_throttles *ct = throttles_of(cpu);
	__u32 i;

	if (!ct)
		return 0;
	for (i = 0; i < THROTTLE_SPANS; i++) {
		struct throttle_span *span = &ct->spans[i];

		if (!span->cfs_rq || span->end)
			continue;
		if (now - span->start > THROTTLE_SPAN_MAX_NS)
			span->end = span->start;
		else if (!cfs_rq_is_throttled((struct cfs_rq *)span->cfs_rq))
			span->end = now;
		else
			continue;
		if (ct->open)
			ct->open--;
	}
	return 0;
}

/* How much of [start, now] a throttle of a waiting task's cgroup or an
 * ancestor (its cfs_rq at `leaf`, its group's entity at `group_se`, both
 * on CPU `cpu`) covered there: sets this CPU's wait_throttle (the scratch
 * of the calling program) from the span of those cfs_rqs on CPU `cpu` that
 * covers the most, or to zero. */
__noinline int throttle_cover(__u32 cpu, __u64 leaf, __u64 group_se, __u64 start, __u64 now)
{
	struct cpu_throttles *ct = throttles_of(cpu);
	struct cpu_state *cs = this_cpu();
	__u64 hierarchy[THROTTLE_DEPTH] = {};
	struct sched_entity *e = (void *)group_se;
	__u64 best_covered = 0, best_cgroup = 0;
	bool any = false;
	__u32 i, d;

	if (!cs)
		return 0;
	cs->wait_throttle.cgroup = 0;
	cs->wait_throttle.covered_ns = 0;
	if (!ct || !leaf)
		return 0;
	for (i = 0; i < THROTTLE_SPANS; i++) {
		struct throttle_span *span = &ct->spans[i];

		if (span->cfs_rq && span->start < now && (!span->end || span->end > start))
			any = true;
	}
	if (!any)
		return 0;
	hierarchy[0] = leaf;
	for (d = 1; d < THROTTLE_DEPTH && e; d++) {
		hierarchy[d] = (__u64)BPF_CORE_READ(e, cfs_rq);
		e = BPF_CORE_READ(e, parent);
	}
	for (i = 0; i < THROTTLE_SPANS; i++) {
		struct throttle_span *span = &ct->spans[i];
		__u64 from = span->start > start ? span->start : start;
		__u64 to = span->end && span->end < now ? span->end : now;

		if (!span->cfs_rq || to <= from || to - from <= best_covered)
			continue;
		for (d = 0; d < THROTTLE_DEPTH; d++) {
			if (hierarchy[d] == span->cfs_rq) {
				best_covered = to - from;
				best_cgroup = span->cgroup;
				break;
			}
		}
	}
	cs->wait_throttle.cgroup = best_cgroup;
	cs->wait_throttle.covered_ns = best_covered;
	return 0;
}

/* Whether a quota throttle explains the wait of `waiter` of `wait` ns that
 * ends now on CPU `cpu`, where it waited since `here_since` (moved there if
 * `cw`, which carries what throttles covered on the CPUs it left): this
 * CPU's wait_throttle is left at the throttled cgroup and the time covered
 * if throttles covered at least half of the wait, else at zero. */
static __always_inline void wait_throttle_judge(struct cpu_state *cs, __u32 cpu,
						struct task_struct *waiter, __u64 here_since,
						__u64 now, __u64 wait,
						const struct carried_wait *cw)
{
	struct cpu_throttles *ct = throttles_of(cpu);
	__u64 carried = cw ? cw->throttled_ns : 0, here, covered;

	cs->wait_throttle.cgroup = 0;
	cs->wait_throttle.covered_ns = 0;
	if (ct && ct->next) /* a span was ever opened here */
		throttle_cover(cpu, task_leaf(waiter), task_group_entity(waiter), here_since, now);
	here = cs->wait_throttle.covered_ns;
	covered = here + carried;
	if (!covered || covered * 2 < wait) {
		cs->wait_throttle.cgroup = 0;
		cs->wait_throttle.covered_ns = 0;
		return;
	}
	if (cw && cw->throttled_most_ns > here)
		cs->wait_throttle.cgroup = cw->throttled_cgroup;
	cs->wait_throttle.covered_ns = covered < wait ? covered : wait;
}

#endif /* STALLTOP_THROTTLE_BPF_H */
