//! What a report is cut to: a window of time and the tasks whose waits it
//! is about. One place for `report --from/--to/--container/--pid`, replay's
//! go-to-time and every section (the why too) that narrows by them. Pure:
//! times as typed are resolved against a recording's header.

use std::time::{Duration, UNIX_EPOCH};

use super::ScopeRow;
use crate::model::StallKind;
use crate::stream::Header;

const DAY_NS: u64 = 86_400_000_000_000;

/// A time as a user types it: an offset into the recording (`+90s`,
/// `+1m30s`), a UTC time of day (`12:03:05`, `12:03:05.250`) on the
/// recording's day, or a full UTC time (`2026-11-26T12:03:05Z`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeSpec {
    Offset(u64),
    TimeOfDay(u64),
    Unix(u64),
}

impl TimeSpec {
    pub fn parse(text: &str) -> Result<TimeSpec, String> {
        let text = text.trim();
        if let Some(offset) = text.strip_prefix('+') {
            return humantime::parse_duration(offset)
                .map(|d| TimeSpec::Offset(d.as_nanos() as u64))
                .map_err(|e| format!("`{text}`: {e} (an offset takes a unit: +90s, +1m30s)"));
        }
        if text.contains('T') || text.contains(' ') {
            let at = humantime::parse_rfc3339_weak(text.trim_end_matches('Z'))
                .map_err(|e| format!("`{text}`: {e} (e.g. 2026-11-26T12:03:05Z)"))?;
            let ns = at
                .duration_since(UNIX_EPOCH)
                .map_err(|_| format!("`{text}` is before 1970"))?;
            return Ok(TimeSpec::Unix(ns.as_nanos() as u64));
        }
        time_of_day(text).map(TimeSpec::TimeOfDay).ok_or_else(|| {
            format!(
                "`{text}` is not a time: give an offset (+90s), a UTC time of day (12:03:05) \
                 or a UTC date and time (2026-11-26T12:03:05Z)"
            )
        })
    }

    /// The CLOCK_MONOTONIC time it names in the recording `header` starts.
    /// A time of day is taken on the recording's first day, or the next
    /// one when it would fall more than 12 hours before the start.
    pub fn resolve(self, header: &Header) -> u64 {
        let start_unix = unix_ns(header, header.start_ns);
        let unix = match self {
            TimeSpec::Offset(ns) => return header.start_ns.saturating_add(ns),
            TimeSpec::Unix(ns) => ns,
            TimeSpec::TimeOfDay(ns) => {
                let day = start_unix - start_unix % DAY_NS;
                let at = day + ns;
                if at + DAY_NS / 2 < start_unix {
                    at + DAY_NS
                } else {
                    at
                }
            }
        };
        monotonic_ns(header, unix)
    }
}

/// "12:03", "12:03:05", "12:03:05.25": ns since midnight.
fn time_of_day(text: &str) -> Option<u64> {
    let mut parts = text.split(':');
    let hours: u64 = parts.next()?.parse().ok()?;
    let minutes: u64 = parts.next()?.parse().ok()?;
    let seconds: f64 = parts.next().map_or(Some(0.0), |s| s.parse().ok())?;
    if parts.next().is_some() || hours > 23 || minutes > 59 || !(0.0..60.0).contains(&seconds) {
        return None;
    }
    Some(((hours * 3600 + minutes * 60) as f64 * 1e9 + seconds * 1e9).round() as u64)
}

/// Unix time (ns) of a CLOCK_MONOTONIC time of the recording.
pub fn unix_ns(header: &Header, monotonic_ns: u64) -> u64 {
    (monotonic_ns as i128 + header.wall_clock_offset_ns as i128).max(0) as u64
}

/// The CLOCK_MONOTONIC time of a Unix time, in the recording's clocks.
pub fn monotonic_ns(header: &Header, unix_ns: u64) -> u64 {
    (unix_ns as i128 - header.wall_clock_offset_ns as i128).max(0) as u64
}

/// "2026-11-26T12:03:05.123Z".
pub fn utc(unix_ns: u64) -> String {
    humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_nanos(unix_ns)).to_string()
}

/// The window and the tasks a report is about. The default is everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReportScope {
    /// CLOCK_MONOTONIC; None: from the start, to the end.
    pub from_ns: Option<u64>,
    pub to_ns: Option<u64>,
    /// A container label or cgroup path (a case-insensitive part of one).
    pub container: Option<String>,
    pub pid: Option<u32>,
    /// Display thresholds above the recording's: waits for a CPU (runq and
    /// throttled stalls, `runq_events`) and the other stalls (softirq,
    /// ksoftirqd, irqs-off; `takeovers`), by their longest single wait.
    pub runq_threshold_ns: Option<u64>,
    pub stall_threshold_ns: Option<u64>,
}

impl ReportScope {
    /// Narrowed to some tasks (not only a window)?
    pub fn has_victim(&self) -> bool {
        self.container.is_some() || self.pid.is_some()
    }

    /// Does `[start_ns, end_ns]` overlap the window?
    pub fn overlaps(&self, start_ns: u64, end_ns: u64) -> bool {
        self.from_ns.is_none_or(|from| end_ns >= from) && self.to_ns.is_none_or(|to| start_ns <= to)
    }

    /// Does a stall whose longest single wait is `longest_wait_ns` pass the
    /// display thresholds?
    pub fn passes(&self, kind: StallKind, longest_wait_ns: u64) -> bool {
        let threshold = match kind {
            StallKind::Runq | StallKind::Throttled => self.runq_threshold_ns,
            StallKind::Ksoftirqd | StallKind::Softirq | StallKind::Irqoff => {
                self.stall_threshold_ns
            }
        };
        threshold.is_none_or(|t| longest_wait_ns >= t)
    }

    /// Is a time inside the window?
    pub fn contains(&self, ns: u64) -> bool {
        self.overlaps(ns, ns)
    }

    /// A kernel snapshot at `ts_ns` is the window's start when no later one
    /// comes before `from`.
    pub fn before_window(&self, ts_ns: u64) -> bool {
        self.from_ns.is_some_and(|from| ts_ns <= from)
    }

    /// Past the window's end: snapshots taken then are left out.
    pub fn after_window(&self, ts_ns: u64) -> bool {
        self.to_ns.is_some_and(|to| ts_ns > to)
    }

    /// Is a task of this process and cgroup one the report is about?
    pub fn matches_task(&self, pid: u32, cgroup: &str, container: &str) -> bool {
        self.pid.is_none_or(|p| p == pid) && self.matches_cgroup(cgroup, container)
    }

    /// Is a cgroup (with its container label) one the report is about?
    /// Without a container, every one is.
    pub fn matches_cgroup(&self, cgroup: &str, container: &str) -> bool {
        self.container.as_deref().is_none_or(|wanted| {
            let wanted = wanted.to_lowercase();
            cgroup.to_lowercase().contains(&wanted) || container.to_lowercase().contains(&wanted)
        })
    }

    pub fn row(&self, header: &Header) -> ScopeRow {
        ScopeRow {
            from_ns: self.from_ns,
            from_unix_ns: self.from_ns.map(|ns| unix_ns(header, ns)),
            to_ns: self.to_ns,
            to_unix_ns: self.to_ns.map(|ns| unix_ns(header, ns)),
            container: self.container.clone(),
            pid: self.pid,
            runq_threshold_ns: self.runq_threshold_ns,
            stall_threshold_ns: self.stall_threshold_ns,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_offsets_times_of_day_or_dates() {
        let mut h = crate::model::tests::header();
        h.wall_clock_offset_ns = 1_700_000_000_000_000_000;
        let start_unix = unix_ns(&h, h.start_ns);
        assert_eq!(utc(start_unix), "2023-11-14T22:13:21.000Z");
        assert_eq!(
            TimeSpec::parse("+1m30s").unwrap().resolve(&h),
            h.start_ns + 90_000_000_000
        );
        let at = TimeSpec::parse("22:34:00").unwrap().resolve(&h);
        assert_eq!(utc(unix_ns(&h, at)), "2023-11-14T22:34:00.000Z");
        assert_eq!(at, h.start_ns + (20 * 60 + 39) * 1_000_000_000);
        // Past midnight, a time of day early in the morning is the next day's.
        let next = TimeSpec::parse("00:10").unwrap().resolve(&h);
        assert_eq!(utc(unix_ns(&h, next)), "2023-11-15T00:10:00.000Z");
        let full = TimeSpec::parse("2023-11-14T22:35:00.5Z")
            .unwrap()
            .resolve(&h);
        assert_eq!(utc(unix_ns(&h, full)), "2023-11-14T22:35:00.500Z");
        for bad in ["12", "25:00", "+10", "yesterday", "12:61"] {
            assert!(TimeSpec::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_window_keeps_what_overlaps_it() {
        let scope = ReportScope {
            from_ns: Some(100),
            to_ns: Some(200),
            ..ReportScope::default()
        };
        assert!(scope.overlaps(50, 100) && scope.overlaps(150, 300));
        assert!(!scope.overlaps(10, 99) && !scope.overlaps(201, 300));
        assert!(scope.before_window(100) && !scope.before_window(101));
        assert!(scope.after_window(201) && !scope.after_window(200));
    }

    #[test]
    fn a_container_matches_its_path_or_label() {
        let scope = ReportScope {
            container: Some("Victim".into()),
            ..ReportScope::default()
        };
        assert!(scope.matches_cgroup("/stalltop_victim", "/stalltop_victim"));
        assert!(!scope.matches_cgroup("/stalltop_noisy", "/stalltop_noisy"));
        let pid = ReportScope {
            pid: Some(7),
            ..ReportScope::default()
        };
        assert!(pid.matches_task(7, "/a", "a") && !pid.matches_task(8, "/a", "a"));
        assert!(pid.matches_cgroup("/a", "a"));
    }
}
