/* SPDX-License-Identifier: GPL-2.0 */
/*
 * CPU X-ray: a cpu-clock perf event on every CPU. Each tick costs a few
 * loads; a stack is taken only when it can explain something (a softirq
 * waiting on this CPU, a task long inside a syscall), and a
 * gap between ticks far beyond the period is reported as irqs-off.
 */
#ifndef STALLTOP_SAMPLER_BPF_H
#define STALLTOP_SAMPLER_BPF_H

#include "common.bpf.h"
#include "softirq.bpf.h"
#include "syscall.bpf.h"
#include "syscall_sampled.bpf.h"

/* Keep stacks once something has waited (or a call run) this long. */
const volatile __u64 sample_after_ns = 1000 * 1000;
/* A gap between ticks at least this long is an irqs-off stall. */
const volatile __u64 irqoff_threshold_ns = 10 * 1000 * 1000;

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
	__u64 now, gap, since, pid_tgid;
	__u32 tid, why;
	long len;

	if (!cs)
		return 0;
	now = bpf_ktime_get_ns();
	gap = cs->last_tick ? now - cs->last_tick : 0;
	cs->last_tick = now;
	pid_tgid = bpf_get_current_pid_tgid();
	tid = (__u32)pid_tgid;
	softirq_tick(btf, cs, pid_tgid);
	call = tid ? current_call(btf, cs, tid) : NULL;
	if (syscalls_sampled)
		/* Kernel addresses are the upper half on 64-bit machines. */
		sampled_call_tick(btf, cs, tid, (long)PT_REGS_IP(&ctx->regs) < 0, now);
	why = sample_reasons(cs, call, tid, now);
	if (gap >= irqoff_threshold_ns)
		why |= SAMPLE_WHY_GAP;
	if (!why)
		return 0;

	e = record_reserve(why & SAMPLE_WHY_GAP ? KIND_IRQOFF : KIND_SAMPLE, sizeof(*e), now);
	if (!e)
		return 0;
	task_ref_fill(btf, &e->task, current_task(btf));
	e->gap_ns = gap;
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
