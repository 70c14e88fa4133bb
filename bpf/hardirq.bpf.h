/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Hardirq handlers (irq_handler_entry / irq_handler_exit): a handler that
 * runs long keeps interrupts off on its CPU for that long (no sampler
 * tick either), so the gap it makes is its own, not the interrupted
 * task's. Such runs are reported with the handler's name.
 */
#ifndef STALLTOP_HARDIRQ_BPF_H
#define STALLTOP_HARDIRQ_BPF_H

#include "common.bpf.h"

/* A handler that ran this long is reported. */
const volatile __u64 hardirq_threshold_ns = 1000 * 1000;

static __always_inline void on_hardirq_entry(void)
{
	struct cpu_state *cs = this_cpu();

	if (cs)
		cs->hardirq_entered = bpf_ktime_get_ns();
}

static __always_inline void on_hardirq_exit(bool btf, int irq, struct irqaction *action)
{
	struct cpu_state *cs = this_cpu();
	struct hardirq_event *e;
	__u64 now, ran;

	if (!cs || !cs->hardirq_entered)
		return;
	now = bpf_ktime_get_ns();
	ran = now - cs->hardirq_entered;
	cs->hardirq_entered = 0;
	if (ran < hardirq_threshold_ns)
		return;
	e = record_reserve(KIND_HARDIRQ, sizeof(*e), now);
	if (!e)
		return;
	e->run_ns = ran;
	e->irq = irq;
	e->_pad = 0;
	__builtin_memset(e->name, 0, sizeof(e->name));
	bpf_probe_read_kernel_str(e->name, sizeof(e->name), BPF_CORE_READ(action, name));
	task_ref_fill(btf, &e->ctx, current_task(btf));
	record_submit(e);
}

#endif /* STALLTOP_HARDIRQ_BPF_H */
