// SPDX-License-Identifier: GPL-2.0
/*
 * A reference for `cargo xtask bench`: the least any tool pays on these
 * tracepoints for the core of what stalltop measures there, written the
 * plain way and measured in the same run as stalltop. sched_switch: the
 * run-queue wait of the incoming task (from sched_info, as stalltop reads
 * it) in a log2 histogram per cgroup. sys_enter/sys_exit: each call's
 * wall time (entry time kept in task storage) in a log2 histogram per
 * syscall number. No preemption attribution, slices, on-CPU split,
 * records or files: stalltop does all of those on top.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "log2.bpf.h"

char LICENSE[] SEC("license") = "GPL";

#define LOG2_SLOTS 64
#define SYSCALLS 512

/* Attribute by the v1 cpu cgroup (hybrid hosts), else the unified one. */
const volatile __u8 cgroup_v1_cpu = 0;

struct log2_hist {
	__u64 slots[LOG2_SLOTS];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, struct log2_hist);
} runq_by_cgroup SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SYSCALLS);
	__type(key, __u32);
	__type(value, struct log2_hist);
} syscall_hists SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u64);
} call_start SEC(".maps");

static __always_inline __u64 cgroup_of(struct task_struct *t)
{
	if (cgroup_v1_cpu) {
		int id = bpf_core_enum_value(enum cgroup_subsys_id, cpu_cgrp_id);

		if (id < 0 || id >= CGROUP_SUBSYS_COUNT)
			return 0;
		return t->cgroups->subsys[id]->cgroup->kn->id;
	}
	return t->cgroups->dfl_cgrp->kn->id;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(min_sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	static const struct log2_hist zero = {};
	__u64 queued = next->sched_info.last_queued, clock, cgroup;
	struct log2_hist *h;

	if (!next->pid || !queued)
		return 0;
	clock = prev->se.cfs_rq->rq->clock;
	cgroup = cgroup_of(next);
	h = bpf_map_lookup_elem(&runq_by_cgroup, &cgroup);
	if (!h) {
		bpf_map_update_elem(&runq_by_cgroup, &cgroup, &zero, BPF_NOEXIST);
		h = bpf_map_lookup_elem(&runq_by_cgroup, &cgroup);
		if (!h)
			return 0;
	}
	h->slots[log2_u64(clock > queued ? clock - queued : 0)]++;
	return 0;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(min_sys_enter)
{
	__u64 *start = bpf_task_storage_get(&call_start, bpf_get_current_task_btf(), 0,
					    BPF_LOCAL_STORAGE_GET_F_CREATE);

	if (start)
		*start = bpf_ktime_get_ns();
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(min_sys_exit, struct pt_regs *regs)
{
	__u64 *start = bpf_task_storage_get(&call_start, bpf_get_current_task_btf(), 0, 0);
	__u32 nr = regs->orig_ax;
	struct log2_hist *h;

	if (!start || !*start)
		return 0;
	h = bpf_map_lookup_elem(&syscall_hists, &nr);
	if (h)
		h->slots[log2_u64(bpf_ktime_get_ns() - *start)]++;
	*start = 0;
	return 0;
}
