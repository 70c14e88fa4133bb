//! The cost guard (`--max-cpu`): from the CPU time stalltop spends, read
//! at every snapshot (its process, plus its programs' run time, each
//! program timing one invocation in 64 itself), it decides when to take a
//! `Step` down and back up. Down: over the budget for `OVER_NS`, one step
//! at a time, each measured on a window of its own before the next. Up,
//! the latest step first: when, for `ROOM_NS`, the cost plus what the step
//! saved (scaled by how much the load fell since) fits in `ROOM_SHARE` of
//! the budget; or, failing that estimate, after a longer probe (`PROBE_NS`,
//! doubled each time the step had to go down again at once) if the cost
//! itself fits. Pure: the live source measures and applies; time is the
//! caller's.

use std::collections::{BTreeMap, VecDeque};

use crate::modes::Step;
use crate::stream::GuardState;

/// How long the cost must stay over the budget before a step down, and
/// how long after a step before the next decision (its effect is then
/// measured on a window of its own).
pub const OVER_NS: u64 = 5_000_000_000;
/// How long there must be room before a step comes back up.
pub const ROOM_NS: u64 = 30_000_000_000;
/// A step comes back up only if the cost with it would stay under this
/// share of the budget: a little room keeps it from going down at once.
const ROOM_SHARE: f64 = 0.8;
/// How long a step stays down, at the least, when the estimate of what it
/// would cost says no (a saving measured under a load that has ended since
/// overstates it): then it comes back up if the cost itself leaves room,
/// and goes down again within `OVER_NS` if it was wrong.
pub const PROBE_NS: u64 = 300_000_000_000;
const PROBE_MAX_NS: u64 = 3_600_000_000_000;

/// A change of detail the guard asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    Down(Step),
    Up(Step),
}

impl Change {
    pub fn step(self) -> Step {
        match self {
            Change::Down(step) | Change::Up(step) => step,
        }
    }
}

/// A step taken down, and what it was found to save.
#[derive(Clone, Copy, Debug)]
struct Down {
    step: Step,
    /// The cost (CPUs) over `OVER_NS` before it.
    before: Option<f64>,
    /// What it saved and the cost right after it, once measured.
    saved: Option<(f64, f64)>,
}

pub struct CostGuard {
    budget_cpus: f64,
    /// The steps this session can take, in the order they go down.
    steps: Vec<Step>,
    /// The steps down, the latest last.
    down: Vec<Down>,
    /// (time, CPU time spent so far) at each observation, `ROOM_NS` back.
    spent: VecDeque<(u64, u64)>,
    last_change_ns: u64,
    /// When each step last came back up, and its probe window now.
    up_at: BTreeMap<Step, u64>,
    probe_ns: BTreeMap<Step, u64>,
}

impl CostGuard {
    /// A guard of `budget_cpus` (a share of the node times its CPUs) over a
    /// session that can take `steps`.
    pub fn new(budget_cpus: f64, steps: Vec<Step>, now_ns: u64) -> CostGuard {
        CostGuard {
            budget_cpus,
            steps,
            down: Vec::new(),
            spent: VecDeque::new(),
            last_change_ns: now_ns,
            up_at: BTreeMap::new(),
            probe_ns: BTreeMap::new(),
        }
    }

    /// stalltop has spent `spent_ns` of CPU time in all by `now_ns`: the
    /// change to make now, if any. The caller makes it, or tells the guard
    /// it could not (`refused`).
    pub fn observe(&mut self, now_ns: u64, spent_ns: u64) -> Option<Change> {
        self.spent.push_back((now_ns, spent_ns));
        while self
            .spent
            .front()
            .is_some_and(|&(t, _)| now_ns.saturating_sub(t) > ROOM_NS)
        {
            self.spent.pop_front();
        }
        let since_change = now_ns.saturating_sub(self.last_change_ns);
        let settled = since_change >= OVER_NS;
        let recent = self.cost(OVER_NS);
        if settled {
            if let Some(latest) = self.down.last_mut() {
                if let (Some(before), None, Some(after)) = (latest.before, latest.saved, recent) {
                    latest.saved = Some(((before - after).max(0.0), after));
                }
            }
            for (step, up) in &self.up_at {
                // Up for a while without going down again: its probe resets.
                let stayed_up = !self.down.iter().any(|d| d.step == *step);
                if stayed_up && now_ns.saturating_sub(*up) >= ROOM_NS {
                    self.probe_ns.remove(step);
                }
            }
        }
        if settled && recent.is_some_and(|c| c > self.budget_cpus) {
            return self.step_down(now_ns, recent);
        }
        let latest = *self.down.last()?;
        let cost = self.cost(ROOM_NS)?;
        let room = ROOM_SHARE * self.budget_cpus;
        let estimate_fits = latest.saved.is_some_and(|(saved, after)| {
            let load = if after > 0.0 {
                (cost / after).min(1.0)
            } else {
                1.0
            };
            cost + saved * load <= room
        });
        let probe = self.probe_ns.get(&latest.step).copied().unwrap_or(PROBE_NS);
        let up =
            (since_change >= ROOM_NS && estimate_fits) || (since_change >= probe && cost <= room);
        if !up {
            return None;
        }
        self.down.pop();
        self.last_change_ns = now_ns;
        self.up_at.insert(latest.step, now_ns);
        Some(Change::Up(latest.step))
    }

    fn step_down(&mut self, now_ns: u64, cost: Option<f64>) -> Option<Change> {
        let step = self
            .steps
            .iter()
            .copied()
            .find(|s| !self.down.iter().any(|d| d.step == *s))?;
        if self
            .up_at
            .get(&step)
            .is_some_and(|&up| now_ns.saturating_sub(up) < 2 * OVER_NS)
        {
            // Back up too soon: wait twice as long before the next try.
            let probe = self.probe_ns.entry(step).or_insert(PROBE_NS);
            *probe = (*probe * 2).min(PROBE_MAX_NS);
        }
        self.down.push(Down {
            step,
            before: cost,
            saved: None,
        });
        self.last_change_ns = now_ns;
        Some(Change::Down(step))
    }

    /// A change `observe` asked for could not be made: the guard takes it
    /// back, and never asks for that step again.
    pub fn refused(&mut self, change: Change) {
        let step = change.step();
        self.down.retain(|d| d.step != step);
        self.steps.retain(|s| *s != step);
    }

    /// What a snapshot says of the guard.
    pub fn state(&self) -> GuardState {
        GuardState {
            budget_cpus: self.budget_cpus,
            cost_cpus: self.cost(OVER_NS).unwrap_or(0.0),
            steps: self.steps.clone(),
            down: self.down.iter().map(|d| d.step).collect(),
        }
    }

    /// CPUs spent on average over the last `window_ns` (from the oldest
    /// observation inside it), once observations span half of it.
    fn cost(&self, window_ns: u64) -> Option<f64> {
        let &(now, spent_now) = self.spent.back()?;
        let &(then, spent_then) = self
            .spent
            .iter()
            .find(|&&(t, _)| now.saturating_sub(t) <= window_ns)?;
        let span = now.saturating_sub(then);
        if span == 0 || span < window_ns / 2 {
            return None;
        }
        Some(spent_now.saturating_sub(spent_then) as f64 / span as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    /// A guard fed one observation a second, stalltop spending `cpus(t)`
    /// CPUs in second t; the changes it asked for, with their second.
    fn run(
        guard: &mut CostGuard,
        from: u64,
        to: u64,
        cpus: impl Fn(u64) -> f64,
    ) -> Vec<(u64, Change)> {
        let mut spent = guard.spent.back().map_or(0, |&(_, s)| s);
        let mut changes = Vec::new();
        for t in from..to {
            spent += (cpus(t) * S as f64) as u64;
            if let Some(change) = guard.observe(t * S, spent) {
                changes.push((t, change));
            }
        }
        changes
    }

    fn guard() -> CostGuard {
        CostGuard::new(0.02, vec![Step::Syscalls, Step::Sampler, Step::Stacks], 0)
    }

    #[test]
    fn over_budget_it_steps_down_one_step_at_a_time_until_within() {
        let mut g = guard();
        // 0.28 CPU while exact syscalls are hooked (the messaging overload
        // on 2 CPUs), 0.015 once sampled.
        let changes = run(&mut g, 0, 40, |t| if t < 6 { 0.28 } else { 0.015 });
        assert_eq!(changes, vec![(5, Change::Down(Step::Syscalls))]);
        assert_eq!(g.state().down, vec![Step::Syscalls]);
        assert!(g.state().cost_cpus < 0.02);
    }

    #[test]
    fn still_over_it_takes_the_next_step_once_the_last_one_settled() {
        let mut g = guard();
        let changes = run(&mut g, 0, 30, |_| 0.05);
        assert_eq!(
            changes,
            vec![
                (5, Change::Down(Step::Syscalls)),
                (10, Change::Down(Step::Sampler)),
                (15, Change::Down(Step::Stacks)),
            ]
        );
        // Nothing left to take down: over budget it stays, and says so.
        assert!(run(&mut g, 30, 60, |_| 0.05).is_empty());
        assert_eq!(g.state().down.len(), 3);
        assert!(g.state().cost_cpus > g.state().budget_cpus);
    }

    #[test]
    fn after_the_load_it_steps_back_up_once_the_probe_finds_room() {
        let mut g = guard();
        // The load runs 20 s: exact costs 0.20, sampled 0.010; after it,
        // sampled costs 0.002 and exact 0.005.
        let cost = |exact: bool, t: u64| match (t < 20, exact) {
            (true, true) => 0.20,
            (true, false) => 0.010,
            (false, true) => 0.005,
            (false, false) => 0.002,
        };
        assert_eq!(
            run(&mut g, 0, 6, |t| cost(true, t)),
            vec![(5, Change::Down(Step::Syscalls))]
        );
        // What the step saved under the load (0.19, scaled by the fall in
        // cost since to 0.038) still says no room: no flapping meanwhile.
        assert!(run(&mut g, 6, 305, |t| cost(false, t)).is_empty());
        // The probe, 300 s after the step: the cost itself leaves room.
        assert_eq!(
            run(&mut g, 305, 306, |t| cost(false, t)),
            vec![(305, Change::Up(Step::Syscalls))]
        );
        assert!(run(&mut g, 306, 400, |t| cost(true, t)).is_empty());
    }

    #[test]
    fn a_step_up_that_goes_over_again_waits_twice_as_long_next_time() {
        let mut g = CostGuard::new(0.02, vec![Step::Syscalls], 0);
        // The load never ends: exact costs 0.20, sampled 0.010 (the guard
        // sees no fall in cost, so only the probe brings the step up).
        let mut exact = true;
        let mut changes = Vec::new();
        let mut spent = 0;
        for t in 0..1_000 {
            spent += if exact { 200_000_000 } else { 10_000_000 };
            if let Some(change) = g.observe(t * S, spent) {
                exact = matches!(change, Change::Up(_));
                changes.push((t, change));
            }
        }
        assert_eq!(
            changes,
            vec![
                (5, Change::Down(Step::Syscalls)),
                (305, Change::Up(Step::Syscalls)),
                (310, Change::Down(Step::Syscalls)),
                (910, Change::Up(Step::Syscalls)),
                (915, Change::Down(Step::Syscalls)),
            ]
        );
    }

    #[test]
    fn a_step_that_saved_little_comes_back_up_after_the_room_window() {
        let mut g = CostGuard::new(0.02, vec![Step::Stacks], 0);
        // 0.03 CPU for 10 s, then 0.005 whatever the stacks: the step saved
        // nothing it can measure (the load ended).
        let changes = run(&mut g, 0, 60, |t| if t < 10 { 0.03 } else { 0.005 });
        assert_eq!(
            changes,
            vec![
                (5, Change::Down(Step::Stacks)),
                (35, Change::Up(Step::Stacks))
            ]
        );
        assert!(g.state().down.is_empty());
    }

    #[test]
    fn within_budget_nothing_changes() {
        let mut g = guard();
        assert!(run(&mut g, 0, 100, |_| 0.019).is_empty());
        assert_eq!(g.state().cost_cpus, 0.019);
    }

    #[test]
    fn a_refused_step_is_never_asked_for_again() {
        let mut g = guard();
        let changes = run(&mut g, 0, 6, |_| 0.05);
        assert_eq!(changes, vec![(5, Change::Down(Step::Syscalls))]);
        g.refused(Change::Down(Step::Syscalls));
        assert_eq!(g.state().steps, vec![Step::Sampler, Step::Stacks]);
        assert_eq!(
            run(&mut g, 6, 12, |_| 0.05),
            vec![(10, Change::Down(Step::Sampler))]
        );
    }
}
