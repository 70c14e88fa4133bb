//! Numbers as the screen shows them: durations, clocks, rates. Pure
//! string work for the view builder; knows nothing of panes.

use crate::model::{WhyCause, WhyRow};
use crate::stream::WaitCause;

/// A duration in the unit that keeps it short: 850us, 12.3ms, 1.25s, 2m05s.
pub fn duration(ns: u64) -> String {
    const US: u64 = 1_000;
    const MS: u64 = 1_000_000;
    const S: u64 = 1_000_000_000;
    match ns {
        0 => "0".into(),
        n if n < US => "<1us".into(),
        n if n < MS => format!("{}us", n / US),
        n if n < 100 * MS && n % MS != 0 => format!("{:.1}ms", n as f64 / MS as f64),
        n if n < S => format!("{}ms", n / MS),
        n if n < 60 * S && n % S != 0 => format!("{:.2}s", n as f64 / S as f64),
        n if n < 60 * S => format!("{}s", n / S),
        n if n < 3600 * S => format!("{}m{:02}s", n / (60 * S), n / S % 60),
        n => format!("{}h{:02}m", n / (3600 * S), n / (60 * S) % 60),
    }
}

/// A value known to lie between `low` and `high` (a histogram bucket):
/// "1.8-2.1ms", "<1us", or one value when both read the same.
pub fn range(low: u64, high: u64) -> String {
    let (lo, hi) = (duration(low), duration(high));
    if hi == "<1us" || lo == hi {
        return hi;
    }
    if lo == "<1us" {
        return format!("≤{hi}");
    }
    for unit in ["us", "ms", "s"] {
        let same = |t: &str| {
            t.strip_suffix(unit)
                .filter(|n| n.chars().all(|c| c.is_ascii_digit() || c == '.'))
                .map(str::to_string)
        };
        if let (Some(l), Some(h)) = (same(&lo), same(&hi)) {
            return format!("{l}-{h}{unit}");
        }
    }
    format!("{lo}-{hi}")
}

/// The UTC time of day of a Unix time, to the millisecond: 12:03:05.123Z.
pub fn utc_clock(unix_ns: u64) -> String {
    let ms = unix_ns / 1_000_000 % 86_400_000;
    let (h, m, s, ms) = (ms / 3_600_000, ms / 60_000 % 60, ms / 1000 % 60, ms % 1000);
    format!("{h:02}:{m:02}:{s:02}.{ms:03}Z")
}

/// Elapsed time as a clock with tenths: 0:05.2, 12:01.0, 1:02:03.
pub fn clock(ns: u64) -> String {
    let tenths = ns / 100_000_000;
    let seconds = tenths / 10;
    let (h, m, s) = (seconds / 3600, seconds / 60 % 60, seconds % 60);
    if h > 0 {
        format!("{h}:{m:02}:{s:02}")
    } else {
        format!("{m}:{s:02}.{}", tenths % 10)
    }
}

/// A time into the session, to the millisecond: +7.040s, +1:02.040.
pub fn offset(ns: u64) -> String {
    let ms = ns / 1_000_000;
    let (s, ms) = (ms / 1000, ms % 1000);
    match s {
        s if s < 60 => format!("+{s}.{ms:03}s"),
        s if s < 3600 => format!("+{}:{:02}.{ms:03}", s / 60, s % 60),
        s => format!("+{}:{:02}:{:02}.{ms:03}", s / 3600, s / 60 % 60, s % 60),
    }
}

/// How long ago, coarse: 0s, 42s, 3m, 2h.
pub fn age(ns: u64) -> String {
    let s = ns / 1_000_000_000;
    match s {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s => format!("{}h", s / 3600),
    }
}

/// A count or rate with a k/M suffix: 950, 12.3k, 4.1M.
pub fn count(value: f64) -> String {
    match value {
        v if v < 1_000.0 => format!("{v:.0}"),
        v if v < 1_000_000.0 => format!("{:.1}k", v / 1e3),
        v => format!("{:.1}M", v / 1e6),
    }
}

/// A window length for titles and the axis: 30s, 2m, 1h.
pub fn span(ns: u64) -> String {
    let s = ns / 1_000_000_000;
    match s {
        s if s >= 3600 && s % 3600 == 0 => format!("{}h", s / 3600),
        s if s >= 120 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

/// A cgroup's wait by cause, largest first: "74% hog (batch.service), 19% short waits ...".
pub fn why(why: &WhyRow) -> String {
    why.causes
        .iter()
        .map(why_cause)
        .collect::<Vec<_>>()
        .join(", ")
}

/// One cause of a cgroup's wait with its share: "74% hog (batch.service)".
pub fn why_cause(c: &WhyCause) -> String {
    format!("{} {}", share(c.percent), cause(c))
}

/// The largest cause of a wait, short, for a table cell: "62% other",
/// "100% quota".
pub fn why_largest(why: &WhyRow) -> String {
    why.largest_cause().map_or("-".into(), |(c, percent)| {
        let name = match c {
            WaitCause::Steal => "steal",
            WaitCause::Throttled => "quota",
            WaitCause::Softirq => "softirq",
            WaitCause::Idle => "idle",
            WaitCause::Kthread => "kthread",
            WaitCause::SameCgroup => "own",
            WaitCause::OtherCgroup => "other",
            WaitCause::ShortWaits => "short",
        };
        format!("{} {name}", share(percent))
    })
}

/// "52%", or "<1%" for a share that rounds to none.
fn share(percent: f64) -> String {
    if percent < 0.5 {
        "<1%".into()
    } else {
        format!("{percent:.0}%")
    }
}

/// How a cause of a wait reads.
fn cause(c: &WhyCause) -> String {
    match (c.cause, &c.comm, &c.container) {
        (WaitCause::OtherCgroup, Some(comm), Some(container)) => format!("{comm} ({container})"),
        (WaitCause::OtherCgroup, _, _) => "other containers".into(),
        (WaitCause::Steal, _, _) => "the hypervisor (steal)".into(),
        (WaitCause::Throttled, _, _) => "its CPU quota".into(),
        (WaitCause::Softirq, _, _) => "softirqs".into(),
        (WaitCause::Idle, _, _) => "an idle CPU (wake-up, migration)".into(),
        (WaitCause::Kthread, _, _) => "kernel threads".into(),
        (WaitCause::SameCgroup, _, _) => "its own tasks".into(),
        (WaitCause::ShortWaits, _, _) => "short waits (under 1 ms, not split)".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_stay_short() {
        assert_eq!(duration(0), "0");
        assert_eq!(duration(300), "<1us");
        assert_eq!(range(300, 999), "<1us");
        assert_eq!(range(1_800_000, 2_100_000), "1.8-2.1ms");
        assert_eq!(range(900_000, 1_100_000), "900us-1.1ms");
        assert_eq!(range(20_000, 24_000), "20-24us");
        assert_eq!(range(500, 1_500), "≤1us");
        assert_eq!(utc_clock(1_700_000_001_234_000_000), "22:13:21.234Z");
        assert_eq!(duration(850_000), "850us");
        assert_eq!(duration(12_340_000), "12.3ms");
        assert_eq!(duration(10_000_000), "10ms");
        assert_eq!(duration(1_000_000_000), "1s");
        assert_eq!(duration(131_000_000), "131ms");
        assert_eq!(duration(1_250_000_000), "1.25s");
        assert_eq!(duration(125_000_000_000), "2m05s");
        assert_eq!(duration(7_260_000_000_000), "2h01m");
    }

    #[test]
    fn clocks_and_counts() {
        assert_eq!(clock(5_230_000_000), "0:05.2");
        assert_eq!(clock(3_723_000_000_000), "1:02:03");
        assert_eq!(age(61_000_000_000), "1m");
        assert_eq!(offset(7_040_000_000), "+7.040s");
        assert_eq!(offset(62_040_000_000), "+1:02.040");
        assert_eq!(count(12_345.0), "12.3k");
        assert_eq!(count(7.0), "7");
        assert_eq!(span(60_000_000_000), "60s");
        assert_eq!(span(300_000_000_000), "5m");
    }
}
