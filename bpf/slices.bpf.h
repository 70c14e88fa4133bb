/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Who held a CPU while a task waited for it: the CPU's recent holders
 * (cpu_state.slices), one entry per task that held it lately, each the
 * stretch from its first to its last slice of at least SLICE_MIN_NS and
 * the time it actually held the CPU in between (a hog that short visitors
 * preempt, or two hogs taking turns, stay one entry each, so eight entries
 * remember far more than eight slices); and the slice of the task running
 * now, which has no end yet.
 */
#ifndef STALLTOP_SLICES_BPF_H
#define STALLTOP_SLICES_BPF_H

#include "common.bpf.h"

/* slice_of's answer for the running task's open slice. */
#define HOLDER_OPEN SLICES
/* A task's entry grows by a slice that begins at most this long after
 * the entry ends; else the slice starts an entry of its own. */
#define SLICE_MERGE_GAP_NS 100000000ULL
/* slice_slot's flags: the slot holds the task's entry, to extend; or
 * the task has an older entry (now marked shared, as the new one must be:
 * if the older one is the slot it replaces, needlessly). */
#define SLOT_EXTEND 0x100
#define SLOT_SHARED 0x200

/* Where thread `tid`'s slice on this CPU beginning at `start` goes: its
 * own entry if that ended at most SLICE_MERGE_GAP_NS before (with
 * SLOT_EXTEND), else the entry that ended longest ago (with SLOT_SHARED
 * if the thread has another). (A global function: checked once.) */
__noinline __u32 slice_slot(__u32 tid, __u64 start)
{
	struct cpu_state *cs = this_cpu();
	__u64 oldest = ~0ULL;
	__u32 i, slot = 0, shared = 0;

	if (!cs)
		return 0;
	for (i = 0; i < SLICES; i++) {
		struct slice *sl = &cs->slices[i];

		if (sl->end && sl->tid == tid) {
			if (sl->end + SLICE_MERGE_GAP_NS >= start)
				return i | SLOT_EXTEND;
			sl->shared = 1;
			shared = SLOT_SHARED;
		}
		if (sl->end < oldest) {
			oldest = sl->end;
			slot = i;
		}
	}
	return slot | shared;
}

/* The current task (thread `tid` of cgroup `cgroup`, leaving the CPU:
 * sched_switch runs in its context) held this CPU for [start, end]:
 * remember the slice. A global function, so the verifier checks it once,
 * not once per path of sched_switch; it takes no kernel pointer, so it
 * reads the task's other fields with BPF_CORE_READ (the cgroup, five
 * reads deep, comes from the caller, which reads it directly). */
__noinline int slice_keep(__u32 prev_tid, __u64 start, __u64 end, __u64 steal_end, __u64 cgroup)
{
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();
	struct cpu_state *cs = this_cpu();
	struct slice *sl;
	__u64 softirq;
	__u32 slot;

	if (!cs)
		return 0;
	softirq = cs->softirq_ns - cs->current_softirq;
	slot = slice_slot(prev_tid, start);
	sl = &cs->slices[slot & (SLICES - 1)];
	if (slot & SLOT_EXTEND) {
		sl->last_start = start;
		sl->end = end;
		sl->steal_end = steal_end;
		sl->held_ns += end - start;
		sl->softirq_ns += softirq;
		/* A busy task's entry can last all its life: it names the
		 * cgroup and name the task has now (a task moved into its
		 * container after it started ran in the parent's first). */
		sl->cgroup = cgroup;
		comm_copy(false, sl->comm, t);
		return 0;
	}
	sl->start = start;
	sl->last_start = start;
	sl->end = end;
	sl->steal_start = cs->current_steal;
	sl->steal_end = steal_end;
	sl->held_ns = end - start;
	sl->softirq_ns = softirq;
	sl->tid = prev_tid;
	sl->pid = prev_tid ? BPF_CORE_READ(t, tgid) : 0;
	sl->cgroup = cgroup;
	sl->kthread = !!(BPF_CORE_READ(t, flags) & PF_KTHREAD);
	sl->shared = !!(slot & SLOT_SHARED);
	comm_copy(false, sl->comm, t);
	return 0;
}

/* The current task `prev`, leaving the CPU, held it for [start, end]:
 * remember the slice if it is long enough to matter to a wait. */
static __always_inline void slice_remember(bool btf, struct task_struct *prev, __u32 prev_tid,
					   __u64 start, __u64 end, __u64 steal_end)
{
	if (end - start >= SLICE_MIN_NS)
		slice_keep(prev_tid, start, end, steal_end, prev_tid ? task_cgroup(btf, prev) : 0);
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

/* `held` ns less their share of the `softirq` ns that ran inside them
 * (the softirq's time, not the task's; in 1/1024ths: no overflow). No
 * division when no softirq ran in them: a wait's holders are weighed
 * twice each, and in a switch-heavy load most entries saw none. */
static __always_inline __u64 less_softirq(__u64 held, __u64 total, __u64 softirq)
{
	__u64 share = 0;

	if (!total || softirq >= total)
		return 0;
	if (softirq)
		share = softirq * 1024 / total;
	/* One path on from here: the 6.1 verifier would walk two, per entry. */
	barrier_var(share);
	return held - held * share / 1024;
}

/* How long entry `i` held the CPU during [start, end]: its last slice
 * exactly, its earlier ones as if spread evenly over their stretch. */
static __always_inline __u64 slice_held(struct cpu_state *cs, __u32 i, __u64 start, __u64 end)
{
	struct slice *sl = &cs->slices[i & (SLICES - 1)];
	__u64 last = sl->end - sl->last_start, earlier = sl->last_start - sl->start;
	__u64 held = span_overlap(sl->last_start, sl->end, start, end);
	__u64 covered = span_overlap(sl->start, sl->last_start, start, end);

	if (covered && earlier && sl->held_ns > last)
		held += (sl->held_ns - last) * (covered * 1024 / earlier) / 1024;
	return less_softirq(held, sl->held_ns, sl->softirq_ns);
}

/* How long thread `tid` held CPU `cpu` during [start, end]: its entries
 * and, if it runs now, its open slice. (A global function: wait_holder
 * calls it once per entry, and the verifier checks its loop once, not
 * once per entry.) */
__noinline __u64 held_by(__u32 cpu, __u32 tid, __u64 start, __u64 end)
{
	struct cpu_state *cs = cpu_state_of(cpu);
	__u64 held = 0;
	__u32 j;

	if (!cs)
		return 0;
	for (j = 0; j < SLICES; j++)
		if (cs->slices[j].tid == tid)
			held += slice_held(cs, j, start, end);
	if (cs->current_tid == tid)
		held += less_softirq(span_overlap(cs->current_since, end, start, end),
				     end > cs->current_since ? end - cs->current_since : 0,
				     cs->softirq_ns - cs->current_softirq);
	return held;
}

/* An entry's weight in wait_holder: its own (`alone`), or where the
 * entry may share its thread with another (bit ENTRY_SHARED_BIT of
 * `alone` set), the thread's (held_by). Global, and called for every
 * entry: a branch on the flag in wait_holder's loop would split the
 * verifier's states at each entry (+10,600 instructions per caller on
 * 6.18); the flag rides in the argument so that the entry's state need
 * not be looked up again, as it had to be when the callee looked for the
 * thread's other entries itself. */
#define ENTRY_SHARED_BIT 63
#define ENTRY_SHARED (1ULL << ENTRY_SHARED_BIT)

__noinline __u64 thread_held(__u32 cpu, __u32 tid, __u64 start, __u64 end, __u64 alone)
{
	if (alone & ENTRY_SHARED)
		return held_by(cpu, tid, start, end);
	return alone;
}

/* wait_holder's answer: the time held in us over the holder's entry
 * (its index + 1, or 0 where slice_of must find it) over its thread id
 * (below 2^22: PID_MAX_LIMIT). */
#define HOLDER_TID_BITS 32
#define HOLDER_ENTRY_SHIFT 24
#define HOLDER_TID_MASK ((1U << 22) - 1)

static __always_inline __u64 holder_held_ns(__u64 found)
{
	return (found >> HOLDER_TID_BITS) * 1000;
}

static __always_inline __u32 holder_tid(__u64 found)
{
	return (__u32)found & HOLDER_TID_MASK;
}

/* The task that held CPU `cpu` longest during [start, end], the running
 * task's open slice included, never the waiter (the run queue's clock and
 * ktime differ by about a microsecond), and idle only if `idle_holds`.
 * Returns (held in us << HOLDER_TID_BITS) | (its entry + 1 if it has no
 * other) << HOLDER_ENTRY_SHIFT | its thread id (0: idle); 0 if none held
 * it a microsecond, or the CPU's state cannot be read (cpu_state_of). (A
 * global function: the verifier checks its loops once.) */
__noinline __u64 wait_holder(__u32 cpu, __u64 start, __u64 end, __u32 waiter_tid, bool idle_holds)
{
	struct cpu_state *cs = cpu_state_of(cpu);
	__u64 best_held = 0, held, shared;
	__u32 best_tid = 0, current, i;

	if (!cs)
		return 0;
	current = cs->current_tid;
	if (current != waiter_tid && (current || idle_holds)) {
		best_held = held_by(cpu, current, start, end);
		best_tid = current;
	}
	for (i = 0; i < SLICES; i++) {
		__u32 tid = cs->slices[i].tid;

		/* (The running task's entries were weighed with its open slice;
		 * an entry that ended before the wait began held none of it.) */
		if (tid == waiter_tid || tid == current || (!tid && !idle_holds) ||
		    cs->slices[i].end <= start)
			continue;
		shared = cs->slices[i].shared;
		held = slice_held(cs, i, start, end);
		if (!held)
			continue;
		held = thread_held(cpu, tid, start, end, held | shared << ENTRY_SHARED_BIT);
		if (held > best_held) {
			best_held = held;
			/* A thread of one entry names it; of several, slice_of
			 * finds the latest. */
			best_tid = shared ? tid : tid | (i + 1) << HOLDER_ENTRY_SHIFT;
		}
	}
	best_held /= 1000;
	return best_held ? best_held << HOLDER_TID_BITS | best_tid : 0;
}

/* The index of thread `tid`'s latest entry on CPU `cpu`; HOLDER_OPEN
 * when it has none but runs now; -1 otherwise. (Global: checked once.) */
__noinline int slice_of(__u32 cpu, __u32 tid)
{
	struct cpu_state *cs = cpu_state_of(cpu);
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

/* The index of the entry of the holder wait_holder `found` on CPU `cpu`;
 * HOLDER_OPEN or -1 as slice_of answers. */
static __always_inline int holder_entry(__u32 cpu, __u64 found)
{
	__u32 entry = (__u32)found >> HOLDER_ENTRY_SHIFT;

	return entry ? (int)entry - 1 : slice_of(cpu, holder_tid(found));
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
