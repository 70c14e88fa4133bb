/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Who held a CPU while a task waited for it: the CPU's last SLICES slices
 * of at least SLICE_MIN_NS (cpu_state.slices) and the slice of the task
 * running on it now, which has no end yet.
 */
#ifndef STALLTOP_SLICES_BPF_H
#define STALLTOP_SLICES_BPF_H

#include "common.bpf.h"

/* wait_holder's answer: the time held, shifted left by these bits, over
 * the index of the slice (HOLDER_OPEN: the open one). */
#define HOLDER_INDEX_BITS 4
#define HOLDER_INDEX_MASK ((1 << HOLDER_INDEX_BITS) - 1)
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

/* How much of [start, end] remembered slice `i` covers. */
static __always_inline __u64 slice_overlap(struct cpu_state *cs, __u32 i, __u64 start, __u64 end)
{
	struct slice *sl = &cs->slices[i & (SLICES - 1)];

	return span_overlap(sl->start, sl->end, start, end);
}

/* How long thread `tid` held the CPU during [start, end] in remembered
 * slices. */
static __always_inline __u64 held_in_slices(struct cpu_state *cs, __u32 tid, __u64 start, __u64 end)
{
	__u64 held = 0;
	__u32 j;

	for (j = 0; j < SLICES; j++)
		if (cs->slices[j].tid == tid)
			held += slice_overlap(cs, j, start, end);
	return held;
}

/* The task that held the CPU longest during [start, end], its slices
 * summed (a task that short visitors preempt holds the CPU in several),
 * the running task's open slice included, never the waiter's own (the run
 * queue's clock and ktime differ by about a microsecond). Returns
 * (held << HOLDER_INDEX_BITS) | the index of one of its slices
 * (HOLDER_OPEN: the open one); 0 if none. (A global function: the
 * verifier checks its loops once.) */
__noinline __u64 wait_holder(struct cpu_state *cs, __u64 start, __u64 end, __u32 waiter_tid)
{
	__u64 open_held, best_held = 0, held;
	__u32 open_tid, best = 0, i;

	if (!cs)
		return 0;
	open_tid = cs->current_tid;
	open_held = span_overlap(cs->current_since, end, start, end);
	for (i = 0; i < SLICES; i++) {
		__u32 tid = cs->slices[i].tid;

		if (tid == waiter_tid || !slice_overlap(cs, i, start, end))
			continue;
		held = held_in_slices(cs, tid, start, end) + (tid == open_tid ? open_held : 0);
		if (held > best_held) {
			best_held = held;
			best = i;
		}
	}
	if (open_tid != waiter_tid && open_held) {
		held = open_held + held_in_slices(cs, open_tid, start, end);
		if (held > best_held) {
			best_held = held;
			best = HOLDER_OPEN;
		}
	}
	return best_held ? best_held << HOLDER_INDEX_BITS | best : 0;
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
