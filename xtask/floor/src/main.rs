//! bench-floor: attach empty tp_btf programs to the tracepoints stalltop
//! uses, say "attached" on stdout, and hold them until stdin closes. The
//! bench reads their run statistics from this process's fdinfo.

use std::io::Read;
use std::mem::MaybeUninit;
use std::process::ExitCode;

use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};

mod floor_skel {
    #![allow(clippy::all, dead_code, non_camel_case_types, unused_imports)]
    include!(concat!(env!("OUT_DIR"), "/floor.skel.rs"));
}

fn main() -> ExitCode {
    let mut storage = MaybeUninit::uninit();
    let attached = floor_skel::FloorSkelBuilder::default()
        .open(&mut storage)
        .and_then(|open| open.load())
        .and_then(|mut skel| skel.attach().map(|()| skel));
    let _skel = match attached {
        Ok(skel) => skel,
        Err(e) => {
            eprintln!("bench-floor: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("attached");
    // Hold the programs until the bench closes our stdin.
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    ExitCode::SUCCESS
}
