//! The header bar: host, run time, refresh, rates, lost events, stalltop's
//! own cost and its cost guard, live/paused/replay, thresholds, filters,
//! warnings. Pure.

use super::data::Rates;
use super::format;
use super::view::{Line, Segment, Tone};
use crate::model::Report;
use crate::stream::{GuardState, Header};

/// The run state shown at the right of the first line.
pub enum State {
    Live {
        paused: bool,
    },
    Replay {
        playing: bool,
        /// The cursor: into the recording, and as Unix time.
        at_ns: u64,
        at_unix_ns: u64,
        length_ns: u64,
    },
}

pub struct HeaderRequest<'a> {
    pub header: &'a Header,
    pub report: &'a Report,
    pub rates: &'a Rates,
    pub state: State,
    /// How long stalltop has run (live).
    pub running_ns: u64,
    pub refresh_ns: u64,
    pub display_threshold_ns: u64,
    pub filter: &'a str,
    pub cpus: &'a str,
    pub warnings: &'a [String],
    pub width: u16,
}

pub fn header_lines(req: &HeaderRequest<'_>) -> Vec<Line> {
    let host = &req.header.host;
    let mut first = vec![
        Segment::new("stalltop", Tone::Strong),
        Segment::plain(host.hostname.clone()),
        Segment::plain(format!("kernel {}", host.kernel)),
        Segment::plain(format!("{} CPUs", host.cpus)),
    ];
    first.push(match req.state {
        State::Live { .. } => Segment::plain(format!("up {}", format::clock(req.running_ns))),
        State::Replay {
            at_ns,
            at_unix_ns,
            length_ns,
            ..
        } => Segment::plain(format!(
            "at {} {} of {}",
            format::offset(at_ns),
            format::utc_clock(at_unix_ns),
            format::clock(length_ns)
        )),
    });
    first.push(Segment::plain(format!(
        "refresh {}",
        format::duration(req.refresh_ns)
    )));
    first.push(match req.state {
        State::Live { paused: false } => Segment::new("● LIVE", Tone::Good),
        State::Live { paused: true } => {
            Segment::new("⏸ PAUSED (probes still counting)", Tone::Warn)
        }
        State::Replay { playing: true, .. } => Segment::new("▶ REPLAY", Tone::Good),
        State::Replay { playing: false, .. } => Segment::new("⏸ REPLAY paused", Tone::Warn),
    });

    let rate = |v: Option<f64>| v.map_or("-".to_string(), format::count);
    let mut second = vec![
        Segment::plain(format!("events {}/s", rate(req.rates.events_per_s))),
        Segment::plain(format!("records {}/s", rate(req.rates.records_per_s))),
    ];
    let lost: Vec<String> = req
        .report
        .lost_events
        .iter()
        .filter(|(_, &n)| n > 0)
        .map(|(kind, n)| format!("{kind} {n}"))
        .collect();
    second.push(if lost.is_empty() {
        Segment::new("lost 0", Tone::Good)
    } else {
        Segment::new(format!("LOST {}", lost.join(" ")), Tone::Bad)
    });
    let full: Vec<String> = req
        .report
        .map_full
        .iter()
        .filter(|(_, &n)| n > 0)
        .map(|(map, n)| format!("{map} {n}"))
        .collect();
    if !full.is_empty() {
        second.push(Segment::new(
            format!("MAP FULL {}", full.join(" ")),
            Tone::Bad,
        ));
    }
    let sampled: Vec<String> = req
        .report
        .rate_limited_events
        .iter()
        .filter(|(_, &n)| n > 0)
        .map(|(kind, n)| format!("{kind} {n}"))
        .collect();
    if !sampled.is_empty() {
        // Not lost: counted in the tables, only their records were not sent.
        second.push(Segment::new(
            format!("over record rate: {}", sampled.join(" ")),
            Tone::Warn,
        ));
    }
    second.push(match (req.rates.ns_per_event, req.rates.cpu_percent) {
        (Some(ns), Some(cpu)) => {
            Segment::plain(format!("probe cost {ns:.0}ns/event {cpu:.2}% CPU"))
        }
        (None, Some(cpu)) => Segment::plain(format!("probe cost {cpu:.2}% CPU")),
        _ => Segment::new("probe cost n/a", Tone::Dim),
    });
    if let Some(guard) = &req.rates.guard {
        second.push(budget(guard, req.header.host.cpus));
    }
    let settings = &req.header.settings;
    second.push(Segment::plain(format!(
        "stalls ≥ runq {} softirq {}",
        format::duration(settings.runq_threshold_ns),
        format::duration(settings.stall_threshold_ns)
    )));
    second.push(Segment::plain(format!("syscalls {}", settings.syscalls)));
    if req.display_threshold_ns > 0 {
        second.push(Segment::new(
            format!("showing ≥{}", format::duration(req.display_threshold_ns)),
            Tone::Warn,
        ));
    }
    if !req.filter.is_empty() {
        second.push(Segment::new(format!("filter {}", req.filter), Tone::Warn));
    }
    if !req.cpus.is_empty() {
        second.push(Segment::new(format!("CPUs {}", req.cpus), Tone::Warn));
    }
    first.extend(second);
    let mut lines = pack(first, req.width);
    for warning in req.warnings {
        lines.push(vec![Segment::new(format!("⚠ {warning}"), Tone::Warn)]);
    }
    lines
}

/// The cost guard's budget (`--max-cpu`), and while it has stepped down,
/// its cost against the budget and the steps down.
fn budget(guard: &GuardState, cpus: u32) -> Segment {
    let percent = |cpus_used: f64| cpus_used / f64::from(cpus.max(1)) * 100.0;
    if guard.down.is_empty() {
        return Segment::plain(format!("budget {:.1}%", percent(guard.budget_cpus)));
    }
    let steps: Vec<&str> = guard.down.iter().map(|s| s.down()).collect();
    Segment::new(
        format!(
            "OVER BUDGET {:.1}%/{:.1}%: {}",
            percent(guard.cost_cpus),
            percent(guard.budget_cpus),
            steps.join(", ")
        ),
        Tone::Warn,
    )
}

/// Segments into lines of at most `width` columns, two spaces apart.
fn pack(segments: Vec<Segment>, width: u16) -> Vec<Line> {
    let width = usize::from(width);
    let mut lines: Vec<Line> = vec![Vec::new()];
    let mut used = 0;
    for segment in segments {
        let len = segment.text.chars().count();
        let line = lines.last_mut().expect("never empty");
        if !line.is_empty() && used + 2 + len > width {
            lines.push(vec![segment]);
            used = len;
        } else {
            if !line.is_empty() {
                line.push(Segment::plain("  "));
                used += 2;
            }
            line.push(segment);
            used += len;
        }
    }
    lines
}
