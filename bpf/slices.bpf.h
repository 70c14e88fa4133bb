/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Who held a CPU while a task waited for it: the CPU's last SLICES slices
 * of at least SLICE_MIN_NS (cpu_state.slices) and the slice of the task
 * running on it now, which has no end yet.
 */
#ifndef STALLTOP_SLICES_BPF_H
#define STALLTOP_SLICES_BPF_H

#include "common.bpf.h"

/* slice_of's answer for the running task's open slice. */
#define HOLDER_OPEN SLICES

/* `prev` held the CPU for [start, end]: remember the slice if it is long
 * enough to matter to a wait. */
static __always_inline void slice_remember(bool btf, struct cpu_state *cs, struct task_struct *prev,
					   __u32 prev_tid, __u64 start, __u64 end, __u64 steal_end)
{
	struct slice *sl;
	__u32 i;

	if (end - start < SLICE_MIN_NS)
		return;
	i = cs->next_slice++ & (SLICES - 1);
	sl = &cs->slices[i];
	sl->start = start;
	sl->end = end;
	sl->steal_start = cs->current_steal;
	sl->steal_end = steal_end;
	sl->softirq_ns = cs->softirq_ns - cs->current_softirq;
	sl->tid = prev_tid;
	sl->pid = prev_tid ? FIELD(btf, prev, tgid) : 0;
	sl->cgroup = prev_tid ? task_cgroup(btf, prev) : 0;
	sl->kthread = !!(FIELD(btf, prev, flags) & PF_KTHREAD);
	comm_copy(btf, sl->comm, prev);
}

/* How much of [start, end] the span [from, to] covers. */
static __always_inline __u64 span_overlap(__u64 from, __u64 to, __u64 start, __u64 end)
{
	if (from < start)
		from = start;
	if (to > end)
		to = end;
	return to > from ? to - from : 0;
}

/* `covered` ns of a slice `length` ns long, less their share of the
 * `softirq` ns that ran inside the slice (in 1/1024ths: no overflow). */
static __always_inline __u64 held_less_softirq(__u64 covered, __u64 length, __u64 softirq)
{
	if (softirq >= length)
		return 0;
	return covered - covered * (softirq * 1024 / length) / 1024;
}

/* How much of [start, end] remembered slice `i` covers, less its share of
 * the softirq time that ran inside the slice (that time is the softirq's,
 * not the task's). */
static __always_inline __u64 slice_held(struct cpu_state *cs, __u32 i, __u64 start, __u64 end)
{
	struct slice *sl = &cs->slices[i & (SLICES - 1)];

	return held_less_softirq(span_overlap(sl->start, sl->end, start, end), sl->end - sl->start,
				 sl->softirq_ns);
}

/* How long thread `tid` held the CPU during [start, end]: its remembered
 * slices and, if it runs now, its open one, less softirq time. (A global
 * function, checked once by the verifier whatever calls it.) */
__noinline __u64 held_by(struct cpu_state *cs, __u32 tid, __u64 start, __u64 end)
{
	__u64 held = 0;
	__u32 j;

	if (!cs)
		return 0;
	for (j = 0; j < SLICES; j++)
		if (cs->slices[j].tid == tid)
			held += slice_held(cs, j, start, end);
	if (cs->current_tid == tid)
		held += held_less_softirq(span_overlap(cs->current_since, end, start, end),
					  end - cs->current_since,
					  cs->softirq_ns - cs->current_softirq);
	return held;
}

/* wait_holder's answer: the time held in us over the holder's thread id. */
#define HOLDER_TID_BITS 32

static __always_inline __u64 holder_held_ns(__u64 found)
{
	return (found >> HOLDER_TID_BITS) * 1000;
}

static __always_inline __u32 holder_tid(__u64 found)
{
	return (__u32)found;
}

/* The task that held the CPU longest during [start, end], its slices
 * summed over the last SLICES (a task that short visitors preempt holds
 * the CPU in several), the running task's open slice included, never the
 * waiter's own (the run queue's clock and ktime differ by about a
 * microsecond). Returns (held in us << HOLDER_TID_BITS) | its thread id
 * (0: idle); 0 if none held it a microsecond. (A global function: the
 * verifier checks its loops once.) */
__noinline __u64 wait_holder(struct cpu_state *cs, __u64 start, __u64 end, __u32 waiter_tid)
{
	__u64 best_held = 0, held;
	__u32 best_tid = 0, current, i;

	if (!cs)
		return 0;
	current = cs->current_tid;
	if (current != waiter_tid) {
		best_held = held_by(cs, current, start, end);
		best_tid = current;
	}
	for (i = 0; i < SLICES; i++) {
		__u32 tid = cs->slices[i].tid;

		/* (The running task's slices were weighed with its open one.) */
		if (tid == waiter_tid || tid == current ||
		    !span_overlap(cs->slices[i].start, cs->slices[i].end, start, end))
			continue;
		held = held_by(cs, tid, start, end);
		if (held > best_held) {
			best_held = held;
			best_tid = tid;
		}
	}
	best_held /= 1000;
	return best_held ? best_held << HOLDER_TID_BITS | best_tid : 0;
}

/* The index of the latest remembered slice of thread `tid`; HOLDER_OPEN
 * when it has none but runs now; -1 otherwise. (Global: checked once.) */
__noinline int slice_of(struct cpu_state *cs, __u32 tid)
{
	__u64 latest = 0;
	int found = -1;
	__u32 i;

	if (!cs)
		return -1;
	for (i = 0; i < SLICES; i++) {
		if (cs->slices[i].tid == tid && cs->slices[i].end > latest) {
			latest = cs->slices[i].end;
			found = i;
		}
	}
	if (found < 0 && cs->current_tid == tid)
		return HOLDER_OPEN;
	return found;
}

/* The holder of a remembered slice, as a task reference. */
static __always_inline void slice_holder(struct cpu_state *cs, __u32 i, struct task_ref *holder,
					 __u32 *kthread)
{
	struct slice *sl = &cs->slices[i & (SLICES - 1)];

	holder->pid = sl->pid;
	holder->tid = sl->tid;
	holder->cgroup = sl->cgroup;
	__builtin_memcpy(holder->comm, sl->comm, sizeof(holder->comm));
	*kthread = sl->kthread;
}

#endif /* STALLTOP_SLICES_BPF_H */
