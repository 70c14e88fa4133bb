/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The sched_switch tracepoint: run-queue latency per cgroup (from the
 * scheduler's own sched_info, so no wakeup hook is needed), who kept tasks
 * off their CPU (preemption episodes and top preemptors), over-threshold
 * waits (ordinary tasks and ksoftirqd takeovers), and the slices of tasks
 * inside syscalls.
 */
#ifndef STALLTOP_SCHED_BPF_H
#define STALLTOP_SCHED_BPF_H

#include "common.bpf.h"
#include "migration.bpf.h"
#include "slices.bpf.h"
#include "softirq_stolen.bpf.h"
#include "steal.bpf.h"
#include "syscall.bpf.h"
#include "syscall_sampled.bpf.h"
#include "throttle.bpf.h"

const volatile __u64 runq_threshold_ns = 10 * 1000 * 1000;

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

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, RUNQ_SLOTS);
	__type(key, __u32);
	__type(value, struct runq_slot);
} runq_slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PREEMPTOR_SLOTS);
	__type(key, __u32);
	__type(value, struct preemptor_slot);
} preemptor_slots SEC(".maps");

/* This CPU's stats of `cgroup`: its array slot if it owns it (the first
 * cgroup to wait here whose id hashes to the slot does), else the hash. */
static __always_inline struct runq_stats *runq_stats_of(__u64 cgroup)
{
	static const struct runq_stats zero = {};
	/* Fibonacci hashing: the top bits of id * 2^64/phi. */
	__u32 index = (cgroup * 0x9E3779B97F4A7C15ULL) >> (64 - RUNQ_SLOT_BITS);
	struct runq_slot *slot = bpf_map_lookup_elem(&runq_slots, &index);
	struct runq_stats *s;

	if (slot) {
		if (!slot->stats.count)
			slot->cgroup = cgroup;
		if (slot->cgroup == cgroup)
			return &slot->stats;
	}
	s = bpf_map_lookup_elem(&runq_by_cgroup, &cgroup);
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

/* This CPU's counts of preemptor `key`: its array slot if it owns it
 * (the first key to land on the slot does), else the hash. The key is
 * five words; compared as such, without a branch per word. */
static __always_inline struct preemptor_stats *preemptor_stats_of(const struct preemptor_key *key)
{
	static const struct preemptor_stats fresh = {};
	const __u64 *k = (const __u64 *)key, *owner;
	struct preemptor_slot *slot;
	struct preemptor_stats *p;
	__u64 h = k[0] * 0x9E3779B97F4A7C15ULL;
	__u32 index;

	_Static_assert(sizeof(*key) == 5 * sizeof(__u64), "a key of five words");
	h = (h ^ k[1]) * 0x9E3779B97F4A7C15ULL;
	h = (h ^ k[2]) * 0x9E3779B97F4A7C15ULL;
	h = (h ^ k[3]) * 0x9E3779B97F4A7C15ULL;
	h = (h ^ k[4]) * 0x9E3779B97F4A7C15ULL;
	index = h >> (64 - PREEMPTOR_SLOT_BITS);
	slot = bpf_map_lookup_elem(&preemptor_slots, &index);
	if (slot) {
		if (!slot->stats.count)
			slot->key = *key;
		owner = (const __u64 *)&slot->key;
		if (!((owner[0] ^ k[0]) | (owner[1] ^ k[1]) | (owner[2] ^ k[2]) |
		      (owner[3] ^ k[3]) | (owner[4] ^ k[4])))
			return &slot->stats;
	}
	p = bpf_map_lookup_elem(&preemptors, key);
	if (p)
		return p;
	bpf_map_update_elem(&preemptors, key, &fresh, BPF_NOEXIST);
	p = bpf_map_lookup_elem(&preemptors, key);
	if (!p)
		count(COUNTER_PREEMPTORS_FULL);
	return p;
}

/* The culprit of `key` (the caller's, filled) kept a task of its victim
 * cgroup (stats `s`) waiting `wait` ns: count the episode by cause and
 * culprit. */
static __always_inline void preemption_record(struct runq_stats *s, const struct preemptor_key *key,
					      bool kthread, __u64 wait)
{
	struct preemptor_stats *p;

	if (kthread)
		s->preempted_kthread++;
	else if (key->preemptor_cgroup == key->victim_cgroup)
		s->preempted_same_cgroup++;
	else
		s->preempted_other_cgroup++;
	p = preemptor_stats_of(key);
	if (!p)
		return;
	p->count++;
	p->wait_ns += wait;
}

/* `now` if the steal clock moved from `before` to `steal`, else
 * `moved_at`. Without a branch: in sched_switch's body one would split
 * the verifier's states through the rest of the handler. */
static __always_inline __u64 steal_moved(__u64 moved_at, __u64 before, __u64 steal, __u64 now)
{
	__u64 diff = before ^ steal, moved = diff | -diff, mask;

	barrier_var(moved); /* kept as arithmetic, not folded into a select */
	mask = -(moved >> 63);
	return (now & mask) | (moved_at & ~mask);
}

/* Slices further apart than this are not interpolated between (and the
 * product below stays far from overflow). */
#define STEAL_SPAN_MAX_NS 4000000000ULL

/* The remembered switches nearest `start`, with their steal clocks: the
 * latest at or before it (lo) and the earliest at or after it (hi). */
struct steal_bracket {
	__u64 start;
	__u64 lo_t, lo_s;
	__u64 hi_t, hi_s;
};

/* A remembered switch at `t` with steal clock `s` narrows bracket `b`. */
static __always_inline void steal_point(struct steal_bracket *b, __u64 t, __u64 s)
{
	if (!t)
		return; /* empty slot */
	if (t <= b->start && t > b->lo_t) {
		b->lo_t = t;
		b->lo_s = s;
	}
	if (t >= b->start && t < b->hi_t) {
		b->hi_t = t;
		b->hi_s = s;
	}
}

/* steal_during's bracket, per CPU (only sched_switch computes one, and
 * it does not nest on a CPU): a global function takes no pointer before
 * Linux 5.12. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct steal_bracket);
} steal_brackets SEC(".maps");

static __always_inline struct steal_bracket *this_steal_bracket(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&steal_brackets, &zero);
}

/* This CPU's slice `i` (its start and end switches) narrows this CPU's
 * bracket. A global function: its caller learns nothing from the
 * comparisons, which would otherwise split the verifier's states at each
 * of the slices' switches, multiplying them through every one after
 * (three quarters of sched_switch's verified instructions). */
__noinline int steal_bracket_slice(__u32 i)
{
	struct steal_bracket *b = this_steal_bracket();
	struct cpu_state *cs = this_cpu();
	struct slice *sl;

	if (!b || !cs)
		return 0;
	sl = &cs->slices[verified_slot(i, SLICES)];
	steal_point(b, sl->start, sl->steal_start);
	steal_point(b, sl->end, sl->steal_end);
	return 0;
}

/* How much of [start, now] the hypervisor took from this vCPU: the steal
 * clock at `start` is interpolated between the remembered switches around
 * it; when none is that old, it is read at the oldest one after `start`
 * (so the result is a lower bound). A global function, so the verifier
 * checks it once, not once per path of sched_switch. */
__noinline __u64 steal_during(__u64 start, __u64 now, __u64 steal_now)
{
	struct steal_bracket *b = this_steal_bracket();
	__u64 at_start, steal, lo_t, lo_s, hi_t, hi_s;
	__u32 i;

	if (!b)
		return 0;
	*b = (struct steal_bracket){.start = start, .hi_t = now, .hi_s = steal_now};
	for (i = 0; i < SLICES; i++)
		steal_bracket_slice(i);
	lo_t = b->lo_t;
	lo_s = b->lo_s;
	hi_t = b->hi_t;
	hi_s = b->hi_s;
	/* Steal beyond the elapsed time: a slot from before the first read. */
	if (!lo_t || hi_t == lo_t || hi_t - lo_t > STEAL_SPAN_MAX_NS || hi_s < lo_s ||
	    hi_s - lo_s > hi_t - lo_t)
		at_start = hi_s;
	else
		at_start = lo_s + (hi_s - lo_s) * (start - lo_t) / (hi_t - lo_t);
	steal = steal_now > at_start ? steal_now - at_start : 0;
	return steal < now - start ? steal : now - start;
}

/* `waiter` waited `wait` ns and now runs (moved here from other CPUs if
 * `cw`); `holder` held a CPU longest meanwhile, inside syscall
 * `ran_syscall` (-1: none) since `ran_since` (0: unknown);
 * cs->wait_throttle says whether a CPU quota kept it off instead. The
 * waiter's name is read here, for records sent only (a line of the task
 * no switch step touches: a cache miss), from the task at `*waiter_task`
 * (switch_args: a pointer held in wait_end took 8 bytes of stack more,
 * past the 512 that 6.1 allows sched_switch, wait_end, throttle_cover). */
static __always_inline void runq_event_emit(__u16 kind, struct cpu_state *cs, __u64 now, __u64 wait,
					    __u64 steal_ns, const struct task_ref *waiter,
					    const __u64 *waiter_task, const struct task_ref *holder,
					    __s32 ran_syscall, __u64 ran_since,
					    const struct carried_wait *cw)
{
	struct runq_event *e = record_reserve(kind, sizeof(*e), now);

	if (!e)
		return;
	e->wait_ns = wait;
	e->steal_us = steal_ns / 1000;
	e->waiter = *waiter;
	comm_copy(false, e->waiter.comm, (struct task_struct *)*waiter_task);
	e->ran = *holder;
	e->ran_syscall = ran_syscall;
	e->ran_syscall_ns = ran_since && ran_since < now ? now - ran_since : 0;
	e->throttled_cgroup = cs->wait_throttle.cgroup;
	e->throttled_ns = cs->wait_throttle.covered_ns;
	e->waited_from_cpu = cw ? cw->from_cpu : 0;
	e->migrations = cw ? cw->migrations : 0;
	record_submit(e);
}

/* Whether a holder that held the CPU `held` ns of a wait here since
 * `here_since` did so mostly inside its call, in since `call_since` with
 * `call_oncpu` ns on a CPU: throughout if it entered the call before the
 * wait, else for at most the call's time on a CPU. Without a known `held`
 * (the task leaving now, no slice remembered), only a call it was in
 * before the wait counts. */
static __always_inline bool held_in_call(__u64 held, __u64 here_since, __u64 call_since,
					 __u64 call_oncpu)
{
	if (call_since && call_since <= here_since)
		return true;
	return held && call_oncpu * 2 >= held;
}

/* What sched_switch hands to the global functions it calls beyond their
 * numbers: before Linux 5.12 a global function takes no pointer, and it
 * takes kernel pointers only as numbers. Per CPU: sched_switch does not
 * nest on a CPU. */
struct switch_args {
	__u64 now;
	__u64 next; /* struct task_struct *, read with BPF_CORE_READ */
	__u32 prev_tid;
	__u32 next_tid;
	/* read by sched_switch, directly where tp_btf gives the tasks:
	 * whether next is of the fair class (only those are throttled),
	 * next (a record's waiter, but its name: runq_event_emit reads that)
	 * for every episode (a branch on it split the verifier's states
	 * through the rest of the handler, +5,400 instructions), and prev
	 * (the holder) where wait_holder found no entry */
	__u32 next_fair;
	__u32 prev_kthread;
	struct task_ref waiter;
	struct task_ref prev_holder;
	/* wait_end's: the wait, from when on this CPU (earlier on others if
	 * `carried`, its entry in carried_waits), the waiter's cgroup */
	__u64 wait;
	__u64 here_since;
	__u64 next_cgroup;
	/* wait_holder's finding, and steal_during the wait if it is long
	 * enough to report (called from sched_switch itself: a call chain
	 * under wait_end would pass the 512 bytes of stack that kernels
	 * before 6.13 allow all frames of a chain together) */
	__u64 found;
	__u64 steal_ns;
	/* prev's stretch on this CPU: since when, and the softirqs run in it */
	__u64 stretch_since;
	__u64 stretch_softirq;
	/* wait_end's verdict for why_record: the part of the wait a throttle
	 * covered, and whether its holder (`holder`) is a kernel thread, or
	 * this CPU's ksoftirqd */
	__u64 why_throttled;
	__u32 why_kthread;
	__u32 why_ksoftirqd;
	__u32 next_is_ksoftirqd;
	__u32 carried;
	__u32 has_stats; /* runq_stats_of(next_cgroup) has an entry */
	/* the call prev's state follows (hooked syscalls), or -1 */
	__s32 prev_call_nr;
	__u64 prev_call_since;
	__u64 prev_call_oncpu;
	/* wait_end's own, kept here rather than on its stack: it is a frame
	 * of sched_switch's deepest call chain */
	struct task_ref holder;
	struct preemptor_key preemptor;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct switch_args);
} switch_args SEC(".maps");

static __always_inline struct switch_args *this_switch_args(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&switch_args, &zero);
}

/* Of `softirq` ns run on this CPU in the stretch since `since` that ends
 * `now`, the share inside a wait on this CPU since `here_since`, in
 * proportion to time where the stretch began before the wait. */
static __always_inline __u64 stretch_softirq_in_wait(__u64 since, __u64 softirq, __u64 here_since,
						     __u64 now)
{
	__u64 inside, whole;

	if (since >= here_since || now <= since)
		return softirq;
	inside = now > here_since ? now - here_since : 0;
	whole = now - since;
	/* softirq <= whole: below 2^64 while the stretch is under 73 min */
	if (whole > (1ULL << 32)) {
		inside >>= 20;
		whole >>= 20;
		if (!whole)
			return 0;
	}
	return softirq * inside / whole;
}

/* Split the wait wait_end just judged (this CPU's switch_args) into its
 * cgroup's why_ns, by cause (enum why_cause, in its order). A global
 * function beside wait_end, not under it: its branches are verified once,
 * and its frame does not add to wait_end's on the stack. */
__noinline int why_record(void)
{
	struct switch_args *a = this_switch_args();
	struct runq_stats *s;
	__u64 rest, part;

	if (!a || !a->has_stats)
		return 0;
	s = runq_stats_of(a->next_cgroup);
	if (!s)
		return 0;
	rest = a->wait;
	part = a->steal_ns < rest ? a->steal_ns : rest;
	s->why_ns[WHY_STEAL] += part;
	rest -= part;
	part = a->why_throttled < rest ? a->why_throttled : rest;
	s->why_ns[WHY_THROTTLED] += part;
	rest -= part;
	part = stretch_softirq_in_wait(a->stretch_since, a->stretch_softirq, a->here_since, a->now);
	part = part < rest ? part : rest;
	s->why_ns[WHY_SOFTIRQ] += part;
	rest -= part;
	if (!a->holder.tid)
		s->why_ns[WHY_IDLE] += rest;
	else if (a->why_ksoftirqd)
		s->why_ns[WHY_SOFTIRQ] += rest;
	else if (a->why_kthread)
		s->why_ns[WHY_KTHREAD] += rest;
	else if (a->holder.cgroup == a->next_cgroup)
		s->why_ns[WHY_SAME_CGROUP] += rest;
	else
		s->why_ns[WHY_OTHER_CGROUP] += rest;
	return 0;
}

/* The task this CPU switches to (this CPU's switch_args) ran after
 * waiting at least PREEMPT_WAIT_MIN_NS: charge the episode to the task
 * that held a CPU longest meanwhile and report the wait if it is over a
 * threshold. The task leaving is the current one (sched_switch runs in
 * its context). A global function: the verifier checks it once, not once
 * per path of sched_switch, and only such waits pay for its call. */
__noinline int wait_end(void)
{
	struct switch_args *a = this_switch_args();
	struct cpu_state *cs = this_cpu();
	struct task_struct *next;
	__u32 cpu = bpf_get_smp_processor_id(), next_tid, prev_tid, kthread = 0;
	__u64 now, wait, here_since, next_cgroup, found, held, held_since = 0, held_oncpu = 0;
	const struct carried_wait *cw = NULL;
	struct runq_stats *s = NULL;
	struct task_ref *holder;
	__s32 held_syscall = -1;
	bool next_is_ksoftirqd;
	int i;

	if (!a || !cs)
		return 0;
	holder = &a->holder;
	__builtin_memset(holder, 0, sizeof(*holder));
	next = (struct task_struct *)a->next;
	next_tid = a->next_tid;
	prev_tid = a->prev_tid;
	now = a->now;
	wait = a->wait;
	here_since = a->here_since;
	next_cgroup = a->next_cgroup;
	next_is_ksoftirqd = a->next_is_ksoftirqd;
	if (a->carried)
		cw = bpf_map_lookup_elem(&carried_waits, &next_tid);
	if (a->has_stats)
		s = runq_stats_of(next_cgroup);
	found = a->found;
	held = holder_held_ns(found);
	i = held ? holder_entry(cpu, found) : -1;

	cs->wait_throttle.cgroup = 0;
	cs->wait_throttle.covered_ns = 0;
	/* Only fair-class tasks are throttled by a CFS quota. */
	if (a->next_fair)
		wait_throttle_judge(cs, cpu, next, here_since, now, wait, cw);

	/* With none found, the task leaving held the CPU; else the holder
	 * found is an entry's (the waiter runs now, so no open slice is
	 * another's): the (unreachable) rest names none. */
	if (!held) {
		*holder = a->prev_holder;
		kthread = a->prev_kthread;
	} else if (i >= 0 && i < SLICES) {
		slice_holder(cs, i, holder, &kthread);
	}
	/* A holder of the CPUs it waited on before outweighs this one's. */
	if (cw && cw->held_ns > held && cw->holder.tid != holder->tid) {
		*holder = cw->holder;
		kthread = cw->kthread;
	}
	a->why_throttled = cs->wait_throttle.cgroup ? cs->wait_throttle.covered_ns : 0;
	a->why_kthread = kthread;
	a->why_ksoftirqd = holder->tid == cs->ksoftirqd_tid;
	if (s && cs->wait_throttle.cgroup)
		s->preempted_throttled++;
	else if (s && holder->tid) {
		a->preemptor.victim_cgroup = next_cgroup;
		a->preemptor.preemptor_cgroup = holder->cgroup;
		__builtin_memcpy(a->preemptor.comm, holder->comm, sizeof(a->preemptor.comm));
		a->preemptor.kthread = kthread;
		preemption_record(s, &a->preemptor, kthread, wait);
	}
	if (wait < (next_is_ksoftirqd ? stall_threshold_ns : runq_threshold_ns))
		return 0;
	/* The syscall the holder was in: from its state (hooked syscalls), or
	 * the call the sampler found it in (sampled); named only if the
	 * holder held the CPU inside it (held_in_call), not for a call it
	 * blocked in as it left. */
	if (holder->tid == prev_tid && a->prev_call_nr >= 0) {
		held_syscall = a->prev_call_nr;
		held_since = a->prev_call_since;
		held_oncpu = a->prev_call_oncpu;
	} else if (sampling_calls() && holder->tid) {
		held_syscall = sampled_syscall_of(cs, holder->tid, now, &held_since, &held_oncpu);
	}
	if (held_syscall >= 0 && !held_in_call(held, here_since, held_since, held_oncpu))
		held_syscall = -1;
	runq_event_emit(next_is_ksoftirqd ? KIND_TAKEOVER : KIND_RUNQ, cs, now, wait, a->steal_ns,
			&a->waiter, &a->next, holder, held_syscall, held_since, cw);
	return 0;
}

/* Hand a wait of `next` that ended now to wait_end, through this CPU's
 * switch_args. */
static __always_inline void
wait_end_call(bool btf, struct cpu_state *cs, __u64 now, __u64 wait, __u64 here_since,
	      __u64 steal_now, __u64 stretch_since, __u64 stretch_softirq, struct task_struct *next,
	      __u32 next_tid, __u64 next_cgroup, struct task_struct *prev, __u32 prev_tid,
	      struct runq_stats *s, struct task_state *ps, struct carried_wait *cw)
{
	struct switch_args *args = this_switch_args();
	bool follows = ps && call_followed(&ps->call);
	bool ksoftirqd = next_tid == cs->ksoftirqd_tid;
	bool reported = wait >= (ksoftirqd ? stall_threshold_ns : runq_threshold_ns);

	if (!args)
		return;
	/* The open slice is the waiter's own, just begun: it counts nothing.
	 * Idle never holds a CPU from a runnable ksoftirqd (never throttled,
	 * never moved): idle's time in such a wait is softirqs run at irq
	 * exits in idle's context, which slices tell from idle only in
	 * proportion over the whole entry, and in a takeover they can outweigh
	 * a hog that softirqs took most of the CPU from. */
	args->found =
		wait_holder(bpf_get_smp_processor_id(), here_since, now, next_tid, !ksoftirqd);
	/* None if the steal clock has not moved since the wait began. */
	args->steal_ns = reported && cs->steal_moved_at > now - wait ?
				 steal_during(now - wait, now, steal_now) :
				 0;
	/* The task leaving holds the wait where no entry did (1% of
	 * episodes in an overload); its cgroup is five loads deep. */
	if (!args->found) {
		task_ref_set(btf, &args->prev_holder, prev, prev_tid ? task_cgroup(btf, prev) : 0);
		args->prev_kthread = !!(FIELD(btf, prev, flags) & PF_KTHREAD);
	}
	args->waiter.pid = FIELD(btf, next, tgid);
	args->waiter.tid = next_tid;
	args->waiter.cgroup = next_cgroup;
	args->next_fair = FIELD(btf, next, prio) >= MAX_RT_PRIO;
	args->stretch_since = stretch_since;
	args->stretch_softirq = stretch_softirq;
	args->now = now;
	args->next = (__u64)next;
	args->prev_tid = prev_tid;
	args->next_tid = next_tid;
	args->wait = wait;
	args->here_since = here_since;
	args->next_cgroup = next_cgroup;
	args->next_is_ksoftirqd = ksoftirqd;
	args->carried = cw != NULL;
	args->has_stats = s != NULL;
	args->prev_call_nr = follows ? ps->call.nr : -1;
	args->prev_call_since = follows ? ps->call.enter_ts : 0;
	args->prev_call_oncpu = follows ? ps->call.oncpu_ns : 0;
	wait_end();
	why_record();
}

/* Whether `next` waited on this CPU's run queue and for how long, as the
 * scheduler's own accounting (sched_info) has it: since its wakeup, or
 * since it was switched out still runnable (preempted, throttled,
 * yielded). The clock is this run queue's, updated by __schedule, except
 * right after a wakeup preemption (the scheduler skips that update): such
 * a short wait reads as 0, and still counts as a wait. Without sched_info
 * the same span comes from the stamp in next's state (runq_from_wakeup). */
static __always_inline bool runq_wait(bool btf, struct task_struct *next, __u32 next_tid,
				      struct rq *rq, __u64 now, __u64 *wait)
{
	__u64 queued, clock;

	if (runq_from_wakeup) {
		struct task_state *ns = task_state_of(next, next_tid, false);

		queued = ns ? ns->queued_at : 0;
		if (!queued)
			return false;
		ns->queued_at = 0;
		*wait = now > queued ? now - queued : 0;
		return true;
	}
	/* No CONFIG_SCHED_INFO or no run queue: user space sets runq_from_wakeup. */
	if (!bpf_core_field_exists(struct task_struct, sched_info) || !rq)
		return false;
	queued = FIELD(btf, next, sched_info.last_queued);
	clock = queued ? FIELD(btf, rq, clock) : 0;
	*wait = clock > queued ? clock - queued : 0;
	return queued != 0;
}

/* `prev` leaves the CPU: a syscall it entered in this slice moves from
 * the CPU to its state (any other call the CPU holds is stale: its task
 * changed thread id in exec), and a call it is inside gets this slice's
 * time. Returns prev's state, if it has one. */
static __always_inline struct task_state *
switch_out_call(struct cpu_state *cs, struct task_struct *prev, __u32 prev_tid, __u64 now)
{
	bool holds = cs && call_followed(&cs->call) && cs->call.tid == prev_tid;
	struct task_state *ps = task_state_of(prev, prev_tid, holds);

	if (holds && ps)
		ps->call = cs->call;
	if (cs)
		cs->call.enter_ts = 0;
	if (ps && call_followed(&ps->call))
		syscall_slice_end(&ps->call, cs, now);
	return ps;
}

/* Without sched_info, at switch-out: a task still runnable (`preempt`,
 * or its state still TASK_RUNNING: yielded, throttled) waits from now; one
 * that goes to sleep waits for nothing until it is woken. `ts` is its
 * state if the caller has it already. */
static __always_inline void runq_switched_out(struct task_struct *p, __u32 tid,
					      struct task_state *ts, __u64 now, bool runnable)
{
	if (!ts)
		ts = task_state_of(p, tid, runnable);

	if (ts)
		ts->queued_at = runnable ? now : 0;
}

/* Without sched_info: `p` is woken. A task already waiting (preempted as
 * it went to sleep, then woken) keeps its earlier start. */
static __always_inline void wakeup_stamp(struct task_struct *p, __u32 tid)
{
	struct task_state *ts = task_state_of(p, tid, true);

	if (ts && !ts->queued_at)
		ts->queued_at = bpf_ktime_get_ns();
}

/* `p` was woken (sched_wakeup, sched_wakeup_new: it is queued, under its
 * run queue's lock). A fair task queued into a throttled hierarchy was
 * throttled as it was enqueued, or joins a group throttled there: its CPU
 * gets a span for that throttle, which no switch there may show. */
static __always_inline void on_wakeup(bool btf, struct task_struct *p)
{
	__u32 tid = FIELD(btf, p, pid);
	struct cfs_rq *cfs_rq;

	if (!tid)
		return;
	if (runq_from_wakeup)
		wakeup_stamp(p, tid);
	else
		run_mark_wakeup(btf, p, tid);
	if (FIELD(btf, p, prio) < MAX_RT_PRIO)
		return;
	cfs_rq = task_cfs_rq(btf, p);
	if (in_throttled_hierarchy(btf, cfs_rq))
		throttle_span_open(cfs_rq_cpu(btf, cfs_rq), task_leaf(p), task_group_entity(p),
				   bpf_ktime_get_ns());
}

/* Before 5.14 the run state was `long state`. */
struct task_struct___pre_5_14 {
	long state;
} __attribute__((preserve_access_index));

/* Whether `p`, being switched out, is still runnable: preempted, or its
 * state still TASK_RUNNING (yielded, throttled). Read from the task, not
 * from sched_switch's prev_state argument, which kernels before 5.18 do
 * not pass. */
static __always_inline bool switched_out_runnable(bool btf, bool preempt, struct task_struct *p)
{
	if (preempt)
		return true;
	if (bpf_core_field_exists(p->__state))
		return FIELD(btf, p, __state) == TASK_RUNNING;
	return BPF_CORE_READ((struct task_struct___pre_5_14 *)p, state) == TASK_RUNNING;
}

/* This CPU's run queue, reached through prev's cfs_rq (hot in cache;
 * next's fields may not be). NULL on kernels without
 * CONFIG_FAIR_GROUP_SCHED, where a sched_entity has no cfs_rq: user space
 * then times waits from wakeups. */
static __always_inline struct rq *this_rq_of(bool btf, struct cfs_rq *prev_cfs_rq)
{
	return prev_cfs_rq ? FIELD(btf, prev_cfs_rq, rq) : NULL;
}

/* A runnable task that waits at least PREEMPT_WAIT_MIN_NS is one episode,
 * charged when it runs again to the task that held the CPU longest during
 * the wait (from the CPU's recent slices), or else to the task that had
 * the CPU until now. Only prev's state is looked up (it is the running
 * task, so hot in cache): next's wait comes from sched_info (from next's
 * state only without it), and a syscall's slices start from the CPU's
 * current_since. */
static __always_inline void on_switch(bool btf, bool preempt, struct task_struct *prev,
				      struct task_struct *next)
{
	__u32 prev_tid = FIELD(btf, prev, pid);
	__u32 next_tid = FIELD(btf, next, pid);
	struct cpu_state *cs = this_cpu();
	struct task_state *ps = NULL;
	struct carried_wait *cw = NULL;
	__u64 now = bpf_ktime_get_ns();
	struct cfs_rq *prev_cfs_rq = task_cfs_rq(btf, prev);
	struct rq *rq = this_rq_of(btf, prev_cfs_rq);
	/* The steal clock as __schedule just brought it up to date (with
	 * CONFIG_PARAVIRT_TIME_ACCOUNTING; else as of the last tick). */
	__u64 steal_now = rq ? rq_steal(btf, rq) : 0;
	struct run_mark *m = next_tid ? run_mark_of(next_tid) : NULL;
	__u64 kernel_wait = 0, wait;
	bool waited = next_tid && runq_wait(btf, next, next_tid, rq, now, &kernel_wait);
	__u32 cpu = bpf_get_smp_processor_id();
	struct cpu_throttles *ct = throttles_of(cpu);
	/* prev's stretch on this CPU, and the softirqs run in it */
	__u64 stretch_since = cs ? cs->current_since : now;
	__u64 stretch_softirq = cs ? cs->softirq_ns - cs->current_softirq : 0;

	if (prev_tid && syscalls_hooked)
		ps = switch_out_call(cs, prev, prev_tid, now);
	if (runq_from_wakeup && prev_tid)
		runq_switched_out(prev, prev_tid, ps, now,
				  switched_out_runnable(btf, preempt, prev));

	if (cs) {
		/* Idle slices too: a wait spent beside an idle CPU is held by
		 * nobody (tid 0), not by whoever ran before or after. */
		slice_remember(btf, prev, prev_tid, cs->current_since, now, steal_now);
		softirq_stolen_settle(cs, prev_tid);
		/* Idle has no sampler ticks: its time is no gap, and the steal
		 * taken meanwhile (a vCPU woken from idle may wait for the host)
		 * is no part of the next one. */
		if (!prev_tid) {
			cs->last_tick = now;
			cs->last_tick_steal = steal_read(btf, cs);
		}
		cs->steal_moved_at =
			steal_moved(cs->steal_moved_at, cs->current_steal, steal_now, now);
		cs->current_since = now;
		cs->current_tid = next_tid;
		cs->current_css_set = 0;
		cs->current_steal = steal_now;
		cs->current_softirq = cs->softirq_ns;
		/* Before the wait below: a waiter of a group unthrottled just
		 * now finds its span closed. */
		if (ct && ct->open)
			throttle_spans_close(cpu, now);
		if (prev_tid && in_throttled_hierarchy(btf, prev_cfs_rq))
			throttle_span_open(cpu, task_leaf(prev), task_group_entity(prev), now);
	}

	/* A wait from a stamp older than the wakeup counts from the wakeup. */
	wait = kernel_wait;
	if (m && m->tid == next_tid && m->woken_at && m->woken_at < now && now - m->woken_at < wait)
		wait = now - m->woken_at;
	if (next_tid)
		cw = run_mark_switch_in(btf, next, next_tid, m, kernel_wait);
	if (waited) {
		__u64 next_cgroup = task_cgroup(btf, next);
		struct runq_stats *s = runq_stats_of(next_cgroup);
		__u64 here_since = now - wait;

		/* Moved here while it waited: the wait began elsewhere. */
		if (cw && cw->since < now && cw->until <= now) {
			if (cw->until > here_since)
				here_since = cw->until;
			if (now - cw->since > wait)
				wait = now - cw->since;
		} else {
			cw = NULL;
		}
		if (s)
			runq_wait_record(s, wait);
		if (wait >= PREEMPT_WAIT_MIN_NS && cs)
			wait_end_call(btf, cs, now, wait, here_since, steal_now, stretch_since,
				      stretch_softirq, next, next_tid, next_cgroup, prev, prev_tid,
				      s, ps, cw);
	}
	/* After the wait's culprit: prev's sampled call names what it held. */
	if (sampling_calls() && cs)
		sampled_call_switch(btf, cs, prev, prev_tid,
				    prev_tid && switched_out_runnable(btf, preempt, prev), next,
				    next_tid, now);
}

static __always_inline void on_task_exit(bool btf, struct task_struct *p)
{
	__u32 tid = FIELD(btf, p, pid);
	struct cpu_state *cs = this_cpu();

	/* A call that never returns (exit, exit_group) must not move to the
	 * state of a task that is going away. */
	if (cs && cs->call.tid == tid)
		cs->call.enter_ts = 0;
	/* Task storage goes away with the task; the hash needs a delete. */
	if (!use_task_storage)
		bpf_map_delete_elem(&tasks, &tid);
}

#endif /* STALLTOP_SCHED_BPF_H */
