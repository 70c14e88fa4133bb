//! Every program within the verifier budget on this kernel, in every syscall mode of both
//! attach families (root, as in CI): a program far under the verifier's limit still loads
//! on the next kernel, whose verifier may explore it differently. The kernel matrix checks
//! the same budget on its kernels.

use super::*;
use super::{config, ONE_AT_A_TIME};

/// xtask/src/matrix/checks.rs holds the same budget for the matrix's kernels.
const VERIFIED_INSNS_BUDGET: u32 = 150_000;

#[test]
fn every_program_verifies_within_the_budget_in_every_mode() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut counted = Vec::new();
    for attach in [AttachMode::TpBtf, AttachMode::RawTp] {
        for syscalls in [SyscallMode::Sampled, SyscallMode::Exact, SyscallMode::Off] {
            let config = ProbeConfig {
                syscalls,
                ..config(attach)
            };
            let mut storage = ObjectStorage::default();
            let loaded = loader::load(&config, &mut storage).expect("probes load");
            for program in loaded.probes.iter().flat_map(|family| &family.programs) {
                let insns = program
                    .verified_insns
                    .unwrap_or_else(|| panic!("{}: this kernel reports no count", program.name));
                counted.push((format!("{attach:?}/{syscalls:?} {}", program.name), insns));
            }
        }
    }
    assert!(
        counted
            .iter()
            .any(|(name, _)| name.ends_with("sched_switch")),
        "{counted:?}"
    );
    let over: Vec<_> = counted
        .iter()
        .filter(|(_, insns)| *insns > VERIFIED_INSNS_BUDGET)
        .collect();
    assert!(
        over.is_empty(),
        "over the budget of {VERIFIED_INSNS_BUDGET} verified instructions: {over:#?}"
    );
}
