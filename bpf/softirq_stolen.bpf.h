/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Softirq time stolen from ordinary threads: the softirq exit adds each
 * run to the CPU's sums for the running thread (cpu_state.stolen_*), and
 * those are settled into map `softirq_stolen` when the thread leaves the
 * CPU (sched_switch) or at a sampler tick: one hash update per thread and
 * vector per switch, not one per softirq. The running thread only changes
 * at a switch, so every sum is the switched-out (or ticked) thread's.
 */
#ifndef STALLTOP_SOFTIRQ_STOLEN_BPF_H
#define STALLTOP_SOFTIRQ_STOLEN_BPF_H

#include "common.bpf.h"

/* LRU: its keys (thread ids) churn, and threads that are gone give way to
 * new ones; preallocated (an LRU map always is), as settling happens under
 * the run-queue lock. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_PERCPU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct stolen_key);
	__type(value, struct stolen_stats);
} softirq_stolen SEC(".maps");

/* Add `ns` over `runs` softirq runs of vector `vec` to thread `tid` (task
 * `t`). */
static __always_inline void softirq_stolen_add(bool btf, struct task_struct *t, __u32 tid,
					       __u32 vec, __u64 ns, __u32 runs)
{
	struct stolen_key key = {.tid = tid, .vector = vec};
	struct stolen_stats *st = bpf_map_lookup_elem(&softirq_stolen, &key);
	struct stolen_stats fresh = {.ns = ns, .count = runs};

	if (st) {
		st->ns += ns;
		st->count += runs;
		return;
	}
	fresh.pid = FIELD(btf, t, tgid);
	comm_copy(btf, fresh.comm, t);
	if (bpf_map_update_elem(&softirq_stolen, &key, &fresh, BPF_NOEXIST) &&
	    !bpf_map_lookup_elem(&softirq_stolen, &key))
		count(COUNTER_STOLEN_FULL);
}

/* Settle what softirqs took from the current task (thread `tid`: at a
 * sampler tick, or leaving the CPU at a switch) since it was last settled.
 * A global function: its loop over the vectors is verified once, not once
 * per path of its callers. */
__noinline int softirq_stolen_settle_all(__u32 tid)
{
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();
	struct cpu_state *cs = this_cpu();
	__u32 vectors;
	int vec;

	if (!cs)
		return 0;
	vectors = cs->stolen_vectors;
	cs->stolen_vectors = 0;
	for (vec = 0; vec < NR_SOFTIRQ_VECTORS; vec++) {
		if (!(vectors & (1U << vec)))
			continue;
		if (tid)
			softirq_stolen_add(false, t, tid, vec, cs->stolen_ns[vec],
					   cs->stolen_runs[vec]);
		cs->stolen_ns[vec] = 0;
		cs->stolen_runs[vec] = 0;
	}
	return 0;
}

/* The same, when softirqs took anything since the last settling. */
static __always_inline void softirq_stolen_settle(struct cpu_state *cs, __u32 tid)
{
	if (cs->stolen_vectors)
		softirq_stolen_settle_all(tid);
}

#endif /* STALLTOP_SOFTIRQ_STOLEN_BPF_H */
