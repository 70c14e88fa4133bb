//! The guest's `/init`: a busybox shell script that mounts what stalltop needs (pure cgroup v2),
//! runs the probe tests and `stalltop record` + `report --json` in every mode over a small load,
//! writes each result as a section on the second serial port, and powers off.

use std::fmt::Write;
use std::time::Duration;

use super::guest_output::{ALIVE, BEGIN, DONE, END, SENDING, SENT};
use super::modes::Mode;

/// Where the guest has the static release binary and the unit-test binary.
pub const STALLTOP: &str = "/usr/bin/stalltop";
pub const PROBE_TESTS: &str = "/usr/libexec/stalltop-tests";
/// The cgroup the load runs in (the report must attribute its waits to it).
pub const LOAD_CGROUP: &str = "/kernel-matrix-load";
/// The probe tests that run in guests (libtest filters, space-separated): what the kernel
/// offers (BTF places, features) and the start-up check of them, loading and refusals, the
/// scheduler's waits, holders and throttles, hooked syscalls, a throttled wait moved between
/// CPUs, a task woken into a spent quota (throttled at that enqueue before 6.18: the guests'
/// kernels are where it happens) and a sleeper moved while asleep (tp_btf; raw_tp runs the
/// same judgements; the latter matters from 6.12, where delayed dequeue keeps a sleeper
/// queued). The other probe modules need the host (a block device for hardirqs, KVM steal)
/// or take longer under TCG than a guest's limit allows. They run one at a time, and their
/// section has what the passing ones printed too (the enqueue test's measures).
pub const PROBE_TEST_FILTER: &str = "probe::features:: probe::tests::fallback:: \
     probe::tests::sched:: probe::tests::selfcheck:: probe::tests::syscall_hooks:: \
     probe::tests::throttles::tp_btf_a_throttled_wait_moved \
     probe::tests::throttles::tp_btf_a_task_woken_into_a_spent_quota \
     probe::tests::sleepers::tp_btf_a_sleeper_moved_while_asleep";
/// How often the guest says on its console that it runs (the host kills a guest that stays
/// silent much longer: `qemu::Guest::silence_limit`).
pub const HEARTBEAT: Duration = Duration::from_secs(15);
/// Lines of a failing program's stderr sent back (the verifier's log can be megabytes; its
/// verdict is at the end).
const STDERR_LINES: u32 = 100;

/// What one guest runs.
#[derive(Clone, Debug)]
pub struct Plan {
    pub modes: Vec<Mode>,
    /// How long each mode records the running load: stalltop is stopped (SIGTERM) this long
    /// after every load process runs, however slowly the guest started them.
    pub record: Duration,
    /// Limits on each step inside the guest (killed past them), so one stuck step still lets
    /// the others report.
    pub probe_tests_limit: Duration,
    pub record_limit: Duration,
    pub report_limit: Duration,
}

impl Plan {
    /// The longest the guest's steps can take together, boot excluded.
    pub fn steps_limit(&self) -> Duration {
        self.probe_tests_limit + (self.record_limit + self.report_limit) * self.modes.len() as u32
    }
}

/// The `/init` script for `plan`.
pub fn init_script(plan: &Plan) -> String {
    let load_limit = plan.record.as_secs() + 10;
    let mut script = format!(
        r#"#!/bin/busybox sh
# /init of a stalltop kernel-matrix guest, written by `cargo xtask kernel-matrix`.
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
mount -t tracefs tracefs /sys/kernel/tracing
mount -t cgroup2 cgroup2 /sys/fs/cgroup
ip link set lo up
cd /tmp
# Results go to the second serial port, where no kernel message can interleave with them.
stty -F /dev/ttyS1 raw -echo
exec 3>/dev/ttyS1

# section TAG STATUS: stdin between the markers the host splits the output on; the console
# says when it is sent (level 3: printed despite "quiet").
section() {{
	echo "<3>{SENDING} $1" > /dev/kmsg
	echo "{BEGIN} $1" >&3
	cat >&3
	echo >&3
	echo "{END} $1 $2" >&3
	echo "<3>{SENT} $1" > /dev/kmsg
}}

# A heartbeat on the console, whatever the steps do: a guest that stops it froze whole.
(while :; do echo "<3>{ALIVE} (uptime $(cut -d" " -f1 /proc/uptime) s)" > /dev/kmsg; sleep {heartbeat}; done) &

# until_exists FILE WHAT / until_empty FILE WHAT: waits (at most 30 s) for a file to appear
# or to be empty; past that, says so with what the guest's tasks wait on.
until_exists() {{
	n=0
	while [ ! -e $1 ] && [ $n -lt 300 ]; do sleep 0.1; n=$((n + 1)); done
	[ -e $1 ] || stuck "$2"
}}
until_empty() {{
	n=0
	while [ -n "$(cat $1)" ] && [ $n -lt 300 ]; do sleep 0.1; n=$((n + 1)); done
	[ -z "$(cat $1)" ] || stuck "$2"
}}
stuck() {{
	echo "kernel-matrix: $1 within 30 s; blocked tasks:" >> /tmp/steps
	echo w > /proc/sysrq-trigger
	dmesg | tail -n 80 >> /tmp/steps
}}

load={load_cgroup}
start_load() {{
	mkdir $load
	(
		echo 0 > $load/cgroup.procs
		echo "kernel-matrix: the load's shell is in $load" >> /tmp/steps
		timeout {load_limit} taskset -c 1 sh -c 'while :; do :; done' &
		timeout {load_limit} taskset -c 1 sh -c 'while :; do :; done' &
		timeout {load_limit} sh -c 'while :; do sleep 0.01; done' &
		timeout {load_limit} sh -c 'while :; do dd if=/tmp/load-file of=/dev/null bs=64k 2> /dev/null; done' &
		ping -q -i 0.01 -w {load_limit} 127.0.0.1 > /dev/null &
		touch /tmp/load-running
		wait
	) &
	until_exists /tmp/load-running "the load did not start"
}}
stop_load() {{
	echo 1 > $load/cgroup.kill
	until_empty $load/cgroup.procs "the load did not end"
	rmdir $load
	rm -f /tmp/load-running
}}

# record TAG ARGS...: stalltop record over the load, then its report.
record() {{
	tag=$1
	shift
	# The background job truncates rec.err only once it runs: the previous mode's "recording
	# to" line must not be there to be read before that.
	rm -f /tmp/rec.stl /tmp/rec.err
	timeout -s KILL {record_limit} {stalltop} record -o /tmp/rec.stl "$@" 2> /tmp/rec.err &
	rec=$!
	# The load starts once the probes are attached, so it neither slows the verifier down
	# nor runs unrecorded; the recording stops {record} s after the load runs, however long
	# the guest takes to start it.
	while kill -0 $rec 2> /dev/null && ! grep -q '^stalltop: recording to' /tmp/rec.err; do
		sleep 0.5
	done
	loaded=no
	: > /tmp/steps
	if grep -q '^stalltop: recording to' /tmp/rec.err; then
		start_load
		loaded=yes
		echo "kernel-matrix: the load runs (uptime $(cut -d" " -f1 /proc/uptime) s)" >> /tmp/steps
		sleep {record}
		kill -TERM $rec 2> /dev/null
		echo "kernel-matrix: SIGTERM sent to stalltop (uptime $(cut -d" " -f1 /proc/uptime) s)" >> /tmp/steps
	fi
	wait $rec
	status=$?
	if [ $loaded = yes ]; then
		stop_load
	fi
	{{ tail -n {stderr_lines} /tmp/rec.err; cat /tmp/steps; }} | section record:$tag $status
	if [ $status -eq 0 ]; then
		timeout -s KILL {report_limit} {stalltop} report /tmp/rec.stl --json > /tmp/rec.json 2> /tmp/rep.err
		status=$?
		if [ $status -eq 0 ]; then
			section report:$tag 0 < /tmp/rec.json
		else
			tail -n {stderr_lines} /tmp/rep.err | section report:$tag $status
		fi
	fi
}}

uname -r | section kernel 0
dd if=/dev/zero of=/tmp/load-file bs=4096 count=1024 2> /dev/null

timeout -s KILL {probe_tests_limit} {probe_tests} {probe_filter} --test-threads=1 --show-output > /tmp/tests.out 2> /tmp/tests.err
status=$?
section probe-tests $status < /tmp/tests.out
tail -n {stderr_lines} /tmp/tests.err | section probe-tests-stderr $status

"#,
        load_cgroup = format_args!("/sys/fs/cgroup{LOAD_CGROUP}"),
        record_limit = plan.record_limit.as_secs(),
        report_limit = plan.report_limit.as_secs(),
        probe_tests_limit = plan.probe_tests_limit.as_secs(),
        record = plan.record.as_secs(),
        stalltop = STALLTOP,
        probe_tests = PROBE_TESTS,
        probe_filter = PROBE_TEST_FILTER,
        stderr_lines = STDERR_LINES,
        heartbeat = HEARTBEAT.as_secs(),
    );
    for mode in &plan.modes {
        writeln!(
            script,
            "record {} {}",
            mode.tag(),
            mode.stalltop_args().join(" ")
        )
        .expect("writing to a String");
    }
    writeln!(script, "\necho {DONE} >&3\npoweroff -f").expect("writing to a String");
    script
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> Plan {
        Plan {
            modes: Mode::all(),
            record: Duration::from_secs(3),
            probe_tests_limit: Duration::from_secs(600),
            record_limit: Duration::from_secs(300),
            report_limit: Duration::from_secs(60),
        }
    }

    #[test]
    fn the_script_records_every_mode_in_order_then_reports_done_and_powers_off() {
        let script = init_script(&plan());
        let records: Vec<&str> = script
            .lines()
            .filter(|line| line.starts_with("record "))
            .collect();
        let expected: Vec<String> = Mode::all()
            .iter()
            .map(|mode| format!("record {} {}", mode.tag(), mode.stalltop_args().join(" ")))
            .collect();
        assert_eq!(records, expected);
        assert!(records.contains(&"record raw-tp/off --attach raw-tp --syscalls off"));
        let tail: Vec<&str> = script.lines().rev().take(2).collect();
        assert_eq!(tail, ["poweroff -f", &format!("echo {DONE} >&3")]);
    }

    #[test]
    fn the_script_runs_the_probe_tests_one_at_a_time_and_stops_each_recording_after_the_load_ran() {
        let script = init_script(&plan());
        assert!(script.contains(&format!(
            "timeout -s KILL 600 /usr/libexec/stalltop-tests {PROBE_TEST_FILTER} --test-threads=1 \
             --show-output"
        )));
        // The previous mode's stderr is gone before the next record starts in the background.
        assert!(script.contains(
            "rm -f /tmp/rec.stl /tmp/rec.err\n\ttimeout -s KILL 300 /usr/bin/stalltop record \
             -o /tmp/rec.stl \"$@\" 2> /tmp/rec.err &"
        ));
        assert!(script.contains("\t\tsleep 3\n\t\tkill -TERM $rec"));
        assert!(script.contains("> /dev/kmsg; sleep 15; done) &"));
    }

    #[test]
    fn the_limit_of_the_steps_adds_the_probe_tests_and_each_mode() {
        assert_eq!(plan().steps_limit(), Duration::from_secs(600 + 6 * 360));
    }
}
