//! A task culprit's stacks and activity from the sampler's ticks on the
//! holder while a task waited behind it (docs/cases.md case 4 shape: a
//! busy neighbour keeps a server's thread off its CPU).

use super::{analyse, MS, NOISY, ROOT, VICTIM};
use crate::abi::KIND_RUNQ;
use crate::event::testing::{migrated_runq_record, runq_record, stacks_sample_record, task};
use crate::model::report::StallRow;
use crate::stream::{Entry, NameTable};

const CPU: u32 = 0;
const OPENSSL: u32 = 900;
const SYS_EPOLL_WAIT: u32 = 232;
const SYS_MUNMAP: u32 = 11;
/// openssl's user frames, leaf first.
const USER_STACK: [(u64, &str); 2] = [
    (0x5555_0000_1000, "sha256_block_data_order"),
    (0x5555_0000_2000, "speed_main"),
];
/// A tick's kernel frames when it found the task in user code.
const IN_USER_CODE: &[u64] = &[];
/// munmap's kernel frames, leaf first.
const KERNEL_STACK: [(u64, &str); 2] = [
    (0xffff_ffff_8140_0000, "zap_pte_range"),
    (0xffff_ffff_8140_1000, "__do_munmap"),
];

fn names() -> Entry {
    Entry::Names(NameTable {
        cgroups: vec![
            (ROOT, "/".into()),
            (VICTIM, "/shop".into()),
            (NOISY, "/batch".into()),
        ],
        kernel_symbols: KERNEL_STACK.iter().map(|&(a, n)| (a, n.into())).collect(),
        user_symbols: USER_STACK
            .iter()
            .map(|&(a, n)| (OPENSSL, a, n.into()))
            .collect(),
        ..NameTable::default()
    })
}

/// redis-server waits 16 ms (from 2000 ms) behind openssl, whose ticks
/// during the wait are `ticks` (ms after the wait began, syscall, kernel
/// frames); the wait's record names `ran_syscall` for openssl.
fn wait_behind_openssl(ticks: &[(u64, Option<u32>, &[u64])], ran_syscall: Option<u32>) -> StallRow {
    let start = 2_000 * MS;
    let user: Vec<u64> = USER_STACK.iter().map(|&(a, _)| a).collect();
    let mut records = Vec::new();
    for &(at_ms, syscall, kernel) in ticks {
        let user: &[u64] = if kernel.is_empty() { &user } else { &[] };
        records.extend(stacks_sample_record(
            CPU,
            start + at_ms * MS,
            task(OPENSSL, "openssl", NOISY),
            syscall,
            kernel,
            user,
        ));
    }
    the_wait_behind_openssl(records, start, ran_syscall)
}

/// The one stall of `samples` and redis-server's 16 ms wait from `start`
/// behind openssl (in `ran_syscall` by the probes).
fn the_wait_behind_openssl(mut samples: Vec<u8>, start: u64, ran_syscall: Option<u32>) -> StallRow {
    samples.extend(runq_record(
        KIND_RUNQ,
        CPU,
        start + 16 * MS,
        16 * MS,
        task(300, "redis-server", VICTIM),
        task(OPENSSL, "openssl", NOISY),
        ran_syscall.map(|nr| (nr as i32, 20 * MS)),
        0,
    ));
    let report = analyse(&[names(), Entry::Records(samples)]);
    assert_eq!(report.stalls.len(), 1, "{:#?}", report.stalls);
    report.stalls[0].clone()
}

/// A 16 ms run-queue wait whose holder was sampled in user code: the stall
/// carries the holder's symbolized user stack, and says "user code", not
/// the call the probes saw it in as it left the CPU.
#[test]
fn a_wait_carries_the_holders_stack_and_user_code() {
    let stall = wait_behind_openssl(
        &[
            (3, None, IN_USER_CODE),
            (6, None, IN_USER_CODE),
            (11, None, IN_USER_CODE),
        ],
        Some(SYS_EPOLL_WAIT),
    );
    let culprit = stall.culprit.expect("a culprit");
    assert_eq!(culprit.comm, "openssl");
    assert_eq!(culprit.samples, 3);
    assert_eq!(
        culprit.user_stack,
        ["sha256_block_data_order", "speed_main"]
    );
    assert!(culprit.stack.is_empty(), "{:?}", culprit.stack);
    assert_eq!(culprit.activity.as_deref(), Some("user code"));
    assert_eq!(culprit.syscall, None, "not its last syscall");
    let owner = culprit.stack_of.as_ref().expect("the stacks' thread");
    assert_eq!((owner.tid, owner.comm.as_str()), (OPENSSL, "openssl"));
    assert_eq!(culprit.borrowed_stack(), None, "its own stacks");
}

/// The only tick during the wait found a kworker on the CPU, not the
/// holder: the kworker's stack is shown, named as the kworker's, and the
/// culprit's activity comes from the probes, not from that tick.
#[test]
fn a_stack_of_another_task_is_named_as_that_tasks() {
    const KWORKER: u32 = 77;
    let start = 2_000 * MS;
    let kernel: Vec<u64> = KERNEL_STACK.iter().map(|&(a, _)| a).collect();
    let kworker_tick = stacks_sample_record(
        CPU,
        start + 5 * MS,
        task(KWORKER, "kworker/0:1", ROOT),
        None,
        &kernel,
        &[],
    );
    let stall = the_wait_behind_openssl(kworker_tick, start, Some(SYS_EPOLL_WAIT));
    let culprit = stall.culprit.expect("a culprit");
    assert_eq!(culprit.comm, "openssl");
    assert_eq!(culprit.stack, ["zap_pte_range", "__do_munmap"]);
    let owner = culprit.borrowed_stack().expect("another task's stacks");
    assert_eq!((owner.tid, owner.comm.as_str()), (KWORKER, "kworker/0:1"));
    assert_eq!(culprit.activity.as_deref(), Some("epoll_wait"));
}

/// A holder sampled inside munmap shows the call and its kernel frames; a
/// minority of ticks elsewhere does not change what it was doing.
#[test]
fn a_holder_inside_a_call_shows_the_call_and_its_kernel_stack() {
    let kernel: Vec<u64> = KERNEL_STACK.iter().map(|&(a, _)| a).collect();
    let stall = wait_behind_openssl(
        &[
            (2, Some(SYS_MUNMAP), kernel.as_slice()),
            (5, Some(SYS_MUNMAP), kernel.as_slice()),
            (9, None, IN_USER_CODE),
        ],
        None,
    );
    let culprit = stall.culprit.expect("a culprit");
    assert_eq!(culprit.activity.as_deref(), Some("munmap"));
    assert_eq!(culprit.syscall.as_deref(), Some("munmap"));
    assert_eq!(culprit.stack, ["zap_pte_range", "__do_munmap"]);
}

/// In the kernel outside any call (a page fault): "kernel (no syscall)".
#[test]
fn kernel_time_outside_calls_is_named_so() {
    let kernel: Vec<u64> = KERNEL_STACK.iter().map(|&(a, _)| a).collect();
    let stall = wait_behind_openssl(
        &[(4, None, kernel.as_slice()), (8, None, kernel.as_slice())],
        None,
    );
    let culprit = stall.culprit.expect("a culprit");
    assert_eq!(culprit.activity.as_deref(), Some("kernel (no syscall)"));
    assert_eq!(culprit.syscall, None);
}

/// Without samples, the probes' word stands (they name a call only when
/// the holder held the CPU inside it), and nothing is made up without it.
#[test]
fn without_samples_the_probes_call_or_nothing() {
    let stall = wait_behind_openssl(&[], Some(SYS_MUNMAP));
    let culprit = stall.culprit.expect("a culprit");
    assert_eq!(culprit.samples, 0);
    assert_eq!(culprit.activity.as_deref(), Some("munmap"));
    let stall = wait_behind_openssl(&[], None);
    assert_eq!(stall.culprit.expect("a culprit").activity, None);
}

/// redis-server waits 16 ms, first on CPU 1 behind openssl, then moved to CPU 0 where its wait
/// ends: the stall (on CPU 0) carries openssl's ticks of CPU 1, and no other task's there.
#[test]
fn a_moved_waits_culprit_brings_its_stack_from_the_cpu_it_held() {
    const FIRST_CPU: u32 = 1;
    let start = 2_000 * MS;
    let user: Vec<u64> = USER_STACK.iter().map(|&(a, _)| a).collect();
    let mut records = Vec::new();
    for (at_ms, who) in [
        (3, task(OPENSSL, "openssl", NOISY)),
        (6, task(77, "other", ROOT)),
    ] {
        records.extend(stacks_sample_record(
            FIRST_CPU,
            start + at_ms * MS,
            who,
            None,
            IN_USER_CODE,
            &user,
        ));
    }
    records.extend(migrated_runq_record(
        CPU,
        start + 16 * MS,
        16 * MS,
        task(300, "redis-server", VICTIM),
        task(OPENSSL, "openssl", NOISY),
        FIRST_CPU,
        1,
    ));
    let report = analyse(&[names(), Entry::Records(records)]);
    let [stall] = report.stalls.as_slice() else {
        panic!("{:#?}", report.stalls);
    };
    assert_eq!(stall.cpu, CPU);
    let culprit = stall.culprit.as_ref().expect("a culprit");
    assert_eq!(culprit.comm, "openssl");
    assert_eq!(culprit.samples, 1, "openssl's tick only, not other's");
    assert_eq!(
        culprit.user_stack,
        ["sha256_block_data_order", "speed_main"]
    );
}
