/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The scheduler tracepoints: run-queue latency per cgroup, who kept tasks
 * off their CPU (preemption episodes and top preemptors), over-threshold
 * waits (ordinary tasks and ksoftirqd takeovers), and the slices of tasks
 * inside syscalls.
 */
#ifndef STALLTOP_SCHED_BPF_H
#define STALLTOP_SCHED_BPF_H

#include "common.bpf.h"
#include "syscall.bpf.h"

const volatile __u64 runq_threshold_ns = 10 * 1000 * 1000;
const volatile __u64 takeover_threshold_ns = 10 * 1000 * 1000;

/* Per-CPU, allocated on first use: no atomics, no cache-line bouncing. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, struct runq_stats);
} runq_by_cgroup SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 8192);
	__type(key, struct preemptor_key);
	__type(value, struct preemptor_stats);
} preemptors SEC(".maps");

static __always_inline struct runq_stats *runq_stats_of(__u64 cgroup)
{
	static const struct runq_stats zero = {};
	struct runq_stats *s = bpf_map_lookup_elem(&runq_by_cgroup, &cgroup);

	if (s)
		return s;
	bpf_map_update_elem(&runq_by_cgroup, &cgroup, &zero, BPF_NOEXIST);
	s = bpf_map_lookup_elem(&runq_by_cgroup, &cgroup);
	if (!s)
		count(COUNTER_RUNQ_CGROUPS_FULL);
	return s;
}

static __always_inline void runq_wait_record(struct runq_stats *s, __u64 wait)
{
	hist_add(s->slots, wait);
	s->count++;
	s->total_ns += wait;
	if (wait > s->max_ns)
		s->max_ns = wait;
}

/* A task of `victim_cgroup` (stats `s`) waited `wait` ns, kept off its CPU
 * by `comm` of `culprit_cgroup`: count the episode by cause and culprit. */
static __always_inline void preemption_record(struct runq_stats *s, __u64 victim_cgroup,
					      __u64 culprit_cgroup, const __u8 *comm, bool kthread,
					      __u64 wait)
{
	struct preemptor_key key = {
		.victim_cgroup = victim_cgroup,
		.preemptor_cgroup = culprit_cgroup,
	};
	struct preemptor_stats *p;

	if (kthread)
		s->preempted_kthread++;
	else if (culprit_cgroup == victim_cgroup)
		s->preempted_same_cgroup++;
	else
		s->preempted_other_cgroup++;
	__builtin_memcpy(key.comm, comm, sizeof(key.comm));
	p = bpf_map_lookup_elem(&preemptors, &key);
	if (!p) {
		struct preemptor_stats fresh = {};

		bpf_map_update_elem(&preemptors, &key, &fresh, BPF_NOEXIST);
		p = bpf_map_lookup_elem(&preemptors, &key);
		if (!p) {
			count(COUNTER_PREEMPTORS_FULL);
			return;
		}
	}
	p->count++;
	p->wait_ns += wait;
}

/* `waiter` waited `wait` ns and now runs; `holder` held the CPU longest
 * meanwhile; `holder_state` is its state if known. */
static __always_inline void runq_event_emit(bool btf, __u16 kind, __u64 now, __u64 wait,
					    struct task_struct *waiter, __u64 waiter_cgroup,
					    const struct task_ref *holder,
					    struct task_state *holder_state)
{
	struct runq_event *e = record_reserve(kind, sizeof(*e), now);

	if (!e)
		return;
	e->wait_ns = wait;
	task_ref_fill(btf, &e->waiter, waiter);
	e->waiter.cgroup = waiter_cgroup;
	e->ran = *holder;
	e->ran_syscall = -1;
	e->ran_syscall_ns = 0;
	if (holder_state && holder_state->sys_enter_ts) {
		e->ran_syscall = holder_state->sys_nr;
		e->ran_syscall_ns = now - holder_state->sys_enter_ts;
	}
	record_submit(e);
}

/* ksoftirqd/N became runnable: the sampler keeps stacks on CPU N while it
 * waits. */
static __always_inline void ksoftirqd_waiting(__u32 cpu, __u64 since)
{
	__u32 zero = 0;
	struct cpu_state *cs = bpf_map_lookup_percpu_elem(&cpus, &zero, cpu);

	if (cs)
		cs->ksoftirqd_runnable_since = since;
}

static __always_inline void on_wakeup(bool btf, struct task_struct *p)
{
	__u32 tid = FIELD(btf, p, pid);
	struct task_state *ts;

	if (!tid)
		return;
	ts = task_state_of(p, tid, true);
	if (!ts)
		return;
	ts->runq_since = bpf_ktime_get_ns();
	if (ts->flags & TASK_IS_KSOFTIRQD)
		ksoftirqd_waiting(FIELD(btf, p, wake_cpu), ts->runq_since);
}

/* `prev` held the CPU for [start, end]: remember the slice if it is long
 * enough to matter to a wait. */
static __always_inline void slice_remember(bool btf, struct cpu_state *cs, struct task_struct *prev,
					   __u32 prev_tid, struct task_state *ps, __u64 start,
					   __u64 end)
{
	struct slice *sl;
	__u32 i;

	if (end - start < SLICE_MIN_NS)
		return;
	i = cs->next_slice++ & (SLICES - 1);
	sl = &cs->slices[i];
	sl->start = start;
	sl->end = end;
	sl->tid = prev_tid;
	sl->pid = prev_tid ? FIELD(btf, prev, tgid) : 0;
	sl->cgroup = !prev_tid ? 0 : ps && ps->cgroup ? ps->cgroup : task_cgroup(btf, prev);
	sl->kthread = !!(FIELD(btf, prev, flags) & PF_KTHREAD);
	bpf_probe_read_kernel(sl->comm, sizeof(sl->comm), &prev->comm);
}

/* The index of the slice whose task held the CPU longest (summed over its
 * slices) during [start, end], or -1 if no remembered slice overlaps it.
 * A global function: verified once, on its own, not at every call site. */
__noinline int longest_holder(struct cpu_state *cs, __u64 start, __u64 end)
{
	__u64 held[SLICES] = {}, best_held = 0;
	int best = -1;
	__u32 i, j;

	if (!cs)
		return -1;
	for (i = 0; i < SLICES; i++) {
		__u64 from = cs->slices[i].start > start ? cs->slices[i].start : start;
		__u64 to = cs->slices[i].end < end ? cs->slices[i].end : end;

		if (to > from)
			held[i] = to - from;
	}
	for (i = 0; i < SLICES; i++) {
		__u64 total = 0;

		if (!held[i])
			continue;
		for (j = 0; j < SLICES; j++)
			if (cs->slices[j].tid == cs->slices[i].tid)
				total += held[j];
		if (total > best_held) {
			best_held = total;
			best = i;
		}
	}
	return best;
}

/* `next` ran after waiting `wait` ns (at least PREEMPT_WAIT_MIN_NS): charge
 * the episode to the task that held the CPU longest meanwhile and report
 * the wait if it is over a threshold. */
static __always_inline void wait_end(bool btf, struct cpu_state *cs, struct runq_stats *s,
				     __u64 now, __u64 wait, struct task_struct *next,
				     struct task_state *ns, __u64 next_cgroup,
				     struct task_struct *prev, __u32 prev_tid, struct task_state *ps)
{
	int i = longest_holder(cs, now - wait, now);
	/* The mask keeps the verifier sure of the bounds. */
	struct slice *longest = i >= 0 ? &cs->slices[i & (SLICES - 1)] : NULL;
	struct task_ref holder = {};
	struct task_state *holder_state = NULL;
	bool kthread;

	if (longest) {
		holder.pid = longest->pid;
		holder.tid = longest->tid;
		holder.cgroup = longest->cgroup;
		__builtin_memcpy(holder.comm, longest->comm, sizeof(holder.comm));
		kthread = longest->kthread;
	} else {
		holder.pid = prev_tid ? FIELD(btf, prev, tgid) : 0;
		holder.tid = prev_tid;
		holder.cgroup = !prev_tid ? 0 : ps && ps->cgroup ? ps->cgroup : task_cgroup(btf, prev);
		bpf_probe_read_kernel(holder.comm, sizeof(holder.comm), &prev->comm);
		kthread = FIELD(btf, prev, flags) & PF_KTHREAD;
	}
	if (holder.tid == prev_tid)
		holder_state = ps;
	if (s && holder.tid)
		preemption_record(s, next_cgroup, holder.cgroup, holder.comm, kthread, wait);
	if (ns->flags & TASK_IS_KSOFTIRQD) {
		if (wait >= takeover_threshold_ns)
			runq_event_emit(btf, KIND_TAKEOVER, now, wait, next, next_cgroup, &holder,
					holder_state);
	} else if (wait >= runq_threshold_ns) {
		runq_event_emit(btf, KIND_RUNQ, now, wait, next, next_cgroup, &holder, holder_state);
	}
}

/* A runnable task that waits at least PREEMPT_WAIT_MIN_NS is one episode,
 * charged when it runs again to the task that held the CPU longest during
 * the wait (from the CPU's recent slices), or else to the task that had
 * the CPU until now. cgroup ids are walked once per switch (next's) and
 * cached per task. */
static __always_inline void on_switch(bool btf, bool preempt, struct task_struct *prev,
				      struct task_struct *next, unsigned int prev_state)
{
	__u32 prev_tid = FIELD(btf, prev, pid);
	__u32 next_tid = FIELD(btf, next, pid);
	bool runnable = preempt || prev_state == TASK_RUNNING;
	struct cpu_state *cs = this_cpu();
	struct task_state *ps = NULL, *ns = NULL;
	__u64 now = bpf_ktime_get_ns();
	__u64 next_cgroup = 0;

	if (next_tid) {
		ns = task_state_of(next, next_tid, false);
		next_cgroup = task_cgroup(btf, next);
		if (ns)
			ns->cgroup = next_cgroup;
	}

	if (prev_tid) {
		ps = task_state_of(prev, prev_tid, runnable);
		/* Switched out while runnable (preempted, throttled, yielded):
		 * its wait for the CPU starts now. */
		if (runnable && ps) {
			ps->runq_since = now;
			if (ps->flags & TASK_IS_KSOFTIRQD && cs)
				cs->ksoftirqd_runnable_since = now;
		}
		if (ps && ps->sys_enter_ts)
			syscall_slice_end(ps, cs, now);
	}

	if (cs) {
		if (prev_tid)
			slice_remember(btf, cs, prev, prev_tid, ps, cs->current_since, now);
		else
			cs->last_tick = now; /* idle has no sampler ticks: not a gap */
		cs->current_since = now;
	}

	if (!ns)
		return;
	if (ns->runq_since) {
		__u64 wait = now - ns->runq_since;
		struct runq_stats *s = runq_stats_of(next_cgroup);

		ns->runq_since = 0;
		if (s)
			runq_wait_record(s, wait);
		if (ns->flags & TASK_IS_KSOFTIRQD && cs)
			cs->ksoftirqd_runnable_since = 0;
		if (wait >= PREEMPT_WAIT_MIN_NS && cs)
			wait_end(btf, cs, s, now, wait, next, ns, next_cgroup, prev, prev_tid, ps);
	}
	if (ns->sys_enter_ts)
		syscall_slice_start(ns, cs, now);
}

static __always_inline void on_task_exit(bool btf, struct task_struct *p)
{
	__u32 tid = FIELD(btf, p, pid);

	/* Task storage goes away with the task; the hash needs a delete. */
	if (!use_task_storage)
		bpf_map_delete_elem(&tasks, &tid);
}

#endif /* STALLTOP_SCHED_BPF_H */
