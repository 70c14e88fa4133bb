//! bench-floor: attach reference tp_btf programs to the tracepoints
//! stalltop uses, say "attached" on stdout, and hold them until stdin
//! closes. The bench reads their run statistics from this process's
//! fdinfo. Without arguments the programs are empty (the floor); with
//! `--minimal` they do the least a tool can do for stalltop's core
//! measures there (see bpf/minimal.bpf.c).

use std::io::Read;
use std::mem::MaybeUninit;
use std::path::Path;
use std::process::ExitCode;

use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};

mod floor_skel {
    #![allow(
        clippy::all,
        clippy::undocumented_unsafe_blocks,
        dead_code,
        non_camel_case_types,
        unused_imports
    )]
    include!(concat!(env!("OUT_DIR"), "/floor.skel.rs"));
}

mod minimal_skel {
    #![allow(
        clippy::all,
        clippy::undocumented_unsafe_blocks,
        dead_code,
        non_camel_case_types,
        unused_imports
    )]
    include!(concat!(env!("OUT_DIR"), "/minimal.skel.rs"));
}

/// Present where the v1 cpu controller is mounted (v1 and hybrid hosts):
/// there the minimal programs attribute by it, as stalltop does.
const V1_CPU_KNOB: &str = "/sys/fs/cgroup/cpu/cpu.shares";

/// Open, load and attach the floor programs; hold them until stdin closes.
fn hold_floor() -> libbpf_rs::Result<()> {
    let mut storage = MaybeUninit::uninit();
    let mut skel = floor_skel::FloorSkelBuilder::default()
        .open(&mut storage)?
        .load()?;
    skel.attach()?;
    hold();
    Ok(())
}

/// The same for the minimal programs, attributing by the host's cgroup
/// hierarchy as stalltop does.
fn hold_minimal() -> libbpf_rs::Result<()> {
    let mut storage = MaybeUninit::uninit();
    let mut open = minimal_skel::MinimalSkelBuilder::default().open(&mut storage)?;
    open.maps
        .rodata_data
        .as_deref_mut()
        .expect("minimal.bpf.c has a const volatile knob")
        .cgroup_v1_cpu = u8::from(Path::new(V1_CPU_KNOB).exists());
    let mut skel = open.load()?;
    skel.attach()?;
    hold();
    Ok(())
}

fn hold() {
    println!("attached");
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
}

fn main() -> ExitCode {
    let held = match std::env::args().nth(1).as_deref() {
        None => hold_floor(),
        Some("--minimal") => hold_minimal(),
        Some(other) => {
            eprintln!("bench-floor: unknown argument {other:?} (takes only --minimal)");
            return ExitCode::from(2);
        }
    };
    match held {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench-floor: {e}");
            ExitCode::FAILURE
        }
    }
}
