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
#define PATH_HALF 256 /* path buffers are 2 * PATH_HALF (see syscall_event) */
#define STACK_DEPTH 32
/*
 * The constants user space shares are enums, not #defines: they reach the
 * generated Rust skeleton (types::record_kind::KIND_RUNQ, ...) through
 * BTF, so Rust has no copies to keep in step. stalltop.bpf.c declares one
 * global of each enum type, for BTF to carry it.
 */

/* Size of the `syscall_arg` rodata table, by syscall number. */
enum syscall_table_size {
	SYSCALL_NR_MAX = 512,
};

/* Record kinds (record_header.kind). Index into the `counters` map too. */
enum record_kind {
	KIND_RUNQ = 1,	   /* a task waited on the run queue over the threshold */
	KIND_TAKEOVER = 2, /* ksoftirqd/N waited over the threshold */
	KIND_SOFTIRQ = 3,  /* raise -> entry of a softirq vector over the threshold */
	KIND_SYSCALL = 4,  /* a syscall over the wall or on-CPU threshold */
	KIND_SAMPLE = 5,   /* a CPU X-ray stack sample that explains a stall */
	KIND_IRQOFF = 6,   /* a gap between two sampler ticks on one CPU */
	KIND_HARDIRQ = 7,  /* a hardirq handler ran at least hardirq_threshold_ns */
	KIND_MAX = 8,
};

/* Slots of the `counters` array map. */
enum counter_slot {
	COUNTER_LOST_BASE = 0,	/* + kind: ring buffer full, record dropped */
	COUNTER_TASKS_FULL = 8, /* per-task state map full */
	COUNTER_RUNQ_CGROUPS_FULL = 9,
	COUNTER_PREEMPTORS_FULL = 10,
	COUNTER_SYSCALLS_FULL = 11,
	COUNTER_STOLEN_FULL = 12,
	COUNTER_RATE_LIMITED_BASE = 16, /* + kind: over the per-CPU record rate */
	COUNTER_MAX = 24,
};

/* Latency histogram: 4 sub-buckets per power of two (error <= 12.5%). */
enum histogram_layout {
	HIST_SUB_BITS = 2,
	HIST_SLOTS = 168, /* covers up to 2^42 ns, about 73 minutes */
};

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
	/* of the wait, the time the hypervisor ran something else on this vCPU */
	__u32 steal_us;
	__u64 ran_syscall_ns; /* how long it had been inside it */
	/* Set when a CFS quota throttle of the waiter's cgroup or an ancestor
	 * covered most of the wait: that cgroup, and how much of the wait it
	 * covered. `ran` only filled the CPU meanwhile. */
	__u64 throttled_cgroup;
	__u64 throttled_ns;
	/* The wait began on CPU waited_from_cpu and moved `migrations` times
	 * (load balancing, affinity) before it ended on this one; 0: it did
	 * not move. */
	__u32 waited_from_cpu;
	__u32 migrations;
};

/* What an episode's wait (below) is split by, in the order taken off it:
 * the hypervisor ran another vCPU (steal; only in waits over the report
 * threshold, where it is computed), its CPU quota or an ancestor's,
 * softirqs on its CPU (those run in its last holder's stretch, and all of
 * a ksoftirqd holder's), an idle CPU (nobody held it: wake-up or migration
 * latency), then whoever held the CPU longest: a kernel thread, a task of
 * its own cgroup or of another. */
enum why_cause {
	WHY_STEAL,
	WHY_THROTTLED,
	WHY_SOFTIRQ,
	WHY_IDLE,
	WHY_KTHREAD,
	WHY_SAME_CGROUP,
	WHY_OTHER_CGROUP,
	WHY_CAUSES,
};

/* Run-queue latency per cgroup (per-CPU map `runq_by_cgroup`). The
 * preempted_* counters count episodes in which a runnable task of the
 * cgroup waited at least PREEMPT_WAIT_MIN_NS for its CPU, by who kept it
 * off: the task that held the CPU longest during the wait, or its CPU
 * quota (throttled: a throttle of the cgroup or an ancestor covered most
 * of the wait). */
struct runq_stats {
	__u32 slots[HIST_SLOTS];
	__u64 count;
	__u64 total_ns;
	__u64 max_ns;
	__u64 preempted_same_cgroup;
	__u64 preempted_other_cgroup;
	__u64 preempted_kthread;
	__u64 preempted_throttled;
	/* The episodes' wait time split by cause (the rest of total_ns is
	 * waits under PREEMPT_WAIT_MIN_NS, split by nothing). */
	__u64 why_ns[WHY_CAUSES];
};

/* On each CPU, RUNQ_SLOTS cgroups (by a hash of the id, first come)
 * keep their runq_stats in an array slot (map `runq_slots`), cheaper than
 * the hash lookup the others take. */
enum runq_slot_layout {
	RUNQ_SLOT_BITS = 6,
	RUNQ_SLOTS = 1 << RUNQ_SLOT_BITS,
};

struct runq_slot {
	__u64 cgroup; /* the owner, once stats.count > 0 */
	struct runq_stats stats;
};

#define PREEMPT_WAIT_MIN_NS 1000000

/* Key and value of per-CPU map `preemptors`: who kept tasks of
 * victim_cgroup off the CPU (episodes as above), how often, and how long
 * those waits were in total. */
struct preemptor_key {
	__u64 victim_cgroup;
	__u64 preemptor_cgroup;
	__u8 comm[COMM_LEN];
	__u32 kthread; /* the culprit is a kernel thread */
	__u32 _pad;
};

struct preemptor_stats {
	__u64 count;
	__u64 wait_ns;
};

/* On each CPU, PREEMPTOR_SLOTS preemptors (by a hash of the key, first
 * come) count in an array slot (map `preemptor_slots`), cheaper than the
 * hash lookup of the 40-byte key the others take. */
enum preemptor_slot_layout {
	PREEMPTOR_SLOT_BITS = 7,
	PREEMPTOR_SLOTS = 1 << PREEMPTOR_SLOT_BITS,
};

struct preemptor_slot {
	struct preemptor_key key; /* the owner, once stats.count > 0 */
	struct preemptor_stats stats;
};

/* KIND_SOFTIRQ: softirq `vector` was raised at ts - delay_ns and started
 * running at ts, in `ctx` (ksoftirqd/N, or the task it interrupted). */
struct softirq_event {
	struct record_header hdr;
	__u64 delay_ns;
	__u32 vector;
	__u32 in_ksoftirqd;
	struct task_ref ctx;
	/* `ctx` was inside this syscall (-1: not in a syscall) */
	__s32 ctx_syscall;
	__u32 _pad;
};

/* Softirq delay and run time, per vector (per-CPU map `softirq_by_vector`). */
struct softirq_stats {
	__u32 delay_slots[HIST_SLOTS];
	__u64 count;
	__u64 delay_total_ns;
	__u64 delay_max_ns;
	__u64 run_total_ns;
	__u64 run_max_ns;
	__u64 runs_in_ksoftirqd;
	__u64 run_in_ksoftirqd_ns;
};

/* Key and value of map `softirq_stolen`: softirq time that ran inside an
 * ordinary thread's time slices, charged to it by the kernel. */
struct stolen_key {
	__u32 tid;
	__u32 vector;
};

struct stolen_stats {
	__u64 ns;
	__u64 count;
	__u32 pid;
	__u32 _pad;
	__u8 comm[COMM_LEN];
};

/* How user space told us to read a syscall's arguments (rodata table
 * `syscall_arg`, indexed by syscall number). */
enum syscall_arg_how {
	SYSCALL_ARG_NONE = 0,
	SYSCALL_ARG_FD0 = 1,   /* arg 0 is a file descriptor */
	SYSCALL_ARG_FD1 = 2,   /* arg 1 is a file descriptor */
	SYSCALL_ARG_PATH0 = 3, /* arg 0 is a user path string */
	SYSCALL_ARG_PATH1 = 4, /* arg 1 is a user path string */
	SYSCALL_ARG_MASK = 0x0f,
	/* Flag: the call locks its file's position (fdget_pos: read, write,
	 * lseek, getdents ...) while it runs, whenever its fd table is shared
	 * with another thread (the file's f_pos_lock, owned by the caller). */
	SYSCALL_LOCKS_POS = 0x10,
	/* Flag: a read that sleeps by design when its fd is a socket, pipe or
	 * character device (it waits for the other end). */
	SYSCALL_WAITS_ON_STREAM = 0x20,
	/* Flag: fcntl, which sleeps by design when it waits for a lock
	 * (F_SETLKW, F_OFD_SETLKW). */
	SYSCALL_WAITS_FOR_LOCK = 0x40,
	/* Flag: the call sleeps by design (epoll_wait, futex, nanosleep, ...):
	 * a long wall time is not news; only its on-CPU time can make it slow. */
	SYSCALL_WAITS = 0x80,
};

/* syscall_event.path_kind */
enum path_kind {
	PATH_NONE = 0,
	PATH_DENTRIES = 1,  /* components leaf first, each NUL-terminated */
	PATH_USER = 2,	    /* the string the caller passed, as given */
	PATH_FD_REUSED = 3, /* the call's fd names another file at its end: unknown */
	/* sampled: another task holds the position lock of the file the fd
	 * names, and is not using that file: the call's file is unknown */
	PATH_UNKNOWN = 4,
};

/* KIND_SYSCALL: a call that ran at least the wall or on-CPU threshold. */
struct syscall_event {
	struct record_header hdr;
	struct task_ref task;
	__u64 wall_ns;
	__u64 oncpu_ns;	  /* time on a CPU in the task's own context */
	__u64 softirq_ns; /* softirq time that ran inside its slices */
	__s32 nr;
	__u32 fd;
	__u32 path_kind;
	__u32 path_len; /* bytes used in path */
	__u32 path_truncated;
	__u32 inode_mode; /* S_IFMT bits of the file, 0 if unknown */
	__u64 inode;
	__u8 path[2 * PATH_HALF];
};

/* Syscall latency per (cgroup, syscall): map `syscalls`, and on each CPU
 * the first cgroup to make syscall nr in `syscalls_by_nr` (an array slot,
 * cheaper than a hash lookup on every call). */
struct syscall_key {
	__u64 cgroup;
	__u32 nr;
	__u32 _pad;
};

struct syscall_stats {
	__u32 slots[HIST_SLOTS];
	__u64 count;
	__u64 wall_total_ns;
	__u64 oncpu_total_ns;
	__u64 max_ns;
};

struct syscall_slot {
	__u64 cgroup; /* the owner, once stats.count > 0 */
	struct syscall_stats stats;
};

/* KIND_SAMPLE and KIND_IRQOFF: what a CPU was doing at a sampler tick. A
 * sample is kept only while a softirq waits on the CPU (in ksoftirqd or
 * not), a task waits on its run queue behind the running one, or a task
 * has been in a syscall for long; an irqoff
 * record is the first tick after a gap of gap_ns without ticks. */
struct sample_event {
	struct record_header hdr;
	struct task_ref task;
	__u64 gap_ns;	  /* KIND_IRQOFF: time since the previous tick */
	__s32 syscall;	  /* -1: not in a syscall */
	__u32 why;	  /* SAMPLE_WHY_* bits */
	__u32 kstack_len; /* bytes of kstack used */
	__u32 ustack_len;
	__u64 kstack[STACK_DEPTH];
	__u64 ustack[STACK_DEPTH];
	/* KIND_IRQOFF: of gap_ns, the time the hypervisor ran something else
	 * on this vCPU (steal; 0 where it is not known) */
	__u64 gap_steal_ns;
};

#define SAMPLE_WHY_SOFTIRQ                                                       \
	1		     /* a softirq has been pending for long (ksoftirqd's \
			      * waits included: it has pending work) */
#define SAMPLE_WHY_RUNQ 2    /* a task waits on the run queue behind this one */
#define SAMPLE_WHY_SYSCALL 4 /* the task has run long inside one syscall */
#define SAMPLE_WHY_GAP 8     /* first tick after a gap */

/* A syscall in progress. Held in the CPU's state while its task stays on
 * that CPU (most calls end there: no per-task lookup), moved to the
 * task's state when the task is switched out inside it. */
struct call {
	__u64 enter_ts;	     /* in a syscall since; 0 when not */
	__u64 enter_softirq; /* the CPU's softirq_ns at enter_ts */
	__u64 oncpu_ns;	     /* on-CPU time inside the call, finished slices */
	__u64 softirq_ns;    /* softirq time inside the call, finished slices */
	/* the struct file its fd argument named at entry, noted only when
	 * another thread could reuse the fd meanwhile (on_sys_enter) */
	__u64 file;
	__s32 nr;
	__u32 tid; /* the task making the call */
};

/* A stretch of time in which one task held a CPU (cpu_state.slices): from
 * the start of its first slice to the end of its last. */
struct slice {
	__u64 start;
	__u64 end;
	__u64 last_start; /* its last slice: [last_start, end] */
	__u64 held_ns;	  /* the time it held the CPU in all its slices */
	/* the vCPU's steal clock at start and end (see rq_steal in
	 * bpf/steal.bpf.h) */
	__u64 steal_start;
	__u64 steal_end;
	/* softirq time that ran inside its slices (the CPU's, not the task's) */
	__u64 softirq_ns;
	__u64 cgroup;
	__u32 pid;
	__u32 tid;
	__u32 kthread;
	/* Another entry may be the same thread's (set when one is made beside
	 * it, left set when that one is reused): only then is its weight more
	 * than this entry's. */
	__u32 shared;
	__u8 comm[COMM_LEN];
};

#define SAMPLED_CALLS 4

/* Sampled syscalls: kernel time by (cgroup, syscall, file), map
 * `sampled_files`; the file's path is resolved once, when it is new. */
struct file_key {
	__u64 cgroup;
	__u64 inode;
	__u32 dev;
	__s32 nr;
};

struct file_time {
	__u64 calls;	 /* sampled calls on the file */
	__u64 oncpu_ns;	 /* the time they held a CPU */
	__u32 path_kind; /* PATH_* */
	__u32 path_len;
	__u32 path_truncated;
	__u32 inode_mode;
	__u8 path[PATH_HALF];
};

/* Sampled syscalls (no syscall hooks): a call the CPU sampler found in
 * progress, from ticks that found the same thread in the kernel inside the
 * same call (number and arguments from its saved user registers). Its time
 * on the CPU comes from context switches, not from ticks (ticks in step
 * with a periodic task would miss the call's stretches between that task's
 * runs). Ends when its thread leaves it or blocks in it, when another
 * thread's call needs its slot, or when no tick has found it for long. */
struct sampled_call {
	struct task_ref task;
	__u64 arg0;
	__u64 arg1;
	__u64 began; /* estimated: half a period before its first tick, or its thread's switch-in if
			later */
	__u64 last_seen; /* in progress, by a tick or at a switch-out */
	/* the thread's completed read and write calls at the first tick: a
	 * change means the call seen since is another */
	__u64 io_calls;
	__u64 running_since; /* its thread runs on this CPU since; 0: switched out */
	__u64 softirq_at;    /* the CPU's softirq_ns at running_since */
	__u64 oncpu_ns;	     /* held this CPU, in stretches before running_since */
	__u64 softirq_ns;    /* softirqs that ran in those stretches */
	__u32 ticks;	     /* 0: no call in progress */
	__s32 nr;
	__u32 path_ready; /* its path_bufs slot holds its file (resolved while it ran) */
	__u8 has_file;	  /* `file` is the file its fd names */
	__u8 blocked;	  /* its thread blocked in it (at last_seen) and has not run since */
	/* its first tick could not tell its fd's file for its own: judged
	 * again when its path is resolved */
	__u8 file_doubted;
	__u8 _pad;
	struct file_key file;
};

/* A CPU's recent holders: SLICES entries of one task each, grown by its
 * slices of at least SLICE_MIN_NS (see bpf/slices.bpf.h); whoever held
 * the CPU longest during a wait is its culprit. */
#define SLICES 8
#define SLICE_MIN_NS 250000

/* A CFS quota throttle seen on a CPU: from the switch that took a task of
 * the throttled hierarchy off the CPU, or the wakeup of a task into it
 * there, to the first switch after the throttled cfs_rq was unthrottled. */
struct throttle_span {
	__u64 cfs_rq; /* the throttled cfs_rq: its kernel address, as its identity */
	__u64 cgroup; /* its cgroup id */
	__u64 start;
	__u64 end; /* 0 while still throttled */
};

#define THROTTLE_SPANS 4

/* One CPU's throttle spans (map `throttle_spans`, indexed by CPU; internal
 * to BPF): written under that CPU's run-queue lock, by its own switches
 * and by wakeups onto it from any CPU. */
struct cpu_throttles {
	struct throttle_span spans[THROTTLE_SPANS];
	__u32 next; /* where the next span goes */
	__u32 open; /* spans with no end yet */
};

/* Whether a throttle explains the wait sched_switch is ending now: the
 * throttled cgroup (0: none does) and how much of the wait its span
 * covered (cpu_state.wait_throttle; kept in the map value, where the
 * verifier does not track it, so the paths after it do not double). */
struct wait_throttle {
	__u64 cgroup;
	__u64 covered_ns;
};

/* stalltop's own cost, per probe (cpu_state.cost): every invocation is
 * counted, one in PROBE_COST_EVERY is timed (no host-wide BPF statistics
 * needed). */
enum probe_kind {
	PROBE_SCHED_SWITCH,
	PROBE_SCHED_WAKEUP,
	PROBE_SCHED_PROCESS_EXIT,
	PROBE_SCHED_MIGRATE,
	PROBE_SOFTIRQ_RAISE,
	PROBE_SOFTIRQ_ENTRY,
	PROBE_SOFTIRQ_EXIT,
	PROBE_HARDIRQ_ENTRY,
	PROBE_HARDIRQ_EXIT,
	PROBE_HRTIMER_ENTRY,
	PROBE_HRTIMER_EXIT,
	PROBE_SYS_ENTER,
	PROBE_SYS_EXIT,
	PROBE_CPU_SAMPLE,
	PROBE_MAX,
};

#define PROBE_COST_EVERY 64

struct probe_cost {
	__u64 runs;
	__u64 timed;
	__u64 timed_ns;
};

/* Something running in hard interrupt context on a CPU (cpu_state.irq_runs,
 * a stack: a handler that dispatches other irqs runs theirs inside its
 * own). */
struct irq_run {
	__u64 start;
	__u64 steal;	/* the steal clock at start (see bpf/steal.bpf.h) */
	__u64 id;	/* what its exit names: the irq, or the hrtimer's address */
	__u64 function; /* IRQ_RUN_HRTIMER: the callback */
	__u32 source;	/* IRQ_RUN_* */
	__u32 _pad;
};

#define IRQ_NESTING 4

/* Per-CPU state (per-CPU map `cpus`); user space seeds ksoftirqd_tid. */
struct cpu_state {
	__u64 softirq_raised[NR_SOFTIRQ_VECTORS]; /* first raise while not pending */
	__u64 softirq_entered[NR_SOFTIRQ_VECTORS];
	/* Softirq time that ran inside the running thread since it was last
	 * settled into map `softirq_stolen` (at its switch-out or a sampler
	 * tick), per vector, and how many runs; `stolen_vectors` has a bit
	 * set for each vector with some. */
	__u64 stolen_ns[NR_SOFTIRQ_VECTORS];
	__u32 stolen_runs[NR_SOFTIRQ_VECTORS];
	__u64 softirq_ns;      /* all softirq run time on this CPU so far */
	__u64 last_tick;       /* previous sampler tick, or the end of idle */
	__u64 last_tick_steal; /* the host's steal clock at the previous tick */
	__u64 current_since;   /* when the running task was switched in */
	__u64 current_softirq; /* softirq_ns at current_since */
	__u64 current_steal;   /* the steal clock at current_since */
	__u64 steal_moved_at;  /* the first switch to read its present value */
	/* Hooked syscalls: the running task's css_set when its cgroup id was
	 * last read in this slice (0: not yet), and that id. */
	__u64 current_css_set;
	__u64 current_cgroup;
	struct call call; /* the running task's syscall, if it entered it here */
	__u32 ksoftirqd_tid;
	__u32 stolen_vectors;
	/* Record rate limit, per kind: tokens left and when last refilled. */
	__u32 tokens[KIND_MAX];
	__u32 current_tid; /* the running task, switched in at current_since */
	/* Set while a softirq exit adds to the stolen sums: a sampler tick
	 * that interrupts it (softirqs run with interrupts on) must not settle
	 * them then. */
	__u32 stolen_adding;
	__u64 refilled[KIND_MAX];
	/* What runs in hard interrupt context, outermost first (irq_depth of
	 * them, at most IRQ_NESTING kept). */
	struct irq_run irq_runs[IRQ_NESTING];
	__u32 irq_depth;
	__u32 steal_pending; /* STEAL_PENDING_* records held (bpf/steal.bpf.h) */
	__u64 rq;	     /* this CPU's run queue's address, once known */
	/* The ring buffer's consumer position, plus one, when this CPU last
	 * forced a wakeup of the reader (0: never). */
	__u64 woke_reader_at;
	struct slice slices[SLICES];
	/* One slot per thread found in a call: short visitors (the tasks a
	 * long call yields to) take the others, not the long call's. */
	struct sampled_call sampled[SAMPLED_CALLS];
	struct probe_cost cost[PROBE_MAX];
	struct wait_throttle wait_throttle;
	/* Waits on this run queue (bpf/sampler.bpf.h): the tick that first
	 * saw a task waiting (0: none waits since the last tick); the running
	 * task's stretch, switched in at runq_holder_since; its ticks while a
	 * task waited, and the stacks they kept. */
	__u64 runq_waiter_seen;
	__u64 runq_holder_since;
	__u32 runq_ticks;
	__u32 runq_samples;
};

/* A thread's mark (map `run_marks`, indexed by thread id modulo
 * RUN_MARKS; internal to BPF): its sched_info run_delay as of its latest
 * switch-in, whether a wait it began on another CPU is carried for it in
 * `carried_waits`, and when it was woken, where sched_info may count the
 * sleep before as waiting (delayed dequeue: see migration.bpf.h). */
struct run_mark {
	__u32 tid;
	/* 0, or the thread's switch-ins (sched_info.pcount) + 1 when a move
	 * last carried a wait for it: the wait is the one its next switch-in
	 * ends only while the count is the same (a switch the probes did not
	 * see may have run it meanwhile). */
	__u32 carried;
	__u64 run_delay;
	__u64 woken_at; /* bpf_ktime_get_ns(); 0: not woken since it ran */
};

#define RUN_MARKS 32768

/* A wait that a migration moved to another CPU (map `carried_waits`, by
 * thread id; internal to BPF): when it began and on which CPU, when it
 * left its latest CPU, who held the CPUs it left longest meanwhile, and
 * how much of it a quota throttle covered there. */
struct carried_wait {
	__u64 since;
	__u64 until;
	struct task_ref holder;
	__u64 held_ns; /* 0: no holder known */
	__u32 kthread;
	__u32 from_cpu;
	__u32 migrations;
	__u32 _pad;
	/* Of [since, until], the time a CFS quota throttle of its hierarchy
	 * covered on the CPUs it left, and the throttled cgroup of the CPU
	 * where one covered the most. */
	__u64 throttled_ns;
	__u64 throttled_most_ns;
	__u64 throttled_cgroup;
};

/* Where the sampler and the interrupt probes read the vCPU's steal clock
 * (rodata `steal_source`, set by user space, which tells a VM from bare
 * metal; see bpf/steal.bpf.h). */
enum steal_source {
	STEAL_NONE = 0, /* bare metal, or a VM whose kernel accounts no steal */
	STEAL_KVM = 1,	/* x86 KVM guests: KVM's per-vCPU steal time */
	STEAL_RQ = 2,	/* the run queue's copies of the paravirt steal clock */
};

/* What ran in hard interrupt context (hardirq_event.source). */
enum irq_run_source {
	IRQ_RUN_HANDLER = 0, /* an irq handler: `irq`, `name` */
	IRQ_RUN_HRTIMER = 1, /* an hrtimer callback: `function` */
};

/* KIND_HARDIRQ: something ran in hard interrupt context (interrupts off)
 * until ts, over the task `ctx` it interrupted: the handler `name` of irq
 * `irq`, or (`source`) the callback at `function`. run_ns is its run less
 * the time the hypervisor took the vCPU meanwhile (steal_ns). Records
 * before `function` and `steal_ns` end at `ctx`, with source 0. */
struct hardirq_event {
	struct record_header hdr;
	__u64 run_ns;
	__u32 irq;
	__u32 source;	     /* IRQ_RUN_* */
	__u8 name[COMM_LEN]; /* the irqaction's name, cut to COMM_LEN */
	struct task_ref ctx;
	__u64 function; /* the callback's kernel address (hrtimer) */
	__u64 steal_ns;
};

/* Per-task state (map `tasks` or task storage). Internal to BPF. */
struct task_state {
	struct call call;
	/* Only without sched_info (see runq_from_wakeup): when the task was
	 * last queued to run (woken, or switched out still runnable); 0 when
	 * it is not waiting. */
	__u64 queued_at;
};

/* Which reads of read_kernel_values succeeded (kernel_values.read). */
enum kernel_read {
	KERNEL_READ_SOFTIRQ_PENDING = 1,
	KERNEL_READ_STEAL = 2,
};

/* What read_kernel_values read on one CPU (per-CPU map `kernel_values`),
 * as the probes read it: the pending mask's low 16 bits, the steal clock
 * as a u64. */
struct kernel_values {
	__u64 steal_ns;
	__u16 softirq_pending;
	__u16 read; /* KERNEL_READ_* bits */
	__u32 pad;
};

#endif /* STALLTOP_H */
