//! The only place with libbpf-rs and `unsafe` BPF plumbing: preflight,
//! open, configure, load, attach (tp_btf, falling back to raw_tp), the ring
//! buffer and the aggregate maps. Everything leaves here as plain data.

mod loader;
mod maps;
mod preflight;
mod sampler;
mod session;
#[cfg(test)]
mod tests;

pub use loader::{sched_info_missing, AttachMode, ObjectStorage, ProbeConfig};
pub use session::{ProbeInfo, Session};

pub mod skel {
    #![allow(clippy::all, dead_code, non_camel_case_types, unused_imports)]
    include!(concat!(env!("OUT_DIR"), "/stalltop.skel.rs"));
}

/// Why the probes could not start. Each message names the fix.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("not enough privileges to load BPF programs ({detail}); run stalltop as root (sudo stalltop ...)")]
    NotPrivileged { detail: String },
    #[error("the kernel has no BTF (/sys/kernel/btf/vmlinux is missing); stalltop needs a kernel built with CONFIG_DEBUG_INFO_BTF=y")]
    NoBtf,
    #[error("tracefs is not available ({detail}); mount it: mount -t tracefs tracefs /sys/kernel/tracing")]
    NoTracefs { detail: String },
    #[error("loading the BPF programs failed ({mode}): {detail}; run with --log FILE for libbpf's verifier output")]
    Load { mode: &'static str, detail: String },
    #[error("attaching the BPF programs failed: {detail}")]
    Attach { detail: String },
}

/// Preflight checks; call before `Session::start`.
pub fn preflight() -> Result<(), ProbeError> {
    preflight::check()
}
