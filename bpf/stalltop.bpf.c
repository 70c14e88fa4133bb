// SPDX-License-Identifier: GPL-2.0
/*
 * stalltop's probes. Every attach point has a tp_btf program (direct BTF
 * access, used where the kernel has BTF tracepoints) and a raw_tp twin
 * (CO-RE reads; older kernels, and BPF_PROG_TEST_RUN in tests) sharing one
 * handler. All are declared `?` (not auto-loaded); user space enables one
 * family at open time.
 */
#include "common.bpf.h"
#include "hardirq.bpf.h"
#include "sched.bpf.h"
#include "softirq.bpf.h"
#include "syscall.bpf.h"
#include "sampler.bpf.h"
#include "selfcheck.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* Dummy instances so libbpf-cargo generates the Rust types of the ABI. */
struct record_header _record_header = {};
struct runq_event _runq_event = {};
struct runq_stats _runq_stats = {};
struct runq_slot _runq_slot = {};
struct preemptor_slot _preemptor_slot = {};
struct preemptor_key _preemptor_key = {};
struct preemptor_stats _preemptor_stats = {};
struct task_state _task_state = {};
struct softirq_event _softirq_event = {};
struct softirq_stats _softirq_stats = {};
struct stolen_key _stolen_key = {};
struct stolen_stats _stolen_stats = {};
struct syscall_event _syscall_event = {};
struct syscall_key _syscall_key = {};
struct syscall_stats _syscall_stats = {};
struct syscall_slot _syscall_slot = {};
struct sample_event _sample_event = {};
struct hardirq_event _hardirq_event = {};
struct cpu_state _cpu_state = {};
struct file_key _file_key = {};
struct file_time _file_time = {};
struct kernel_values _kernel_values = {};
enum probe_kind _probe_kind = PROBE_SCHED_SWITCH;
enum syscall_table_size _syscall_table_size = SYSCALL_NR_MAX;
enum record_kind _record_kind = KIND_RUNQ;
enum counter_slot _counter_slot = COUNTER_LOST_BASE;
enum histogram_layout _histogram_layout = HIST_SLOTS;
enum runq_slot_layout _runq_slot_layout = RUNQ_SLOTS;
enum preemptor_slot_layout _preemptor_slot_layout = PREEMPTOR_SLOTS;
enum why_cause _why_cause = WHY_CAUSES;
enum syscall_arg_how _syscall_arg_how = SYSCALL_ARG_NONE;
enum path_kind _path_kind = PATH_NONE;
enum steal_source _steal_source = STEAL_NONE;
enum irq_run_source _irq_run_source = IRQ_RUN_HANDLER;
enum kernel_read _kernel_read = KERNEL_READ_SOFTIRQ_PENDING;

/* sched_switch gained a 4th argument (prev_state) in 5.18; only the three
 * every kernel passes are declared, so no program reads past them. */
SEC("?tp_btf/sched_switch")
int BPF_PROG(btf_sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	COSTED(PROBE_SCHED_SWITCH, on_switch(true, preempt, prev, next));
	return 0;
}

SEC("?raw_tp/sched_switch")
int BPF_PROG(raw_sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	COSTED(PROBE_SCHED_SWITCH, on_switch(false, preempt, prev, next));
	return 0;
}

/* sched_wakeup and sched_wakeup_new: throttles that begin as a task is
 * enqueued, sleepers moved while queued (delayed dequeue), and without
 * sched_info (runq_from_wakeup) the start of every wait. */
SEC("?tp_btf/sched_wakeup")
int BPF_PROG(btf_sched_wakeup, struct task_struct *p)
{
	COSTED(PROBE_SCHED_WAKEUP, on_wakeup(true, p));
	return 0;
}

SEC("?raw_tp/sched_wakeup")
int BPF_PROG(raw_sched_wakeup, struct task_struct *p)
{
	COSTED(PROBE_SCHED_WAKEUP, on_wakeup(false, p));
	return 0;
}

SEC("?tp_btf/sched_wakeup_new")
int BPF_PROG(btf_sched_wakeup_new, struct task_struct *p)
{
	COSTED(PROBE_SCHED_WAKEUP, on_wakeup(true, p));
	return 0;
}

SEC("?raw_tp/sched_wakeup_new")
int BPF_PROG(raw_sched_wakeup_new, struct task_struct *p)
{
	COSTED(PROBE_SCHED_WAKEUP, on_wakeup(false, p));
	return 0;
}

SEC("?tp_btf/sched_migrate_task")
int BPF_PROG(btf_sched_migrate_task, struct task_struct *p)
{
	COSTED(PROBE_SCHED_MIGRATE, on_migrate(true, p));
	return 0;
}

SEC("?raw_tp/sched_migrate_task")
int BPF_PROG(raw_sched_migrate_task, struct task_struct *p)
{
	COSTED(PROBE_SCHED_MIGRATE, on_migrate(false, p));
	return 0;
}

SEC("?tp_btf/sched_process_exit")
int BPF_PROG(btf_sched_process_exit, struct task_struct *p)
{
	COSTED(PROBE_SCHED_PROCESS_EXIT, on_task_exit(true, p));
	return 0;
}

/* Never attached: user space runs it on one CPU (BPF_PROG_TEST_RUN) to
 * tell that CPU which thread is its ksoftirqd (args[0]), when a CPU came
 * online after the probes loaded; the rest of the CPU's state stays. */
SEC("?raw_tp")
int BPF_PROG(set_ksoftirqd, __u64 tid)
{
	struct cpu_state *cs = this_cpu();

	if (cs)
		cs->ksoftirqd_tid = (__u32)tid;
	return 0;
}

/* Never attached: user space runs it on each CPU (BPF_PROG_TEST_RUN) to
 * check, at start, the per-CPU values the probes read (args: the pending
 * mask's distance from the run queue, where steal is read, KVM steal
 * time's distance; see selfcheck.bpf.h). */
SEC("?raw_tp")
int BPF_PROG(read_kernel_values, __s64 pending_at, __u64 steal_from, __s64 steal_at)
{
	read_kernel_values_here(pending_at, steal_from, steal_at);
	return 0;
}

SEC("?raw_tp/sched_process_exit")
int BPF_PROG(raw_sched_process_exit, struct task_struct *p)
{
	COSTED(PROBE_SCHED_PROCESS_EXIT, on_task_exit(false, p));
	return 0;
}

SEC("?tp_btf/softirq_raise")
int BPF_PROG(btf_softirq_raise, unsigned int vec)
{
	COSTED(PROBE_SOFTIRQ_RAISE, on_softirq_raise(vec));
	return 0;
}

SEC("?raw_tp/softirq_raise")
int BPF_PROG(raw_softirq_raise, unsigned int vec)
{
	COSTED(PROBE_SOFTIRQ_RAISE, on_softirq_raise(vec));
	return 0;
}

SEC("?tp_btf/softirq_entry")
int BPF_PROG(btf_softirq_entry, unsigned int vec)
{
	COSTED(PROBE_SOFTIRQ_ENTRY, on_softirq_entry(true, vec));
	return 0;
}

SEC("?raw_tp/softirq_entry")
int BPF_PROG(raw_softirq_entry, unsigned int vec)
{
	COSTED(PROBE_SOFTIRQ_ENTRY, on_softirq_entry(false, vec));
	return 0;
}

SEC("?tp_btf/softirq_exit")
int BPF_PROG(btf_softirq_exit, unsigned int vec)
{
	COSTED(PROBE_SOFTIRQ_EXIT, on_softirq_exit(vec));
	return 0;
}

SEC("?raw_tp/softirq_exit")
int BPF_PROG(raw_softirq_exit, unsigned int vec)
{
	COSTED(PROBE_SOFTIRQ_EXIT, on_softirq_exit(vec));
	return 0;
}

SEC("?tp_btf/irq_handler_entry")
int BPF_PROG(btf_irq_handler_entry, int irq, struct irqaction *action)
{
	COSTED(PROBE_HARDIRQ_ENTRY, on_hardirq_entry(true, irq));
	return 0;
}

SEC("?raw_tp/irq_handler_entry")
int BPF_PROG(raw_irq_handler_entry, int irq, struct irqaction *action)
{
	COSTED(PROBE_HARDIRQ_ENTRY, on_hardirq_entry(false, irq));
	return 0;
}

SEC("?tp_btf/irq_handler_exit")
int BPF_PROG(btf_irq_handler_exit, int irq, struct irqaction *action)
{
	COSTED(PROBE_HARDIRQ_EXIT, on_hardirq_exit(true, irq, action));
	return 0;
}

SEC("?raw_tp/irq_handler_exit")
int BPF_PROG(raw_irq_handler_exit, int irq, struct irqaction *action)
{
	COSTED(PROBE_HARDIRQ_EXIT, on_hardirq_exit(false, irq, action));
	return 0;
}

SEC("?tp_btf/hrtimer_expire_entry")
int BPF_PROG(btf_hrtimer_expire_entry, struct hrtimer *timer)
{
	COSTED(PROBE_HRTIMER_ENTRY, on_hrtimer_entry(true, timer));
	return 0;
}

SEC("?raw_tp/hrtimer_expire_entry")
int BPF_PROG(raw_hrtimer_expire_entry, struct hrtimer *timer)
{
	COSTED(PROBE_HRTIMER_ENTRY, on_hrtimer_entry(false, timer));
	return 0;
}

SEC("?tp_btf/hrtimer_expire_exit")
int BPF_PROG(btf_hrtimer_expire_exit, struct hrtimer *timer)
{
	COSTED(PROBE_HRTIMER_EXIT, on_hrtimer_exit(true, timer));
	return 0;
}

SEC("?raw_tp/hrtimer_expire_exit")
int BPF_PROG(raw_hrtimer_expire_exit, struct hrtimer *timer)
{
	COSTED(PROBE_HRTIMER_EXIT, on_hrtimer_exit(false, timer));
	return 0;
}

SEC("?tp_btf/sys_enter")
int BPF_PROG(btf_sys_enter, struct pt_regs *regs, long id)
{
	COSTED(PROBE_SYS_ENTER, on_sys_enter(true, regs, id));
	return 0;
}

SEC("?raw_tp/sys_enter")
int BPF_PROG(raw_sys_enter, struct pt_regs *regs, long id)
{
	COSTED(PROBE_SYS_ENTER, on_sys_enter(false, regs, id));
	return 0;
}

SEC("?tp_btf/sys_exit")
int BPF_PROG(btf_sys_exit, struct pt_regs *regs, long ret)
{
	COSTED(PROBE_SYS_EXIT, on_sys_exit(true, regs));
	return 0;
}

SEC("?raw_tp/sys_exit")
int BPF_PROG(raw_sys_exit, struct pt_regs *regs, long ret)
{
	COSTED(PROBE_SYS_EXIT, on_sys_exit(false, regs));
	return 0;
}

/* Attached by user space to a cpu-clock perf event per CPU (optional);
 * one twin per family, as the running task is read the family's way. */
SEC("?perf_event")
int btf_cpu_sample(struct bpf_perf_event_data *ctx)
{
	COSTED(PROBE_CPU_SAMPLE, on_sample(true, ctx));
	return 0;
}

SEC("?perf_event")
int raw_cpu_sample(struct bpf_perf_event_data *ctx)
{
	COSTED(PROBE_CPU_SAMPLE, on_sample(false, ctx));
	return 0;
}
