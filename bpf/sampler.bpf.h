/* SPDX-License-Identifier: GPL-2.0 */
/*
 * CPU X-ray: a cpu-clock perf event on every CPU. Each tick costs a few
 * loads; a stack is taken only when it can explain something (a softirq
 * waiting on this CPU, a task long inside a syscall), and a
 * gap between ticks far beyond the period, less the time the host took
 * the vCPU meanwhile (steal), is reported as irqs-off.
 */
#ifndef STALLTOP_SAMPLER_BPF_H
#define STALLTOP_SAMPLER_BPF_H

#include "common.bpf.h"
#include "softirq.bpf.h"
#include "syscall.bpf.h"
#include "syscall_sampled.bpf.h"

/* x86 KVM guests: how far this CPU's KVM steal time lies from its run
 * queue (both per-CPU variables), from the kernel's BTF; 0 elsewhere. Its
 * first field is the vCPU's steal clock in ns, which the host updates
 * whenever it runs the vCPU again: current at the first tick after a gap.
 * (Read by address: a typed ksym of a per-CPU variable needs a kernel
 * whose kallsyms lists data.) */
const volatile __s64 steal_time_from_rq = 0;

/* This vCPU's steal time so far, in ns; 0 where unknown. */
static __always_inline __u64 host_steal_ns(bool btf)
{
	__u64 rq = steal_time_from_rq ? current_rq(btf) : 0, steal = 0;

	if (!rq || bpf_probe_read_kernel(&steal, sizeof(steal), (void *)(rq + steal_time_from_rq)))
		return 0;
	return steal;
}

/* Keep stacks once something has waited (or a call run) this long. */
const volatile __u64 sample_after_ns = 1000 * 1000;

static __always_inline __u32 sample_reasons(struct cpu_state *cs, struct call *call, __u32 tid,
					    __u64 now)
{
	__u32 why = 0;
	int vec;

	for (vec = 0; vec < NR_SOFTIRQ_VECTORS; vec++) {
		__u64 raised = cs->softirq_raised[vec];

		if (raised && now - raised >= sample_after_ns)
			why |= SAMPLE_WHY_SOFTIRQ;
	}
	/* On-CPU time in the call so far, not wall time: a call that slept
	 * explains nothing about this CPU. */
	if (call && call->oncpu_ns + (now - slice_start(call, cs)) >= sample_after_ns)
		why |= SAMPLE_WHY_SYSCALL;
	if (sampled_stack_due(cs, tid, sample_after_ns))
		why |= SAMPLE_WHY_SYSCALL;
	return why;
}

static __always_inline int on_sample(bool btf, struct bpf_perf_event_data *ctx)
{
	struct cpu_state *cs = this_cpu();
	struct call *call;
	struct sample_event *e;
	__u64 now, gap, gap_steal, steal, since, pid_tgid;
	__u32 tid, why;
	long len;

	if (!cs)
		return 0;
	now = bpf_ktime_get_ns();
	gap = cs->last_tick ? now - cs->last_tick : 0;
	steal = host_steal_ns(btf);
	gap_steal = cs->last_tick_steal && steal > cs->last_tick_steal ?
			    steal - cs->last_tick_steal :
			    0;
	if (gap_steal > gap)
		gap_steal = gap;
	cs->last_tick = now;
	cs->last_tick_steal = steal;
	pid_tgid = bpf_get_current_pid_tgid();
	tid = (__u32)pid_tgid;
	softirq_tick(btf, cs, tid, now);
	call = tid ? current_call(btf, cs, tid) : NULL;
	if (syscalls_sampled)
		/* Kernel addresses are the upper half on 64-bit machines. */
		sampled_call_tick(btf, cs, tid, (long)PT_REGS_IP(&ctx->regs) < 0, now);
	why = sample_reasons(cs, call, tid, now);
	/* Only the time the guest itself lost counts: a vCPU the host did
	 * not run had its interrupts on. */
	if (gap - gap_steal >= stall_threshold_ns)
		why |= SAMPLE_WHY_GAP;
	if (!why)
		return 0;

	e = record_reserve(why & SAMPLE_WHY_GAP ? KIND_IRQOFF : KIND_SAMPLE, sizeof(*e), now);
	if (!e)
		return 0;
	task_ref_fill(btf, &e->task, current_task(btf));
	e->gap_ns = gap;
	e->gap_steal_ns = gap_steal;
	e->syscall = call ? call->nr : sampled_syscall_of(cs, tid, &since);
	e->why = why;
	len = bpf_get_stack(ctx, e->kstack, sizeof(e->kstack), 0);
	e->kstack_len = len > 0 ? len : 0;
	len = bpf_get_stack(ctx, e->ustack, sizeof(e->ustack), BPF_F_USER_STACK);
	e->ustack_len = len > 0 ? len : 0;
	record_submit(e);
	return 0;
}

#endif /* STALLTOP_SAMPLER_BPF_H */
