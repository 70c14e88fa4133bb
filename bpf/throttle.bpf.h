/* SPDX-License-Identifier: GPL-2.0 */
/*
 * CFS bandwidth throttling as the cause of a wait, read in the kernel.
 * A group whose quota ran out leaves the CPU at a context switch: the task
 * switched out sits in a throttled hierarchy (its cfs_rq's throttle_count,
 * kept for every cfs_rq below the throttled one). That switch opens a span
 * for the throttled cfs_rq on this CPU; the first switch after the cfs_rq
 * is unthrottled closes it. A wait that such a span of its task's cgroup,
 * or of an ancestor, covered for at least half was a throttle, not a
 * neighbour.
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

/* A task queued on the cfs_rq at `leaf`, whose group's entity is at
 * `group_se`, left this CPU in a throttled hierarchy: open a span for the
 * throttled cfs_rq among the ancestors, unless one is open for it already.
 * (A global function: the verifier checks it once; such a function must
 * return a scalar, here always 0.) */
__noinline int throttle_span_open(__u64 leaf, __u64 group_se, __u64 now)
{
	struct cpu_state *cs = this_cpu();
	struct sched_entity *e = (void *)group_se;
	struct cfs_rq *cfs_rq = (void *)leaf;
	struct throttle_span *span;
	__u32 i, depth;

	if (!cs || !cfs_rq)
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
		if (cs->throttles[i].cfs_rq == (__u64)cfs_rq && !cs->throttles[i].end)
			return 0;
	span = &cs->throttles[cs->next_throttle++ & (THROTTLE_SPANS - 1)];
	if (span->cfs_rq && !span->end && cs->throttles_open)
		cs->throttles_open--; /* an open span is overwritten */
	span->cfs_rq = (__u64)cfs_rq;
	span->cgroup = BPF_CORE_READ(cfs_rq, tg, css.cgroup, kn, id);
	span->start = now;
	span->end = 0;
	cs->throttles_open++;
	return 0;
}

/* This CPU's open spans whose cfs_rq is throttled no more end now; stale
 * ones end where they began. */
__noinline int throttle_spans_close(__u64 now)
{
	struct cpu_state *cs = this_cpu();
	__u32 i;

	if (!cs)
		return 0;
	for (i = 0; i < THROTTLE_SPANS; i++) {
		struct throttle_span *span = &cs->throttles[i];

		if (!span->cfs_rq || span->end)
			continue;
		if (now - span->start > THROTTLE_SPAN_MAX_NS)
			span->end = span->start;
		else if (!cfs_rq_is_throttled((struct cfs_rq *)span->cfs_rq))
			span->end = now;
		else
			continue;
		if (cs->throttles_open)
			cs->throttles_open--;
	}
	return 0;
}

/* Whether a throttle of a waiting task's cgroup or an ancestor (its cfs_rq
 * at `leaf`, its group's entity at `group_se`) covered at least half of
 * its wait [start, now] on this CPU: if so, sets this CPU's wait_throttle
 * (zero on entry) from the span of those cfs_rqs that covers the most. */
__noinline int wait_throttle_judge(__u64 leaf, __u64 group_se, __u64 start, __u64 now)
{
	struct cpu_state *cs = this_cpu();
	__u64 hierarchy[THROTTLE_DEPTH] = {};
	struct sched_entity *e = (void *)group_se;
	__u64 best_covered = 0, best_cgroup = 0;
	bool any = false;
	__u32 i, d;

	if (!cs)
		return 0;
	for (i = 0; i < THROTTLE_SPANS; i++) {
		struct throttle_span *span = &cs->throttles[i];

		if (span->cfs_rq && span->start < now && (!span->end || span->end > start))
			any = true;
	}
	if (!any || !leaf)
		return 0;
	hierarchy[0] = leaf;
	for (d = 1; d < THROTTLE_DEPTH && e; d++) {
		hierarchy[d] = (__u64)BPF_CORE_READ(e, cfs_rq);
		e = BPF_CORE_READ(e, parent);
	}
	for (i = 0; i < THROTTLE_SPANS; i++) {
		struct throttle_span *span = &cs->throttles[i];
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
	if (best_covered * 2 < now - start)
		return 0;
	cs->wait_throttle.cgroup = best_cgroup;
	cs->wait_throttle.covered_ns = best_covered;
	return 0;
}

#endif /* STALLTOP_THROTTLE_BPF_H */
