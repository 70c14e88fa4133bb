//! A running probe session: loaded programs, the ring buffer drained into a
//! byte buffer, and snapshots of the aggregate maps on demand.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use libbpf_rs::{RingBuffer, RingBufferBuilder};

use super::loader::{self, Loaded, ObjectStorage, ProbeConfig};
use super::{maps, ProbeError};
use crate::modes::{
    Attach, RunqWait, SoftirqDelay, SoftirqTime, StealSource, Step, SyscallMode, Throttle,
};
use crate::stream::{KernelSnapshot, ProbeLoad};

/// What loaded, for headers and the UI.
#[derive(Clone, Debug)]
pub struct ProbeInfo {
    pub attach: Attach,
    /// How syscalls are watched ("off" when their family did not load).
    pub syscalls: SyscallMode,
    /// How softirq run time and delays are timed, given what attached.
    pub softirq_time: SoftirqTime,
    pub softirq_delay: SoftirqDelay,
    /// Where steal is read, once checked at start.
    pub steal: StealSource,
    pub runq_wait: RunqWait,
    pub throttle: Throttle,
    /// Families and optional parts that did not come up.
    pub warnings: Vec<String>,
    /// What each family's load did.
    pub probes: Vec<ProbeLoad>,
}

/// Fields drop in order: the ring buffer before the programs and maps.
pub struct Session<'obj> {
    ring: RingBuffer<'static>,
    pending: Rc<RefCell<Vec<u8>>>,
    loaded: Loaded<'obj>,
}

#[cfg(test)]
impl Session<'_> {
    /// The maps every family shares: for tests that set a state the probes reach only where
    /// the kernel does something a test cannot make it do.
    pub(super) fn maps(&self) -> &super::skel::StalltopSkel<'_> {
        self.loaded.maps()
    }
}

impl<'obj> Session<'obj> {
    /// Load and attach; `storage` backs the BPF objects and must outlive
    /// the session.
    pub fn start(
        config: &ProbeConfig,
        storage: &'obj mut ObjectStorage,
    ) -> Result<Session<'obj>, ProbeError> {
        let loaded = loader::load(config, storage)?;
        let pending = Rc::new(RefCell::new(Vec::with_capacity(1 << 20)));
        let sink = Rc::clone(&pending);
        let mut builder = RingBufferBuilder::new();
        builder
            .add(&loaded.maps().maps.events, move |record: &[u8]| {
                sink.borrow_mut().extend_from_slice(record);
                0
            })
            .map_err(|e| ProbeError::Attach {
                detail: format!("ring buffer: {e}"),
            })?;
        let ring = builder.build().map_err(|e| ProbeError::Attach {
            detail: format!("ring buffer: {e}"),
        })?;
        Ok(Session {
            ring,
            pending,
            loaded,
        })
    }

    pub fn info(&self) -> ProbeInfo {
        ProbeInfo {
            attach: self.loaded.attach,
            syscalls: self.loaded.syscalls,
            softirq_time: self.loaded.softirq_time,
            softirq_delay: self.loaded.softirq_delay,
            steal: self.loaded.steal,
            runq_wait: self.loaded.runq_wait,
            throttle: self.loaded.throttle,
            warnings: self.loaded.warnings.clone(),
            probes: self.loaded.probes.clone(),
        }
    }

    /// Wait up to `timeout` for a wakeup, then take every queued record.
    /// The BPF side wakes us only when much is queued, so this also drains
    /// on timeout.
    pub fn poll(&mut self, timeout: Duration) -> Vec<u8> {
        if let Err(e) = self.ring.poll(timeout) {
            tracing::debug!("ring buffer poll: {e}");
        }
        if let Err(e) = self.ring.consume() {
            tracing::debug!("ring buffer consume: {e}");
        }
        std::mem::take(&mut *self.pending.borrow_mut())
    }

    /// See `Loaded::set_ksoftirqd`.
    pub fn set_ksoftirqd(&mut self, ksoftirqd: &[(u32, u32)]) -> Result<(), libbpf_rs::Error> {
        self.loaded.set_ksoftirqd(ksoftirqd)
    }

    pub fn snapshot(&self, ts_ns: u64) -> KernelSnapshot {
        maps::snapshot(&self.loaded, ts_ns)
    }

    /// See `Loaded::steps`.
    pub fn steps(&self) -> Vec<Step> {
        self.loaded.steps()
    }

    /// See `Loaded::step`.
    pub fn step(&mut self, step: Step, down: bool) -> Result<(), String> {
        self.loaded.step(step, down)
    }

    /// See `maps::prune_cgroups`.
    pub fn prune_cgroups(&self, dead: &dyn Fn(u64) -> bool) -> usize {
        maps::prune_cgroups(&self.loaded, dead)
    }
}
