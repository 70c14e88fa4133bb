//! The programs against rules of the kernels older than any this machine can boot
//! (docs/kernels.md, "What the programs need"), checked on the object itself.

use std::mem::MaybeUninit;

use libbpf_rs::btf::types::{Func, FuncProto, Linkage};
use libbpf_rs::btf::{Btf, BtfKind, BtfType, ReferencesType};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::AsRawLibbpf;

use crate::probe::skel::StalltopSkelBuilder;

/// The verifier takes a global function's arguments from its BTF: until Linux 5.12 ("bpf:
/// Support pointers in global func args") only numbers (int, enum) or the program's context,
/// at most five, and a number back. A pointer argument fails the whole program there.
#[test]
fn global_functions_take_and_return_only_numbers() {
    let mut storage = MaybeUninit::uninit();
    let open = StalltopSkelBuilder::default()
        .open(&mut storage)
        .expect("the object opens");
    // SAFETY: the pointer is the live bpf_object of `open`, which outlives `btf`.
    let object = unsafe { open.open_object().as_libbpf_object().as_ref() };
    let btf = Btf::from_bpf_object(object)
        .expect("the object's BTF")
        .expect("the object has BTF");
    let number = |ty: BtfType<'_>| {
        matches!(
            ty.skip_mods_and_typedefs().kind(),
            BtfKind::Int | BtfKind::Enum | BtfKind::Enum64
        )
    };
    // Programs are global functions too; their one argument is the context.
    let programs: Vec<String> = open
        .open_object()
        .progs()
        .map(|p| p.name().to_string_lossy().into_owned())
        .collect();
    let mut checked = Vec::new();
    for func in btf.type_by_kind::<Func<'_>>() {
        if func.linkage() != Linkage::Global {
            continue;
        }
        let name = func
            .name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        if programs.contains(&name) {
            continue;
        }
        let proto =
            FuncProto::try_from(func.referenced_type()).expect("a function's type is a prototype");
        assert!(proto.len() <= 5, "{name} takes {} arguments", proto.len());
        for param in proto.iter() {
            let ty = btf.type_by_id::<BtfType<'_>>(param.ty).expect("the type");
            assert!(
                number(ty),
                "{name}: argument {:?} is a {:?}, not a number",
                param.name,
                ty.skip_mods_and_typedefs().kind()
            );
        }
        let returned = proto.referenced_type();
        assert!(number(returned), "{name} does not return a number");
        checked.push(name);
    }
    // The scan sees the functions it is about.
    for name in [
        "wait_holder",
        "held_by",
        "slice_of",
        "steal_during",
        "path_of_fd",
    ] {
        assert!(
            checked.iter().any(|c| c == name),
            "{name} not in {checked:?}"
        );
    }
}
