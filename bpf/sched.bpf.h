/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The scheduler tracepoints: run-queue latency per cgroup, preemption
 * causes and top preemptors, over-threshold waits (ordinary tasks and
 * ksoftirqd takeovers), and the slices of tasks inside syscalls.
 */
#ifndef STALLTOP_SCHED_BPF_H
#define STALLTOP_SCHED_BPF_H

#include "common.bpf.h"
#include "syscall.bpf.h"

const volatile __u64 runq_threshold_ns = 10 * 1000 * 1000;
const volatile __u64 takeover_threshold_ns = 10 * 1000 * 1000;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, struct runq_stats);
} runq_by_cgroup SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, struct preemptor_key);
	__type(value, __u64);
} preemptors SEC(".maps");

static __always_inline struct runq_stats *runq_stats_get_or_create(__u64 cgroup)
{
	struct runq_stats *s = bpf_map_lookup_elem(&runq_by_cgroup, &cgroup);
	static const struct runq_stats zero = {};

	if (s)
		return s;
	/* May fail with EEXIST when another CPU won the race: look up again. */
	bpf_map_update_elem(&runq_by_cgroup, &cgroup, &zero, BPF_NOEXIST);
	s = bpf_map_lookup_elem(&runq_by_cgroup, &cgroup);
	if (!s)
		count(COUNTER_RUNQ_CGROUPS_FULL);
	return s;
}

static __always_inline void runq_wait_record(__u64 cgroup, __u64 wait)
{
	struct runq_stats *s = runq_stats_get_or_create(cgroup);
	__u32 slot = hist_slot(wait);

	if (!s)
		return;
	if (slot < HIST_SLOTS)
		__sync_fetch_and_add(&s->slots[slot], 1);
	__sync_fetch_and_add(&s->count, 1);
	__sync_fetch_and_add(&s->total_ns, wait);
	if (wait > s->max_ns)
		s->max_ns = wait; /* racy by design: a lost max is re-set by the next one */
}

/* A runnable `victim` lost the CPU to `preemptor`: count the cause against
 * the victim's cgroup and remember who did it. */
static __always_inline void preemption_record(bool btf, struct task_struct *victim,
					      struct task_struct *preemptor)
{
	struct preemptor_key key = {};
	struct runq_stats *s;
	__u64 *n;
	__u64 one = 1;

	key.victim_cgroup = task_cgroup(btf, victim);
	key.preemptor_cgroup = task_cgroup(btf, preemptor);
	s = runq_stats_get_or_create(key.victim_cgroup);
	if (s) {
		if (FIELD(btf, preemptor, flags) & PF_KTHREAD)
			__sync_fetch_and_add(&s->preempted_kthread, 1);
		else if (key.preemptor_cgroup == key.victim_cgroup)
			__sync_fetch_and_add(&s->preempted_same_cgroup, 1);
		else
			__sync_fetch_and_add(&s->preempted_other_cgroup, 1);
	}
	bpf_probe_read_kernel(key.comm, sizeof(key.comm), &preemptor->comm);
	n = bpf_map_lookup_elem(&preemptors, &key);
	if (n)
		__sync_fetch_and_add(n, 1);
	else if (bpf_map_update_elem(&preemptors, &key, &one, BPF_NOEXIST))
		count(COUNTER_PREEMPTORS_FULL);
}

/* `waiter` waited `wait` ns and now runs; `ran` held the CPU until now. */
static __always_inline void runq_event_emit(bool btf, __u16 kind, __u64 now, __u64 wait,
					    struct task_struct *waiter, __u64 waiter_cgroup,
					    struct task_struct *ran, struct task_state *ran_state)
{
	struct runq_event *e = record_reserve(kind, sizeof(*e), now);

	if (!e)
		return;
	e->wait_ns = wait;
	task_ref_fill(btf, &e->waiter, waiter);
	e->waiter.cgroup = waiter_cgroup;
	task_ref_fill(btf, &e->ran, ran);
	e->ran_syscall = -1;
	e->ran_syscall_ns = 0;
	if (ran_state && ran_state->sys_enter_ts) {
		e->ran_syscall = ran_state->sys_nr;
		e->ran_syscall_ns = now - ran_state->sys_enter_ts;
	}
	record_submit(e);
}

static __always_inline void on_wakeup(bool btf, struct task_struct *p)
{
	__u32 tid = FIELD(btf, p, pid);
	struct task_state *ts;

	if (!tid)
		return;
	ts = task_state_get_or_create(tid);
	if (ts)
		ts->runq_since = bpf_ktime_get_ns();
}

static __always_inline void on_switch(bool btf, bool preempt, struct task_struct *prev,
				      struct task_struct *next, unsigned int prev_state)
{
	__u32 prev_tid = FIELD(btf, prev, pid);
	__u32 next_tid = FIELD(btf, next, pid);
	struct task_state *ps = NULL, *ns;
	__u64 now = bpf_ktime_get_ns();

	if (prev_tid) {
		ps = bpf_map_lookup_elem(&tasks, &prev_tid);
		/* Switched out while runnable: preempted (or throttled, or yielded);
		 * its wait for the CPU starts now. */
		if (preempt || prev_state == TASK_RUNNING) {
			if (!ps)
				ps = task_state_get_or_create(prev_tid);
			if (ps)
				ps->runq_since = now;
			if (next_tid)
				preemption_record(btf, prev, next);
		}
		if (ps && ps->sys_enter_ts)
			syscall_slice_end(ps, this_cpu(), now);
	}

	if (!next_tid)
		return;
	ns = bpf_map_lookup_elem(&tasks, &next_tid);
	if (!ns)
		return;
	if (ns->runq_since) {
		__u64 wait = now - ns->runq_since;
		__u64 cgroup = task_cgroup(btf, next);

		ns->runq_since = 0;
		runq_wait_record(cgroup, wait);
		if (ns->flags & TASK_IS_KSOFTIRQD) {
			if (wait >= takeover_threshold_ns)
				runq_event_emit(btf, KIND_TAKEOVER, now, wait, next, cgroup, prev, ps);
		} else if (wait >= runq_threshold_ns) {
			runq_event_emit(btf, KIND_RUNQ, now, wait, next, cgroup, prev, ps);
		}
	}
	if (ns->sys_enter_ts)
		syscall_slice_start(ns, this_cpu(), now);
}

static __always_inline void on_task_exit(bool btf, struct task_struct *p)
{
	__u32 tid = FIELD(btf, p, pid);

	bpf_map_delete_elem(&tasks, &tid);
}

#endif /* STALLTOP_SCHED_BPF_H */
