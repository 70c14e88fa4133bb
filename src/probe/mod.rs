pub mod skel {
    include!(concat!(env!("OUT_DIR"), "/stalltop.skel.rs"));
}
