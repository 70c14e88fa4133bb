//! The per-CPU stall timeline: one row per CPU, one cell per time bucket
//! of the zoom window, coloured by the kind of the longest stall touching
//! the bucket, its height by how long that stall was, `K` where ksoftirqd
//! took over; the axis and the legend. Pure.

use std::collections::HashMap;

use super::format;
use super::tables::{kind_tone, Rows};
use super::view::{Segment, TimelineRow, TimelineView, Tone};
use crate::model::{Report, StallKind};

/// Width of the "cpu 12" label and of the per-row worst stall.
const LABEL_WIDTH: u16 = 7;
const SUMMARY_WIDTH: u16 = 8;
/// Cell glyphs by stall length relative to the display floor.
const SHORT: char = '▂';
const MEDIUM: char = '▅';
const LONG: char = '█';
const TAKEOVER: char = 'K';
const EMPTY: char = '·';

pub struct TimelineRequest<'a> {
    pub report: &'a Report,
    pub rows: &'a Rows,
    /// The right edge of the window.
    pub now_ns: u64,
    pub window_ns: u64,
    /// Replay: the recording's start; the axis reads offsets from it ("+5s")
    /// instead of times before now ("-5s").
    pub origin_ns: Option<u64>,
    pub inner_width: u16,
    /// CPU rows `first..first + count` of `rows.cpus` are visible.
    pub first: usize,
    pub count: usize,
    pub selected: usize,
    pub focused: bool,
    /// Stalls this long are the shortest shown (for the glyph heights).
    pub floor_ns: u64,
    pub cpus_picked: Option<String>,
}

#[derive(Clone, Copy, Default)]
struct Cell {
    /// Longest stall touching the bucket, and its kind.
    longest_ns: u64,
    kind: Option<StallKind>,
    takeover: bool,
}

pub fn timeline_view(req: &TimelineRequest<'_>) -> TimelineView {
    let buckets = usize::from(req.inner_width.saturating_sub(LABEL_WIDTH + SUMMARY_WIDTH));
    let left_ns = req.now_ns.saturating_sub(req.window_ns);
    let bucket_ns = (req.window_ns / buckets.max(1) as u64).max(1);
    let visible: Vec<u32> = req
        .rows
        .cpus
        .iter()
        .skip(req.first)
        .take(req.count)
        .copied()
        .collect();
    let row_of: HashMap<u32, usize> = visible.iter().enumerate().map(|(i, &c)| (c, i)).collect();
    let mut grid = vec![vec![Cell::default(); buckets]; visible.len()];
    let mut worst = vec![0u64; visible.len()];
    let bucket = |ts: u64| (((ts - left_ns) / bucket_ns) as usize).min(buckets.saturating_sub(1));
    for &i in &req.rows.feed {
        let stall = &req.report.stalls[i];
        let end = stall.start_ns + stall.duration_ns;
        let Some(&row) = row_of.get(&stall.cpu) else {
            continue;
        };
        if end < left_ns || stall.start_ns > req.now_ns || buckets == 0 {
            continue;
        }
        worst[row] = worst[row].max(stall.duration_ns);
        let first = bucket(stall.start_ns.max(left_ns));
        let last = bucket(end.min(req.now_ns));
        for cell in &mut grid[row][first..=last] {
            if stall.duration_ns >= cell.longest_ns {
                cell.longest_ns = stall.duration_ns;
                cell.kind = Some(stall.kind);
            }
        }
    }
    for &i in &req.rows.takeovers {
        let t = &req.report.takeovers[i];
        if let Some(&row) = row_of.get(&t.cpu) {
            if (left_ns..=req.now_ns).contains(&t.ts_ns) && buckets > 0 {
                grid[row][bucket(t.ts_ns)].takeover = true;
            }
        }
    }
    let rows = visible
        .iter()
        .zip(grid)
        .zip(&worst)
        .map(|((cpu, cells), &worst)| TimelineRow {
            label: format!("{:<w$}", format!("cpu {cpu}"), w = usize::from(LABEL_WIDTH)),
            cells: merge_runs(cells.iter().map(|c| glyph(c, req.floor_ns))),
            summary: {
                let w = usize::from(SUMMARY_WIDTH);
                if worst > 0 {
                    Segment::new(format!("{:>w$}", format::duration(worst)), Tone::Strong)
                } else {
                    Segment::new(format!("{:>w$}", "·"), Tone::Dim)
                }
            },
        })
        .collect();
    let span = match req.origin_ns {
        Some(origin) => format!(
            "· {} to {} of the recording ",
            format::offset(left_ns.saturating_sub(origin)),
            format::offset(req.now_ns.saturating_sub(origin))
        ),
        None => format!("· last {} ", format::span(req.window_ns)),
    };
    let mut title = vec![
        Segment::new(" CPU stall timeline ", Tone::Strong),
        Segment::new(span, Tone::Normal),
        Segment::new("· +/- zoom ", Tone::Dim),
    ];
    if let Some(cpus) = &req.cpus_picked {
        title.push(Segment::new(format!("· CPUs {cpus} "), Tone::Warn));
    }
    TimelineView {
        title,
        rows,
        axis: match req.origin_ns {
            Some(origin) => offset_axis(left_ns.saturating_sub(origin), req.window_ns, buckets),
            None => axis(req.window_ns, buckets),
        },
        legend: legend(req.floor_ns),
        selected: (req.selected >= req.first && req.selected < req.first + visible.len())
            .then(|| req.selected - req.first),
        focused: req.focused,
    }
}

fn glyph(cell: &Cell, floor_ns: u64) -> (char, Tone) {
    let Some(kind) = cell.kind else {
        return (EMPTY, Tone::Dim);
    };
    let tone = kind_tone(kind);
    if cell.takeover {
        return (TAKEOVER, tone);
    }
    let floor = floor_ns.max(1);
    let glyph = match cell.longest_ns / floor {
        0 | 1 => SHORT,
        2..=9 => MEDIUM,
        _ => LONG,
    };
    (glyph, tone)
}

/// Runs of one tone become one segment.
fn merge_runs(cells: impl Iterator<Item = (char, Tone)>) -> Vec<Segment> {
    let mut out: Vec<Segment> = Vec::new();
    for (c, tone) in cells {
        match out.last_mut() {
            Some(last) if last.tone == tone => last.text.push(c),
            _ => out.push(Segment::new(c.to_string(), tone)),
        }
    }
    out
}

/// "-60s" at the left, "now" at the right, quarter marks between where
/// they fit.
fn axis(window_ns: u64, buckets: usize) -> String {
    let mut line: Vec<char> = vec![' '; buckets];
    let mut put = |at: usize, label: &str| {
        let chars: Vec<char> = label.chars().collect();
        if at + chars.len() <= line.len() && line[at..at + chars.len()].iter().all(|&c| c == ' ') {
            line[at..at + chars.len()].copy_from_slice(&chars);
        }
    };
    let now = "now";
    put(buckets.saturating_sub(now.len()), now);
    for quarter in 0..4u64 {
        let at = buckets * quarter as usize / 4;
        let label = format!("-{}", format::span(window_ns * (4 - quarter) / 4));
        // Leave a gap before the next label.
        put(at, &format!("{label} "));
    }
    let pad = " ".repeat(usize::from(LABEL_WIDTH));
    format!("{pad}{}", line.into_iter().collect::<String>().trim_end())
}

/// Replay: offsets into the recording at the left, the quarters and the
/// right ("+0s", "+2.5s", ..., "+10s").
fn offset_axis(left_ns: u64, window_ns: u64, buckets: usize) -> String {
    let mut line: Vec<char> = vec![' '; buckets];
    let mut put = |at: usize, label: &str| {
        let chars: Vec<char> = label.chars().collect();
        let at = at.min(line.len().saturating_sub(chars.len()));
        if at + chars.len() <= line.len() && line[at..at + chars.len()].iter().all(|&c| c == ' ') {
            line[at..at + chars.len()].copy_from_slice(&chars);
        }
    };
    let label = |ns: u64| {
        let s = ns as f64 / 1e9;
        if s.fract() == 0.0 {
            format!("+{s:.0}s")
        } else {
            format!("+{s:.1}s")
        }
    };
    put(buckets, &label(left_ns + window_ns));
    for quarter in 0..4u64 {
        let at = buckets * quarter as usize / 4;
        put(
            at,
            &format!("{} ", label(left_ns + window_ns * quarter / 4)),
        );
    }
    let pad = " ".repeat(usize::from(LABEL_WIDTH));
    format!("{pad}{}", line.into_iter().collect::<String>().trim_end())
}

fn legend(floor_ns: u64) -> Vec<Segment> {
    vec![
        Segment::new(" █", Tone::Runq),
        Segment::plain("runq "),
        Segment::new("█", Tone::Ksoftirqd),
        Segment::plain("ksoftirqd "),
        Segment::new("█", Tone::Softirq),
        Segment::plain("softirq "),
        Segment::new("█", Tone::Irqoff),
        Segment::plain("irqs-off "),
        Segment::new("K", Tone::Strong),
        Segment::plain("=takeover "),
        Segment::new(format!("{SHORT}{MEDIUM}{LONG}"), Tone::Strong),
        Segment::plain(format!("=<2×,<10×,≥10× {} ", format::duration(floor_ns))),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_labels_fit_and_end_with_now() {
        let a = axis(60_000_000_000, 60);
        assert!(a.trim_start().starts_with("-60s"), "{a}");
        assert!(a.ends_with("now"), "{a}");
        assert!(a.contains("-30s"), "{a}");
        assert_eq!(axis(60_000_000_000, 2).trim(), "");
    }

    #[test]
    fn a_replay_axis_reads_offsets_into_the_recording() {
        let a = offset_axis(0, 10_000_000_000, 60);
        assert!(a.trim_start().starts_with("+0s"), "{a}");
        assert!(a.contains("+5s") && a.ends_with("+10s"), "{a}");
    }
}
