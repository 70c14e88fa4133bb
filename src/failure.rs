//! Why stalltop stopped, one variant per kind of failure, each with its own exit code: shared
//! by every mode (src/cmd/) and the entry source (src/source.rs), mapped to the exit code in
//! main.rs.

use crate::{cgroup, probe};

/// Why stalltop stopped; each has its own exit code.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    #[error(transparent)]
    Probe(#[from] probe::ProbeError),
    #[error(transparent)]
    Cgroup(#[from] cgroup::CgroupError),
    #[error("cannot read the recording {0}")]
    Recording(String),
    #[error("cannot write {0}")]
    Output(String),
    /// A check the user asked for (`diff --fail-if`) holds.
    #[error("{0}")]
    Check(String),
    #[error("{0}")]
    Other(String),
}

impl Failure {
    pub fn io(e: std::io::Error) -> Failure {
        Failure::Other(e.to_string())
    }

    /// 2 is clap's usage error.
    pub fn exit_code(&self) -> u8 {
        match self {
            Failure::Probe(probe::ProbeError::NotPrivileged { .. }) => 3,
            Failure::Probe(probe::ProbeError::NoBtf) => 4,
            Failure::Probe(probe::ProbeError::NoTracefs { .. }) => 5,
            Failure::Probe(_) => 6,
            Failure::Cgroup(_) => 7,
            Failure::Recording(_) => 8,
            Failure::Output(_) => 9,
            Failure::Check(_) => 10,
            Failure::Other(_) => 1,
        }
    }
}
