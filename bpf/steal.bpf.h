/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The vCPU's steal clock (all the time the hypervisor ran something else
 * on it): where each probe reads it, and how fresh that reading is. The
 * kernel keeps it for any hypervisor it reads steal from (paravirt steal
 * clock: KVM on x86 and arm64, Xen, VMware, ...) in the run queue; x86
 * KVM guests also have KVM's own per-vCPU record, current at any moment.
 */
#ifndef STALLTOP_STEAL_BPF_H
#define STALLTOP_STEAL_BPF_H

#include "common.bpf.h"

/* Where the sampler and the interrupt probes read steal (enum
 * steal_source). */
const volatile __u8 steal_source = STEAL_NONE;

/* x86 KVM guests: how far this CPU's KVM steal time lies from its run
 * queue (both per-CPU variables), from the kernel's BTF. Its first field is
 * the vCPU's steal clock in ns, which the host updates whenever it runs
 * the vCPU again: current at the first tick after a gap. (Read by address:
 * a typed ksym of a per-CPU variable needs a kernel whose kallsyms lists
 * data.) */
const volatile __s64 steal_time_from_rq = 0;

/* Declared here: a vmlinux.h of a kernel without the configs (Debian's
 * arm64 has no CONFIG_PARAVIRT_TIME_ACCOUNTING) lacks the fields. */
struct rq___steal {
	__u64 prev_steal_time;
	__u64 prev_steal_time_rq;
} __attribute__((preserve_access_index));

/* The run queue's steal clock: the later of its two copies of the
 * paravirt steal clock. prev_steal_time (CONFIG_PARAVIRT) is brought up to
 * date at every scheduler tick of the CPU (steal_account_process_time, on
 * each tick and when the CPU leaves nohz idle); prev_steal_time_rq
 * (CONFIG_PARAVIRT_TIME_ACCOUNTING, unless booted with no-steal-acc) at
 * every update of the run queue's clock (update_rq_clock_task: each
 * switch, wakeup and tick). Each is the clock as of its last update; 0
 * where the kernel keeps neither or the hypervisor gives no steal. */
static __always_inline __u64 rq_steal(bool btf, struct rq *rq)
{
	struct rq___steal *r = (void *)rq;
	__u64 tick = 0, clock = 0;

	if (bpf_core_field_exists(r->prev_steal_time))
		tick = FIELD(btf, r, prev_steal_time);
	if (bpf_core_field_exists(r->prev_steal_time_rq))
		clock = FIELD(btf, r, prev_steal_time_rq);
	return tick > clock ? tick : clock;
}

/* This CPU's run queue's address, kept in its state once known. */
static __always_inline __u64 this_rq_addr(bool btf, struct cpu_state *cs)
{
	if (!cs->rq)
		cs->rq = current_rq(btf);
	return cs->rq;
}

/* This vCPU's steal clock as the sampler and the interrupt probes read
 * it (steal_source): KVM's, current now; or the run queue's, as of its
 * last update (see steal_lags). 0 where there is none. */
static __always_inline __u64 steal_read(bool btf, struct cpu_state *cs)
{
	__u64 rq, steal = 0;

	if (steal_source == STEAL_NONE)
		return 0;
	rq = this_rq_addr(btf, cs);
	if (!rq)
		return 0;
	if (steal_source == STEAL_KVM) {
		bpf_probe_read_kernel(&steal, sizeof(steal), (void *)(rq + steal_time_from_rq));
		return steal;
	}
	return rq_steal(false, (struct rq *)rq);
}

/* Whether steal_read lags: the run queue's copies are only brought up to
 * date by the scheduler, so steal taken during an irqs-off gap or an
 * interrupt's run is known only after the next scheduler tick on the CPU
 * (see steal_settled). */
static __always_inline bool steal_lags(void)
{
	return steal_source == STEAL_RQ;
}

/* Of `span` ns, the time the hypervisor took between two readings of the
 * steal clock. */
static __always_inline __u64 steal_between(__u64 before, __u64 after, __u64 span)
{
	__u64 steal = after > before ? after - before : 0;

	return steal < span ? steal : span;
}

/* Records waiting for the steal of the span they end (steal_lags): an
 * irqs-off gap, an interrupt's run. Judged at the first sampler tick two
 * jiffies after (by then the CPU's scheduler tick, which runs at each
 * jiffy while the CPU is busy, has brought the run queue's steal up to
 * date): over the threshold once that steal is out, they are sent. One of
 * each per CPU (cpu_state.steal_pending says which are held). */
struct steal_wait {
	__u64 steal_before; /* the steal clock where the span began */
	__u64 jiffies;	    /* when the span ended */
	__u64 threshold_ns; /* what is left of it must reach this to be sent */
};

struct steal_pending {
	struct sample_event gap;
	struct hardirq_event run;
	struct steal_wait gap_wait;
	struct steal_wait run_wait;
};

#define STEAL_PENDING_GAP 1
#define STEAL_PENDING_RUN 2

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct steal_pending);
} steal_pending SEC(".maps");

static __always_inline struct steal_pending *this_steal_pending(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&steal_pending, &zero);
}

/* Whether the steal of a span that ended at `w->jiffies` is known now. */
static __always_inline bool steal_settled(const struct steal_wait *w)
{
	return bpf_jiffies64() >= w->jiffies + 2;
}

/* Send the records of this CPU that wait for steal and can be judged now
 * (all of them if `force`), at `now`, with steal clock `steal`. A global
 * function, checked once by the verifier. */
__noinline int steal_pending_send(__u64 steal, __u64 now, int force)
{
	struct cpu_state *cs = this_cpu();
	struct steal_pending *p = this_steal_pending();
	__u64 taken;

	if (!cs || !p)
		return 0;
	if ((cs->steal_pending & STEAL_PENDING_GAP) && (force || steal_settled(&p->gap_wait))) {
		cs->steal_pending &= ~STEAL_PENDING_GAP;
		taken = steal_between(p->gap_wait.steal_before, steal, p->gap.gap_ns);
		p->gap.gap_steal_ns = taken;
		if (p->gap.gap_ns - taken >= p->gap_wait.threshold_ns)
			record_output(&p->gap, sizeof(p->gap), now);
	}
	if ((cs->steal_pending & STEAL_PENDING_RUN) && (force || steal_settled(&p->run_wait))) {
		cs->steal_pending &= ~STEAL_PENDING_RUN;
		taken = steal_between(p->run_wait.steal_before, steal, p->run.run_ns);
		p->run.run_ns -= taken;
		p->run.steal_ns = taken;
		if (p->run.run_ns >= p->run_wait.threshold_ns)
			record_output(&p->run, sizeof(p->run), now);
	}
	return 0;
}

#endif /* STALLTOP_STEAL_BPF_H */
