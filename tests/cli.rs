//! The real binary as a user runs it: help, bad input, missing privileges,
//! BTF or tracefs (in private mount namespaces), recording until SIGTERM or
//! SIGKILL, reports of damaged files, and nothing left attached. Needs root
//! (CI runs as root).

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

const STALLTOP: &str = env!("CARGO_BIN_EXE_stalltop");

/// Tests that load probes check what is left attached: one at a time.
static PROBES: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    PROBES.lock().unwrap_or_else(|e| e.into_inner())
}

fn require_root() {
    assert!(
        rustix::process::geteuid().is_root(),
        "these tests load BPF programs: run them as root (CI does)"
    );
}

fn stalltop(args: &[&str]) -> Output {
    Command::new(STALLTOP).args(args).output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A user-facing failure: one line, the given exit code, no Rust panic or
/// libbpf dump.
fn assert_clean_failure(out: &Output, code: i32, says: &str) {
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "stderr: {stderr}");
    assert!(stderr.contains(says), "stderr lacks {says:?}: {stderr}");
    assert!(
        !stderr.contains("panicked") && !stderr.contains("libbpf:"),
        "{stderr}"
    );
    assert_eq!(
        stderr.trim().lines().count(),
        1,
        "one line expected: {stderr}"
    );
}

/// Ids of the stalltop programs loaded on the machine now.
fn stalltop_program_ids() -> BTreeSet<u64> {
    let out = Command::new("bpftool")
        .args(["prog", "show", "-j"])
        .output()
        .unwrap();
    let progs: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    progs
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| {
            p["name"].as_str().is_some_and(|n| {
                n.starts_with("btf_") || n.starts_with("raw_") || n == "cpu_sample"
            })
        })
        .filter_map(|p| p["id"].as_u64())
        .collect()
}

/// Programs that appeared since `before` and are still loaded: what a run
/// of ours left behind (waits up to 5 s for a killed process's fds to go).
fn left_behind(before: &BTreeSet<u64>) -> Vec<u64> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let left: Vec<u64> = stalltop_program_ids().difference(before).copied().collect();
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        thread::sleep(Duration::from_millis(100));
    }
}

/// Waits until `child` (its stderr piped) says it records, so what it attached is checked
/// after the verifier is done, however long loading takes on a busy machine. The rest of its
/// stderr is read on (it must not write into a closed pipe) and returned, with the start, by
/// the handle.
fn until_recording(child: &mut std::process::Child) -> thread::JoinHandle<String> {
    use std::io::{BufRead, BufReader};
    let mut lines = BufReader::new(child.stderr.take().expect("stderr piped")).lines();
    let mut said = String::new();
    for line in lines.by_ref().map_while(Result::ok) {
        said.push_str(&line);
        said.push('\n');
        if line.starts_with("stalltop: recording to") {
            return thread::spawn(move || {
                for line in lines.map_while(Result::ok) {
                    said.push_str(&line);
                    said.push('\n');
                }
                said
            });
        }
    }
    panic!("stalltop ended before it recorded: {said}");
}

fn report_json(path: &Path) -> serde_json::Value {
    let out = stalltop(&["report", path.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "report: {}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn help_teaches_with_examples() {
    let out = stalltop(&["--help"]);
    assert!(out.status.success());
    let help = text(&out.stdout);
    for needle in [
        "record",
        "report",
        "Examples:",
        "500us, 2ms, 10s, 5m",
        "--stall-threshold",
    ] {
        assert!(help.contains(needle), "help lacks {needle:?}:\n{help}");
    }
    assert!(help.contains("Reading a stall line"), "{help}");
    for mode in ["record", "report", "replay"] {
        let out = stalltop(&[mode, "--help"]);
        assert!(out.status.success());
        let help = text(&out.stdout);
        assert!(help.contains("Examples:"), "{mode} --help:\n{help}");
    }
}

#[test]
fn completions_and_the_man_page_come_from_the_cli() {
    let out = stalltop(&["completions", "bash"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("--runq-threshold"));
    let out = stalltop(&["man"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains(".TH stalltop"));
    let out = stalltop(&["completions", "tcsh"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "an unknown shell is a usage error"
    );
}

#[test]
fn bad_input_is_a_usage_error() {
    let out = stalltop(&["record"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--output"));
    let out = stalltop(&["record", "-o", "/tmp/x.stl", "--duration", "10"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("time unit needed"));
    let out = stalltop(&["--threshold", "100us", "record", "-o", "/tmp/x.stl"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("1ms minimum"));
}

#[test]
fn without_privileges_it_says_to_run_as_root() {
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", STALLTOP])
        .args(["record", "-o", "/tmp/stalltop-noroot.stl", "-d", "1s"])
        .output()
        .unwrap();
    assert_clean_failure(&out, 3, "run stalltop as root");
    assert!(!Path::new("/tmp/stalltop-noroot.stl").exists());
}

#[test]
fn without_kernel_btf_it_names_the_kernel_option() {
    require_root();
    // A private mount namespace where /sys/kernel/btf is an empty tmpfs.
    let out = Command::new("unshare")
        .args(["-m", "sh", "-c"])
        .arg(format!(
            "mount -t tmpfs none /sys/kernel/btf && exec {STALLTOP} record -o /tmp/stalltop-nobtf.stl -d 1s"
        ))
        .output()
        .unwrap();
    assert_clean_failure(&out, 4, "CONFIG_DEBUG_INFO_BTF");
}

#[test]
fn tracefs_is_mounted_when_missing_or_named_when_it_cannot_be() {
    require_root();
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.stl");
    // Unmounted and mountable: stalltop mounts it and records.
    let out = Command::new("unshare")
        .args(["-m", "sh", "-c"])
        .arg(format!(
            "umount -l /sys/kernel/tracing; {STALLTOP} record -o {} -d 1s && test -d /sys/kernel/tracing/events",
            file.display()
        ))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    // Unmounted, and no CAP_SYS_ADMIN to mount it (CAP_BPF and CAP_PERFMON
    // are enough for the privilege check).
    let out = Command::new("unshare")
        .args(["-m", "sh", "-c"])
        .arg(format!(
            "umount -l /sys/kernel/tracing; exec capsh --drop=cap_sys_admin -- -c '{STALLTOP} record -o {} -d 1s'",
            file.display()
        ))
        .output()
        .unwrap();
    assert_clean_failure(&out, 5, "mount -t tracefs");
}

#[test]
fn record_until_sigterm_writes_a_private_readable_file_and_detaches() {
    use std::os::unix::fs::PermissionsExt;
    require_root();
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("term.stl");
    let before = stalltop_program_ids();
    let mut child = Command::new(STALLTOP)
        .args(["record", "-o", file.to_str().unwrap()])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = until_recording(&mut child);
    assert!(
        stalltop_program_ids().len() > before.len(),
        "not attached once recording"
    );
    thread::sleep(Duration::from_millis(2500));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    let said = stderr.join().unwrap();
    assert!(status.success(), "{said}");
    assert!(said.contains("wrote"), "{said}");
    assert_eq!(left_behind(&before), Vec::<u64>::new());
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let report = report_json(&file);
    assert!(
        report["duration_ns"].as_u64().unwrap() >= 2_000_000_000,
        "{report}"
    );
    assert!(
        !report["runq"].as_array().unwrap().is_empty(),
        "no run-queue data: {report}"
    );
    assert!(
        !report["syscalls"].as_array().unwrap().is_empty(),
        "no syscall data: {report}"
    );
}

#[test]
fn sigkill_loses_at_most_the_last_chunk() {
    require_root();
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("kill.stl");
    let before = stalltop_program_ids();
    let mut child = Command::new(STALLTOP)
        .args(["record", "-o", file.to_str().unwrap()])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = until_recording(&mut child);
    // Chunks are flushed every second: 3.5 s into the recording at least two are on disk.
    thread::sleep(Duration::from_millis(3500));
    child.kill().unwrap();
    child.wait().unwrap();
    stderr.join().unwrap();
    // The kernel detaches a killed process's programs once its fds close.
    assert_eq!(left_behind(&before), Vec::<u64>::new());
    let report = report_json(&file);
    let duration = report["duration_ns"].as_u64().unwrap();
    assert!(
        duration >= 1_500_000_000,
        "only {duration} ns survived: {report}"
    );
}

#[test]
fn damaged_recordings_are_read_up_to_the_damage() {
    require_root();
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("whole.stl");
    let out = stalltop(&["record", "-o", file.to_str().unwrap(), "-d", "3s"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let whole = std::fs::read(&file).unwrap();

    // Cut in the middle of the last chunk: earlier chunks still report.
    let cut = dir.path().join("cut.stl");
    std::fs::write(&cut, &whole[..whole.len() - 10]).unwrap();
    let out = stalltop(&["report", cut.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("damaged at byte"),
        "{}",
        text(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(report["duration_ns"].as_u64().unwrap() > 0);

    // Not a recording at all, or missing: nothing readable, exit 8.
    let junk = dir.path().join("junk.stl");
    std::fs::write(&junk, "hello, I am not a recording\n").unwrap();
    assert_clean_failure(
        &stalltop(&["report", junk.to_str().unwrap()]),
        8,
        "not a stalltop recording",
    );
    assert_clean_failure(
        &stalltop(&["report", "/nonexistent/x.stl"]),
        8,
        "/nonexistent/x.stl",
    );
}

#[test]
fn an_unwritable_output_fails_cleanly_and_detaches() {
    require_root();
    let _serial = serial();
    let before = stalltop_program_ids();
    let out = stalltop(&["record", "-o", "/proc/stalltop/x.stl", "-d", "1s"]);
    assert_clean_failure(&out, 9, "/proc/stalltop/x.stl");
    assert_eq!(left_behind(&before), Vec::<u64>::new());
}

#[test]
fn no_syscalls_leaves_the_syscall_hooks_out() {
    require_root();
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("nosys.stl");
    let mut child = Command::new(STALLTOP)
        .args([
            "record",
            "-o",
            file.to_str().unwrap(),
            "-d",
            "3s",
            "--no-syscalls",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = until_recording(&mut child);
    let out = Command::new("bpftool")
        .args(["prog", "show", "-j"])
        .output()
        .unwrap();
    let progs: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ours: Vec<&str> = progs
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["name"].as_str())
        .filter(|n| n.starts_with("btf_") || n.starts_with("raw_"))
        .collect();
    assert!(ours.iter().any(|n| n.ends_with("sched_switch")), "{ours:?}");
    assert!(!ours.iter().any(|n| n.contains("sys_e")), "{ours:?}");
    assert!(
        child.wait().unwrap().success(),
        "{}",
        stderr.join().unwrap()
    );
    let report = report_json(&file);
    assert_eq!(report["syscalls"].as_array().unwrap().len(), 0);
    assert!(!report["runq"].as_array().unwrap().is_empty(), "{report}");
}

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
        .display()
        .to_string()
}

#[test]
fn report_and_diff_help_teach_their_options() {
    let report = text(&stalltop(&["report", "--help"]).stdout);
    for needle in [
        "--from",
        "--container",
        "--pid",
        "--limit",
        "--all",
        "--sort",
        "12:03:05",
        "Reading a stall line",
        "<1us",
    ] {
        assert!(
            report.contains(needle),
            "report --help lacks {needle}:\n{report}"
        );
    }
    let diff = text(&stalltop(&["diff", "--help"]).stdout);
    for needle in [
        "--fail-if",
        "wait_change_pct(C)",
        "new_culprits",
        "exit code 10",
    ] {
        assert!(diff.contains(needle), "diff --help lacks {needle}:\n{diff}");
    }
}

/// The real binary on committed recordings: options, clear errors, and
/// `diff --fail-if` exit codes.
#[test]
fn report_options_and_diff_on_real_recordings() {
    let noisy = fixture("noisy.stl");
    let out = stalltop(&["report", &noisy, "--container", "victim", "--limit", "2"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    assert!(
        shown.contains("What hurt `victim`") && shown.contains("more (--limit N"),
        "{shown}"
    );

    let out = stalltop(&["report", &noisy, "--runq-threshold", "1ms"]);
    assert_clean_failure(&out, 1, "below the recording's 2ms");
    let out = stalltop(&["report", &noisy, "--from", "99:99"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("is not a time"),
        "{}",
        text(&out.stderr)
    );
    let out = stalltop(&["report", &noisy, "--from", "+5s", "--to", "+2s"]);
    assert_clean_failure(&out, 1, "--from must come before --to");

    let quiet = fixture("quiet.stl");
    let out = stalltop(&["diff", &quiet, &noisy]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let compared = text(&out.stdout);
    assert!(
        compared.contains("hog (/stalltop_noisy): none ->") && compared.contains("NEW"),
        "{compared}"
    );
    let holds = stalltop(&[
        "diff",
        &quiet,
        &noisy,
        "--fail-if",
        "wait_change_pct(\"victim\") > 100",
    ]);
    assert_clean_failure(&holds, 10, "holds for");
    let fine = stalltop(&[
        "diff",
        &quiet,
        &noisy,
        "--fail-if",
        "stalls(\"irqoff\") > 0",
    ]);
    assert!(fine.status.success(), "{}", text(&fine.stderr));
    // As JSON, for scripts: the victim's change and the hog as a new culprit; a condition that
    // holds still prints the JSON, then exits 10.
    let as_json = stalltop(&[
        "diff",
        &quiet,
        &noisy,
        "--json",
        "--fail-if",
        "wait_change_pct(\"victim\") > 100",
    ]);
    assert_eq!(as_json.status.code(), Some(10), "{}", text(&as_json.stderr));
    let compared: serde_json::Value =
        serde_json::from_slice(&as_json.stdout).expect("diff --json prints one JSON object");
    assert_eq!(compared["schema_version"], 2);
    let victim = compared["containers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["cgroup"].as_str().is_some_and(|g| g.contains("victim")))
        .expect("the victim's row");
    assert!(
        victim["after"]["ns_per_s"].as_f64() > victim["before"]["ns_per_s"].as_f64()
            && victim["wait_change_pct"]
                .as_f64()
                .is_some_and(|p| p > 100.0),
        "{victim}"
    );
    let hog = compared["culprits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["comm"] == "hog")
        .expect("the hog among the culprits");
    assert!(
        hog["before"].is_null() && hog["after"]["count"].as_u64() > Some(0),
        "{hog}"
    );
    let bad = stalltop(&["diff", &quiet, &noisy, "--fail-if", "wait_ms(victim) >"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        text(&bad.stderr).contains("--fail-if"),
        "{}",
        text(&bad.stderr)
    );
}

#[test]
fn report_writes_a_perfetto_trace_or_says_why_not() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/noisy-neighbour.stl");
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("nn.pftrace");
    let out = stalltop(&[
        "report",
        fixture.to_str().unwrap(),
        "--perfetto",
        trace.to_str().unwrap(),
    ]);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(out.stdout.is_empty(), "the trace replaces the report");
    assert!(stderr.contains("98 stalls and 2004 waits"), "{stderr}");
    // A Trace's first bytes: packet field 1, length-delimited.
    assert_eq!(std::fs::read(&trace).unwrap()[0], 0x0a);

    assert_clean_failure(
        &stalltop(&[
            "report",
            fixture.to_str().unwrap(),
            "--perfetto",
            "/proc/stalltop/x.pftrace",
        ]),
        9,
        "/proc/stalltop/x.pftrace",
    );
    let out = stalltop(&["report", "x.stl", "--json", "--perfetto", "y"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}
