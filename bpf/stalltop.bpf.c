// SPDX-License-Identifier: GPL-2.0
/*
 * stalltop's probes. Every attach point has a tp_btf program (direct BTF
 * access, used where the kernel has BTF tracepoints) and a raw_tp twin
 * (CO-RE reads; older kernels, and BPF_PROG_TEST_RUN in tests) sharing one
 * handler. All are declared `?` (not auto-loaded); user space enables one
 * family at open time.
 */
#include "common.bpf.h"
#include "runq.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* Dummy instances so libbpf-cargo generates the Rust types of the ABI. */
struct record_header _record_header = {};
struct runq_event _runq_event = {};
struct runq_stats _runq_stats = {};
struct preemptor_key _preemptor_key = {};

SEC("?tp_btf/sched_wakeup")
int BPF_PROG(btf_sched_wakeup, struct task_struct *p)
{
	on_wakeup(true, p);
	return 0;
}

SEC("?raw_tp/sched_wakeup")
int BPF_PROG(raw_sched_wakeup, struct task_struct *p)
{
	on_wakeup(false, p);
	return 0;
}

SEC("?tp_btf/sched_wakeup_new")
int BPF_PROG(btf_sched_wakeup_new, struct task_struct *p)
{
	on_wakeup(true, p);
	return 0;
}

SEC("?raw_tp/sched_wakeup_new")
int BPF_PROG(raw_sched_wakeup_new, struct task_struct *p)
{
	on_wakeup(false, p);
	return 0;
}

SEC("?tp_btf/sched_switch")
int BPF_PROG(btf_sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	on_switch(true, preempt, prev, next, prev_state);
	return 0;
}

SEC("?raw_tp/sched_switch")
int BPF_PROG(raw_sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	on_switch(false, preempt, prev, next, prev_state);
	return 0;
}

SEC("?tp_btf/sched_process_exit")
int BPF_PROG(btf_sched_process_exit, struct task_struct *p)
{
	on_task_exit(true, p);
	return 0;
}

SEC("?raw_tp/sched_process_exit")
int BPF_PROG(raw_sched_process_exit, struct task_struct *p)
{
	on_task_exit(false, p);
	return 0;
}
