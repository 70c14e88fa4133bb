//! CPU pressure (PSI) over the recording: the growth of the host's and of
//! each cgroup's cumulative `some` and `full` totals from their first
//! reading to their latest, and where PSI saw more waiting in a cgroup
//! than stalltop measured. Pure.

use std::collections::BTreeMap;

use crate::stream::{Pressure, PressureSnapshot};

/// PSI's `some` may exceed stalltop's waits by this share of it, plus
/// PRESSURE_SLACK_NS, before the report calls it a disagreement: the two
/// are read at different moments (PSI once a second, after stalltop's
/// kernel snapshot) and PSI folds its per-CPU times by each CPU's busy
/// time.
pub const PRESSURE_MARGIN_PERCENT: u64 = 10;
pub const PRESSURE_SLACK_NS: u64 = 20_000_000;

#[derive(Default)]
pub struct PressureTracker {
    /// (first, latest) reading.
    host: Option<(Pressure, Pressure)>,
    /// path -> (first, latest) reading.
    cgroups: BTreeMap<String, (Pressure, Pressure)>,
}

/// How much a PSI file's totals grew over the recording, in ns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PressureGrowth {
    pub some_ns: u64,
    pub full_ns: Option<u64>,
}

impl PressureTracker {
    pub fn apply(&mut self, p: &PressureSnapshot) {
        if let Some(now) = p.host {
            update(&mut self.host, now);
        }
        for c in &p.cgroups {
            let mut entry = self.cgroups.get(&c.path).copied();
            update(&mut entry, c.pressure);
            if let Some(entry) = entry {
                self.cgroups.insert(c.path.clone(), entry);
            }
        }
    }

    pub fn host(&self) -> Option<PressureGrowth> {
        self.host.map(growth)
    }

    /// The growth of the cgroup at `path` (None: never read).
    pub fn cgroup(&self, path: &str) -> Option<PressureGrowth> {
        self.cgroups.get(path).copied().map(growth)
    }

    pub fn cgroups(&self) -> impl Iterator<Item = (&str, PressureGrowth)> {
        self.cgroups
            .iter()
            .map(|(path, &readings)| (path.as_str(), growth(readings)))
    }
}

/// A reading after the first; totals that went backwards mean the cgroup
/// was made again: it counts from that reading.
fn update(entry: &mut Option<(Pressure, Pressure)>, now: Pressure) {
    *entry = Some(match *entry {
        Some((_, latest)) if now.some_us < latest.some_us => (now, now),
        Some((first, _)) => (first, now),
        None => (now, now),
    });
}

fn growth((first, latest): (Pressure, Pressure)) -> PressureGrowth {
    PressureGrowth {
        some_ns: latest.some_us.saturating_sub(first.some_us) * 1000,
        full_ns: latest
            .full_us
            .zip(first.full_us)
            .map(|(l, f)| l.saturating_sub(f) * 1000),
    }
}

/// Whether PSI's `some` time of a cgroup says stalltop missed waiting:
/// stalltop sums every wait of the cgroup's tasks (and its descendants',
/// as PSI counts them), so its total is at least PSI's (the time in which
/// any task waited, averaged over the CPUs the cgroup ran on) unless
/// waits went unseen.
pub fn psi_exceeds(psi_some_ns: u64, waited_ns: u64) -> bool {
    psi_some_ns > waited_ns + waited_ns * PRESSURE_MARGIN_PERCENT / 100 + PRESSURE_SLACK_NS
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::CgroupPressure;

    fn snapshot(host_some: u64, cgroup_some: u64) -> PressureSnapshot {
        PressureSnapshot {
            ts_ns: 0,
            host: Some(Pressure {
                some_us: host_some,
                full_us: Some(host_some / 2),
            }),
            cgroups: vec![CgroupPressure {
                path: "/shop".into(),
                pressure: Pressure {
                    some_us: cgroup_some,
                    full_us: None,
                },
            }],
        }
    }

    #[test]
    fn growth_is_from_the_first_reading_and_restarts_when_a_cgroup_is_made_again() {
        let mut t = PressureTracker::default();
        t.apply(&snapshot(1_000, 500));
        t.apply(&snapshot(4_000, 2_500));
        assert_eq!(
            t.host(),
            Some(PressureGrowth {
                some_ns: 3_000_000,
                full_ns: Some(1_500_000)
            })
        );
        assert_eq!(t.cgroup("/shop").unwrap().some_ns, 2_000_000);
        // Re-created: its totals start again; the growth counts from there.
        t.apply(&snapshot(5_000, 100));
        t.apply(&snapshot(6_000, 400));
        assert_eq!(t.cgroup("/shop").unwrap().some_ns, 300_000);
        assert_eq!(t.cgroup("/other"), None);
    }

    #[test]
    fn psi_over_the_waits_by_more_than_the_margin_is_a_disagreement() {
        let ms = 1_000_000;
        assert!(
            !psi_exceeds(500 * ms, 1_000 * ms),
            "sums exceed PSI: normal"
        );
        assert!(!psi_exceeds(1_110 * ms, 1_000 * ms), "within 10% + 20 ms");
        assert!(psi_exceeds(1_130 * ms, 1_000 * ms));
        assert!(psi_exceeds(30 * ms, 0), "PSI saw waits stalltop never did");
    }
}
