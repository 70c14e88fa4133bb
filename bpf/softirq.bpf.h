/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Softirq delay (first raise of a vector not yet pending -> entry) and run
 * time, per CPU and vector; who ran it (ksoftirqd/N or the task it
 * interrupted); softirq time stolen from ordinary tasks. Hooked: the delay
 * starts at the raise and run time is timed from entry to exit. Sampled
 * (softirq_sampled): no program on raise or exit, the two of three that a
 * network server runs hundreds of thousands of times a second; a sampler
 * tick that finds a vector pending starts its delay, and one that finds a
 * softirq running counts a period of its run time.
 */
#ifndef STALLTOP_SOFTIRQ_BPF_H
#define STALLTOP_SOFTIRQ_BPF_H

#include "common.bpf.h"
#include "syscall.bpf.h"
#include "syscall_sampled.bpf.h"

/* Set by user space when softirq delays start, and run time is counted,
 * at the sampler's ticks (softirq_tick) rather than in programs on
 * softirq_raise and softirq_exit. */
const volatile __u8 softirq_sampled = 0;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NR_SOFTIRQ_VECTORS);
	__type(key, __u32);
	__type(value, struct softirq_stats);
} softirq_by_vector SEC(".maps");

/* LRU: its keys (thread ids) churn, and threads that are gone give way to
 * new ones; preallocated, as a per-CPU allocation inside the softirq would
 * cost microseconds. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_PERCPU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct stolen_key);
	__type(value, struct stolen_stats);
} softirq_stolen SEC(".maps");

static __always_inline void on_softirq_raise(unsigned int vec)
{
	struct cpu_state *cs = this_cpu();

	if (!cs || vec >= NR_SOFTIRQ_VECTORS)
		return;
	barrier_var(vec); /* index with the register that was bounds-checked */
	if (!cs->softirq_raised[vec])
		cs->softirq_raised[vec] = bpf_ktime_get_ns();
}

static __always_inline void softirq_event_emit(bool btf, __u64 now, __u64 delay, __u32 vec,
					       bool in_ksoftirqd)
{
	struct softirq_event *e = record_reserve(KIND_SOFTIRQ, sizeof(*e), now);
	struct call *call;

	if (!e)
		return;
	e->delay_ns = delay;
	e->vector = vec;
	e->in_ksoftirqd = in_ksoftirqd;
	task_ref_fill(btf, &e->ctx, current_task(btf));
	call = current_call(btf, this_cpu(), (__u32)bpf_get_current_pid_tgid());
	e->ctx_syscall = call ? call->nr : -1;
	if (syscalls_sampled && e->ctx.tid) {
		__u64 arg0, arg1;

		e->ctx_syscall = syscall_in_progress(btf, current_task(btf), &arg0, &arg1);
	}
	e->_pad = 0;
	record_submit(e);
}

static __always_inline void on_softirq_entry(bool btf, unsigned int vec)
{
	struct cpu_state *cs = this_cpu();
	struct softirq_stats *s;
	__u64 now, raised, delay;
	__u32 key = vec, slot;
	bool in_ksoftirqd;

	if (!cs || vec >= NR_SOFTIRQ_VECTORS)
		return;
	barrier_var(vec); /* index with the register that was bounds-checked */
	cs->softirq_vec = vec;
	s = bpf_map_lookup_elem(&softirq_by_vector, &key);
	if (!s)
		return;
	/* Per-CPU values: no other CPU writes here, no atomics needed. */
	s->count++;
	in_ksoftirqd = (__u32)bpf_get_current_pid_tgid() == cs->ksoftirqd_tid;
	if (in_ksoftirqd)
		s->runs_in_ksoftirqd++;
	raised = cs->softirq_raised[vec];
	/* Sampled: most runs were raised and entered between two ticks; they
	 * take no clock read here. */
	if (softirq_sampled && !raised)
		return;
	now = bpf_ktime_get_ns();
	if (!softirq_sampled)
		cs->softirq_entered[vec] = now;
	if (!raised)
		return; /* raised before we attached */
	cs->softirq_raised[vec] = 0;
	delay = now > raised ? now - raised : 0;
	s->delay_total_ns += delay;
	if (delay > s->delay_max_ns)
		s->delay_max_ns = delay;
	slot = hist_slot(delay);
	if (slot < HIST_SLOTS)
		s->delay_slots[slot]++;
	if (delay >= stall_threshold_ns)
		softirq_event_emit(btf, now, delay, vec, in_ksoftirqd);
}

static __always_inline void softirq_stolen_add(__u64 pid_tgid, __u32 vec, __u64 ran)
{
	struct stolen_key key = {.tid = (__u32)pid_tgid, .vector = vec};
	struct stolen_stats *st = bpf_map_lookup_elem(&softirq_stolen, &key);

	if (st) {
		st->ns += ran;
		st->count++;
		return;
	}
	{
		struct stolen_stats fresh = {.ns = ran, .count = 1, .pid = pid_tgid >> 32};

		bpf_get_current_comm(fresh.comm, sizeof(fresh.comm));
		if (bpf_map_update_elem(&softirq_stolen, &key, &fresh, BPF_NOEXIST) &&
		    !bpf_map_lookup_elem(&softirq_stolen, &key))
			count(COUNTER_STOLEN_FULL);
	}
}

static __always_inline void on_softirq_exit(unsigned int vec)
{
	struct cpu_state *cs = this_cpu();
	struct softirq_stats *s;
	__u64 now, entered, ran;
	__u64 pid_tgid;
	__u32 key = vec;

	if (!cs || vec >= NR_SOFTIRQ_VECTORS)
		return;
	barrier_var(vec); /* index with the register that was bounds-checked */
	entered = cs->softirq_entered[vec];
	if (!entered)
		return;
	cs->softirq_entered[vec] = 0;
	now = bpf_ktime_get_ns();
	ran = now - entered;
	cs->softirq_ns += ran;
	s = bpf_map_lookup_elem(&softirq_by_vector, &key);
	if (!s)
		return;
	s->run_total_ns += ran;
	if (ran > s->run_max_ns)
		s->run_max_ns = ran;
	pid_tgid = bpf_get_current_pid_tgid();
	if ((__u32)pid_tgid == cs->ksoftirqd_tid)
		s->run_in_ksoftirqd_ns += ran;
	else if ((__u32)pid_tgid)
		softirq_stolen_add(pid_tgid, vec, ran);
}

/* Set in the preempt count while a softirq is served (the next bit up
 * counts bottom-half disabling). */
#define SOFTIRQ_OFFSET (1U << 8)

/* x86: how far this CPU's preempt count (per-CPU data) lies from its run
 * queue (another), from the kernel's BTF; user space sets softirq_sampled
 * only where it knows it. */
const volatile __s64 preempt_count_from_rq = 0;
/* How far this CPU's mask of pending softirqs lies from its run queue;
 * known wherever softirq_sampled is set. */
const volatile __s64 softirq_pending_from_rq = 0;

/* Whether this CPU serves a softirq under the running task, seen from a
 * sampler tick (its hardirq adds to the count; the softirq bits are those
 * of what it interrupted). */
static __always_inline bool serving_softirq(bool btf, __u64 rq)
{
#if defined(__TARGET_ARCH_arm64)
	struct task_struct *t = current_task(btf);

	return FIELD(btf, t, thread_info.preempt_count) & SOFTIRQ_OFFSET;
#else
	int count = 0;

	if (!rq ||
	    bpf_probe_read_kernel(&count, sizeof(count), (void *)(rq + preempt_count_from_rq)))
		return false;
	return count & SOFTIRQ_OFFSET;
#endif
}

/* Starts the delay of every vector this tick finds pending and not yet
 * started, at the tick: a delay measured so is short of the true one by
 * less than a period (the raise came since the last tick), but not
 * inflated for the many vectors raised by the interrupt that carries the
 * tick itself and run on its way out. (The mask is 16 bits on x86 and 32
 * elsewhere; its low half holds every vector on a little-endian CPU.) */
static __always_inline void softirq_pending_tick(struct cpu_state *cs, __u64 rq, __u64 now)
{
	__u16 pending = 0;
	int vec;

	if (!rq || bpf_probe_read_kernel(&pending, sizeof(pending),
					 (void *)(rq + softirq_pending_from_rq)))
		return;
	for (vec = 0; vec < NR_SOFTIRQ_VECTORS; vec++)
		if ((pending & (1U << vec)) && !cs->softirq_raised[vec])
			cs->softirq_raised[vec] = now;
}

/* A sampler tick on this CPU (softirq_sampled) that interrupted thread
 * `pid_tgid`: starts the delays of the vectors pending; if a softirq runs,
 * the period goes to the vector last entered and to the CPU's softirq
 * time, and is stolen from the thread (unless it is ksoftirqd). Counted in
 * periods: right on average over many ticks. */
static __always_inline void softirq_tick(bool btf, struct cpu_state *cs, __u64 pid_tgid, __u64 now)
{
	__u32 key = cs->softirq_vec;
	struct softirq_stats *s;
	bool in_ksoftirqd;
	__u64 rq;

	if (!softirq_sampled)
		return;
	rq = current_rq(btf);
	softirq_pending_tick(cs, rq, now);
	if (!serving_softirq(btf, rq))
		return;
	in_ksoftirqd = (__u32)pid_tgid && (__u32)pid_tgid == cs->ksoftirqd_tid;
	s = bpf_map_lookup_elem(&softirq_by_vector, &key);
	if (!s)
		return;
	s->run_total_ns += sample_period_ns;
	cs->softirq_ns += sample_period_ns;
	if (in_ksoftirqd)
		s->run_in_ksoftirqd_ns += sample_period_ns;
	else if ((__u32)pid_tgid)
		softirq_stolen_add(pid_tgid, key, sample_period_ns);
}

#endif /* STALLTOP_SOFTIRQ_BPF_H */
