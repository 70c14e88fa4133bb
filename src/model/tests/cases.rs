//! Synthetic entry streams shaped like docs/cases.md cases 3 and 4, through the whole analysis
//! to the report.

use super::*;
use crate::abi::KIND_RUNQ;
use crate::event::testing::{runq_record, task};
use crate::stream::{CgroupThrottle, ThrottleSnapshot};

/// The victim's pod and container by name, sent after the cgroup paths
/// (a live source names a pod once its logs are read).
#[test]
fn kubernetes_names_label_the_victim_everywhere() {
    let mut stream = noisy_neighbour_stream();
    stream.push(Entry::Names(NameTable {
        pods: vec![(
            "0f1e2d3c-aaaa-bbbb-cccc-000000000001".into(),
            "shop/api-7d9f".into(),
        )],
        containers: vec![(
            "4c5f7e9a1b2c3d4e5f60718293a4b5c6d7e8f9012345678901234567890abcd".into(),
            "api".into(),
        )],
        ..NameTable::default()
    }));
    let r = analyse(&stream);
    assert_eq!(r.runq[0].container, "shop/api-7d9f/api");
    assert_eq!(r.runq_events[0].container, "shop/api-7d9f/api");
    assert_eq!(r.runq[0].top_preemptors[0].container, "/noisy");

    // Without the names (a recording made before them): the short ids.
    let r = analyse(&noisy_neighbour_stream());
    assert_eq!(r.runq_events[0].container, "pod:0f1e2d3c/4c5f7e9a1b2c");
}

#[test]
fn noisy_neighbour_names_the_hog_and_the_victims_tail() {
    let r = analyse(&noisy_neighbour_stream());
    assert_eq!(r.duration_ns, 5_000 * MS);
    let victim = &r.runq[0];
    assert!(victim.cgroup.starts_with("/kubepods/burstable/pod0f1e2d3c"));
    assert_eq!(victim.container, "pod:0f1e2d3c/4c5f7e9a1b2c");
    let p50 = victim.p50_ns as f64;
    assert!((p50 - 85_000.0).abs() / 85_000.0 < 0.125, "p50 {p50}");
    assert!(
        victim.p99_ns >= 90 * MS && victim.p99_ns <= 140 * MS,
        "p99 {}",
        victim.p99_ns
    );
    assert_eq!(victim.max_ns, 131 * MS);
    assert_eq!(victim.preempted_by.other_cgroup, 250);
    assert_eq!(victim.top_preemptors[0].comm, "hog");
    assert_eq!(victim.top_preemptors[0].cgroup, "/noisy");
    assert_eq!(victim.top_preemptors[1].cgroup, "/");
    // Why it waited, in one line: 90% the hog of /noisy (the kworker is a
    // kernel thread, its own cause), then its short waits.
    let why = victim.why.as_ref().expect("split by cause");
    let causes: Vec<(WaitCause, Option<&str>, u64)> = why
        .causes
        .iter()
        .map(|c| (c.cause, c.comm.as_deref(), c.ns / MS))
        .collect();
    assert_eq!(
        causes,
        [
            (WaitCause::OtherCgroup, Some("hog"), 900),
            (WaitCause::ShortWaits, None, 71),
            (WaitCause::SameCgroup, None, 20),
            (WaitCause::Kthread, None, 9),
        ]
    );

    assert_eq!(r.runq_events.len(), 2);
    let worst = &r.runq_events[0];
    assert_eq!(
        (worst.cpu, worst.wait_ns, worst.comm.as_str()),
        (1, 131 * MS, "api-worker")
    );
    assert_eq!(worst.ran_instead.comm, "hog");
    assert_eq!(worst.ran_instead.cgroup, "/noisy");
    assert_eq!(r.lost_events["runq"], 2);
    assert_eq!(r.lost_events["undecodable"], 0);
    assert_eq!(r.rate_limited_events["runq"], 40);

    // In short: the victim waited, 90% of it behind the hog of /noisy.
    let Finding::ContainerWaited {
        container,
        waited_ns,
        largest,
        quota,
        ..
    } = &r.findings[0]
    else {
        panic!("{:#?}", r.findings);
    };
    assert_eq!(
        (container.as_str(), *waited_ns),
        ("pod:0f1e2d3c/4c5f7e9a1b2c", 1_000 * MS)
    );
    assert_eq!(
        (
            largest.cause,
            largest.comm.as_deref(),
            largest.container.as_deref()
        ),
        (WaitCause::OtherCgroup, Some("hog"), Some("/noisy"))
    );
    assert_eq!((largest.percent, quota), (90.0, &None));
}

#[test]
fn unresolved_cgroups_are_named_by_id() {
    let mut stream = noisy_neighbour_stream();
    stream.remove(0); // no names
    let r = analyse(&stream);
    assert_eq!(r.runq_events[0].cgroup, format!("cgroup#{VICTIM}"));
}

#[test]
fn garbage_records_are_counted_not_fatal() {
    let mut stream = noisy_neighbour_stream();
    stream.push(Entry::Records(vec![9, 9, 9]));
    let r = analyse(&stream);
    assert_eq!(r.lost_events["undecodable"], 1);
    assert_eq!(r.runq_events.len(), 2);
}

/// Case 3: a cgroup throttled while using well under its quota.
#[test]
fn throttled_under_the_limit_is_visible() {
    let reading = |ts, periods, throttled, throttled_ns, usage_ns| {
        quota_reading(
            "/stalltop_throttled",
            ts,
            (periods, throttled, throttled_ns, usage_ns),
        )
    };
    let r = analyse(&[
        reading(1_000 * MS, 1_000, 100, 10_000 * MS, 50_000 * MS),
        reading(8_500 * MS, 1_060, 128, 11_300 * MS, 50_480 * MS),
    ]);
    let t = &r.throttling[0];
    assert_eq!(
        (t.quota_us, t.period_us, t.cpus.as_deref()),
        (15_000, 100_000, Some("0-1"))
    );
    assert_eq!(
        (t.nr_periods, t.nr_throttled, t.throttled_ns),
        (60, 28, 1_300 * MS)
    );
    assert_eq!(t.throttled_pct, 46.7);
    // 480 ms used of 60 x 15 ms allowed: throttled at 53% of the limit.
    assert_eq!(t.usage_of_quota_pct, Some(53.3));
    assert_eq!(t.container, "/stalltop_throttled");
}

/// A cgroupfs reading at `ts` of `path`, with a 15 ms / 100 ms quota on CPUs 0-1:
/// its periods, throttled periods, throttled time and CPU usage so far.
fn quota_reading(
    path: &str,
    ts: u64,
    (periods, throttled, throttled_ns, usage_ns): (u64, u64, u64, u64),
) -> Entry {
    Entry::Throttle(ThrottleSnapshot {
        ts_ns: ts,
        cgroups: vec![CgroupThrottle {
            path: path.into(),
            quota_us: 15_000,
            period_us: 100_000,
            burst_us: Some(0),
            cpus: Some("0-1".into()),
            nr_periods: periods,
            nr_throttled: throttled,
            throttled_ns,
            usage_ns: Some(usage_ns),
        }],
    })
}

/// Case 3 in short: a container that waited mostly for its own quota, with
/// the quota and how little of it it used.
#[test]
fn a_container_that_waited_for_its_quota_says_so_with_the_quota() {
    let throttle = |ts, periods, throttled, throttled_ns, usage_ns| {
        quota_reading("/noisy", ts, (periods, throttled, throttled_ns, usage_ns))
    };
    let waits = Entry::Kernel(KernelSnapshot {
        ts_ns: 8_000 * MS,
        runq: vec![CgroupRunq {
            cgroup: NOISY,
            count: 400,
            latency: Histogram::from_slots(&[0u32, 0, 0, 0, 400]),
            total_ns: 800 * MS,
            max_ns: 90 * MS,
            preempted_throttled: 30,
            why: Some(WaitCauses {
                throttled_ns: 600 * MS,
                same_cgroup_ns: 150 * MS,
                ..WaitCauses::default()
            }),
            ..Default::default()
        }],
        ..KernelSnapshot::default()
    });
    let r = analyse(&[
        names(),
        throttle(1_000 * MS, 1_000, 100, 10_000 * MS, 50_000 * MS),
        waits,
        throttle(8_500 * MS, 1_060, 28 + 100, 11_300 * MS, 50_480 * MS),
    ]);
    assert_eq!(
        r.findings,
        [Finding::ContainerWaited {
            container: "/noisy".into(),
            waited_ns: 800 * MS,
            waits: 400,
            largest: WhyCause {
                cause: WaitCause::Throttled,
                comm: None,
                container: None,
                ns: 600 * MS,
                percent: 75.0,
            },
            quota: Some(Quota {
                quota_us: 15_000,
                period_us: 100_000,
                throttled_pct: 46.7,
                usage_of_quota_pct: Some(53.3),
            }),
        }]
    );
}

/// A task that waited while its CPU sat idle (forced idle, or a wakeup that did not get the
/// CPU): the probes name the idle task (tid 0) as the holder; the stall says the CPU was idle
/// and blames nobody.
#[test]
fn a_wait_beside_an_idle_cpu_blames_nobody_and_says_so() {
    let idle = runq_record(
        KIND_RUNQ,
        1,
        2_000 * MS,
        40 * MS,
        task(300, "api-worker", VICTIM),
        task(0, "swapper/1", 0),
        None,
        0,
    );
    let report = analyse(&[names(), Entry::Records(idle)]);
    let [stall] = report.stalls.as_slice() else {
        panic!("{:#?}", report.stalls);
    };
    assert!(stall.culprit.is_none(), "{stall:?}");
    assert!(stall.waited.cpu_idle, "{stall:?}");
    let json = serde_json::to_value(stall).unwrap();
    assert_eq!(json["waited"]["cpu_idle"], true);
    // A wait some task held is not marked.
    let held = runq_record(
        KIND_RUNQ,
        1,
        2_000 * MS,
        40 * MS,
        task(300, "api-worker", VICTIM),
        task(400, "hog", NOISY),
        None,
        0,
    );
    let report = analyse(&[names(), Entry::Records(held)]);
    assert!(!report.stalls[0].waited.cpu_idle);
    let json = serde_json::to_value(&report.stalls[0]).unwrap();
    assert_eq!(json["waited"]["cpu_idle"], serde_json::Value::Bool(false));
}

/// A PSI reading of the host and of `cgroups` (path, `some` in us).
fn psi(ts_ns: u64, host_us: u64, cgroups: &[(&str, u64)]) -> Entry {
    use crate::stream::{CgroupPressure, Pressure, PressureSnapshot};
    Entry::Pressure(PressureSnapshot {
        ts_ns,
        host: Some(Pressure {
            some_us: host_us,
            full_us: Some(0),
        }),
        cgroups: cgroups
            .iter()
            .map(|&(path, some_us)| CgroupPressure {
                path: path.into(),
                pressure: Pressure {
                    some_us,
                    full_us: None,
                },
            })
            .collect(),
    })
}

/// PSI beside the waits: the victim's `some` time is under its summed
/// waits (1 s), as it must be; /noisy's is far over its waits (none
/// summed in this stream): the report says PSI saw waiting stalltop did
/// not.
#[test]
fn psi_stands_beside_the_waits_and_a_disagreement_is_named() {
    let victim_path = match &names() {
        Entry::Names(n) => n.cgroups[1].1.clone(),
        _ => unreachable!(),
    };
    let mut stream = noisy_neighbour_stream();
    stream.push(psi(
        2_000 * MS,
        10_000,
        &[(&victim_path, 1_000), ("/noisy", 0)],
    ));
    stream.push(psi(
        6_000 * MS,
        910_000,
        &[(&victim_path, 601_000), ("/noisy", 400_000)],
    ));
    let r = analyse(&stream);
    let victim = r.runq.iter().find(|row| row.cgroup == victim_path).unwrap();
    assert_eq!(victim.pressure_some_ns, Some(600 * MS));
    assert_eq!(r.pressure.host_some_ns, Some(900 * MS));
    assert_eq!(r.pressure.host_full_ns, Some(0));
    assert_eq!(r.pressure.disagreements.len(), 1, "{:?}", r.pressure);
    let d = &r.pressure.disagreements[0];
    assert_eq!((d.cgroup.as_str(), d.psi_some_ns), ("/noisy", 400 * MS));
    assert_eq!(d.waited_ns, 0);
}

/// `report --from/--to`: PSI grows from the last reading at or before the
/// window's start to the last inside it; readings after it are left out,
/// and `--container` keeps only its cgroups' disagreements.
#[test]
fn psi_is_cut_to_the_report_window() {
    let readings = [
        psi(1_000 * MS, 1_000, &[("/noisy", 1_000), ("/other", 0)]),
        psi(2_000 * MS, 5_000, &[("/noisy", 2_000), ("/other", 0)]),
        psi(
            3_000 * MS,
            305_000,
            &[("/noisy", 202_000), ("/other", 500_000)],
        ),
        psi(
            4_000 * MS,
            905_000,
            &[("/noisy", 902_000), ("/other", 900_000)],
        ),
    ];
    let scope = ReportScope {
        from_ns: Some(2_000 * MS),
        to_ns: Some(3_500 * MS),
        ..ReportScope::default()
    };
    let mut a = Analysis::scoped(header(), scope.clone());
    for e in [names()].iter().chain(&readings) {
        a.apply(e);
    }
    let r = a.report();
    assert_eq!(r.pressure.host_some_ns, Some(300 * MS));
    let growth: Vec<_> = r
        .pressure
        .disagreements
        .iter()
        .map(|d| (d.cgroup.as_str(), d.psi_some_ns))
        .collect();
    assert_eq!(growth, [("/noisy", 200 * MS), ("/other", 500 * MS)]);
    let mut a = Analysis::scoped(
        header(),
        ReportScope {
            container: Some("noisy".into()),
            ..scope
        },
    );
    for e in [names()].iter().chain(&readings) {
        a.apply(e);
    }
    let r = a.report();
    assert_eq!(r.pressure.disagreements.len(), 1);
    assert_eq!(r.pressure.disagreements[0].cgroup, "/noisy");
}

/// `report --pid`: a daemon's unit cgroup holds a container's cgroup, whose
/// waits the pid's scope cuts from the rows; PSI of the unit counts them
/// (its whole subtree), and so does the comparison: no disagreement.
#[test]
fn psi_of_a_cgroup_is_weighed_against_its_subtree_before_the_scope_cuts_rows() {
    const UNIT: u64 = 70;
    const NESTED: u64 = 71;
    let unit = "/system.slice/containerd.service";
    let nested = format!("{unit}/docker-{}.scope", "ab".repeat(32));
    let row = |cgroup, total_ns| CgroupRunq {
        cgroup,
        count: 10,
        latency: Histogram::from_slots(&[0u32, 0, 0, 0, 10]),
        total_ns,
        ..Default::default()
    };
    let stream = [
        Entry::Names(NameTable {
            cgroups: vec![(UNIT, unit.into()), (NESTED, nested.clone())],
            ..NameTable::default()
        }),
        Entry::Records(runq_record(
            KIND_RUNQ,
            1,
            2_000 * MS,
            20 * MS,
            task(500, "containerd", UNIT),
            task(400, "hog", NOISY),
            None,
            0,
        )),
        psi(1_000 * MS, 0, &[(unit, 0)]),
        Entry::Kernel(KernelSnapshot {
            ts_ns: 6_000 * MS,
            runq: vec![row(UNIT, 20 * MS), row(NESTED, 500 * MS)],
            ..KernelSnapshot::default()
        }),
        psi(6_000 * MS, 600_000, &[(unit, 515_000)]),
    ];
    let mut a = Analysis::scoped(
        header(),
        ReportScope {
            pid: Some(500),
            ..ReportScope::default()
        },
    );
    for e in &stream {
        a.apply(e);
    }
    let r = a.report();
    let rows: Vec<&str> = r.runq.iter().map(|row| row.cgroup.as_str()).collect();
    assert_eq!(
        rows,
        [unit],
        "the nested container is out of the pid's scope"
    );
    assert!(
        r.pressure.disagreements.is_empty(),
        "{:?}",
        r.pressure.disagreements
    );
}
