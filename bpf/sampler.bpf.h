/* SPDX-License-Identifier: GPL-2.0 */
/*
 * CPU X-ray: a cpu-clock perf event on every CPU. Each tick costs a few
 * loads; a stack is taken only when it can explain something (a softirq
 * waiting on this CPU, a task waiting on its run queue behind the running
 * one, a task long inside a syscall), and a
 * gap between ticks far beyond the period, less the time the host took
 * the vCPU meanwhile (steal), is reported as irqs-off: at once where the
 * steal is known at once, else once the run queue's steal has caught up
 * (see bpf/steal.bpf.h).
 */
#ifndef STALLTOP_SAMPLER_BPF_H
#define STALLTOP_SAMPLER_BPF_H

#include "common.bpf.h"
#include "softirq.bpf.h"
#include "steal.bpf.h"
#include "syscall.bpf.h"
#include "syscall_sampled.bpf.h"

/* Set by user space while the probes run when the cost guard turns stacks
 * off: records say why and who, without the stacks. */
volatile __u8 stacks_off = 0;

/* Keep stacks once something has waited (or a call run) this long. */
const volatile __u64 sample_after_ns = 1000 * 1000;

/* Stacks kept per stretch of one holder on the CPU while tasks wait. */
#define RUNQ_SAMPLES_MAX 4

/* Whether this tick keeps the running task's stacks for a task waiting on
 * this CPU's run queue behind it. One read per tick: the run queue's
 * nr_running, the running task included. Waiting is seen from the first
 * tick that finds a waiter (a lower bound: it may have waited before)
 * until a tick finds none, whoever runs meanwhile. Once it is
 * sample_after_ns old, each holder's stretch on the CPU keeps its stacks
 * at its first tick, then at its 4th, 8th and 16th: every holder of a
 * long wait is seen, even one of tasks taking turns of a tick or two (a
 * waiter's culprit), and one long stretch keeps at most RUNQ_SAMPLES_MAX. */
static __always_inline bool runq_sample_due(bool btf, struct cpu_state *cs, __u32 tid, __u64 now)
{
	__u64 rq = tid ? this_rq_addr(btf, cs) : 0;
	__u32 ticks;

	if (!rq || BPF_CORE_READ((struct rq *)rq, nr_running) < 2) {
		cs->runq_waiter_seen = 0;
		cs->runq_holder_since = 0; /* the next waiter's holder starts anew */
		return false;
	}
	if (!cs->runq_waiter_seen)
		cs->runq_waiter_seen = now;
	if (cs->runq_holder_since != cs->current_since) {
		cs->runq_holder_since = cs->current_since;
		cs->runq_ticks = 0;
		cs->runq_samples = 0;
	}
	ticks = ++cs->runq_ticks;
	if (now - cs->runq_waiter_seen < sample_after_ns || cs->runq_samples >= RUNQ_SAMPLES_MAX)
		return false;
	if (cs->runq_samples && (ticks < 4 || (ticks & (ticks - 1))))
		return false;
	cs->runq_samples++;
	return true;
}

static __always_inline __u32 sample_reasons(bool btf, struct cpu_state *cs, struct call *call,
					    __u32 tid, __u64 now)
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
	if (runq_sample_due(btf, cs, tid, now))
		why |= SAMPLE_WHY_RUNQ;
	return why;
}

/* Fill sample `e` from this tick (`why`), its stacks from `ctx`. */
static __always_inline void sample_fill(bool btf, struct bpf_perf_event_data *ctx,
					struct sample_event *e, __u64 gap, __u64 gap_steal,
					__s32 syscall, __u32 why)
{
	long len;

	task_ref_fill(btf, &e->task, current_task(btf));
	e->gap_ns = gap;
	e->gap_steal_ns = gap_steal;
	e->syscall = syscall;
	e->why = why;
	e->kstack_len = 0;
	e->ustack_len = 0;
	if (stacks_off)
		return;
	len = bpf_get_stack(ctx, e->kstack, sizeof(e->kstack), 0);
	e->kstack_len = len > 0 ? len : 0;
	len = bpf_get_stack(ctx, e->ustack, sizeof(e->ustack), BPF_F_USER_STACK);
	e->ustack_len = len > 0 ? len : 0;
}

/* The gap of `gap` ns that ends at this tick (`now`) is over the threshold
 * before the hypervisor's share is known (steal_lags): hold its record
 * until the run queue's steal has caught up, from `steal_before`. */
static __always_inline void gap_hold(bool btf, struct bpf_perf_event_data *ctx,
				     struct cpu_state *cs, __u64 now, __u64 gap, __u64 steal_before,
				     __u64 steal, __s32 syscall)
{
	struct steal_pending *p = this_steal_pending();

	if (!p)
		return;
	if (cs->steal_pending & STEAL_PENDING_GAP)
		steal_pending_send(steal, now, 1);
	p->gap.hdr.kind = KIND_IRQOFF;
	p->gap.hdr.size = sizeof(p->gap);
	p->gap.hdr.cpu = bpf_get_smp_processor_id();
	p->gap.hdr.ts = now;
	sample_fill(btf, ctx, &p->gap, gap, 0, syscall, SAMPLE_WHY_GAP);
	p->gap_wait.steal_before = steal_before;
	p->gap_wait.jiffies = bpf_jiffies64();
	p->gap_wait.threshold_ns = stall_threshold_ns;
	cs->steal_pending |= STEAL_PENDING_GAP;
}

static __always_inline int on_sample(bool btf, struct bpf_perf_event_data *ctx)
{
	struct cpu_state *cs = this_cpu();
	struct call *call;
	struct sample_event *e;
	__u64 now, gap, gap_steal, steal, steal_before, since, oncpu, pid_tgid;
	__u32 tid, why;
	__s32 syscall;
	bool gap_waits = false;

	if (!cs)
		return 0;
	now = bpf_ktime_get_ns();
	gap = cs->last_tick ? now - cs->last_tick : 0;
	steal = steal_read(btf, cs);
	steal_before = cs->last_tick_steal;
	gap_steal = steal_between(steal_before, steal, gap);
	cs->last_tick = now;
	cs->last_tick_steal = steal;
	if (cs->steal_pending)
		steal_pending_send(steal, now, 0);
	pid_tgid = bpf_get_current_pid_tgid();
	tid = (__u32)pid_tgid;
	softirq_tick(btf, cs, tid, now);
	call = tid ? current_call(btf, cs, tid) : NULL;
	if (sampling_calls())
		/* Kernel addresses are the upper half on 64-bit machines. */
		sampled_call_tick(btf, cs, tid, (long)PT_REGS_IP(&ctx->regs) < 0, now);
	why = sample_reasons(btf, cs, call, tid, now);
	/* Only the time the guest itself lost counts: a vCPU the host did
	 * not run had its interrupts on. */
	if (gap - gap_steal >= stall_threshold_ns) {
		if (steal_lags())
			gap_waits = true;
		else
			why |= SAMPLE_WHY_GAP;
	}
	if (!why && !gap_waits)
		return 0;
	syscall = call ? call->nr : sampled_syscall_of(cs, tid, now, &since, &oncpu);
	if (gap_waits)
		gap_hold(btf, ctx, cs, now, gap, steal_before, steal, syscall);
	if (!why)
		return 0;

	e = record_reserve(why & SAMPLE_WHY_GAP ? KIND_IRQOFF : KIND_SAMPLE, sizeof(*e), now);
	if (!e)
		return 0;
	sample_fill(btf, ctx, e, gap, gap_steal, syscall, why);
	record_submit(e);
	return 0;
}

#endif /* STALLTOP_SAMPLER_BPF_H */
