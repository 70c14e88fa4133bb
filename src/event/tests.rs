//! Decoding: back-to-back records, damage.

use super::testing::*;
use super::*;

#[test]
fn decodes_back_to_back_records() {
    let mut bytes = runq_record(
        KIND_RUNQ,
        1,
        5_000,
        12_000_000,
        task(42, "victim", 7),
        task(43, "hog", 8),
        None,
        0,
    );
    bytes.extend(runq_record(
        KIND_TAKEOVER,
        1,
        9_000,
        100_000_000,
        task(15, "ksoftirqd/1", 1),
        task(99, "cadvisor", 9),
        Some((0, 150_000_000)),
        0,
    ));
    let events = decode(&bytes);
    assert_eq!(events.len(), 2);
    let Ok(Event::Runq(w)) = &events[0] else {
        panic!("{:?}", events[0])
    };
    assert_eq!(
        (w.cpu, w.wait_ns, w.waiter.comm.as_str()),
        (1, 12_000_000, "victim")
    );
    assert_eq!((w.ran.pid, w.ran.cgroup, w.ran_syscall), (43, 8, None));
    let Ok(Event::Takeover(t)) = &events[1] else {
        panic!("{:?}", events[1])
    };
    assert_eq!(t.ran.comm, "cadvisor");
    assert_eq!(t.ran_syscall, Some((0, 150_000_000)));
}

#[test]
fn a_throttled_wait_names_the_throttled_cgroup_and_how_much_it_covered() {
    let bytes = throttled_runq_record(
        0,
        90_000_000,
        88_000_000,
        task(42, "worker", 7),
        task(9, "kdamond.0", 1),
        5,
        86_000_000,
    );
    let events = decode(&bytes);
    let [Ok(Event::Runq(w))] = &events[..] else {
        panic!("{events:?}")
    };
    assert_eq!(
        w.throttle,
        Some(WaitThrottle {
            cgroup: 5,
            covered_ns: 86_000_000
        })
    );
    assert_eq!(w.ran.comm, "kdamond.0");
}

#[test]
fn run_queue_records_of_the_layout_before_throttles_still_decode() {
    let mut bytes = runq_record(
        KIND_RUNQ,
        1,
        5_000,
        12_000_000,
        task(42, "victim", 7),
        task(43, "hog", 8),
        None,
        0,
    );
    bytes.truncate(RUNQ_EVENT_BEFORE_THROTTLE);
    bytes[2..4].copy_from_slice(&(RUNQ_EVENT_BEFORE_THROTTLE as u16).to_le_bytes());
    let events = decode(&bytes);
    let [Ok(Event::Runq(w))] = &events[..] else {
        panic!("{events:?}")
    };
    assert_eq!(
        (w.wait_ns, w.ran.comm.as_str(), w.throttle),
        (12_000_000, "hog", None)
    );
}

#[test]
fn a_wait_moved_between_cpus_says_where_it_began_and_how_often_it_moved() {
    let bytes = migrated_runq_record(
        1,
        90_000_000,
        37_000_000,
        task(42, "victim", 7),
        task(9, "hog0", 1),
        0,
        1,
    );
    let events = decode(&bytes);
    let [Ok(Event::Runq(w))] = &events[..] else {
        panic!("{events:?}")
    };
    assert_eq!(
        w.migrated,
        Some(WaitMigrated {
            from_cpu: 0,
            migrations: 1
        })
    );
    assert_eq!((w.cpu, w.wait_ns), (1, 37_000_000));
}

#[test]
fn run_queue_records_of_the_layout_before_migrations_still_decode() {
    let mut bytes = throttled_runq_record(
        1,
        5_000,
        12_000_000,
        task(42, "victim", 7),
        task(43, "hog", 8),
        5,
        11_000_000,
    );
    bytes.truncate(RUNQ_EVENT_BEFORE_MIGRATIONS);
    bytes[2..4].copy_from_slice(&(RUNQ_EVENT_BEFORE_MIGRATIONS as u16).to_le_bytes());
    let events = decode(&bytes);
    let [Ok(Event::Runq(w))] = &events[..] else {
        panic!("{events:?}")
    };
    assert_eq!(
        (w.wait_ns, w.throttle.map(|t| t.cgroup), w.migrated),
        (12_000_000, Some(5), None)
    );
}

#[test]
fn a_gap_says_how_much_of_it_the_hypervisor_took_and_older_records_say_none() {
    let mut bytes = stolen_gap_record(1, 90_000_000, task(42, "worker", 7), 30_000_000, 22_000_000);
    let events = decode(&bytes);
    let [Ok(Event::Irqoff(s))] = &events[..] else {
        panic!("{events:?}")
    };
    assert_eq!((s.gap_ns, s.gap_steal_ns), (30_000_000, 22_000_000));

    bytes.truncate(SAMPLE_EVENT_BEFORE_STEAL);
    bytes[2..4].copy_from_slice(&(SAMPLE_EVENT_BEFORE_STEAL as u16).to_le_bytes());
    let events = decode(&bytes);
    let [Ok(Event::Irqoff(s))] = &events[..] else {
        panic!("{events:?}")
    };
    assert_eq!((s.gap_ns, s.gap_steal_ns), (30_000_000, 0));
}

#[test]
fn a_long_hardirq_handler_is_named_with_its_irq_and_the_task_it_interrupted() {
    let bytes = hardirq_record(
        0,
        90_000_000,
        12_000_000,
        25,
        "virtio0-input.0",
        task(42, "api", 7),
    );
    let events = decode(&bytes);
    let [Ok(Event::Hardirq(h))] = &events[..] else {
        panic!("{events:?}")
    };
    assert_eq!(
        (h.irq, h.handler.as_str(), h.run_ns, h.ctx.comm.as_str()),
        (25, "virtio0-input.0", 12_000_000, "api")
    );
}

#[test]
fn unknown_kinds_are_skipped_and_damage_ends_the_buffer() {
    let mut bytes = Vec::new();
    let unknown = header(200, 24, 0, 1);
    // SAFETY: record_header is Plain.
    bytes.extend(unsafe { plain::as_bytes(&unknown) });
    bytes.extend([0u8; 8]);
    bytes.extend(runq_record(
        KIND_RUNQ,
        0,
        2,
        3,
        task(1, "a", 1),
        task(2, "b", 1),
        None,
        0,
    ));
    bytes.extend([1u8, 0, 0]);
    let events = decode(&bytes);
    assert_eq!(events[0], Err(DecodeError::UnknownKind(200)));
    assert!(matches!(events[1], Ok(Event::Runq(_))));
    assert_eq!(events[2], Err(DecodeError::Truncated(3)));
    assert_eq!(events.len(), 3);
}

#[test]
fn comm_stops_at_nul_and_survives_bad_utf8() {
    assert_eq!(comm_str(b"hog\0\0\0garbage"), "hog");
    assert_eq!(comm_str(&[0xff, b'x']), "\u{fffd}x");
}
