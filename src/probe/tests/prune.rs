//! Real-kernel test of freeing the map entries of removed cgroups: entries
//! put in the real maps are deleted for the dead cgroups only, whichever
//! side of a key names them.

use std::time::Duration;

use libbpf_rs::{MapCore, MapFlags};

use super::*;
use super::{config, ONE_AT_A_TIME};
use crate::probe::skel::types;

const LIVE: u64 = 0x11;
const DEAD: u64 = 0xdead;

fn bytes<T: plain::Plain>(value: &T) -> Vec<u8> {
    // SAFETY: T is a plain map type of bpf/stalltop.h (no padding bytes read as values).
    unsafe { plain::as_bytes(value) }.to_vec()
}

fn put<K: plain::Plain, V: plain::Plain + Default>(map: &dyn MapCore, key: &K) {
    let cpus = libbpf_rs::num_possible_cpus().unwrap();
    let values = vec![bytes(&V::default()); cpus];
    map.update_percpu(&bytes(key), &values, MapFlags::ANY)
        .expect("insert a test entry");
}

fn keys(map: &dyn MapCore) -> Vec<Vec<u8>> {
    let mut keys: Vec<Vec<u8>> = map.keys().collect();
    keys.sort();
    keys
}

fn entries_of_removed_cgroups_are_freed(attach: AttachMode, syscalls: SyscallMode) {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let config = ProbeConfig {
        syscalls,
        ..config(attach)
    };
    let mut storage = ObjectStorage::default();
    let loaded = loader::load(&config, &mut storage).expect("probes load");
    let maps = &loaded.maps().maps;
    put::<u64, types::runq_stats>(&maps.runq_by_cgroup, &LIVE);
    put::<u64, types::runq_stats>(&maps.runq_by_cgroup, &DEAD);
    let preemptor = |victim, preemptor| types::preemptor_key {
        victim_cgroup: victim,
        preemptor_cgroup: preemptor,
        ..Default::default()
    };
    for key in [
        preemptor(LIVE, LIVE),
        preemptor(LIVE, DEAD),
        preemptor(DEAD, LIVE),
    ] {
        put::<_, types::preemptor_stats>(&maps.preemptors, &key);
    }
    let syscall = |cgroup| types::syscall_key {
        cgroup,
        nr: 0,
        ..Default::default()
    };
    if syscalls != SyscallMode::Off {
        put::<_, types::syscall_stats>(&maps.syscalls, &syscall(LIVE));
        put::<_, types::syscall_stats>(&maps.syscalls, &syscall(DEAD));
    }
    // Real entries of live cgroups come in meanwhile; they must all stay.
    std::thread::sleep(Duration::from_millis(50));
    let runq_before = keys(&maps.runq_by_cgroup);
    let preemptors_before = keys(&maps.preemptors);

    let deleted = maps::prune_cgroups(&loaded, &|id| id == DEAD);

    let hooked = if syscalls == SyscallMode::Off { 0 } else { 1 };
    assert_eq!(deleted, 1 + 2 + hooked);
    let gone = |before: Vec<Vec<u8>>, dead: &[Vec<u8>]| -> Vec<Vec<u8>> {
        before.into_iter().filter(|k| !dead.contains(k)).collect()
    };
    assert_eq!(
        keys(&maps.runq_by_cgroup),
        gone(runq_before, &[bytes(&DEAD)])
    );
    assert_eq!(
        keys(&maps.preemptors),
        gone(
            preemptors_before,
            &[bytes(&preemptor(LIVE, DEAD)), bytes(&preemptor(DEAD, LIVE))]
        )
    );
    if syscalls != SyscallMode::Off {
        let left = keys(&maps.syscalls);
        assert!(left.contains(&bytes(&syscall(LIVE))) && !left.contains(&bytes(&syscall(DEAD))));
    }
}

#[test]
fn tp_btf_probes_free_the_entries_of_removed_cgroups() {
    entries_of_removed_cgroups_are_freed(AttachMode::TpBtf, SyscallMode::Exact);
}

#[test]
fn raw_tp_probes_free_the_entries_of_removed_cgroups() {
    entries_of_removed_cgroups_are_freed(AttachMode::RawTp, SyscallMode::Off);
}
