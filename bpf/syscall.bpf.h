/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Syscall latency per (cgroup, syscall): wall time, on-CPU time (the
 * slices the task ran inside the call, minus the softirqs that ran in
 * them) and, for slow calls, the file the call was about.
 */
#ifndef STALLTOP_SYSCALL_BPF_H
#define STALLTOP_SYSCALL_BPF_H

#include "common.bpf.h"

/* Path components resolved from a file, leaf first. */
#define PATH_COMPONENTS 24

/* Cleared when the syscall tracepoints are not attached (--no-syscalls):
 * then no task is ever inside a call we know of, and sched_switch, the
 * softirq handlers and the sampler skip the per-task lookup. */
const volatile __u8 syscalls_hooked = 1;
/* Hooked calls that began before this are not followed: set by user space
 * while the probes run (the cost guard's `syscalls` step), ~0 while the
 * hooks are off, the moment they came back after (a call's exit, or its
 * entry, may have been missed meanwhile). */
volatile __u64 calls_hooked_since = 0;
const volatile __u64 syscall_wall_threshold_ns = 10 * 1000 * 1000;
const volatile __u64 syscall_oncpu_threshold_ns = 1000 * 1000;
/* SYSCALL_ARG_* per syscall number, filled from the syscall table. */
const volatile __u8 syscall_arg[SYSCALL_NR_MAX] = {};

/* Per-CPU, allocated on first use: no atomics, no cache-line bouncing. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SYSCALL_NR_MAX);
	__type(key, __u32);
	__type(value, struct syscall_slot);
} syscalls_by_nr SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 8192);
	__type(key, struct syscall_key);
	__type(value, struct syscall_stats);
} syscalls SEC(".maps");

/* Whether `c` holds a call the hooks follow (see calls_hooked_since). */
static __always_inline bool call_followed(const struct call *c)
{
	return c->enter_ts && c->enter_ts >= calls_hooked_since;
}

/* The syscall the running task `tid` is in, or NULL: the CPU holds it
 * when the call began in the task's current slice, else (the task was
 * switched out inside it) the task's state does. */
static __always_inline struct call *current_call(bool btf, struct cpu_state *cs, __u32 tid)
{
	struct task_state *ts;

	if (!syscalls_hooked)
		return NULL;
	if (cs && call_followed(&cs->call) && cs->call.tid == tid)
		return &cs->call;
	ts = current_state(btf, false);
	return ts && call_followed(&ts->call) ? &ts->call : NULL;
}

/* The running task's current slice inside its syscall: from the later
 * of its switch-in and the call's entry. Needs no per-task work at
 * switch-in: the CPU remembers when (and at which softirq total) its
 * current task came in. */
static __always_inline __u64 slice_start(struct call *c, struct cpu_state *cs)
{
	return cs && cs->current_since > c->enter_ts ? cs->current_since : c->enter_ts;
}

/* The slice ends (switch-out, or the call's exit): charge it to the call,
 * softirqs that ran in it apart. Time a hypervisor took from the vCPU
 * meanwhile still counts: the task held the guest's CPU (the steal clock
 * is not readable from here without per-CPU kernel symbols). */
static __always_inline void syscall_slice_end(struct call *c, struct cpu_state *cs, __u64 now)
{
	__u64 ran, softirq = 0;

	if (!cs)
		return;
	ran = now - slice_start(c, cs);
	softirq = cs->softirq_ns -
		  (cs->current_since > c->enter_ts ? cs->current_softirq : c->enter_softirq);
	if (softirq > ran)
		softirq = ran;
	c->softirq_ns += softirq;
	c->oncpu_ns += ran - softirq;
}

/* The file behind `fd` of `task`, or NULL. */
static __always_inline struct file *file_of_fd(struct task_struct *task, __u32 fd)
{
	struct fdtable *fdt = BPF_CORE_READ(task, files, fdt);
	struct file **slots;
	struct file *f = NULL;

	if (!fdt || fd >= BPF_CORE_READ(fdt, max_fds))
		return NULL;
	slots = BPF_CORE_READ(fdt, fd);
	bpf_probe_read_kernel(&f, sizeof(f), &slots[fd]);
	return f;
}

/* The file behind `fd` of the running task, or NULL: in tp_btf programs
 * with direct loads down to the fd array (one probe read instead of four:
 * sys_enter does this for every call that takes an fd). */
static __always_inline struct file *current_file_of_fd(bool btf, __u32 fd)
{
	struct task_struct *task = current_task(btf);
	struct fdtable *fdt;
	struct file **slots;
	struct file *f = NULL;

	if (!btf)
		return file_of_fd(task, fd);
	fdt = task->files->fdt;
	if (!fdt || fd >= fdt->max_fds)
		return NULL;
	slots = fdt->fd;
	bpf_probe_read_kernel(&f, sizeof(f), &slots[fd]);
	return f;
}

/* How syscall `nr` names its file (SYSCALL_ARG_*). */
static __always_inline __u8 syscall_file_arg(__s32 nr)
{
	return nr >= 0 && nr < SYSCALL_NR_MAX ?
		       syscall_arg[nr & (SYSCALL_NR_MAX - 1)] & SYSCALL_ARG_MASK :
		       SYSCALL_ARG_NONE;
}

/* The struct file that call `nr`'s fd argument names now (0: none), kept
 * from entry so the exit can tell whether the fd still names it: another
 * thread may close it and get the number again for a new file meanwhile.
 * Its address only: compared, never read. */
static __always_inline __u64 call_fd_file(bool btf, __s32 nr, __u64 arg0, __u64 arg1)
{
	__u8 how = syscall_file_arg(nr);

	if (how != SYSCALL_ARG_FD0 && how != SYSCALL_ARG_FD1)
		return 0;
	return (__u64)current_file_of_fd(btf, how == SYSCALL_ARG_FD0 ? arg0 : arg1);
}

/* The running task's thread id: the one sched_switch put on this CPU
 * (no helper call), until the CPU's first switch after load. */
static __always_inline __u32 current_tid_of(struct cpu_state *cs)
{
	return cs->current_tid ?: (__u32)bpf_get_current_pid_tgid();
}

/* The running task's cgroup id, read once per slice and css_set: the
 * walk to it is five dependent loads, and a syscall exit comes far more
 * often than a switch. A task moved to another cgroup gets another
 * css_set; a stale match would take two moves within one slice, no call
 * ending between them, and the second css_set at the first's address. */
static __always_inline __u64 current_cgroup_of(bool btf, struct cpu_state *cs)
{
	struct task_struct *t = current_task(btf);
	__u64 css_set = (__u64)FIELD(btf, t, cgroups);

	if (cs->current_css_set != css_set) {
		cs->current_cgroup = task_cgroup(btf, t);
		cs->current_css_set = css_set;
	}
	return cs->current_cgroup;
}

/* Argument `i` (0 or 1) of the running task's call, from its saved user
 * registers: they hold the arguments until the call returns. */
static __always_inline __u64 call_arg(bool btf, struct pt_regs *regs, int i)
{
	if (btf)
		return i ? PT_REGS_PARM2_SYSCALL(regs) : PT_REGS_PARM1_SYSCALL(regs);
	return i ? PT_REGS_PARM2_CORE_SYSCALL(regs) : PT_REGS_PARM1_CORE_SYSCALL(regs);
}

/* Whether another task can change the running task's fd table: it shares
 * the table (threads, io_uring workers). Otherwise only the task itself
 * can, and no call that names its file by fd closes or replaces that fd. */
static __always_inline bool current_fd_table_shared(bool btf)
{
	struct task_struct *t = current_task(btf);

	if (btf)
		return t->files && t->files->count.counter >= 2;
	return BPF_CORE_READ(t, files, count.counter) >= 2;
}

/* The CPU holds the call; sched_switch moves it to the task's state if
 * the task is switched out before the call ends. Only what the exit cannot
 * read itself: when and at which softirq total it began, and the file its
 * fd names when another thread could close the fd and get its number for a
 * new file meanwhile (the exit compares). The arguments stay in the task's
 * registers until the call returns. */
static __always_inline void on_sys_enter(bool btf, struct pt_regs *regs, long id)
{
	struct cpu_state *cs = this_cpu();
	__u8 how = syscall_file_arg(id);
	struct call *c;

	if (!cs)
		return;
	c = &cs->call;
	c->enter_ts = bpf_ktime_get_ns();
	c->tid = current_tid_of(cs);
	c->nr = id;
	c->enter_softirq = cs->softirq_ns;
	c->oncpu_ns = 0;
	c->softirq_ns = 0;
	c->file = 0;
	if ((how == SYSCALL_ARG_FD0 || how == SYSCALL_ARG_FD1) && current_fd_table_shared(btf))
		c->file = call_fd_file(btf, id, call_arg(btf, regs, 0), call_arg(btf, regs, 1));
}

/* The stats of (cgroup, nr) on this CPU: the array slot of nr when this
 * cgroup owns it (the first to make the call here does), else the hash. */
static __always_inline struct syscall_stats *syscall_stats_of(__u64 cgroup, __s32 nr)
{
	struct syscall_key key = {.cgroup = cgroup, .nr = nr};
	static const struct syscall_stats zero = {};
	__u32 index = nr;
	struct syscall_slot *slot = bpf_map_lookup_elem(&syscalls_by_nr, &index);
	struct syscall_stats *s;

	if (slot) {
		if (!slot->stats.count)
			slot->cgroup = cgroup;
		if (slot->cgroup == cgroup)
			return &slot->stats;
	}
	s = bpf_map_lookup_elem(&syscalls, &key);
	if (s)
		return s;
	bpf_map_update_elem(&syscalls, &key, &zero, BPF_NOEXIST);
	s = bpf_map_lookup_elem(&syscalls, &key);
	if (!s)
		count(COUNTER_SYSCALLS_FULL);
	return s;
}

static __always_inline void syscall_record(__u64 cgroup, __s32 nr, __u64 wall, __u64 oncpu)
{
	struct syscall_stats *s = syscall_stats_of(cgroup, nr);

	if (!s)
		return;
	hist_add(s->slots, wall);
	s->count++;
	s->wall_total_ns += wall;
	s->oncpu_total_ns += oncpu;
	if (wall > s->max_ns)
		s->max_ns = wall;
}

/* Where the file of a slow call is resolved: a per-CPU map value. */
struct path_buf {
	__u8 path[2 * PATH_HALF]; /* PATH_DENTRIES: components leaf first, each NUL-terminated */
	__u32 kind;		  /* PATH_* */
	__u32 len;		  /* bytes used in path */
	__u32 truncated;
	__u32 inode_mode; /* S_IFMT bits */
	__u64 inode;
};

/* Slot 0 for a call resolved and sent at once (hooked syscalls), then one
 * per sampled-call slot (resolved while the call runs, sent when it ends). */
#define PATH_BUFS (1 + SAMPLED_CALLS)

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PATH_BUFS);
	__type(key, __u32);
	__type(value, struct path_buf);
} path_bufs SEC(".maps");

static __always_inline struct path_buf *this_path_buf(__u32 slot)
{
	return bpf_map_lookup_elem(&path_bufs, &slot);
}

/* Resolve the path of the running task's file descriptor `fd` into this
 * CPU's path_buf `slot`: components leaf first, crossing mount points up to the
 * root. Returns 1 when the buffer holds a path, 0 when the fd has no
 * file.
 *
 * A global function, so the verifier checks it once on its own, whatever
 * state its callers are in. The walk's progress lives in the map value
 * (unknown to the verifier) rather than in registers, so every step looks
 * the same to it and older verifiers (6.1: a 1,000,000-instruction budget)
 * prune the walk instead of exploring each combination of path lengths. */
__noinline int path_of_fd(__u32 fd, __u32 slot)
{
	struct file *f = file_of_fd((struct task_struct *)bpf_get_current_task(), fd);
	struct path_buf *b;
	struct dentry *d;
	struct mount *mnt;
	int i;

	if (!f)
		return 0;
	b = this_path_buf(slot);
	if (!b)
		return 0;
	b->kind = PATH_DENTRIES;
	b->len = 0;
	b->truncated = 0;
	b->inode = BPF_CORE_READ(f, f_inode, i_ino);
	b->inode_mode = BPF_CORE_READ(f, f_inode, i_mode) & 0170000;
	d = BPF_CORE_READ(f, f_path.dentry);
	mnt = container_of(BPF_CORE_READ(f, f_path.mnt), struct mount, mnt);
	for (i = 0; i < PATH_COMPONENTS; i++) {
		struct dentry *parent = BPF_CORE_READ(d, d_parent);
		struct dentry *mnt_root = BPF_CORE_READ(mnt, mnt.mnt_root);
		__u32 off;
		long len;

		if (d == mnt_root || d == parent) {
			struct mount *mnt_parent = BPF_CORE_READ(mnt, mnt_parent);

			if (mnt_parent == mnt)
				return 1; /* the root of everything */
			d = BPF_CORE_READ(mnt, mnt_mountpoint);
			mnt = mnt_parent;
			continue;
		}
		off = *(volatile __u32 *)&b->len;
		if (off >= PATH_HALF)
			break;
		len = bpf_probe_read_kernel_str(&b->path[off], PATH_HALF,
						BPF_CORE_READ(d, d_name.name));
		if (len <= 0)
			return 1;
		b->len = off + len;
		d = parent;
	}
	b->truncated = 1; /* longer than PATH_HALF, or deeper than PATH_COMPONENTS */
	return 1;
}

/* Resolve the file the running task's call `nr` (with its first two
 * arguments) is about into path_buf `slot`: the path behind its fd, or the
 * path string it passed. Returns 1 when the buffer holds it. */
static __always_inline int call_file_resolve(__s32 nr, __u64 arg0, __u64 arg1, __u32 slot)
{
	__u8 how = syscall_file_arg(nr);
	struct path_buf *b;
	long len;

	if (how == SYSCALL_ARG_FD0 || how == SYSCALL_ARG_FD1)
		return path_of_fd(how == SYSCALL_ARG_FD0 ? arg0 : arg1, slot);
	if (how != SYSCALL_ARG_PATH0 && how != SYSCALL_ARG_PATH1)
		return 0;
	b = this_path_buf(slot);
	if (!b)
		return 0;
	len = bpf_probe_read_user_str(b->path, PATH_HALF,
				      (const char *)(how == SYSCALL_ARG_PATH0 ? arg0 : arg1));
	b->kind = PATH_USER;
	b->len = len > 0 ? len : 0;
	b->truncated = 0;
	b->inode = 0;
	b->inode_mode = 0;
	return 1;
}

/* Send a slow call of `task` (its file in path_buf `path_slot`, if >= 0). */
static __always_inline void syscall_event_send(const struct task_ref *task, __s32 nr, __u64 arg0,
					       __u64 arg1, __u64 now, __u64 wall, __u64 oncpu,
					       __u64 softirq, int path_slot)
{
	struct syscall_event *e = record_reserve(KIND_SYSCALL, sizeof(*e), now);
	struct path_buf *b;
	__u8 how;

	/* (Checked before anything else: older verifiers lose track of the
	 * reservation when the check comes later.) */
	if (!e)
		return;
	how = syscall_file_arg(nr);
	b = path_slot >= 0 ? this_path_buf(path_slot) : NULL;
	e->task = *task;
	e->wall_ns = wall;
	e->oncpu_ns = oncpu;
	e->softirq_ns = softirq;
	e->nr = nr;
	e->fd = how == SYSCALL_ARG_FD0 ? arg0 : how == SYSCALL_ARG_FD1 ? arg1 : 0;
	e->path_kind = PATH_NONE;
	e->path_len = 0;
	e->path_truncated = 0;
	e->inode_mode = 0;
	e->inode = 0;
	if (b) {
		bpf_probe_read_kernel(e->path, sizeof(e->path), b->path);
		e->path_kind = b->kind;
		e->path_len = b->len < PATH_HALF ? b->len : PATH_HALF;
		e->path_truncated = b->truncated || b->len >= PATH_HALF;
		e->inode = b->inode;
		e->inode_mode = b->inode_mode;
	}
	record_submit(e);
}

#define F_SETLKW 7
#define F_OFD_SETLKW 38
#define S_IFMT 0170000
#define S_IFSOCK 0140000
#define S_IFIFO 0010000
#define S_IFCHR 0020000

/* Say in path buffer `slot` why the call's file is unknown (`kind`:
 * PATH_FD_REUSED, the fd named another file than the call used, which may
 * be freed; or PATH_UNKNOWN). */
static __always_inline bool path_buf_mark_unknown(__u32 slot, __u32 kind)
{
	struct path_buf *b = this_path_buf(slot);

	if (!b)
		return false;
	b->kind = kind;
	b->len = 0;
	b->truncated = 0;
	b->inode = 0;
	b->inode_mode = 0;
	return true;
}

/* Whether the running task's `fd` is a socket, pipe or character device.
 * (A global function: its walk of the fd table is verified once.) */
__noinline int fd_is_stream(__u32 fd)
{
	struct file *f = file_of_fd((struct task_struct *)bpf_get_current_task(), fd);
	__u32 mode;

	if (!f)
		return 0;
	mode = BPF_CORE_READ(f, f_inode, i_mode) & S_IFMT;
	return mode == S_IFSOCK || mode == S_IFIFO || mode == S_IFCHR;
}

/* Whether call `c` of the running task (first arguments `arg0`, `arg1`)
 * slept by design: its call does (SYSCALL_WAITS), or it read a stream, or
 * it waited for a lock. */
static __always_inline bool call_waits(const struct call *c, __u64 arg0, __u64 arg1)
{
	__u8 flags = c->nr >= 0 && c->nr < SYSCALL_NR_MAX ?
			     syscall_arg[c->nr & (SYSCALL_NR_MAX - 1)] :
			     0;

	if (flags & SYSCALL_WAITS)
		return true;
	if (flags & SYSCALL_WAITS_FOR_LOCK)
		return arg1 == F_SETLKW || arg1 == F_OFD_SETLKW;
	if (flags & SYSCALL_WAITS_ON_STREAM)
		return fd_is_stream((flags & SYSCALL_ARG_MASK) == SYSCALL_ARG_FD1 ? arg1 : arg0);
	return false;
}

/* The path_buf slot that holds the file of ending call `c` (-1: none): the
 * path behind its fd, unless the fd names another file than at entry (then
 * the buffer says so: the file the call used may be freed by now). */
static __always_inline int call_path_slot(bool btf, const struct call *c, __u64 arg0, __u64 arg1)
{
	if (c->file && call_fd_file(btf, c->nr, arg0, arg1) != c->file)
		return path_buf_mark_unknown(0, PATH_FD_REUSED) ? 0 : -1;
	return call_file_resolve(c->nr, arg0, arg1, 0) ? 0 : -1;
}

static __always_inline void on_sys_exit(bool btf, struct pt_regs *regs)
{
	struct cpu_state *cs = this_cpu();
	struct call *c;
	__u64 now, wall, cgroup, arg0, arg1;

	if (!cs)
		return;
	c = current_call(btf, cs, current_tid_of(cs));
	if (!c)
		return;
	now = bpf_ktime_get_ns();
	syscall_slice_end(c, cs, now);
	wall = now - c->enter_ts;
	cgroup = current_cgroup_of(btf, cs);
	syscall_record(cgroup, c->nr, wall, c->oncpu_ns);
	if (c->oncpu_ns < syscall_oncpu_threshold_ns && wall < syscall_wall_threshold_ns) {
		c->enter_ts = 0;
		return;
	}
	arg0 = call_arg(btf, regs, 0);
	arg1 = call_arg(btf, regs, 1);
	if (c->oncpu_ns >= syscall_oncpu_threshold_ns || !call_waits(c, arg0, arg1)) {
		struct task_ref task;

		task_ref_set(btf, &task, current_task(btf), cgroup);
		syscall_event_send(&task, c->nr, arg0, arg1, now, wall, c->oncpu_ns, c->softirq_ns,
				   call_path_slot(btf, c, arg0, arg1));
	}
	c->enter_ts = 0;
}

#endif /* STALLTOP_SYSCALL_BPF_H */
