//! Test fixtures: reports of clean runs as `stalltop report --json` prints them, the ground
//! truths of those runs, and the helpers the checks' tests vary them with.

use serde_json::{json, Value};

use super::report::Report;
use crate::scenario::slow_syscall::{self, Call, Timing};
use crate::scenario::{ksoftirqd, Percentiles};

pub const MS: u64 = 1_000_000;

/// A report as `stalltop report --json` prints it for a clean noisy-neighbour run.
pub const NOISY: &str = r#"{
      "version": 1,
      "host": {"hostname": "vm", "kernel": "6.18.44-fc", "cpus": 2},
      "duration_ns": 7000000000,
      "settings": {"runq_threshold_ns": 10000000, "stall_threshold_ns": 10000000,
                   "syscall_wall_threshold_ns": 10000000, "syscall_oncpu_threshold_ns": 1000000,
                   "syscalls": "exact",
                   "sample_hz": 1000, "attach": "tp_btf"},
      "stalls": [], "takeovers": [], "culprits": [], "syscalls": [], "softirq": [],
      "softirq_stolen": [],
      "lost_events": {"runq": 0},
      "runq": [
        {"cgroup": "/stalltop_victim", "container": null, "count": 4870,
         "p50_ns": 310000, "p99_ns": 4100000, "max_ns": 6950000,
         "preempted_by": {"same_cgroup": 0, "other_cgroup": 1620, "kthread": 12},
         "top_preemptors": [
           {"comm": "hog", "cgroup": "/stalltop_noisy", "count": 1598},
           {"comm": "kworker/1:1", "cgroup": "/", "count": 12}]},
        {"cgroup": "/stalltop_noisy", "container": null, "count": 2100,
         "p50_ns": 3900000, "p99_ns": 8000000, "max_ns": 12000000,
         "preempted_by": {"same_cgroup": 900, "other_cgroup": 1100, "kthread": 3},
         "top_preemptors": [{"comm": "victim", "cgroup": "/stalltop_victim", "count": 1100}]}
      ],
      "runq_events": [
        {"cpu": 1, "ts_ns": 123456789, "wait_ns": 12000000, "steal_ns": 0, "pid": 4242, "tid": 4242,
         "comm": "hog",
         "cgroup": "/stalltop_noisy",
         "ran_instead": {"pid": 4243, "comm": "hog", "cgroup": "/stalltop_noisy"}}
      ],
      "throttling": []
    }"#;

/// The quiet baseline of the same invocation.
pub const QUIET: &str = r#"{
      "version": 1,
      "host": {"hostname": "vm", "kernel": "6.18.44-fc", "cpus": 2},
      "duration_ns": 7000000000,
      "settings": {"runq_threshold_ns": 10000000, "stall_threshold_ns": 10000000,
                   "syscall_wall_threshold_ns": 10000000, "syscall_oncpu_threshold_ns": 1000000,
                   "syscalls": "exact",
                   "sample_hz": 1000, "attach": "tp_btf"},
      "stalls": [
        {"id": 0, "cpu": 0, "start_ns": 84, "duration_ns": 15000000, "kind": "runq", "waits": 1,
         "signals": 1, "waited": {"pid": 77, "comm": "cc1", "cgroup": "/", "wait_ns": 15000000},
         "culprit": {"pid": 78, "tid": 78, "comm": "rustc", "cgroup": "/", "container": "host",
                     "stack": [], "user_stack": [], "samples": 0}},
        {"id": 1, "cpu": 0, "start_ns": 500, "duration_ns": 40000000, "kind": "irqoff", "waits": 1,
         "signals": 1, "waited": {},
         "culprit": {"pid": 78, "tid": 78, "comm": "rustc", "cgroup": "/", "container": "host",
                     "stack": ["do_idle"], "user_stack": [], "samples": 1}}
      ],
      "takeovers": [
        {"cpu": 0, "ts_ns": 900, "wait_ns": 12000000,
         "culprit": {"pid": 78, "tid": 78, "comm": "rustc", "cgroup": "/", "container": "host",
                     "stack": [], "user_stack": [], "samples": 0}}
      ],
      "culprits": [], "syscalls": [], "softirq": [], "softirq_stolen": [],
      "lost_events": {},
      "runq": [
        {"cgroup": "/stalltop_victim", "container": null, "count": 4990,
         "p50_ns": 4000, "p99_ns": 60000, "max_ns": 1900000,
         "preempted_by": {"same_cgroup": 0, "other_cgroup": 40, "kthread": 5},
         "top_preemptors": [{"comm": "burstreq", "cgroup": "/stalltop_throttled", "count": 40}]},
        {"cgroup": "/stalltop_throttled", "container": null, "count": 420,
         "p50_ns": 2000000, "p99_ns": 8000000, "max_ns": 9100000,
         "preempted_by": {"same_cgroup": 300, "other_cgroup": 60, "kthread": 1},
         "top_preemptors": [{"comm": "burstreq", "cgroup": "/stalltop_throttled", "count": 300}]}
      ],
      "runq_events": [
        {"cpu": 0, "ts_ns": 99, "wait_ns": 15000000, "steal_ns": 0, "pid": 77, "tid": 77, "comm": "cc1",
         "cgroup": "/",
         "ran_instead": {"pid": 78, "comm": "rustc", "cgroup": "/"}}
      ],
      "throttling": []
    }"#;

/// A clean throttle run: 20 requests, 19 of them throttled; 7 throttled stalls.
pub const THROTTLE: &str = r#"{
      "version": 1,
      "host": {"hostname": "vm", "kernel": "6.18.44-fc", "cpus": 2},
      "duration_ns": 7000000000,
      "settings": {"runq_threshold_ns": 10000000, "stall_threshold_ns": 10000000,
                   "syscall_wall_threshold_ns": 10000000, "syscall_oncpu_threshold_ns": 1000000,
                   "syscalls": "exact",
                   "sample_hz": 1000, "attach": "tp_btf"},
      "stalls": [
        {"id": 0, "cpu": 1, "start_ns": 1020000000, "duration_ns": 82000000,
         "kind": "throttled", "waits": 1, "signals": 2, "throttled_cgroup": "/stalltop_throttled",
         "waited": {"pid": 700, "comm": "burstreq", "cgroup": "/stalltop_throttled",
                    "wait_ns": 82000000}, "culprit": null},
        {"id": 1, "cpu": 1, "start_ns": 1120000000, "duration_ns": 82000000,
         "kind": "throttled", "waits": 1, "signals": 2, "throttled_cgroup": "/stalltop_throttled",
         "waited": {"pid": 700, "comm": "burstreq", "cgroup": "/stalltop_throttled",
                    "wait_ns": 82000000}, "culprit": null},
        {"id": 2, "cpu": 1, "start_ns": 1220000000, "duration_ns": 82000000,
         "kind": "throttled", "waits": 1, "signals": 2, "throttled_cgroup": "/stalltop_throttled",
         "waited": {"pid": 700, "comm": "burstreq", "cgroup": "/stalltop_throttled",
                    "wait_ns": 82000000}, "culprit": null},
        {"id": 3, "cpu": 1, "start_ns": 1320000000, "duration_ns": 82000000,
         "kind": "throttled", "waits": 1, "signals": 2, "throttled_cgroup": "/stalltop_throttled",
         "waited": {"pid": 700, "comm": "burstreq", "cgroup": "/stalltop_throttled",
                    "wait_ns": 82000000}, "culprit": null},
        {"id": 4, "cpu": 1, "start_ns": 1420000000, "duration_ns": 82000000,
         "kind": "throttled", "waits": 1, "signals": 2, "throttled_cgroup": "/stalltop_throttled",
         "waited": {"pid": 700, "comm": "burstreq", "cgroup": "/stalltop_throttled",
                    "wait_ns": 82000000}, "culprit": null},
        {"id": 5, "cpu": 1, "start_ns": 1520000000, "duration_ns": 82000000,
         "kind": "throttled", "waits": 1, "signals": 2, "throttled_cgroup": "/stalltop_throttled",
         "waited": {"pid": 700, "comm": "burstreq", "cgroup": "/stalltop_throttled",
                    "wait_ns": 82000000}, "culprit": null},
        {"id": 6, "cpu": 1, "start_ns": 1620000000, "duration_ns": 82000000,
         "kind": "throttled", "waits": 1, "signals": 2, "throttled_cgroup": "/stalltop_throttled",
         "waited": {"pid": 700, "comm": "burstreq", "cgroup": "/stalltop_throttled",
                    "wait_ns": 82000000}, "culprit": null}
      ],
       "takeovers": [], "culprits": [], "syscalls": [], "softirq": [],
      "softirq_stolen": [],
      "lost_events": {"runq": 0, "syscall": 0},
      "runq": [],
      "runq_events": [],
      "throttling": [
        {"cgroup": "/stalltop_throttled", "container": null, "quota_us": 15000,
         "period_us": 100000, "cpus": 2, "nr_periods": 51, "nr_throttled": 19,
         "throttled_ns": 1520000000}
      ]
    }"#;

/// throttle-parent's cgroups: the parent has the quota, the requests wait in its child.
pub const QUOTA_PARENT: &str = "/stalltop_quota_parent";
pub const REQUESTS_CHILD: &str = "/stalltop_quota_parent/stalltop_throttled";

/// THROTTLE as a clean throttle-parent run reports it: the same stalls, of the child's requests
/// and naming the parent's quota, and the parent's throttling row.
pub fn throttle_parent() -> String {
    let mut doc: Value = serde_json::from_str(THROTTLE).unwrap();
    for stall in doc["stalls"].as_array_mut().unwrap() {
        stall["waited"]["cgroup"] = json!(REQUESTS_CHILD);
        stall["throttled_cgroup"] = json!(QUOTA_PARENT);
    }
    doc["throttling"][0]["cgroup"] = json!(QUOTA_PARENT);
    doc.to_string()
}

pub fn report(json: &str) -> Report {
    Report::parse(json).unwrap()
}

/// `json` with the value at JSON pointer `at` replaced.
pub fn with(json: &str, at: &str, value: Value) -> Report {
    let mut doc: Value = serde_json::from_str(json).unwrap();
    *doc.pointer_mut(at).unwrap_or_else(|| panic!("no {at}")) = value;
    serde_json::from_value(doc).unwrap()
}

pub fn assert_fails(result: Result<(), String>, needle: &str) {
    let message = result.expect_err("the check should fail");
    assert!(message.contains(needle), "{needle:?} not in:\n{message}");
}

pub fn stall(cpu: u32, start_ns: u64, duration_ns: u64, kind: &str) -> Value {
    json!({"id": 9, "cpu": cpu, "start_ns": start_ns, "duration_ns": duration_ns,
               "kind": kind, "signals": 1, "waits": 1, "waited": {}, "culprit": null})
}

pub fn culprit(tid: u32, comm: &str, cgroup: &str, syscall: Option<&str>) -> Value {
    json!({"pid": 4000, "tid": tid, "comm": comm, "cgroup": cgroup, "container": cgroup,
               "syscall": syscall, "path": null, "stack": [], "user_stack": [], "samples": 0})
}

/// One call at `start` ms: wall, CPU clock and runnable time in ms, switches, victim lateness.
pub fn timing(start: u64, wall: f64, cpu: f64, runq: f64, switches: u64, late: f64) -> Timing {
    let ns = |ms: f64| (ms * MS as f64) as u64;
    Timing {
        start_ns: start * MS,
        end_ns: start * MS + ns(wall),
        wall_ns: ns(wall),
        oncpu_ns: ns(cpu),
        runq_wait_ns: ns(runq),
        switches,
        victim_late_ns: ns(late),
    }
}

fn call(syscall: &'static str, cgroup: &str, path: Option<&str>, calls: Vec<Timing>) -> Call {
    Call {
        syscall,
        tid: if cgroup == "/stalltop_glog" { 12 } else { 11 },
        cgroup: cgroup.into(),
        path: path.map(str::to_owned),
        calls,
    }
}

fn percentiles(count: usize, p50: u64, p99: u64, max: u64) -> Percentiles {
    Percentiles {
        count,
        p50_ns: p50,
        p99_ns: p99,
        max_ns: max,
    }
}

const SMAPS: &str = "/proc/4000/smaps";
const DIR: &str = "/dev/shm/stalltop-getdents";
pub const FORCE_EMPTY: &str = "/sys/fs/cgroup/memory/stalltop_zombies/memory.force_empty";
const LOG: &str = "/var/tmp/stalltop-slow-syscall/app.log";

/// A clean run's ground truth: every number as the scenario measures it.
pub fn slow_truth() -> slow_syscall::Truth {
    let culprit = "/stalltop_culprit";
    let mut reads = vec![timing(300, 22.0, 17.0, 5.0, 9, 1.5)];
    reads.extend((0..10).map(|i| timing(301 + i, 0.04, 0.04, 0.0, 0, 0.0)));
    let mut fadvise = vec![timing(1900, 50.0, 30.0, 20.0, 25, 4.0)];
    fadvise.extend((0..3).map(|i| timing(2000 + i, 0.02, 0.02, 0.0, 0, 0.0)));
    slow_syscall::Truth {
        comm: "culprit",
        pid: 4000,
        cpu: 1,
        calls: vec![
            call("read", culprit, Some(SMAPS), reads),
            call(
                "munmap",
                culprit,
                None,
                vec![timing(700, 130.0, 100.0, 30.0, 120, 3.7)],
            ),
            call(
                "getdents64",
                culprit,
                Some(DIR),
                vec![
                    timing(1100, 30.0, 20.0, 10.0, 1, 19.5),
                    timing(1131, 0.005, 0.005, 0.0, 0, 0.0),
                ],
            ),
            call(
                "write",
                culprit,
                Some(FORCE_EMPTY),
                vec![timing(1500, 100.0, 60.0, 40.0, 300, 6.0)],
            ),
            call("fadvise64", "/stalltop_glog", Some(LOG), fadvise),
        ],
        fadvise: slow_syscall::Fadvise {
            tid: 12,
            cgroup: "/stalltop_glog".into(),
            path: LOG.into(),
            wall: percentiles(4, 20_000, 50 * MS, 50 * MS),
            in_kernel_at_least: percentiles(4, 20_000, 30 * MS, 30 * MS),
            cached_bytes: 1 << 30,
        },
        zombies: slow_syscall::ZombieCount {
            made: 4000,
            memory_cgroups_before: 59,
            memory_cgroups_with_zombies: 4060,
            memory_cgroups_after: 60,
        },
        victim_comm: "victim",
        victim_late: Vec::new(),
    }
}

fn row(syscall: &str, container: &str, count: u64, max: u64, oncpu: u64, paths: Value) -> Value {
    json!({"syscall": syscall, "container": container, "count": count, "p50_ns": 20000,
               "p99_ns": max, "max_ns": max, "total_ns": max, "oncpu_total_ns": oncpu,
               "top_paths": paths})
}

/// What stalltop reports for that run when it gets everything right.
pub fn slow_report() -> String {
    let culprit = "/stalltop_culprit";
    let mut doc: Value = serde_json::from_str(QUIET).unwrap();
    doc["syscalls"] = json!([
        row(
            "read",
            culprit,
            11,
            17 * MS,
            17_400_000,
            json!([{"path": "/proc/*/smaps", "count": 1, "total_ns": 17 * MS}])
        ),
        row("munmap", culprit, 3, 130 * MS, 100_500_000, json!([])),
        row(
            "getdents64",
            culprit,
            2,
            20 * MS,
            20 * MS,
            json!([{"path": DIR, "count": 1, "total_ns": 20 * MS}])
        ),
        row(
            "write",
            culprit,
            1,
            100 * MS,
            61 * MS,
            json!([{"path": FORCE_EMPTY, "count": 1, "total_ns": 100 * MS}])
        ),
        row(
            "fadvise64",
            "/stalltop_glog",
            4,
            50 * MS,
            30_060_000,
            json!([{"path": LOG, "count": 1, "total_ns": 50 * MS}])
        ),
    ]);
    let mut waited = stall(1, 1_100_300_000, 19 * MS, "runq");
    waited["waited"] = json!({"pid": 4001, "comm": "victim", "cgroup": "/stalltop_victim"});
    waited["culprit"] = culprit_json(11, "getdents64");
    doc["stalls"] = json!([waited]);
    doc.to_string()
}

fn culprit_json(tid: u32, syscall: &str) -> Value {
    culprit(tid, "culprit", "/stalltop_culprit", Some(syscall))
}

const HOG_TID: u32 = 21;

pub fn burst(i: u64, ran_after_us: u64) -> ksoftirqd::Burst {
    let start_ns = 1_000 * MS + i * 200 * MS;
    let end_ns = start_ns + 50 * MS;
    ksoftirqd::Burst {
        start_ns,
        end_ns,
        interrupted_ns: 45 * MS,
        longest_gap_ns: 4 * MS,
        vcpu_stall_ns: 0,
        ksoftirqd: ksoftirqd::Switch::In {
            at_ns: end_ns + ran_after_us * 1000,
            within_ns: 1000,
        },
    }
}

pub fn ksoftirqd_truth() -> ksoftirqd::Truth {
    ksoftirqd::Truth {
        hog_comm: "hog",
        hog_pid: 20,
        hog_tid: HOG_TID,
        hog_cgroup: "/stalltop_hog".into(),
        hog_shares: 262_144,
        bursts: (0..10).map(|i| burst(i, 20)).collect(),
        flood: ksoftirqd::Flood::default(),
        softnet: ksoftirqd::Softnet::default(),
        ksoftirqd_pid: 22,
        ksoftirqd_oncpu_ns: 550 * MS,
        steal_ns: 30 * MS,
        steal_tick_ns: 10 * MS,
    }
}

/// A report naming the hog for every burst's takeover.
pub fn ksoftirqd_report() -> String {
    let truth = ksoftirqd_truth();
    let mut doc: Value = serde_json::from_str(QUIET).unwrap();
    let hog = culprit(HOG_TID, "hog", "/stalltop_hog", None);
    doc["takeovers"] = truth
        .bursts
        .iter()
        .map(|b| {
            json!({"cpu": 1, "ts_ns": b.end_ns + 15_000, "wait_ns": 50 * MS + 30_000,
                       "culprit": hog})
        })
        .collect();
    let mut named = stall(1, truth.bursts[0].start_ns, 50 * MS, "ksoftirqd");
    named["waited"] = json!({"pid": 22, "comm": "ksoftirqd/1", "cgroup": "/"});
    named["culprit"] = hog;
    doc["stalls"] = json!([named]);
    doc["softirq"] = json!([{"cpu": 1, "vector": "NET_RX", "count": 500, "p50_ns": 180000,
            "p99_ns": 980000, "max_ns": 990000, "in_ksoftirqd": 170,
            "run_total_ns": 1_900 * MS, "run_in_ksoftirqd_ns": 600 * MS}]);
    doc["softirq_stolen"] = json!([{"pid": 20, "comm": "hog", "vector": "NET_RX",
            "ns": 455 * MS, "count": 300}]);
    doc.to_string()
}

/// A slow call as stalltop lists it: ended at `end` ms, with wall and on-CPU times in ms.
pub fn listed(
    tid: u32,
    syscall: &str,
    path: Option<&str>,
    end: f64,
    wall: f64,
    oncpu: f64,
) -> Value {
    let ns = |ms: f64| (ms * MS as f64) as u64;
    json!({"ts_ns": ns(end), "tid": tid, "syscall": syscall, "path": path,
           "wall_ns": ns(wall), "oncpu_ns": ns(oncpu)})
}

/// What stalltop reports for `slow_truth`'s run with sampled syscalls when it gets everything
/// right: kernel time by sampler ticks, no percentiles, each long call listed once.
pub fn sampled_slow_report() -> String {
    let mut doc: Value = serde_json::from_str(&slow_report()).unwrap();
    doc["settings"]["syscalls"] = json!("sampled");
    for row in doc["syscalls"].as_array_mut().unwrap() {
        row["p50_ns"] = Value::Null;
        row["p99_ns"] = Value::Null;
    }
    doc["slow_syscalls"] = json!([
        listed(11, "read", Some(SMAPS), 321.5, 21.0, 17.0),
        listed(11, "munmap", None, 829.5, 129.0, 100.0),
        listed(11, "getdents64", Some(DIR), 1129.5, 29.0, 20.0),
        listed(11, "write", Some(FORCE_EMPTY), 1599.5, 99.0, 60.0),
        listed(12, "fadvise64", Some(LOG), 1949.5, 49.0, 30.0),
    ]);
    doc.to_string()
}
