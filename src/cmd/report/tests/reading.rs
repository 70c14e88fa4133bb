//! What the lines of the text say, read as a user reads them: a merged
//! stall's span beside its waiter's own longest wait, times on every line,
//! numbers as measured, slow calls with their callers.

use super::*;

#[test]
fn a_merged_stall_line_gives_the_span_and_the_waiters_own_wait() {
    let report = report_of(&fixture("noisy-neighbour"), ReportScope::default());
    let merged = report
        .stalls
        .iter()
        .filter(|s| s.signals > 10)
        .max_by_key(|s| s.duration_ns)
        .expect("a merged stall");
    let own = merged.waited.wait_ns.unwrap();
    // The span is many waits long; no task waited anything like it.
    assert!(merged.duration_ns > 5 * merged.longest_wait_ns);
    assert!(own <= merged.longest_wait_ns);
    assert_eq!(merged.wait_ids.len(), merged.waits as usize);
    // Every wait the stall names points back at it.
    for id in &merged.wait_ids {
        let event = report
            .runq_events
            .iter()
            .find(|e| e.id == *id)
            .expect("its wait");
        assert_eq!(event.stall_id, Some(merged.id));
        assert!(event.wait_ns <= merged.longest_wait_ns);
    }
    let text = text_of(&report, ListOrder::Worst, None);
    let line = text
        .lines()
        .find(|l| l.contains(&format!("#{} cpu", merged.id)))
        .unwrap_or_else(|| panic!("no line for #{}:\n{text}", merged.id));
    let span = crate::app::format::duration(merged.duration_ns);
    let own_text = crate::app::format::duration(own);
    assert!(
        line.contains(&format!("{span} span ("))
            && line.contains(&format!(
                "waited {own_text} x{}",
                merged.waited.waits.unwrap()
            )),
        "{line}"
    );
    // A culprit's worst is a single wait, never a span.
    let hog = &report.culprits[0];
    assert!(
        hog.worst_ns
            <= report
                .stalls
                .iter()
                .map(|s| s.longest_wait_ns)
                .max()
                .unwrap()
    );
    assert!(hog.worst_ns < merged.duration_ns);
}

#[test]
fn every_event_line_carries_its_offset_and_utc_time() {
    let report = report_of(&fixture("noisy-neighbour"), ReportScope::default());
    let text = text_of(&report, ListOrder::Worst, None);
    let utc = regex_free_utc;
    // Stall and wait lines (the softirq table's rows are per CPU, not events).
    for line in text.lines().filter(|l| {
        let l = l.trim_start();
        l.starts_with('#') || (l.starts_with("cpu ") && l.contains(" waited"))
    }) {
        assert!(line.contains(" +") && utc(line), "no time on: {line}");
    }
    assert!(
        text.contains("Recorded from 2026-11-22T01:28:38.985Z"),
        "{text}"
    );
}

/// "hh:mm:ss.mmmZ" somewhere in the line.
fn regex_free_utc(line: &str) -> bool {
    line.split_whitespace().any(|w| {
        let b = w.as_bytes();
        b.len() == 13 && b[2] == b':' && b[5] == b':' && b[8] == b'.' && b[12] == b'Z'
    })
}

#[test]
fn numbers_read_as_measured() {
    let report = report_of(&fixture("noisy-neighbour"), ReportScope::default());
    let text = text_of(&report, ListOrder::Worst, None);
    // Sub-microsecond percentiles read <1us, never 0.00ms.
    assert!(text.contains("<1us") && !text.contains("0.00ms"), "{text}");
    // Percentiles are bucket ranges, tails counts over the threshold.
    let victim = text
        .lines()
        .find(|l| l.trim_start().starts_with("/stalltop_victim") && l.contains("waits p50"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        victim.contains("p99.9") && victim.contains("2ms+ 840"),
        "{victim}"
    );
    let row = report
        .runq
        .iter()
        .find(|r| r.cgroup == "/stalltop_victim")
        .unwrap();
    let p99 = row.distribution.p99.unwrap();
    assert!(p99.low_ns <= row.p99_ns && row.p99_ns <= p99.high_ns && p99.high_ns <= row.max_ns);
}

#[test]
fn slow_calls_name_their_caller_and_file() {
    let report = report_of(&fixture("noisy-neighbour"), ReportScope::default());
    let text = text_of(&report, ListOrder::Worst, None);
    let calls: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("Slow calls:"))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect();
    assert_eq!(
        calls
            .iter()
            .filter(|l| !l.trim_start().starts_with("at "))
            .count(),
        report.slow_syscalls.len()
    );
    assert!(
        calls.iter().any(|l| l.contains("write")
            && l.contains("victim[23974/23978] (/stalltop_victim)")
            && l.contains("/sys/fs/cgroup/cpu/stalltop_victim/tasks")
            && l.contains("wall 14.6ms, on-CPU 99us")),
        "{calls:#?}"
    );
}

/// A flight recording names the stall that made `serve` write it.
#[test]
fn a_flight_recording_names_its_trigger() {
    let mut recording = fixture("noisy");
    let plain = report_of(&recording, ReportScope::default());
    assert!(plain.trigger.is_none());
    let worst = plain
        .stalls
        .iter()
        .max_by_key(|s| s.duration_ns)
        .expect("a stall");
    recording.header.trigger = Some(crate::stream::FlightTrigger {
        start_ns: worst.start_ns,
        end_ns: worst.start_ns + worst.duration_ns,
    });
    let report = report_of(&recording, ReportScope::default());
    let trigger = report.trigger.as_ref().expect("the trigger");
    assert_eq!(trigger.stall_id, Some(worst.id));
    assert_eq!(report.unix_ns(trigger.start_ns), trigger.start_unix_ns);
    let text = text_of(&report, ListOrder::Worst, Some(5));
    let line = format!(
        "Flight recording triggered by stall #{} at {}, {} long",
        worst.id,
        text::at(&report, worst.start_ns),
        crate::app::format::duration(worst.duration_ns)
    );
    assert!(text.contains(&line), "`{line}` missing:\n{text}");
    assert_matches_schema(&json(&report), "a flight recording's report");
}
