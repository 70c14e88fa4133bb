//! Names for the code addresses in sampled stacks and of hrtimer callbacks: kernel addresses via
//! kallsyms, user addresses via the process's mappings (blazesym). Each
//! address is looked up once; the names go into the entry stream so a
//! recording replays with names on any machine.

use std::collections::HashSet;

use blazesym::symbolize::source::{Kernel, Process, Source};
use blazesym::symbolize::{Input, Symbolized, Symbolizer};
use blazesym::{MaybeDefault, Pid};

use crate::event::Sample;

pub struct StackNamer {
    symbolizer: Symbolizer,
    kernel_known: HashSet<u64>,
    user_known: HashSet<(u32, u64)>,
}

/// Newly named addresses.
#[derive(Default)]
pub struct NewNames {
    pub kernel: Vec<(u64, String)>,
    pub user: Vec<(u32, u64, String)>,
}

impl StackNamer {
    /// Reads kallsyms at once (about 70 ms of CPU here): made before the
    /// probes attach, the namer does not spend it on the watched workload
    /// when the first stack comes.
    pub fn new() -> StackNamer {
        let namer = StackNamer {
            symbolizer: Symbolizer::new(),
            kernel_known: HashSet::new(),
            user_known: HashSet::new(),
        };
        namer.lookup(&kernel_source(), &[0]);
        namer
    }

    /// Names for the addresses of `samples` and the kernel `functions` (hrtimer callbacks)
    /// not named before.
    pub fn name(&mut self, samples: &[&Sample], functions: &[u64]) -> NewNames {
        let mut names = NewNames::default();
        let kernel: Vec<u64> = samples
            .iter()
            .flat_map(|s| s.kernel_stack.iter().copied())
            .chain(functions.iter().copied())
            .filter(|a| self.kernel_known.insert(*a))
            .collect();
        if !kernel.is_empty() {
            names.kernel = self.lookup(&kernel_source(), &kernel);
        }
        for sample in samples {
            let pid = sample.task.pid;
            let user: Vec<u64> = sample
                .user_stack
                .iter()
                .copied()
                .filter(|a| pid != 0 && self.user_known.insert((pid, *a)))
                .collect();
            if user.is_empty() {
                continue;
            }
            let mut process = Process::new(Pid::from(pid));
            process.debug_syms = false;
            let source = Source::Process(process);
            names.user.extend(
                self.lookup(&source, &user)
                    .into_iter()
                    .map(|(addr, name)| (pid, addr, name)),
            );
        }
        names
    }

    /// Named addresses; unknown ones are left out (shown as hex).
    fn lookup(&self, source: &Source<'_>, addrs: &[u64]) -> Vec<(u64, String)> {
        match self.symbolizer.symbolize(source, Input::AbsAddr(addrs)) {
            Ok(found) => addrs
                .iter()
                .zip(found)
                .filter_map(|(&addr, sym)| match sym {
                    Symbolized::Sym(sym) => Some((addr, sym.name.into_owned())),
                    Symbolized::Unknown(_) => None,
                })
                .collect(),
            Err(e) => {
                tracing::debug!("symbolizing {} addresses: {e}", addrs.len());
                Vec::new()
            }
        }
    }
}

fn kernel_source() -> Source<'static> {
    Source::Kernel(Kernel {
        vmlinux: MaybeDefault::None, // kallsyms is enough and quick
        debug_syms: false,
        ..Kernel::default()
    })
}
