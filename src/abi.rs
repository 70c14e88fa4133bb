//! The ABI with the BPF programs, on the ground floor: the Rust types libbpf-cargo generates
//! from bpf/stalltop.h (with the skeleton they come in), marked `Plain` so records and map
//! values read from bytes, and the record kinds. Everything that reads a record or a map value
//! imports its types from here; only src/probe/ uses the skeleton itself.

pub mod skel {
    #![allow(
        clippy::all,
        clippy::undocumented_unsafe_blocks,
        dead_code,
        non_camel_case_types,
        unused_imports
    )]
    include!(concat!(env!("OUT_DIR"), "/stalltop.skel.rs"));
}

pub use skel::types;

/// Record kinds (record_header.kind), from `enum record_kind`.
const fn kind(k: types::record_kind) -> u16 {
    k.0 as u16
}
pub const KIND_RUNQ: u16 = kind(types::record_kind::KIND_RUNQ);
pub const KIND_TAKEOVER: u16 = kind(types::record_kind::KIND_TAKEOVER);
pub const KIND_SOFTIRQ: u16 = kind(types::record_kind::KIND_SOFTIRQ);
pub const KIND_SYSCALL: u16 = kind(types::record_kind::KIND_SYSCALL);
pub const KIND_SAMPLE: u16 = kind(types::record_kind::KIND_SAMPLE);
pub const KIND_IRQOFF: u16 = kind(types::record_kind::KIND_IRQOFF);
pub const KIND_HARDIRQ: u16 = kind(types::record_kind::KIND_HARDIRQ);
pub const KIND_MAX: u16 = kind(types::record_kind::KIND_MAX);

/// Marks ABI structs generated from bpf/stalltop.h as `Plain`.
macro_rules! plain_abi {
    ($($t:ty),* $(,)?) => {$(
        // SAFETY: #[repr(C)] structs of integers and integer arrays generated
        // from bpf/stalltop.h; every bit pattern is a valid value.
        unsafe impl plain::Plain for $t {}
    )*};
}

plain_abi!(
    types::record_header,
    types::runq_event,
    types::runq_stats,
    types::preemptor_key,
    types::preemptor_stats,
    types::task_state,
    types::cpu_state,
    types::file_key,
    types::file_time,
    types::softirq_event,
    types::softirq_stats,
    types::stolen_key,
    types::stolen_stats,
    types::syscall_event,
    types::syscall_key,
    types::syscall_stats,
    types::syscall_slot,
    types::runq_slot,
    types::preemptor_slot,
    types::sample_event,
    types::hardirq_event,
    types::kernel_values,
);
