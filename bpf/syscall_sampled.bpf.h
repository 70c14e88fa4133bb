/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Sampled syscalls: no syscall hooks. The CPU sampler reads the running
 * task's syscall (number and arguments) from its saved user registers;
 * ticks on one CPU that find the same thread in the kernel in the same call
 * (number and arguments) make one call. Its time on the CPU is measured at
 * context switches (the ticks only find it), and it ends when its thread
 * leaves it (seen by a tick or at a switch-out) or blocks in it, when no
 * tick has found it for long, or when another thread's call needs its
 * slot. Its start and end are known to about a period; its file is
 * resolved while it runs. A call that two ticks found stays open while its
 * thread blocks in it, so its wall time holds its sleeps (a memcg reclaim
 * that waits for writeback between bursts of work is one call); one that
 * blocks before its second tick ends there (a wait by design or a short
 * call: calls that block and come back with the same arguments would read
 * as one). Back-to-back calls with the same arguments that no tick or
 * switch sees apart read as one, unless a read or write came between them;
 * a call that moves to another CPU reads as two.
 */
#ifndef STALLTOP_SYSCALL_SAMPLED_BPF_H
#define STALLTOP_SYSCALL_SAMPLED_BPF_H

#include "common.bpf.h"
#include "syscall.bpf.h"

/* Set by user space in sampled mode (with the sampler on). */
const volatile __u8 syscalls_sampled = 0;
/* Whether sampled calls are followed now: user space turns them on while
 * the probes run when the cost guard takes the syscall hooks off (then
 * syscalls_sampled is set too), off when they come back. */
volatile __u8 sampling_calls_now = 1;
/* The sampler's period: user space doubles it while the probes run when
 * the cost guard slows the sampler down. */
volatile __u64 sample_period_ns = 1000 * 1000;
/* Kernel stack size: the saved user registers sit at its top, for
 * kernels without bpf_task_pt_regs (before 5.15) and raw_tp programs. */
const volatile __u64 thread_size = 16384;

#define ENOSYS 38

/* Task `t`'s saved user registers. */
static __always_inline bool sampling_calls(void)
{
	return syscalls_sampled && sampling_calls_now;
}

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

/* The flag bits of a mutex's owner word, below the owning task's address. */
#define MUTEX_FLAGS 0x07UL
/* fs.h: the file's position is locked (f_pos_lock) by calls that use it:
 * regular files and directories, unless opened as streams (stream_open).
 * The same bit on every kernel since 3.14. */
#define FMODE_ATOMIC_POS 0x8000

/* What the position lock of the file a sampled call's fd names now tells
 * of the call's own file. */
enum file_claim {
	/* the fd's file: the caller holds its lock or waits for it, or
	 * nothing can tell (a call or file that takes no such lock) */
	FILE_NAMED = 0,
	/* not the call's file: nobody holds its lock, which the call would
	 * hold (or wait for) were it on it */
	FILE_REUSED = 1,
	/* another task holds the lock, and is not seen using that file */
	FILE_UNKNOWN = 2,
};

/* Flags of syscall `nr` (SYSCALL_* of the `syscall_arg` table). */
static __always_inline __u8 syscall_flags(__s32 nr)
{
	return nr >= 0 && nr < SYSCALL_NR_MAX ? syscall_arg[nr & (SYSCALL_NR_MAX - 1)] : 0;
}

/* Whether task `t` (not running here) is inside a call that holds the
 * position lock of `f`: a call that locks its file's position, on an fd
 * that names `f` in its own table. */
static __always_inline bool in_call_on_file(struct task_struct *t, struct file *f)
{
	__u64 arg0 = 0, arg1 = 0;
	__s32 nr = syscall_in_progress(false, t, &arg0, &arg1);
	__u8 how;

	if (nr < 0 || !(syscall_flags(nr) & SYSCALL_LOCKS_POS))
		return false;
	how = syscall_flags(nr) & SYSCALL_ARG_MASK;
	if (how != SYSCALL_ARG_FD0 && how != SYSCALL_ARG_FD1)
		return false;
	return file_of_fd(t, how == SYSCALL_ARG_FD0 ? arg0 : arg1) == f;
}

/* What the position lock of `f`, the file the running task's call `nr`
 * names by its fd now, tells of the call's own file (FILE_*). Such a call
 * (SYSCALL_LOCKS_POS) of a task whose fd table another thread shares (only
 * then can another thread close the fd, and only then is the lock taken)
 * holds that lock on its file, or waits for it, for as long as it runs.
 * So a lock that nobody holds or waits for is another file's, which got
 * the fd's number since the call began; a lock another thread holds is the
 * call's file if that thread is seen using it (threads writing one log:
 * the caller waits its turn). Nothing is told of files whose position is
 * not locked (streams, sockets, pipes) nor on PREEMPT_RT, whose mutex has
 * no owner word. A global function, checked once by the verifier: it
 * takes the file's address as a number. */
__noinline int sampled_file_claim(__u64 file, __s32 nr)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct file *f = (struct file *)file;
	__u64 word;

	if (!f || !(syscall_flags(nr) & SYSCALL_LOCKS_POS) ||
	    !bpf_core_field_exists(f->f_pos_lock.owner))
		return FILE_NAMED;
	if (BPF_CORE_READ(task, files, count.counter) < 2 ||
	    !(BPF_CORE_READ(f, f_mode) & FMODE_ATOMIC_POS))
		return FILE_NAMED;
	word = BPF_CORE_READ(f, f_pos_lock.owner.counter);
	if (!word)
		return FILE_REUSED;
	if ((word & ~MUTEX_FLAGS) == (__u64)task)
		return FILE_NAMED;
	/* Flag bits alone: free, with waiters about to take it (the caller
	 * may be one). */
	if (!(word & ~MUTEX_FLAGS))
		return FILE_UNKNOWN;
	return in_call_on_file((struct task_struct *)(word & ~MUTEX_FLAGS), f) ? FILE_NAMED :
										 FILE_UNKNOWN;
}

/* Read and write calls task `t` has completed (CONFIG_TASK_XACCT; 0
 * without it): they tell apart two calls with the same arguments when a
 * read or write came between them, as in a loop that writes then
 * fadvises. */
static __always_inline __u64 io_calls_of(bool btf, struct task_struct *t)
{
	if (!bpf_core_field_exists(t->ioac))
		return 0;
	return FIELD(btf, t, ioac.syscr) + FIELD(btf, t, ioac.syscw);
}

/* Kernel time by file: shared by every CPU (atomic adds), its least
 * recently used files give way; preallocated, as a tick may come in any
 * context. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, struct file_key);
	__type(value, struct file_time);
} sampled_files SEC(".maps");

/* Call `s` (in this CPU's sampled-call `slot`) is on file `f`: the file
 * becomes its key in the kernel time by file, and the file's path is
 * resolved (into the slot's path buffer, for a slow-call record too) when
 * the file is new. */
static __always_inline void sampled_file_keep(struct sampled_call *s, __u32 slot, struct file *f)
{
	static const struct file_time zero = {};
	struct file_time *v;
	struct path_buf *b;

	s->file.cgroup = s->task.cgroup;
	s->file.nr = s->nr;
	s->file.inode = BPF_CORE_READ(f, f_inode, i_ino);
	s->file.dev = BPF_CORE_READ(f, f_inode, i_sb, s_dev);
	s->has_file = 1;
	v = bpf_map_lookup_elem(&sampled_files, &s->file);
	if (v) {
		__sync_fetch_and_add(&v->calls, 1);
		return;
	}
	s->path_ready = call_file_resolve(s->nr, s->arg0, s->arg1, 1 + slot) ? 1 : 2;
	b = s->path_ready == 1 ? this_path_buf(1 + slot) : NULL;
	bpf_map_update_elem(&sampled_files, &s->file, &zero, BPF_NOEXIST);
	v = bpf_map_lookup_elem(&sampled_files, &s->file);
	if (!v)
		return;
	__sync_fetch_and_add(&v->calls, 1);
	if (!b)
		return;
	bpf_probe_read_kernel(v->path, sizeof(v->path), b->path);
	v->path_kind = b->kind;
	v->path_len = b->len < PATH_HALF ? b->len : PATH_HALF;
	v->path_truncated = b->truncated || b->len >= PATH_HALF;
	v->inode_mode = b->inode_mode;
}

/* The call in this CPU's sampled-call `slot`, begun by the running task:
 * the file its fd names, if any, is its file unless the file's position
 * lock says otherwise; then the call keeps no file until its path is
 * resolved, which judges again (a lock seen free once may be one the call
 * is about to take, or one its sibling just let go). A global function,
 * checked once by the verifier rather than once per slot and caller
 * state. */
__noinline int sampled_file_begin(__u32 slot)
{
	struct cpu_state *cs = this_cpu();
	struct sampled_call *s;
	struct file *f;

	if (!cs)
		return 0;
	slot &= SAMPLED_CALLS - 1;
	s = &cs->sampled[slot];
	s->has_file = 0;
	s->file_doubted = 0;
	f = (struct file *)call_fd_file(false, s->nr, s->arg0, s->arg1);
	if (!f)
		return 0;
	if (sampled_file_claim((__u64)f, s->nr) != FILE_NAMED) {
		s->file_doubted = 1;
		return 0;
	}
	sampled_file_keep(s, slot, f);
	return 0;
}

/* The path of the call in this CPU's sampled-call `slot` (begun by the
 * running task), into the slot's path buffer: the file its fd names now,
 * unless that is not the file its first tick found (another thread closed
 * the fd and the number went to a new file since: then unknown), or, when
 * its first tick doubted the file, unless the file's position lock still
 * says it is another file's (or cannot tell). A global function, like
 * sampled_file_begin. */
__noinline int sampled_path_resolve(__u32 slot)
{
	struct cpu_state *cs = this_cpu();
	struct sampled_call *s;
	struct file *f;
	__u8 how;
	int claim;

	if (!cs)
		return 0;
	slot &= SAMPLED_CALLS - 1;
	s = &cs->sampled[slot];
	how = syscall_file_arg(s->nr);
	if (how == SYSCALL_ARG_FD0 || how == SYSCALL_ARG_FD1) {
		f = (struct file *)call_fd_file(false, s->nr, s->arg0, s->arg1);
		claim = s->file_doubted && f ? sampled_file_claim((__u64)f, s->nr) : FILE_NAMED;
		if (claim == FILE_UNKNOWN) {
			s->path_ready = path_buf_mark_unknown(1 + slot, PATH_UNKNOWN) ? 1 : 2;
			return 0;
		}
		/* (No file at the first tick: the fd was closed by then.) */
		if (!f || claim == FILE_REUSED ||
		    (!s->file_doubted &&
		     (!s->has_file || BPF_CORE_READ(f, f_inode, i_ino) != s->file.inode ||
		      BPF_CORE_READ(f, f_inode, i_sb, s_dev) != s->file.dev))) {
			s->path_ready = path_buf_mark_unknown(1 + slot, PATH_FD_REUSED) ? 1 : 2;
			return 0;
		}
		if (s->file_doubted) {
			s->file_doubted = 0;
			sampled_file_keep(s, slot, f);
			if (s->path_ready)
				return 0;
		}
	}
	s->path_ready = call_file_resolve(s->nr, s->arg0, s->arg1, 1 + slot) ? 1 : 2;
	return 0;
}

/* Call `slot` on this CPU stops running at `until`: the stretch since its
 * thread was switched in (or found in it) held the CPU, softirqs that ran
 * meanwhile apart; its table row and its file count it. A global function,
 * like sampled_file_begin. */
__noinline int sampled_stretch_end(__u32 slot, __u64 until)
{
	struct cpu_state *cs = this_cpu();
	struct syscall_stats *stats;
	struct sampled_call *s;
	struct file_time *v;
	__u64 ran, softirq;

	if (!cs)
		return 0;
	slot &= SAMPLED_CALLS - 1;
	s = &cs->sampled[slot];
	if (!s->running_since)
		return 0;
	ran = until > s->running_since ? until - s->running_since : 0;
	softirq = cs->softirq_ns - s->softirq_at;
	if (softirq > ran)
		softirq = ran;
	ran -= softirq;
	s->running_since = 0;
	s->oncpu_ns += ran;
	s->softirq_ns += softirq;
	stats = syscall_stats_of(s->task.cgroup, s->nr);
	if (stats)
		stats->oncpu_total_ns += ran;
	if (!s->has_file)
		return 0;
	v = bpf_map_lookup_elem(&sampled_files, &s->file);
	if (v)
		__sync_fetch_and_add(&v->oncpu_ns, ran);
	return 0;
}

/* A sampled call not seen for this many periods has ended (its thread
 * waits that long for the CPU, or runs on another CPU). */
#define SAMPLED_STALE_PERIODS 100
/* A call its thread blocked in, not seen for this long, has ended (the
 * thread woke on another CPU, or sleeps on): longer, as a call may sleep
 * between bursts of work. */
#define SAMPLED_BLOCKED_STALE_NS (1000ULL * 1000 * 1000)

/* When call `s` ended, if it ended by `now`: within a period after it was
 * last seen in progress (by a tick, at a switch-out, or at a switch-in
 * since), estimated at the middle. */
static __always_inline __u64 sampled_end_estimate(struct sampled_call *s, __u64 now)
{
	__u64 seen = s->last_seen > s->running_since ? s->last_seen : s->running_since;
	__u64 end = seen + sample_period_ns / 2;

	return end < now ? end : now;
}

/* Sampled call `slot` has ended at `end`. Count it, and send it if it held
 * the CPU past the on-CPU threshold (a single tick says nothing of a call's
 * length: it takes two). A global function, like sampled_file_begin. */
__noinline int sampled_call_end(__u32 slot, __u64 end)
{
	struct cpu_state *cs = this_cpu();
	struct syscall_stats *stats;
	struct sampled_call *s;
	__u64 wall;

	if (!cs)
		return 0;
	slot &= SAMPLED_CALLS - 1;
	sampled_stretch_end(slot, end);
	s = &cs->sampled[slot];
	wall = end > s->began ? end - s->began : 0;
	if (s->oncpu_ns > wall)
		wall = s->oncpu_ns;
	stats = syscall_stats_of(s->task.cgroup, s->nr);
	if (stats) {
		stats->wall_total_ns += wall;
		if (wall > stats->max_ns)
			stats->max_ns = wall;
	}
	if (s->ticks >= 2 && s->oncpu_ns >= syscall_oncpu_threshold_ns)
		syscall_event_send(&s->task, s->nr, s->arg0, s->arg1, end, wall, s->oncpu_ns,
				   s->softirq_ns, s->path_ready == 1 ? 1 + slot : -1);
	s->ticks = 0;
	return 0;
}

/* Whether task `t` is still inside sampled call `s`. */
static __always_inline bool sampled_call_goes_on(bool btf, struct task_struct *t,
						 struct sampled_call *s)
{
	__u64 arg0 = 0, arg1 = 0;

	return syscall_in_progress(btf, t, &arg0, &arg1) == s->nr && arg0 == s->arg0 &&
	       arg1 == s->arg1 && io_calls_of(btf, t) == s->io_calls;
}

/* Call `s`'s thread runs on this CPU at `now`, yet no stretch of it is
 * open: it came back by a switch the probes did not see. Some kernels
 * switch away from some tasks without the sched_switch tracepoint (seen on
 * a Firecracker guest's kernel, for threads of its PID 1): a thread
 * switched to one of them runs again unseen. It came back after its last
 * sighting and after the last switch seen here, within about a period. */
static __always_inline void sampled_stretch_resume(struct cpu_state *cs, struct sampled_call *s,
						   __u64 now)
{
	__u64 since = now - sample_period_ns / 2;

	if (s->last_seen > since)
		since = s->last_seen;
	if (cs->current_since > since)
		since = cs->current_since;
	s->running_since = since;
	s->softirq_at = cs->softirq_ns;
	s->blocked = 0;
}

/* A sampler tick at `now` on this CPU, running `tid`, in the kernel or
 * not (`in_kernel`): the call it finds `tid` in continues or begins; a
 * call `tid` was in before has ended, and so have calls no tick found
 * for long. */
static __always_inline void sampled_call_tick(bool btf, struct cpu_state *cs, __u32 tid,
					      bool in_kernel, __u64 now)
{
	struct task_struct *t = current_task(btf);
	struct syscall_stats *stats;
	struct sampled_call *s;
	__u64 arg0 = 0, arg1 = 0, io_calls = 0, stale;
	__u32 fewest = (__u32)-1;
	int mine = -1, free = -1, evict = 0;
	__s32 nr = -1;
	__u32 i;

	if (tid && in_kernel)
		nr = syscall_in_progress(btf, t, &arg0, &arg1);
	if (nr >= 0)
		io_calls = io_calls_of(btf, t);
	for (i = 0; i < SAMPLED_CALLS; i++) {
		s = &cs->sampled[i];
		if (!s->ticks) {
			free = i;
			continue;
		}
		if (s->task.tid == tid && nr == s->nr && arg0 == s->arg0 && arg1 == s->arg1 &&
		    io_calls == s->io_calls) {
			mine = i;
			continue;
		}
		stale = s->blocked ? SAMPLED_BLOCKED_STALE_NS :
				     SAMPLED_STALE_PERIODS * sample_period_ns;
		if (s->task.tid == tid || now - s->last_seen > stale) {
			sampled_call_end(i, sampled_end_estimate(s, now));
			free = i;
			continue;
		}
		/* If every slot is taken, the call with the fewest ticks gives
		 * way: a long call outlasts visitors. */
		if (s->ticks < fewest) {
			fewest = s->ticks;
			evict = i;
		}
	}
	if (nr < 0)
		return;
	if (mine < 0) {
		if (free < 0) {
			free = evict;
			s = &cs->sampled[free & (SAMPLED_CALLS - 1)];
			sampled_call_end(free, sampled_end_estimate(s, now));
		}
		mine = free;
		s = &cs->sampled[mine & (SAMPLED_CALLS - 1)];
		task_ref_fill(btf, &s->task, t);
		s->nr = nr;
		s->arg0 = arg0;
		s->arg1 = arg1;
		s->io_calls = io_calls;
		/* It began since the last tick, and while its thread ran. */
		s->began = now - sample_period_ns / 2;
		s->softirq_at = cs->softirq_ns;
		if (cs->current_since > s->began) {
			s->began = cs->current_since;
			s->softirq_at = cs->current_softirq;
		}
		s->running_since = s->began;
		s->oncpu_ns = 0;
		s->softirq_ns = 0;
		s->path_ready = 0;
		s->blocked = 0;
		sampled_file_begin(mine);
		stats = syscall_stats_of(s->task.cgroup, nr);
		if (stats)
			stats->count++;
	}
	s = &cs->sampled[mine & (SAMPLED_CALLS - 1)];
	if (!s->running_since)
		sampled_stretch_resume(cs, s, now);
	s->ticks++;
	s->last_seen = now;
	/* Resolve the file once the call is long, while it still uses it. */
	if (!s->path_ready && s->ticks >= 2 &&
	    s->oncpu_ns + (now - s->running_since) >= syscall_oncpu_threshold_ns)
		sampled_path_resolve(mine);
}

/* A context switch on this CPU at `now`, from `prev` (still runnable or
 * not) to `next`. prev's sampled call stops running: it has ended if prev
 * left it (since its last tick), or if prev blocked in it (now) before two
 * ticks found it. next's call, if a tick found one here before, runs again
 * if next is still in it (it may have run elsewhere meanwhile). */
static __always_inline void sampled_call_switch(bool btf, struct cpu_state *cs,
						struct task_struct *prev, __u32 prev_tid,
						bool prev_runnable, struct task_struct *next,
						__u32 next_tid, __u64 now)
{
	struct sampled_call *s;
	__u32 i;

	for (i = 0; i < SAMPLED_CALLS; i++) {
		s = &cs->sampled[i];
		if (!s->ticks)
			continue;
		if (prev_tid && s->task.tid == prev_tid) {
			if (!sampled_call_goes_on(btf, prev, s))
				sampled_call_end(i, sampled_end_estimate(s, now));
			else if (prev_runnable || s->ticks >= 2) {
				sampled_stretch_end(i, now);
				s->last_seen = now;
				s->blocked = !prev_runnable;
			} else
				sampled_call_end(i, now);
		} else if (next_tid && s->task.tid == next_tid) {
			if (!sampled_call_goes_on(btf, next, s)) {
				sampled_call_end(i, sampled_end_estimate(s, now));
				continue;
			}
			s->running_since = now;
			s->softirq_at = cs->softirq_ns;
			s->blocked = 0;
		}
	}
}

/* Whether this tick should keep a stack of `tid`'s sampled call: once it
 * has run `after` ns, at its 2nd, 4th, 8th... tick. A long call is seen
 * often enough; back-to-back calls that read as one do not flood. */
static __always_inline bool sampled_stack_due(struct cpu_state *cs, __u32 tid, __u64 after)
{
	__u32 i;

	if (!sampling_calls() || !cs)
		return false;
	for (i = 0; i < SAMPLED_CALLS; i++) {
		__u32 ticks = cs->sampled[i].ticks;

		if (ticks && cs->sampled[i].task.tid == tid)
			return ticks >= 2 && ticks * sample_period_ns >= after &&
			       !(ticks & (ticks - 1));
	}
	return false;
}

/* The syscall `tid` is in by the sampler's account on this CPU, or -1,
 * since when, and how long it has held this CPU inside it until `now`. */
static __always_inline __s32 sampled_syscall_of(struct cpu_state *cs, __u32 tid, __u64 now,
						__u64 *since, __u64 *oncpu)
{
	struct sampled_call *s;
	__u32 i;

	if (!sampling_calls() || !cs)
		return -1;
	for (i = 0; i < SAMPLED_CALLS; i++) {
		s = &cs->sampled[i];
		if (s->ticks && s->task.tid == tid) {
			*since = s->began;
			*oncpu = s->oncpu_ns;
			if (s->running_since && s->running_since < now)
				*oncpu += now - s->running_since;
			return s->nr;
		}
	}
	return -1;
}

#endif /* STALLTOP_SYSCALL_SAMPLED_BPF_H */
