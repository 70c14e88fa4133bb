/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The one ABI between stalltop's BPF programs and user space: record kinds,
 * the {kind,size,ts,cpu} header every ring-buffer record starts with, the
 * payloads, and the aggregate map layouts. Fixed-width fields only; no
 * bool, no enum, explicit padding. Rust types are generated from this file
 * by libbpf-cargo (see the dummy instances in stalltop.bpf.c).
 */
#ifndef STALLTOP_H
#define STALLTOP_H

#define COMM_LEN 16
#define PATH_LEN 256
#define STACK_DEPTH 32

/* Record kinds (record_header.kind). Index into the `counters` map too. */
#define KIND_RUNQ 1      /* a task waited on the run queue over the threshold */
#define KIND_TAKEOVER 2  /* ksoftirqd/N waited over the threshold */
#define KIND_SOFTIRQ 3   /* raise -> entry of a softirq vector over the threshold */
#define KIND_SYSCALL 4   /* a syscall over the wall or on-CPU threshold */
#define KIND_SAMPLE 5    /* a CPU X-ray stack sample that explains a stall */
#define KIND_IRQOFF 6    /* a gap between two sampler ticks on one CPU */
#define KIND_MAX 7

/* Other slots of the `counters` array map, after the per-kind lost counts. */
#define COUNTER_LOST_BASE 0 /* + kind: ring buffer full, record dropped */
#define COUNTER_TASKS_FULL 8 /* per-task state map full */
#define COUNTER_RUNQ_CGROUPS_FULL 9
#define COUNTER_PREEMPTORS_FULL 10
#define COUNTER_SYSCALLS_FULL 11
#define COUNTER_STOLEN_FULL 12
#define COUNTER_MAX 16

/* Latency histogram: 4 sub-buckets per power of two (error <= 12.5%). */
#define HIST_SUB_BITS 2
#define HIST_SLOTS 168 /* covers up to 2^42 ns, about 73 minutes */

#define NR_SOFTIRQ_VECTORS 10

struct record_header {
	__u16 kind;
	__u16 size; /* whole record, header included */
	__u32 cpu;
	__u64 ts; /* bpf_ktime_get_ns() */
};

/* The task that held a CPU, as seen from a probe. */
struct task_ref {
	__u32 pid; /* thread group id */
	__u32 tid;
	__u64 cgroup; /* cgroup id (kernfs inode) of the attributed hierarchy */
	__u8 comm[COMM_LEN];
};

/* KIND_RUNQ and KIND_TAKEOVER: `waiter` became runnable at ts - wait_ns and
 * ran at ts; `ran` is the task that had the CPU until then. */
struct runq_event {
	struct record_header hdr;
	__u64 wait_ns;
	struct task_ref waiter;
	struct task_ref ran;
	/* `ran` was inside this syscall (-1: not in a syscall) */
	__s32 ran_syscall;
	__u32 _pad;
	__u64 ran_syscall_ns; /* how long it had been inside it */
};

/* Run-queue latency aggregate, per cgroup (map `runq_by_cgroup`). */
struct runq_stats {
	__u32 slots[HIST_SLOTS];
	__u64 count;
	__u64 total_ns;
	__u64 max_ns;
	/* a runnable task of this cgroup was switched out in favour of ... */
	__u64 preempted_same_cgroup;
	__u64 preempted_other_cgroup;
	__u64 preempted_kthread;
};

/* Key of map `preemptors`: who took the CPU from a runnable task. */
struct preemptor_key {
	__u64 victim_cgroup;
	__u64 preemptor_cgroup;
	__u8 comm[COMM_LEN];
};

#endif /* STALLTOP_H */
