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

pub const ATTACH_MODES: &[AttachMode] = &[
    AttachMode {
        flag: "tp-btf",
        reported: "tp_btf",
    },
    AttachMode {
        flag: "raw-tp",
        reported: "raw_tp",
    },
];

/// What stalltop does with syscalls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyscallMode {
    /// The mode's name, as the report's `settings.syscalls` says it.
    pub name: &'static str,
    /// The stalltop options that select it.
    pub args: &'static [&'static str],
    /// Whether the mode hooks syscalls, so the report has syscall rows.
    pub hooks_syscalls: bool,
}

// `--no-syscalls` and no flag until stalltop takes `--syscalls MODE`; then each mode is
// `["--syscalls", name]`, and `sampled` one more line here.
pub const SYSCALL_MODES: &[SyscallMode] = &[
    SyscallMode {
        name: "exact",
        args: &[],
        hooks_syscalls: true,
    },
    SyscallMode {
        name: "off",
        args: &["--no-syscalls"],
        hooks_syscalls: false,
    },
];

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
