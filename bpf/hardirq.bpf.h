/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What runs in hard interrupt context: irq handlers (irq_handler_entry /
 * exit) and hrtimer callbacks (hrtimer_expire_entry / exit: on x86 the
 * LAPIC timer's, which are no irq handler). One that runs long keeps
 * interrupts off on its CPU for that long (no sampler tick either), so the
 * gap it makes is its own, not the interrupted task's. Such runs are
 * reported with the handler's name or the callback's address, less the
 * time the hypervisor took the vCPU meanwhile. Runs nest (a handler that
 * dispatches other irqs runs theirs inside its own): each CPU keeps a
 * small stack of them.
 */
#ifndef STALLTOP_HARDIRQ_BPF_H
#define STALLTOP_HARDIRQ_BPF_H

#include "common.bpf.h"
#include "steal.bpf.h"

/* A run this long is reported. */
const volatile __u64 hardirq_threshold_ns = 1000 * 1000;

/* An entry this old is one whose exit was never seen (its exit program
 * was attached after it began): no run with interrupts off lasts that
 * long without tripping the hard-lockup watchdog. */
#define IRQ_RUN_STALE_NS (10ULL * 1000 * 1000 * 1000)

/* Something of `source` named `id` starts running in hard interrupt
 * context on this CPU. */
static __always_inline void irq_run_enter(bool btf, __u32 source, __u64 id, __u64 function)
{
	struct cpu_state *cs = this_cpu();
	struct irq_run *r;
	__u64 now;
	__u32 depth;

	if (!cs)
		return;
	now = bpf_ktime_get_ns();
	depth = cs->irq_depth;
	if (depth && depth <= IRQ_NESTING &&
	    now - cs->irq_runs[verified_slot(depth - 1, IRQ_NESTING)].start > IRQ_RUN_STALE_NS)
		depth = 0;
	if (depth < IRQ_NESTING) {
		r = &cs->irq_runs[verified_slot(depth, IRQ_NESTING)];
		r->start = now;
		r->steal = steal_read(btf, cs);
		r->id = id;
		r->function = function;
		r->source = source;
	}
	cs->irq_depth = depth + 1;
}

/* Fill `e` for run `r` that ended at `now` after `ran` ns, `taken` of
 * them by the hypervisor; `action` is a handler's irqaction. */
static __always_inline void irq_run_fill(bool btf, struct hardirq_event *e, const struct irq_run *r,
					 __u64 now, __u64 ran, __u64 taken, __u32 irq,
					 struct irqaction *action)
{
	e->hdr.kind = KIND_HARDIRQ;
	e->hdr.size = sizeof(*e);
	e->hdr.cpu = bpf_get_smp_processor_id();
	e->hdr.ts = now;
	e->run_ns = ran - taken;
	e->steal_ns = taken;
	e->irq = irq;
	e->source = r->source;
	e->function = r->function;
	__builtin_memset(e->name, 0, sizeof(e->name));
	if (action)
		bpf_probe_read_kernel_str(e->name, sizeof(e->name), BPF_CORE_READ(action, name));
	task_ref_fill(btf, &e->ctx, current_task(btf));
}

/* What ran as `source` named `id` on this CPU ends (`irq` and `action`:
 * a handler's). Its entry is the innermost one of that name: entries
 * above it are left from exits never seen, and go. */
static __always_inline void irq_run_exit(bool btf, __u32 source, __u64 id, __u32 irq,
					 struct irqaction *action)
{
	struct cpu_state *cs = this_cpu();
	struct steal_pending *p;
	struct hardirq_event *e;
	struct irq_run *r = NULL;
	__u64 now, ran, steal, taken;
	__u32 depth, i;

	if (!cs || !cs->irq_depth)
		return;
	depth = cs->irq_depth;
	if (depth > IRQ_NESTING) {
		cs->irq_depth = depth - 1;
		return;
	}
	for (i = 0; i < IRQ_NESTING; i++) {
		if (i >= depth)
			return; /* no entry of that name: begun before the probes */
		r = &cs->irq_runs[verified_slot(depth - 1 - i, IRQ_NESTING)];
		if (r->source == source && r->id == id)
			break;
	}
	if (i == IRQ_NESTING)
		return;
	cs->irq_depth = depth - 1 - i;
	now = bpf_ktime_get_ns();
	ran = now - r->start;
	if (ran < hardirq_threshold_ns)
		return;
	steal = steal_read(btf, cs);
	if (steal_lags()) {
		/* Judged once the run queue's steal has caught up. */
		p = this_steal_pending();
		if (!p)
			return;
		if (cs->steal_pending & STEAL_PENDING_RUN)
			steal_pending_send(steal, now, 1);
		irq_run_fill(btf, &p->run, r, now, ran, 0, irq, action);
		p->run_wait.steal_before = r->steal;
		p->run_wait.jiffies = bpf_jiffies64();
		p->run_wait.threshold_ns = hardirq_threshold_ns;
		cs->steal_pending |= STEAL_PENDING_RUN;
		return;
	}
	taken = steal_between(r->steal, steal, ran);
	if (ran - taken < hardirq_threshold_ns)
		return;
	e = record_reserve(KIND_HARDIRQ, sizeof(*e), now);
	if (!e)
		return;
	irq_run_fill(btf, e, r, now, ran, taken, irq, action);
	record_submit(e);
}

static __always_inline void on_hardirq_entry(bool btf, int irq)
{
	irq_run_enter(btf, IRQ_RUN_HANDLER, (__u32)irq, 0);
}

static __always_inline void on_hardirq_exit(bool btf, int irq, struct irqaction *action)
{
	irq_run_exit(btf, IRQ_RUN_HANDLER, (__u32)irq, irq, action);
}

/* An hrtimer callback starts. Only hard ones (the interrupt's; soft ones
 * run in the HRTIMER softirq, interrupts on, and are its time): their
 * exit finds no entry of their name. The timer's address names the run,
 * as the callback may free the timer before the exit. */
static __always_inline void on_hrtimer_entry(bool btf, struct hrtimer *t)
{
	if (FIELD(btf, t, is_soft))
		return;
	irq_run_enter(btf, IRQ_RUN_HRTIMER, (__u64)t, (__u64)FIELD(btf, t, function));
}

static __always_inline void on_hrtimer_exit(bool btf, struct hrtimer *t)
{
	irq_run_exit(btf, IRQ_RUN_HRTIMER, (__u64)t, 0, NULL);
}

#endif /* STALLTOP_HARDIRQ_BPF_H */
