//! What each option of `stalltop report` does to a real recording
//! (tests/fixtures/noisy-neighbour.stl: a 1 ms victim waker beside two hogs
//! of another cgroup on CPU 1, recorded with --runq-threshold 2ms; the
//! stall threshold on tests/fixtures/ksoftirqd.stl).

use super::*;
use crate::app::format;
use crate::model::TimeSpec;

const MS: u64 = 1_000_000;

fn noisy(scope: ReportScope) -> Report {
    report_of(&fixture("noisy-neighbour"), scope)
}

#[test]
fn a_higher_runq_threshold_filters_stalls_and_waits_and_says_so() {
    let all = noisy(ReportScope::default());
    assert!(all.runq_events.iter().any(|e| e.wait_ns < 5 * MS));
    let raised = noisy(ReportScope {
        runq_threshold_ns: Some(5 * MS),
        ..ReportScope::default()
    });
    assert!(!raised.runq_events.is_empty());
    assert!(raised.runq_events.iter().all(|e| e.wait_ns >= 5 * MS));
    assert!(raised.stalls.iter().all(|s| s.longest_wait_ns >= 5 * MS));
    assert!(raised.stalls.len() < all.stalls.len());
    let culprit_stalls: u64 = raised.culprits.iter().map(|c| c.count).sum();
    assert_eq!(
        culprit_stalls as usize,
        raised.stalls.iter().filter(|s| s.culprit.is_some()).count(),
        "culprits count the stalls shown"
    );
    let text = text_of(&raised, ListOrder::Worst, Some(15));
    assert!(
        text.contains("a single wait of 5ms+ for a CPU")
            && text.contains("Waits for a CPU of 5ms+"),
        "{text}"
    );
}

#[test]
fn limits_say_what_they_left_out_and_all_leaves_nothing_out() {
    let report = noisy(ReportScope::default());
    let limited = text_of(&report, ListOrder::Worst, Some(5));
    let stall_lines = |text: &str| text.lines().filter(|l| l.contains(" runq ")).count();
    let shown = select(&report, ListOrder::Worst, Some(5));
    let more = report.stalls.len()
        - shown.stalls.rows.len()
        - shown.own_stalls.iter().map(|f| f.count).sum::<usize>();
    assert!(
        limited.contains(&format!(
            "  ... {more} more (--limit N or --all shows them)"
        )),
        "{limited}"
    );
    let everything = text_of(&report, ListOrder::Worst, None);
    assert!(!everything.contains("more (--limit N"), "{everything}");
    assert!(stall_lines(&everything) > stall_lines(&limited));
    // Empty sections say so.
    assert!(
        everything.contains("ksoftirqd takeovers: 0\n  none"),
        "{everything}"
    );
}

#[test]
fn stalls_sort_by_their_longest_single_wait_or_by_time() {
    let report = noisy(ReportScope::default());
    let worst = select(&report, ListOrder::Worst, None);
    let waits: Vec<u64> = worst
        .stalls
        .rows
        .iter()
        .map(|s| s.longest_wait_ns)
        .collect();
    assert!(waits.windows(2).all(|w| w[0] >= w[1]), "{waits:?}");
    let newest = select(&report, ListOrder::Newest, None);
    let ends: Vec<u64> = newest
        .stalls
        .rows
        .iter()
        .map(|s| s.start_ns + s.duration_ns)
        .collect();
    assert!(ends.windows(2).all(|w| w[0] >= w[1]), "{ends:?}");
}

/// --container: the victim's stalls only, each showing the victim's own
/// wait, the culprit the neighbour, and a first section on what hurt it.
#[test]
fn a_container_opens_with_what_hurt_it() {
    let report = noisy(ReportScope {
        container: Some("victim".into()),
        ..ReportScope::default()
    });
    assert!(!report.stalls.is_empty());
    for s in &report.stalls {
        assert_eq!(
            s.waited.cgroup.as_deref(),
            Some("/stalltop_victim"),
            "{s:?}"
        );
        assert!(s.waited.wait_ns.unwrap() <= s.longest_wait_ns);
    }
    assert_eq!(report.culprits[0].container, "/stalltop_noisy");
    assert!(report.runq.iter().all(|r| r.cgroup == "/stalltop_victim"));
    assert!(report
        .runq_events
        .iter()
        .all(|e| e.cgroup == "/stalltop_victim"));
    let text = text_of(&report, ListOrder::Worst, Some(15));
    let first = text
        .lines()
        .position(|l| l.starts_with("What hurt `victim`"))
        .unwrap_or_else(|| panic!("{text}"));
    let stalls = text.lines().position(|l| l.starts_with("Stalls:")).unwrap();
    assert!(first < stalls, "{text}");
    assert!(text.contains("by hog (/stalltop_noisy) x1165"), "{text}");
    insta::assert_snapshot!("victim_text", text);
}

/// --from/--to: stalls and waits that overlap the window, and tables that
/// count only what happened in it.
#[test]
fn a_window_cuts_every_section() {
    let recording = fixture("noisy-neighbour");
    let header = &recording.header;
    let from = TimeSpec::parse("+3s").unwrap().resolve(header);
    let to = TimeSpec::parse("+5s").unwrap().resolve(header);
    let all = report_of(&recording, ReportScope::default());
    let window = report_of(
        &recording,
        ReportScope {
            from_ns: Some(from),
            to_ns: Some(to),
            ..ReportScope::default()
        },
    );
    assert!(!window.stalls.is_empty() && window.stalls.len() < all.stalls.len());
    for s in &window.stalls {
        assert!(
            s.start_ns <= to && s.start_ns + s.duration_ns >= from,
            "{s:?}"
        );
    }
    for e in &window.runq_events {
        assert!(e.ts_ns >= from && e.ts_ns - e.wait_ns <= to);
    }
    let victim = |r: &Report| {
        r.runq
            .iter()
            .find(|row| row.cgroup == "/stalltop_victim")
            .map_or(0, |row| row.count)
    };
    let (whole, part) = (victim(&all), victim(&window));
    assert!(part > 0 && part < whole, "{part} of {whole}");
    assert_eq!(window.scope.from_ns, Some(from));
    let text = text_of(&window, ListOrder::Worst, Some(15));
    assert!(text.contains("Window: +3.000s "), "{text}");
}

/// --stall-threshold: on the ksoftirqd recording, raised to the median longest wait of its
/// softirq, ksoftirqd and irqs-off stalls, it keeps those at or over it (and takeovers too),
/// leaves the waits for a CPU alone, and the header states it.
#[test]
fn a_higher_stall_threshold_filters_the_other_stalls_and_says_so() {
    use crate::model::StallKind;
    let recording = fixture("ksoftirqd");
    let all = report_of(&recording, ReportScope::default());
    let is_cpu_wait = |kind: StallKind| matches!(kind, StallKind::Runq | StallKind::Throttled);
    let mut others: Vec<u64> = all
        .stalls
        .iter()
        .filter(|s| !is_cpu_wait(s.kind))
        .map(|s| s.longest_wait_ns)
        .collect();
    others.sort_unstable();
    assert!(others.len() >= 4, "{others:?}");
    let median = others[others.len() / 2];
    // Whole milliseconds, as the option takes them: over the shortest, at most the median.
    let threshold = (median / MS).max(others[0] / MS + 1) * MS;
    let raised = report_of(
        &recording,
        ReportScope {
            stall_threshold_ns: Some(threshold),
            ..ReportScope::default()
        },
    );
    let kept = |r: &Report| r.stalls.iter().filter(|s| !is_cpu_wait(s.kind)).count();
    assert!(kept(&raised) > 0 && kept(&raised) < kept(&all));
    assert!(raised
        .stalls
        .iter()
        .filter(|s| !is_cpu_wait(s.kind))
        .all(|s| s.longest_wait_ns >= threshold));
    assert!(raised.takeovers.iter().all(|t| t.wait_ns >= threshold));
    let cpu_waits = |r: &Report| r.stalls.iter().filter(|s| is_cpu_wait(s.kind)).count();
    assert_eq!(cpu_waits(&raised), cpu_waits(&all));
    let text = text_of(&raised, ListOrder::Worst, Some(15));
    let stated = format!(
        "{}+ for softirq, ksoftirqd, irqs-off",
        format::duration(threshold)
    );
    assert!(text.contains(&stated), "`{stated}` is missing:\n{text}");
}

/// --pid: a process's waits and stalls only. In the recording the scenario's
/// victim and hogs are threads of one process; a kworker waited once too.
#[test]
fn a_pid_narrows_the_report_to_its_tasks() {
    let all = noisy(ReportScope::default());
    let pid_of = |comm: &str| {
        all.runq_events
            .iter()
            .find(|e| e.comm.starts_with(comm))
            .map(|e| e.pid)
            .unwrap_or_else(|| panic!("{comm} waited"))
    };
    for pid in [pid_of("victim"), pid_of("kworker")] {
        let report = noisy(ReportScope {
            pid: Some(pid),
            ..ReportScope::default()
        });
        let theirs = all.runq_events.iter().filter(|e| e.pid == pid).count();
        assert!(theirs > 0 && theirs < all.runq_events.len());
        assert_eq!(report.runq_events.len(), theirs, "pid {pid}");
        assert!(report.runq_events.iter().all(|e| e.pid == pid));
        assert!(!report.stalls.is_empty());
        assert!(
            report.stalls.iter().all(|s| s.waited.pid == Some(pid)),
            "pid {pid}: {:?}",
            report
                .stalls
                .iter()
                .map(|s| s.waited.pid)
                .collect::<Vec<_>>()
        );
    }
}

/// Records lost or rate-limited: the text says so first, with what it means for the lists.
#[test]
fn lost_and_rate_limited_records_are_a_warning_at_the_top() {
    let mut report = noisy(ReportScope::default());
    report.lost_events.insert("runq".into(), 12);
    report.rate_limited_events.insert("sample".into(), 2_621);
    let text = text_of(&report, ListOrder::Worst, Some(15));
    let lost =
        "WARNING: 12 records lost (runq 12): the lists below miss them and the tables may too";
    let limited =
        "WARNING: 2621 records rate-limited (over --record-rate) (sample 2621): the lists \
                   below miss them; the tables count them";
    let stalls = text.lines().position(|l| l.starts_with("Stalls:"));
    for warning in [lost, limited] {
        let at = text.lines().position(|l| l == warning);
        assert!(
            at.is_some() && at < stalls,
            "`{warning}` is not above the stalls:\n{text}"
        );
    }
}
