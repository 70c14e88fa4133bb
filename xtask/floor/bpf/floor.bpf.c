// SPDX-License-Identifier: GPL-2.0
/*
 * The cost floor for `cargo xtask bench`: empty tp_btf programs on the
 * tracepoints stalltop uses, measured in the same run as stalltop.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

SEC("tp_btf/sched_switch")
int BPF_PROG(flr_sched_switch)
{
	return 0;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(flr_sched_wakeup)
{
	return 0;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(flr_sys_enter)
{
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(flr_sys_exit)
{
	return 0;
}
