/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Sampled syscalls: no syscall hooks. The CPU sampler reads the running
 * task's syscall (number and arguments) from its saved user registers;
 * consecutive ticks that find the same thread in the same call on one CPU
 * make one call, which ends when a tick finds something else or
 * sched_switch takes the thread off the CPU. Its time on the CPU is known
 * to about a sampler period; its file is resolved while it runs.
 */
#ifndef STALLTOP_SYSCALL_SAMPLED_BPF_H
#define STALLTOP_SYSCALL_SAMPLED_BPF_H

#include "common.bpf.h"
#include "syscall.bpf.h"

/* Set by user space in sampled mode (with the sampler on). */
const volatile __u8 syscalls_sampled = 0;
const volatile __u64 sample_period_ns = 1000 * 1000;
/* Kernel stack size: the saved user registers sit at its top, for
 * kernels without bpf_task_pt_regs (before 5.15) and raw_tp programs. */
const volatile __u64 thread_size = 16384;

#define ENOSYS 38

/* Task `t`'s saved user registers. */
static __always_inline struct pt_regs *user_regs(bool btf, struct task_struct *t)
{
	if (btf && bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_task_pt_regs))
		return (struct pt_regs *)bpf_task_pt_regs(t);
	return (struct pt_regs *)((__u64)BPF_CORE_READ(t, stack) + thread_size) - 1;
}

/* The syscall task `t`, in the kernel, is inside (its number, with its
 * first two arguments), or -1. */
static __always_inline __s32 syscall_in_progress(bool btf, struct task_struct *t, __u64 *arg0,
						 __u64 *arg1)
{
	struct pt_regs *regs;
	long nr;

	if (FIELD(btf, t, flags) & PF_KTHREAD)
		return -1;
	regs = user_regs(btf, t);
#if defined(__TARGET_ARCH_arm64)
	nr = BPF_CORE_READ(regs, syscallno);
#else
	/* orig_ax also holds an exception's error code; a syscall's ax is
	 * -ENOSYS from its entry until it returns. */
	if ((long)BPF_CORE_READ(regs, ax) != -ENOSYS)
		return -1;
	nr = BPF_CORE_READ(regs, orig_ax);
#endif
	if (nr < 0 || nr >= SYSCALL_NR_MAX)
		return -1;
	*arg0 = PT_REGS_PARM1_CORE_SYSCALL(regs);
	*arg1 = PT_REGS_PARM2_CORE_SYSCALL(regs);
	return nr;
}

/* The sampled call ends: count its time and send it if it held the CPU
 * past the on-CPU threshold. */
static __always_inline void sampled_call_end(struct cpu_state *cs, __u64 now)
{
	struct sampled_call *s = &cs->sampled;
	__u64 end = s->last_tick + sample_period_ns;
	__u64 held;
	struct syscall_stats *stats;

	if (!s->ticks)
		return;
	if (end > now)
		end = now;
	held = end > s->first_tick ? end - s->first_tick : 0;
	stats = syscall_stats_of(s->task.cgroup, s->nr);
	if (stats) {
		stats->wall_total_ns += held;
		if (held > stats->max_ns)
			stats->max_ns = held;
	}
	if (held >= syscall_oncpu_threshold_ns)
		syscall_event_send(&s->task, s->nr, s->arg0, s->arg1, end, held, held, 0,
				   s->path_ready == 1);
	s->ticks = 0;
}

/* A sampler tick at `now` on this CPU, running `tid`, in the kernel or
 * not (`in_kernel`). */
static __always_inline void sampled_call_tick(bool btf, struct cpu_state *cs, __u32 tid,
					      bool in_kernel, __u64 now)
{
	struct sampled_call *s = &cs->sampled;
	struct task_struct *t = current_task(btf);
	struct syscall_stats *stats;
	__u64 arg0 = 0, arg1 = 0;
	__s32 nr = -1;

	if (tid && in_kernel)
		nr = syscall_in_progress(btf, t, &arg0, &arg1);
	if (s->ticks && (nr < 0 || s->task.tid != tid || s->nr != nr || s->arg0 != arg0 ||
			 s->arg1 != arg1))
		sampled_call_end(cs, now);
	if (nr < 0)
		return;
	if (!s->ticks) {
		task_ref_fill(btf, &s->task, t);
		s->nr = nr;
		s->arg0 = arg0;
		s->arg1 = arg1;
		s->first_tick = now;
		s->path_ready = 0;
	}
	s->ticks++;
	s->last_tick = now;
	stats = syscall_stats_of(s->task.cgroup, nr);
	if (stats) {
		if (s->ticks == 1)
			stats->count++;
		stats->oncpu_total_ns += sample_period_ns;
	}
	/* Resolve the file once the call is long, while it still uses it. */
	if (!s->path_ready && s->ticks * sample_period_ns >= syscall_oncpu_threshold_ns)
		s->path_ready = call_file_resolve(nr, arg0, arg1) ? 1 : 2;
}

/* The syscall `tid` is in by the sampler's account, or -1, and since when. */
static __always_inline __s32 sampled_syscall_of(struct cpu_state *cs, __u32 tid, __u64 *since)
{
	if (!syscalls_sampled || !cs || !cs->sampled.ticks || cs->sampled.task.tid != tid)
		return -1;
	*since = cs->sampled.first_tick;
	return cs->sampled.nr;
}

#endif /* STALLTOP_SYSCALL_SAMPLED_BPF_H */
