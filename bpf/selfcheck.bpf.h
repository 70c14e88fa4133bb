/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The start-up check of the per-CPU values the probes read by address or
 * from the run queue: the mask of pending softirqs (at a distance from the
 * run queue that user space takes from the kernel's BTF) and the vCPU's
 * steal clock (KVM's, at such a distance, or the run queue's copies).
 * Never attached: user space runs read_kernel_values with
 * BPF_PROG_TEST_RUN on each CPU and judges what it read there.
 */
#ifndef STALLTOP_SELFCHECK_BPF_H
#define STALLTOP_SELFCHECK_BPF_H

#include "common.bpf.h"
#include "steal.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct kernel_values);
} kernel_values SEC(".maps");

/* Reads, on this CPU, the pending mask where `pending_at` is not 0, and
 * the steal clock from `steal_from` (enum steal_source; KVM's at
 * `steal_at`), the way the sampler reads them. */
static __always_inline void read_kernel_values_here(__s64 pending_at, __u64 steal_from,
						    __s64 steal_at)
{
	__u64 rq = current_rq(false);
	struct kernel_values *v;
	__u32 key = 0;

	v = bpf_map_lookup_elem(&kernel_values, &key);
	if (!v)
		return;
	v->read = 0;
	if (!rq)
		return;
	if (pending_at && !bpf_probe_read_kernel(&v->softirq_pending, sizeof(v->softirq_pending),
						 (void *)(rq + pending_at)))
		v->read |= KERNEL_READ_SOFTIRQ_PENDING;
	if (steal_from == STEAL_KVM &&
	    !bpf_probe_read_kernel(&v->steal_ns, sizeof(v->steal_ns), (void *)(rq + steal_at)))
		v->read |= KERNEL_READ_STEAL;
	if (steal_from == STEAL_RQ) {
		v->steal_ns = rq_steal(false, (struct rq *)rq);
		v->read |= KERNEL_READ_STEAL;
	}
}

#endif /* STALLTOP_SELFCHECK_BPF_H */
