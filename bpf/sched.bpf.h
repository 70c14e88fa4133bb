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

/* `waiter` waited `wait` ns and now runs; `holder` had the CPU (see
 * task_state.holder); `holder_state` is its state if known. */
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

/* `t` (whose cgroup is `cgroup`) as a task_ref. */
static __always_inline void holder_fill(bool btf, struct task_ref *r, struct task_struct *t,
					__u32 tid, __u64 cgroup)
{
	r->pid = FIELD(btf, t, tgid);
	r->tid = tid;
	r->cgroup = cgroup;
	bpf_probe_read_kernel(r->comm, sizeof(r->comm), &t->comm);
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
	ts->flags &= ~(TASK_PREEMPTED | TASK_HOLDER_KTHREAD);
	ts->holder.tid = 0;
	if (ts->flags & TASK_IS_KSOFTIRQD) {
		__u32 cpu = FIELD(btf, p, wake_cpu);

		ksoftirqd_waiting(cpu, ts->runq_since);
		/* Woken at irq exit on its own CPU: the interrupted task keeps
		 * the CPU until it yields; that is who ksoftirqd waits behind. */
		if (cpu == bpf_get_smp_processor_id()) {
			struct task_struct *current = bpf_get_current_task_btf();
			__u32 current_tid = current->pid;

			if (current_tid && current_tid != tid) {
				holder_fill(true, &ts->holder, current, current_tid,
					    task_cgroup(true, current));
				if (current->flags & PF_KTHREAD)
					ts->flags |= TASK_HOLDER_KTHREAD;
			}
		}
	}
}

/* A runnable task that waits at least PREEMPT_WAIT_MIN_NS is one episode,
 * charged when it runs again to its holder (the task that took its CPU,
 * or the one its wakeup interrupted, for ksoftirqd) or else to the task
 * that had the CPU until now. cgroup ids are walked once per switch
 * (next's) and cached per task. */
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

	if (!prev_tid && cs)
		cs->last_tick = now; /* idle has no sampler ticks: not a gap */

	if (next_tid) {
		ns = task_state_of(next, next_tid, false);
		next_cgroup = task_cgroup(btf, next);
		if (ns)
			ns->cgroup = next_cgroup;
	}

	if (prev_tid) {
		ps = task_state_of(prev, prev_tid, runnable);
		/* Switched out while runnable (preempted, throttled, yielded):
		 * its wait for the CPU starts now; next holds the CPU. */
		if (runnable && ps) {
			ps->runq_since = now;
			ps->flags |= TASK_PREEMPTED;
			ps->flags &= ~TASK_HOLDER_KTHREAD;
			ps->holder.tid = 0;
			if (next_tid) {
				holder_fill(btf, &ps->holder, next, next_tid, next_cgroup);
				if (FIELD(btf, next, flags) & PF_KTHREAD)
					ps->flags |= TASK_HOLDER_KTHREAD;
			}
			if (ps->flags & TASK_IS_KSOFTIRQD && cs)
				cs->ksoftirqd_runnable_since = now;
		}
		if (ps && ps->sys_enter_ts)
			syscall_slice_end(ps, cs, now);
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
		if (wait >= PREEMPT_WAIT_MIN_NS) {
			struct task_ref from_prev = {};
			const struct task_ref *holder = &ns->holder;
			struct task_state *holder_state = ns->holder.tid == prev_tid ? ps : NULL;
			bool kthread = ns->flags & TASK_HOLDER_KTHREAD;

			if (!ns->holder.tid) {
				holder_fill(btf, &from_prev, prev, prev_tid,
					    !prev_tid	       ? 0 :
					    ps && ps->cgroup ? ps->cgroup :
							       task_cgroup(btf, prev));
				holder = &from_prev;
				holder_state = ps;
				kthread = FIELD(btf, prev, flags) & PF_KTHREAD;
			}
			if (s && holder->tid)
				preemption_record(s, next_cgroup, holder->cgroup, holder->comm, kthread,
						  wait);
			if (ns->flags & TASK_IS_KSOFTIRQD) {
				if (wait >= takeover_threshold_ns)
					runq_event_emit(btf, KIND_TAKEOVER, now, wait, next, next_cgroup,
							holder, holder_state);
			} else if (wait >= runq_threshold_ns) {
				runq_event_emit(btf, KIND_RUNQ, now, wait, next, next_cgroup, holder,
						holder_state);
			}
		}
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
