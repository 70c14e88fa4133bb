/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Softirq delay (first raise of a vector not yet pending -> entry) and run
 * time, per CPU and vector; who ran it (ksoftirqd/N or the task it
 * interrupted); softirq time stolen from ordinary tasks. Run time is timed
 * from entry to exit in every mode: a clock read at each, per-CPU sums at
 * exit, and the stolen time settled per thread at its switch-out
 * (softirq_stolen.bpf.h). The delay starts at the raise (a program on
 * softirq_raise) or, where the sampler runs (softirq_delay_ticks), at the
 * first sampler tick that finds the vector pending: no program on raise,
 * which a network server runs hundreds of thousands of times a second.
 */
#ifndef STALLTOP_SOFTIRQ_BPF_H
#define STALLTOP_SOFTIRQ_BPF_H

#include "common.bpf.h"
#include "softirq_stolen.bpf.h"
#include "syscall.bpf.h"
#include "syscall_sampled.bpf.h"

/* Set by user space in the sampler's instance when its ticks start
 * softirq delays (softirq_pending_tick) and no program runs on raise. */
const volatile __u8 softirq_delay_ticks = 0;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NR_SOFTIRQ_VECTORS);
	__type(key, __u32);
	__type(value, struct softirq_stats);
} softirq_by_vector SEC(".maps");

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
	if (sampling_calls() && e->ctx.tid) {
		__u64 arg0, arg1;

		e->ctx_syscall = syscall_in_progress(btf, current_task(btf), &arg0, &arg1);
	}
	e->_pad = 0;
	record_submit(e);
}

/* The end of a delay that began at `raised`: into the vector's histogram,
 * and a record when it makes a stall. Off the common path: most runs had
 * no delay started (raised and run between two ticks, or before we
 * attached). */
static __always_inline void softirq_delay_end(bool btf, struct cpu_state *cs, __u32 vec,
					      __u64 raised, __u64 now)
{
	struct softirq_stats *s = bpf_map_lookup_elem(&softirq_by_vector, &vec);
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u64 delay = now > raised ? now - raised : 0;
	__u32 slot;

	if (!s)
		return;
	/* Per-CPU values: no other CPU writes here, no atomics needed. */
	s->delay_total_ns += delay;
	if (delay > s->delay_max_ns)
		s->delay_max_ns = delay;
	slot = hist_slot(delay);
	if (slot < HIST_SLOTS)
		s->delay_slots[slot]++;
	if (delay >= stall_threshold_ns)
		softirq_event_emit(btf, now, delay, vec, tid && tid == cs->ksoftirqd_tid);
}

/* Entry: stamps the start (the exit times the run) and ends the vector's
 * delay if one was started. */
static __always_inline void on_softirq_entry(bool btf, unsigned int vec)
{
	struct cpu_state *cs = this_cpu();
	__u64 now, raised;

	if (!cs || vec >= NR_SOFTIRQ_VECTORS)
		return;
	barrier_var(vec); /* index with the register that was bounds-checked */
	now = bpf_ktime_get_ns();
	cs->softirq_entered[vec] = now;
	raised = cs->softirq_raised[vec];
	if (!raised)
		return;
	cs->softirq_raised[vec] = 0;
	softirq_delay_end(btf, cs, vec, raised, now);
}

/* Exit: the run's time goes to the CPU's softirq time, the vector's sums,
 * and ksoftirqd's share or the running thread's stolen sums (settled at
 * its switch-out). One clock read, no hash update. */
static __always_inline void on_softirq_exit(unsigned int vec)
{
	struct cpu_state *cs = this_cpu();
	struct softirq_stats *s;
	__u64 entered, ran;
	__u32 key = vec, tid;

	if (!cs || vec >= NR_SOFTIRQ_VECTORS)
		return;
	barrier_var(vec); /* index with the register that was bounds-checked */
	entered = cs->softirq_entered[vec];
	if (!entered)
		return; /* entered before we attached */
	cs->softirq_entered[vec] = 0;
	ran = bpf_ktime_get_ns() - entered;
	cs->softirq_ns += ran;
	s = bpf_map_lookup_elem(&softirq_by_vector, &key);
	if (!s)
		return;
	s->count++;
	s->run_total_ns += ran;
	if (ran > s->run_max_ns)
		s->run_max_ns = ran;
	tid = (__u32)bpf_get_current_pid_tgid();
	if (tid && tid == cs->ksoftirqd_tid) {
		s->runs_in_ksoftirqd++;
		s->run_in_ksoftirqd_ns += ran;
	} else if (tid) {
		/* A tick that settled between a read and a write here would
		 * see its sum added again (stolen time over the CPU's own). */
		cs->stolen_adding = 1;
		barrier();
		cs->stolen_ns[vec] += ran;
		cs->stolen_runs[vec]++;
		cs->stolen_vectors |= 1U << vec;
		barrier();
		cs->stolen_adding = 0;
	}
}

/* How far this CPU's mask of pending softirqs lies from its run queue;
 * known wherever softirq_delay_ticks is set. */
const volatile __s64 softirq_pending_from_rq = 0;

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

/* A sampler tick on this CPU that interrupted thread `tid`: starts the
 * delays of the vectors pending (softirq_delay_ticks), and settles the
 * softirq time stolen from the thread so far, so that a thread that keeps
 * its CPU is not charged only when it leaves it. */
static __always_inline void softirq_tick(bool btf, struct cpu_state *cs, __u32 tid, __u64 now)
{
	if (softirq_delay_ticks)
		softirq_pending_tick(cs, current_rq(btf), now);
	/* (Left to the next tick or switch-out while a softirq exit adds.) */
	if (!cs->stolen_adding)
		softirq_stolen_settle(cs, tid);
}

#endif /* STALLTOP_SOFTIRQ_BPF_H */
