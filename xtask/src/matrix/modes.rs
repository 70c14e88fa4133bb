//! The stalltop modes every kernel of the matrix runs: each attach mode with each syscall mode.
//! The one place that lists them.

/// How stalltop attaches its programs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttachMode {
    /// The `--attach` value.
    pub flag: &'static str,
    /// What the report's `settings.attach` and each probe family's `attach` say for it.
    pub reported: &'static str,
}

pub const TP_BTF: AttachMode = AttachMode {
    flag: "tp-btf",
    reported: "tp_btf",
};
pub const RAW_TP: AttachMode = AttachMode {
    flag: "raw-tp",
    reported: "raw_tp",
};
pub const ATTACH_MODES: &[AttachMode] = &[TP_BTF, RAW_TP];

/// What stalltop does with syscalls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyscallMode {
    /// The mode's name, as the report's `settings.syscalls` says it.
    pub name: &'static str,
    /// The stalltop options that select it.
    pub args: &'static [&'static str],
    /// Whether the mode watches syscalls, so the report has syscall rows.
    pub watches_syscalls: bool,
    /// Whether its syscall rows have per-call percentiles (hooked calls).
    pub percentiles: bool,
    /// Whether it starts softirq delays at sampler ticks (a cheap mode) rather than from a
    /// program on every raise; PREEMPT_RT kernels always use the program.
    pub softirq_delay_by_ticks: bool,
}

pub const SAMPLED: SyscallMode = SyscallMode {
    name: "sampled",
    args: &["--syscalls", "sampled"],
    watches_syscalls: true,
    percentiles: false,
    softirq_delay_by_ticks: true,
};
pub const EXACT: SyscallMode = SyscallMode {
    name: "exact",
    args: &["--syscalls", "exact"],
    watches_syscalls: true,
    percentiles: true,
    softirq_delay_by_ticks: false,
};
pub const OFF: SyscallMode = SyscallMode {
    name: "off",
    args: &["--syscalls", "off"],
    watches_syscalls: false,
    percentiles: false,
    softirq_delay_by_ticks: true,
};
pub const SYSCALL_MODES: &[SyscallMode] = &[SAMPLED, EXACT, OFF];

/// One recording of the matrix: an attach mode with a syscall mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mode {
    pub attach: AttachMode,
    pub syscalls: SyscallMode,
}

impl Mode {
    /// Every combination, attach mode first.
    pub fn all() -> Vec<Mode> {
        ATTACH_MODES
            .iter()
            .flat_map(|&attach| {
                SYSCALL_MODES
                    .iter()
                    .map(move |&syscalls| Mode { attach, syscalls })
            })
            .collect()
    }

    /// A name without spaces, used to tag the mode's output: `tp-btf/exact`.
    pub fn tag(&self) -> String {
        format!("{}/{}", self.attach.flag, self.syscalls.name)
    }

    /// The options of `stalltop record` for this mode.
    pub fn stalltop_args(&self) -> Vec<&'static str> {
        let mut args = vec!["--attach", self.attach.flag];
        args.extend_from_slice(self.syscalls.args);
        args
    }
}
