//! The only place with libbpf-rs and `unsafe` BPF plumbing: preflight,
//! open, configure, load, attach (tp_btf, falling back to raw_tp), the ring
//! buffer and the aggregate maps. Everything leaves here as plain data.

mod config;
mod family;
mod features;
mod libbpf_log;
mod loader;
mod maps;
mod prealloc;
mod preflight;
mod refusal;
mod sampler;
mod sched_info;
mod selfcheck;
mod session;
mod steps;
#[cfg(test)]
mod tests;

pub use config::{choose_steal_source, DEFAULT_SAMPLE_HZ, HARDIRQ_THRESHOLD_NS};
pub use features::KernelFeatures;
pub use libbpf_log::install as route_libbpf_logs;
pub use loader::{ObjectStorage, ProbeConfig};
pub use session::{ProbeInfo, Session};

pub use crate::abi::skel;

/// Why the probes could not start. Each message names the fix.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("not enough privileges to load BPF programs ({detail}); run stalltop as root (sudo stalltop ...)")]
    NotPrivileged { detail: String },
    #[error("the kernel has no BTF (no /sys/kernel/btf/vmlinux, nor a vmlinux with BTF under /boot or /lib/modules); stalltop needs Linux 5.8 or later built with CONFIG_DEBUG_INFO_BTF=y")]
    NoBtf,
    #[error("tracefs is not available ({detail}); mount it: mount -t tracefs tracefs /sys/kernel/tracing")]
    NoTracefs { detail: String },
    #[error("the scheduler probes cannot load ({attach}): {reason}; {hint} (--log FILE keeps the verifier's output)")]
    SchedRefused {
        attach: &'static str,
        reason: String,
        hint: &'static str,
    },
    #[error("attaching the BPF programs failed: {detail}")]
    Attach { detail: String },
}

/// Preflight checks; call before `Session::start`.
pub fn preflight() -> Result<(), ProbeError> {
    preflight::check()
}
