/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Waits that move between CPUs. Load balancing and affinity changes move
 * exactly the tasks that wait; the scheduler then folds the wait so far
 * into the task's sched_info.run_delay and stamps sched_info.last_queued
 * anew on the destination, so the switch that finally runs the task sees
 * only its last stretch. At the migration (sched_migrate_task, a queued
 * task) this file notes when the wait began and who held the CPU it
 * leaves; that switch then counts the whole wait and weighs that holder
 * against the ones of its last CPU.
 *
 * When the wait began: from the task's run_delay, against the value it had
 * when the task last ran (kept in `run_marks`, an array written at every
 * switch-in: no hash lookup on the hot path); without sched_info, from its
 * wakeup stamp, which migrations leave alone.
 */
#ifndef STALLTOP_MIGRATION_BPF_H
#define STALLTOP_MIGRATION_BPF_H

#include "common.bpf.h"
#include "slices.bpf.h"
#include "throttle.bpf.h"

/* task_struct.on_rq of a task taken off one run queue for another. */
#define TASK_ON_RQ_MIGRATING 2

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, RUN_MARKS);
	__type(key, __u32);
	__type(value, struct run_mark);
} run_marks SEC(".maps");

/* LRU: a carried wait whose mark another thread took over is never read
 * again; it ages out. Preallocated, so inserting never allocates (the
 * migration hook runs under run-queue locks). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct carried_wait);
} carried_waits SEC(".maps");

static __always_inline struct run_mark *run_mark_of(__u32 tid)
{
	__u32 key = tid & (RUN_MARKS - 1);

	return bpf_map_lookup_elem(&run_marks, &key);
}

/* The task's total run-queue wait as sched_info counts it (0 without). */
static __always_inline __u64 run_delay_of(bool btf, struct task_struct *t)
{
	if (!bpf_core_field_exists(struct task_struct, sched_info))
		return 0;
	return FIELD(btf, t, sched_info.run_delay);
}

/* The mark's `carried` for `p` as of now: its switch-ins so far, by
 * sched_info (the low 32 bits), + 1 (never 0, the mark's "none", but
 * after 2^32 - 1 runs); 1 without sched_info. At sched_switch, next's
 * count does not yet include that switch. */
static __always_inline __u32 carried_mark(bool btf, struct task_struct *p)
{
	if (!bpf_core_field_exists(struct task_struct, sched_info))
		return 1;
	return (__u32)FIELD(btf, p, sched_info.pcount) + 1;
}

/* `next` (thread `tid`, mark `m`) runs now, after waiting `kernel_wait` ns
 * here as sched_info counts it (0: it did not wait): its mark takes the
 * run_delay the scheduler is about to count, and forgets its wakeup.
 * Returns the wait it carried from other CPUs, if it was moved while it
 * waited. */
static __always_inline struct carried_wait *run_mark_switch_in(bool btf, struct task_struct *next,
							       __u32 tid, struct run_mark *m,
							       __u64 kernel_wait)
{
	struct carried_wait *cw = NULL;
	__u32 carried = carried_mark(btf, next);

	if (!m)
		return NULL;
	/* Not if it ran since it moved, by a switch the probes did not see:
	 * the wait ending now began after that run. (The count is read for
	 * every switch-in, on the line runq_wait reads: one more test in
	 * the branch there was, not a branch of its own, which split the
	 * verifier's states through the rest of the handler.) */
	if (m->tid == tid && m->carried == carried)
		cw = bpf_map_lookup_elem(&carried_waits, &tid);
	m->tid = tid;
	m->carried = 0;
	m->woken_at = 0;
	if (!runq_from_wakeup)
		m->run_delay = run_delay_of(btf, next) + kernel_wait;
	return cw;
}

/* EEVDF's delayed dequeue (6.12+) keeps a task that goes to sleep owing
 * CPU time on its run queue until it is picked or woken, and it can be
 * moved meanwhile. Declared here: vmlinux.h of an older kernel (the
 * committed arm64 one) lacks the field. */
struct sched_entity___delayed {
	unsigned char sched_delayed;
} __attribute__((preserve_access_index));

static __always_inline bool kernel_delays_dequeue(void)
{
	return bpf_core_field_exists(struct sched_entity___delayed, sched_delayed);
}

/* Whether `p` is asleep though still queued (false on kernels without
 * delayed dequeue). */
static __always_inline bool asleep_in_queue(bool btf, struct task_struct *p)
{
	struct sched_entity___delayed *se = (void *)&p->se;

	if (!kernel_delays_dequeue())
		return false;
	return FIELD(btf, se, sched_delayed);
}

/* `p` (thread `tid`) is being woken: its mark keeps the wakeup's time, the
 * earliest its wait can begin. With delayed dequeue sched_info can count
 * the sleep before it as waiting, two ways: a task moved while asleep in
 * the queue keeps the stamp of that move (counted at its switch-in), and
 * one woken to a busy CPU is first dequeued as a sleeper, which adds the
 * time since such a stamp to run_delay at once (and the wakeup stamps
 * anew). Kernels without delayed dequeue never queue a sleeping task. */
static __always_inline void run_mark_wakeup(bool btf, struct task_struct *p, __u32 tid)
{
	struct run_mark *m;

	if (runq_from_wakeup || !kernel_delays_dequeue())
		return;
	m = run_mark_of(tid);
	if (!m)
		return;
	if (m->tid != tid) {
		m->tid = tid;
		m->carried = 0;
		m->run_delay = run_delay_of(btf, p);
	}
	m->woken_at = bpf_ktime_get_ns();
}

/* When the wait of `p` (thread `tid`, mark `m`), being migrated at `now`,
 * began; 0 if unknown. */
static __always_inline __u64 wait_began(bool btf, struct task_struct *p, __u32 tid,
					struct run_mark *m, __u64 now)
{
	__u64 delay, base;

	if (runq_from_wakeup) {
		struct task_state *ts = task_state_of(p, tid, false);

		return ts ? ts->queued_at : 0;
	}
	if (!bpf_core_field_exists(struct task_struct, sched_info))
		return 0;
	if (m->tid == tid)
		base = m->run_delay;
	else if (!FIELD(btf, p, sched_info.pcount))
		base = 0; /* it never ran: it has waited nowhere else */
	else
		return 0; /* another thread took its mark since it ran */
	delay = FIELD(btf, p, sched_info.run_delay);
	if (delay < base || delay - base > now)
		return 0;
	/* A stamp older than its wakeup counted sleep too. */
	if (m->tid == tid && m->woken_at > now - (delay - base))
		return m->woken_at;
	return now - (delay - base);
}

/* Weigh who held the run queue `rq` of CPU `cpu` during [from, now]
 * while thread `tid` waited on it, against the holder `cw` carries: the
 * one that held a CPU longer stays (the same task's times add up). Needs
 * another CPU's state: from Linux 5.19 (cpu_state_of). */
static __always_inline void carried_holder_weigh(bool btf, struct carried_wait *cw, __u32 cpu,
						 struct rq *rq, __u32 tid, __u64 from, __u64 now)
{
	struct cpu_state *cs = cpu_state_of(cpu);
	__u64 found, held;
	__u32 kthread = 0;
	struct task_ref holder = {};
	int index;

	if (!cs)
		return;
	found = wait_holder(cpu, from, now, tid, true);
	held = holder_held_ns(found);
	if (!held)
		return;
	index = holder_entry(cpu, found);
	if (index == HOLDER_OPEN) {
		struct task_struct *curr = FIELD(btf, rq, curr);

		/* The CPU may have switched since it was weighed. */
		if (!curr || FIELD(btf, curr, pid) != holder_tid(found))
			return;
		if (holder_tid(found))
			task_ref_fill(btf, &holder, curr);
		kthread = !!(FIELD(btf, curr, flags) & PF_KTHREAD);
	} else if (index >= 0 && index < SLICES) {
		slice_holder(cs, index, &holder, &kthread);
	} else {
		return;
	}
	if (cw->held_ns && holder.tid == cw->holder.tid) {
		cw->held_ns += held;
		return;
	}
	if (held <= cw->held_ns)
		return;
	cw->holder = holder;
	cw->held_ns = held;
	cw->kthread = kthread;
}

/* Add to `cw` what throttles of `p`'s hierarchy covered of [from, now] on
 * CPU `cpu`, which it leaves (its cfs_rq is still that CPU's). */
static __always_inline void carried_throttle_weigh(struct carried_wait *cw, struct task_struct *p,
						   __u32 cpu, __u64 from, __u64 now)
{
	struct cpu_state *cs = this_cpu(); /* throttle_cover's scratch */
	__u64 covered;

	if (!cs)
		return;
	throttle_cover(cpu, task_leaf(p), task_group_entity(p), from, now);
	covered = cs->wait_throttle.covered_ns;
	cw->throttled_ns += covered;
	if (covered > cw->throttled_most_ns) {
		cw->throttled_most_ns = covered;
		cw->throttled_cgroup = cs->wait_throttle.cgroup;
	}
}

/* A task is moved to another CPU. Only a queued one (taken off its run
 * queue for another) carries a wait, and only if it is not asleep there
 * (delayed dequeue); a woken one is placed before it is queued. The run
 * queue it leaves is still the one its cfs_rq names (the move follows
 * this tracepoint). */
static __always_inline void on_migrate(bool btf, struct task_struct *p)
{
	__u32 tid = FIELD(btf, p, pid);
	struct cfs_rq *cfs_rq;
	struct carried_wait cw = {}, *earlier;
	struct run_mark *m;
	struct rq *rq;
	__u64 now, since, from;
	__u32 cpu;

	if (!tid || FIELD(btf, p, on_rq) != TASK_ON_RQ_MIGRATING || asleep_in_queue(btf, p))
		return;
	m = run_mark_of(tid);
	if (!m)
		return;
	now = bpf_ktime_get_ns();
	since = wait_began(btf, p, tid, m, now);
	if (!since || since > now)
		return;
	cfs_rq = task_cfs_rq(btf, p);
	rq = cfs_rq ? FIELD(btf, cfs_rq, rq) : NULL;
	if (!rq)
		return;
	cpu = FIELD(btf, rq, cpu);

	/* (A move before a run the probes did not see was of another wait.) */
	earlier = m->tid == tid && m->carried == carried_mark(btf, p) ?
			  bpf_map_lookup_elem(&carried_waits, &tid) :
			  NULL;
	if (earlier) {
		cw = *earlier;
		from = cw.until;
	} else {
		cw.since = since;
		cw.from_cpu = cpu;
		from = since;
	}
	cw.until = now;
	cw.migrations++;
	carried_holder_weigh(btf, &cw, cpu, rq, tid, from, now);
	/* Only fair-class tasks are throttled by a CFS quota. */
	if (FIELD(btf, p, prio) >= MAX_RT_PRIO)
		carried_throttle_weigh(&cw, p, cpu, from, now);
	if (bpf_map_update_elem(&carried_waits, &tid, &cw, BPF_ANY))
		return;
	if (m->tid != tid) {
		m->tid = tid;
		m->run_delay = 0;
	}
	m->carried = carried_mark(btf, p);
}

#endif /* STALLTOP_MIGRATION_BPF_H */
