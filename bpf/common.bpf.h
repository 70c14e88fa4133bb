/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Shared by every probe family: per-task state, counters, the ring buffer,
 * histograms and cgroup attribution. Handlers take `btf` as a compile-time
 * constant: true in tp_btf programs (direct BTF loads), false in their
 * raw_tp twins (CO-RE probe reads).
 */
#ifndef STALLTOP_COMMON_BPF_H
#define STALLTOP_COMMON_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "stalltop.h"
#include "log2.bpf.h"

#define PF_KTHREAD 0x00200000
#define TASK_RUNNING 0

/* Wake user space only once this much is queued; it also polls. */
#define RINGBUF_WAKEUP_BYTES (256 * 1024)

/* Read one field of a kernel struct: direct in tp_btf, CO-RE otherwise. */
#define FIELD(btf, ptr, field) ((btf) ? (ptr)->field : BPF_CORE_READ((ptr), field))

/* Set from user space before load. */
/* A softirq delay, a ksoftirqd wait or an irqs-off gap this long is a stall
 * (--stall-threshold). */
const volatile __u64 stall_threshold_ns = 10 * 1000 * 1000;
const volatile __u8 cgroup_v1_cpu = 0; /* attribute by the v1 cpu hierarchy */
/* Keep per-task state in task storage rather than in the `tasks` hash.
 * Only for the tp_btf family (it needs trusted task pointers) and only on
 * kernels whose local storage allocates through the BPF memory allocator:
 * elsewhere creating an entry inside sched_switch, under the run-queue
 * lock, could wake kswapd on that same run queue. */
const volatile __u8 use_task_storage = 0;

/* Set by user space on kernels without CONFIG_SCHED_INFO: waits are then
 * timed from sched_wakeup / sched_wakeup_new and from switch-outs of
 * runnable tasks, kept in the task's state (a lookup per wakeup and per
 * switch-in: the cost sched_info saves). */
const volatile __u8 runq_from_wakeup = 0;

/* Preallocated (the default for a hash map): inserting never allocates. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct task_state);
} tasks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct task_state);
} task_store SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 * 1024 * 1024);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, COUNTER_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cpu_state);
} cpus SEC(".maps");

static __always_inline struct cpu_state *this_cpu(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&cpus, &zero);
}

/* The state of CPU `cpu`. Global functions take a CPU's number and look
 * its state up here: before Linux 5.12 a global function takes no pointer
 * argument. Another CPU's state needs bpf_map_lookup_percpu_elem (5.19);
 * before, only this CPU's is found (NULL for the others). One lookup
 * either way, so the verifier walks a global function's body once. */
static __always_inline struct cpu_state *cpu_state_of(__u32 cpu)
{
	__u32 zero = 0;

	if (bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_map_lookup_percpu_elem))
		return bpf_map_lookup_percpu_elem(&cpus, &zero, cpu);
	return cpu == bpf_get_smp_processor_id() ? this_cpu() : NULL;
}

/* Count an invocation of `probe`; time one in PROBE_COST_EVERY (returns
 * its start, else 0). */
static __always_inline __u64 cost_start(struct cpu_state *cs, enum probe_kind probe)
{
	if (!cs || probe >= PROBE_MAX)
		return 0;
	return cs->cost[probe].runs++ & (PROBE_COST_EVERY - 1) ? 0 : bpf_ktime_get_ns();
}

static __always_inline void cost_end(struct cpu_state *cs, enum probe_kind probe, __u64 start)
{
	if (!cs || !start || probe >= PROBE_MAX)
		return;
	cs->cost[probe].timed++;
	cs->cost[probe].timed_ns += bpf_ktime_get_ns() - start;
}

/* Run `body` as an invocation of `probe`, counted and now and then timed. */
#define COSTED(probe, body)                                      \
	do {                                                     \
		struct cpu_state *cost_cs_ = this_cpu();         \
		__u64 cost_start_ = cost_start(cost_cs_, probe); \
		body;                                            \
		cost_end(cost_cs_, probe, cost_start_);          \
	} while (0)

/* Index `i`, already known to be below `n` (a power of two), masked where
 * the verifier sees the mask: clang drops a mask it proves redundant, and
 * the 6.1 verifier loses a bounds check's range through 32-bit register
 * copies and through a reload of the unchecked value from the stack. */
#define verified_slot(i, n)                                             \
	({                                                              \
		_Static_assert(((n) & ((n)-1)) == 0, "a power of two"); \
		__u32 __slot = (i);                                     \
		barrier_var(__slot);                                    \
		__slot &((n)-1);                                        \
	})

static __always_inline void count(__u32 slot)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &slot);

	if (c)
		(*c)++; /* per-CPU slot: no atomics needed */
}

/* The running task: a trusted BTF pointer in tp_btf programs; in raw_tp
 * programs a plain one (read with CO-RE), from a helper every kernel of
 * the floor has. */
static __always_inline struct task_struct *current_task(bool btf)
{
	if (btf)
		return bpf_get_current_task_btf();
	return (struct task_struct *)bpf_get_current_task();
}

/* The address of this CPU's run queue, reached through the running task's
 * cfs_rq (it runs here); 0 without CONFIG_FAIR_GROUP_SCHED. */
static __always_inline __u64 current_rq(bool btf)
{
	struct task_struct *t = current_task(btf);

	if (!bpf_core_field_exists(t->se.cfs_rq))
		return 0;
	return (__u64)BPF_CORE_READ(t, se.cfs_rq, rq);
}

/* The state of task `t` (thread id `tid`), created when `create` is set.
 * With use_task_storage (tp_btf only), `t` is a trusted pointer: a tp_btf
 * argument or current_task(true). */
static __always_inline struct task_state *task_state_of(struct task_struct *t, __u32 tid,
							bool create)
{
	static const struct task_state zero = {};
	struct task_state *ts;

	if (use_task_storage) {
		ts = bpf_task_storage_get(&task_store, t, 0,
					  create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
		if (!ts && create)
			count(COUNTER_TASKS_FULL);
		return ts;
	}
	ts = bpf_map_lookup_elem(&tasks, &tid);
	if (ts || !create)
		return ts;
	/* May fail with EEXIST when another CPU won the race: look up again. */
	bpf_map_update_elem(&tasks, &tid, &zero, BPF_NOEXIST);
	ts = bpf_map_lookup_elem(&tasks, &tid);
	if (!ts)
		count(COUNTER_TASKS_FULL);
	return ts;
}

/* The running task's state. Task storage is only reached in tp_btf
 * programs (use_task_storage), so raw_tp ones never call a BTF-only
 * helper: the branch is dead there and the verifier drops it. */
static __always_inline struct task_state *current_state(bool btf, bool create)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();

	if (use_task_storage && btf)
		return task_state_of(bpf_get_current_task_btf(), tid, create);
	return task_state_of(NULL, tid, create);
}

/* Records per second per CPU and kind, and the burst allowed: under
 * overload (every wait over the threshold) the kernel side samples records
 * rather than flood the ring buffer; histograms still count everything. */
const volatile __u32 record_rate = 1000;
const volatile __u32 record_burst = 250;

static __always_inline bool record_allowed(__u16 checked_kind, __u64 now)
{
	struct cpu_state *cs = this_cpu();
	__u64 refill;
	__u32 kind;

	if (!cs || checked_kind >= KIND_MAX)
		return true;
	kind = verified_slot(checked_kind, KIND_MAX);
	refill = (now - cs->refilled[kind]) * record_rate / 1000000000;
	if (refill) {
		cs->tokens[kind] = cs->tokens[kind] + refill > record_burst ?
					   record_burst :
					   cs->tokens[kind] + refill;
		cs->refilled[kind] = now;
	}
	if (!cs->tokens[kind]) {
		count(COUNTER_RATE_LIMITED_BASE + kind);
		return false;
	}
	cs->tokens[kind]--;
	return true;
}

/* Reserve a record of `size` bytes of kind `kind` and fill its header;
 * NULL when rate-limited or the ring buffer is full (both counted). */
static __always_inline void *record_reserve(__u16 kind, __u16 size, __u64 now)
{
	struct record_header *h;

	if (!record_allowed(kind, now))
		return NULL;
	h = bpf_ringbuf_reserve(&events, size, 0);

	if (!h) {
		count(COUNTER_LOST_BASE + kind);
		return NULL;
	}
	h->kind = kind;
	h->size = size;
	h->cpu = bpf_get_smp_processor_id();
	h->ts = now;
	return h;
}

/* Batch wakeups: wake the reader once RINGBUF_WAKEUP_BYTES are queued,
 * and from each CPU once per read of the reader's. A forced wakeup costs
 * a self-interrupt, and a reader that the load keeps off its CPU takes
 * long to come: meanwhile every record forced one (~9 us each here). */
static __always_inline __u64 record_wakeup(void)
{
	struct cpu_state *cs;
	__u64 consumed;

	if (bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) < RINGBUF_WAKEUP_BYTES)
		return BPF_RB_NO_WAKEUP;
	cs = this_cpu();
	consumed = bpf_ringbuf_query(&events, BPF_RB_CONS_POS) + 1;
	if (cs && cs->woke_reader_at == consumed)
		return BPF_RB_NO_WAKEUP;
	if (cs)
		cs->woke_reader_at = consumed;
	return BPF_RB_FORCE_WAKEUP;
}

static __always_inline void record_submit(void *rec)
{
	bpf_ringbuf_submit(rec, record_wakeup());
}

/* Send a copy of `rec` (`size` bytes, its header filled: a record held
 * back in a map) at `now`; rate limits and losses count as for
 * record_reserve. */
static __always_inline void record_output(void *rec, __u64 size, __u64 now)
{
	struct record_header *h = rec;
	__u16 kind = h->kind;

	if (!record_allowed(kind, now))
		return;
	if (bpf_ringbuf_output(&events, rec, size, record_wakeup()))
		count(COUNTER_LOST_BASE + kind);
}

/* Slot of `v` in a histogram with 2^HIST_SUB_BITS sub-buckets per power of
 * two: values below 4 have their own slot; above, (msb - 1) * 4 + the two
 * bits after the leading one. Mirrored by src/model/histogram.rs. */
static __always_inline __u32 hist_slot(__u64 v)
{
	__u32 msb, slot;

	if (v < 4)
		return v;
	msb = log2_u64(v);
	slot = ((msb - 1) << HIST_SUB_BITS) | ((v >> (msb - HIST_SUB_BITS)) & 3);
	return slot < HIST_SLOTS ? slot : HIST_SLOTS - 1;
}

/* The cgroup a task is attributed to: its v1 cpu cgroup on v1 and hybrid
 * hosts (there every task sits at the cgroup2 root), else its unified one. */
static __always_inline __u64 task_cgroup(bool btf, struct task_struct *t)
{
	if (cgroup_v1_cpu && bpf_core_enum_value_exists(enum cgroup_subsys_id, cpu_cgrp_id)) {
		int id = bpf_core_enum_value(enum cgroup_subsys_id, cpu_cgrp_id);

		if (id < 0 || id >= CGROUP_SUBSYS_COUNT)
			return 0;
		if (btf)
			return t->cgroups->subsys[id]->cgroup->kn->id;
		return BPF_CORE_READ(t, cgroups, subsys[id], cgroup, kn, id);
	}
	if (btf)
		return t->cgroups->dfl_cgrp->kn->id;
	return BPF_CORE_READ(t, cgroups, dfl_cgrp, kn, id);
}

/* `slots` is a per-CPU value: plain increments. */
static __always_inline void hist_add(__u32 *slots, __u64 v)
{
	__u32 slot = hist_slot(v);

	if (slot < HIST_SLOTS)
		slots[slot]++;
}

/* Copy the command name of `t`: two direct loads in tp_btf (no helper
 * call on the hot path), a probe read otherwise. */
static __always_inline void comm_copy(bool btf, __u8 dst[COMM_LEN], struct task_struct *t)
{
	if (btf) {
		((__u64 *)dst)[0] = *(__u64 *)&t->comm[0];
		((__u64 *)dst)[1] = *(__u64 *)&t->comm[8];
	} else {
		bpf_probe_read_kernel(dst, COMM_LEN, &t->comm);
	}
}

/* `r` names task `t`, whose cgroup the caller already knows. */
static __always_inline void task_ref_set(bool btf, struct task_ref *r, struct task_struct *t,
					 __u64 cgroup)
{
	r->pid = FIELD(btf, t, tgid);
	r->tid = FIELD(btf, t, pid);
	r->cgroup = cgroup;
	comm_copy(btf, r->comm, t);
}

static __always_inline void task_ref_fill(bool btf, struct task_ref *r, struct task_struct *t)
{
	task_ref_set(btf, r, t, FIELD(btf, t, pid) ? task_cgroup(btf, t) : 0);
}

#endif /* STALLTOP_COMMON_BPF_H */
