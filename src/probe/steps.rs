//! The cost guard's steps on a running session (`Step`): each is a few
//! writes to the programs' globals that user space may change while they
//! run (.data and .bss, one copy per family's instance), plus taking the
//! syscall hooks off or putting them back, or changing the sampler's
//! period. Nothing reloads: the maps and their counts stay.
//!
//! Softirqs keep the shape the loader gave them: an exact session times
//! delays from the raise program (its sampler loaded without ticks that
//! start them), and its syscalls step leaves that program attached, so
//! delays stay exact while the hooks are off. Where ticks start delays
//! (the cheap modes), the sampler's step coarsens them: a delay is short
//! of the true one by less than the period, now twice as long.

use super::family::ProbeFamily;
use super::loader::{attach_programs, sample_period_ns, Instance, Loaded};
use super::sampler;
use crate::host;
use crate::modes::{Step, SyscallMode};

impl<'obj> Loaded<'obj> {
    /// The steps this session can take, in the order the guard takes them
    /// down: the syscall hooks only in exact mode with the sampled-call
    /// code loaded (`ProbeConfig::cost_guard`), the sampler's only with it.
    pub fn steps(&self) -> Vec<Step> {
        let sampler = self.has(ProbeFamily::Sampler);
        Step::ALL
            .into_iter()
            .filter(|step| match step {
                Step::Syscalls => {
                    self.exact_steps_to_sampled && sampler && self.has(ProbeFamily::Syscall)
                }
                Step::Sampler | Step::Stacks => sampler,
            })
            .collect()
    }

    /// Takes `step` down (`down`) or back up.
    pub fn step(&mut self, step: Step, down: bool) -> Result<(), String> {
        if !self.steps().contains(&step) {
            return Err(format!("this session cannot step {}", step.name()));
        }
        match step {
            Step::Syscalls if down => {
                // Hooked calls are no longer followed, then the hooks come
                // off, then the sampler follows calls.
                self.globals(|g| g.bss.calls_hooked_since = u64::MAX);
                self.instance(ProbeFamily::Syscall).links.clear();
                self.globals(|g| g.data.sampling_calls_now = 1);
                self.syscalls = SyscallMode::Sampled;
            }
            Step::Syscalls => {
                // Only calls that enter once the hooks are back are followed
                // (an exit or an entry may have been missed meanwhile).
                self.globals(|g| g.data.sampling_calls_now = 0);
                let since = host::monotonic_ns();
                self.globals(|g| g.bss.calls_hooked_since = since);
                let syscall = self.instance(ProbeFamily::Syscall);
                syscall.links = attach_programs(&syscall.skel)?;
                self.syscalls = SyscallMode::Exact;
            }
            Step::Sampler => {
                let period = sample_period_ns(self.sample_hz) * if down { 2 } else { 1 };
                let sampler = self.instance(ProbeFamily::Sampler);
                sampler::set_period(&sampler.perf_events, period)
                    .map_err(|e| format!("setting the sampler's period: {e}"))?;
                self.globals(|g| g.data.sample_period_ns = period);
            }
            Step::Stacks => self.globals(|g| g.bss.stacks_off = u8::from(down)),
        }
        Ok(())
    }

    fn instance(&mut self, family: ProbeFamily) -> &mut Instance<'obj> {
        self.instances
            .iter_mut()
            .find(|i| i.family == family)
            .expect("steps() checked the family loaded")
    }

    /// Applies `set` to every instance's writable globals.
    fn globals(&mut self, set: impl Fn(&mut Globals<'_>)) {
        for instance in &mut self.instances {
            let maps = &mut instance.skel.maps;
            if let (Some(bss), Some(data)) =
                (maps.bss_data.as_deref_mut(), maps.data_data.as_deref_mut())
            {
                set(&mut Globals { bss, data });
            }
        }
    }
}

/// One instance's .bss and .data, mapped into this process.
struct Globals<'a> {
    bss: &'a mut super::skel::types::bss,
    data: &'a mut super::skel::types::data,
}
