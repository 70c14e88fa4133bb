//! Real-kernel tests of the probes (root, as in CI): load each program
//! family, make two threads of ours fight for one CPU, and check what the
//! ring buffer and the maps say about them; check that nothing stays
//! attached afterwards.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::*;
use crate::event::{self, Event};
use crate::host;

/// Workload tests pin threads to one CPU; run them one at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

const CPU: usize = 1;
const SPIN: Duration = Duration::from_millis(400);

fn config(attach: AttachMode) -> ProbeConfig {
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "probe tests load BPF programs: run them as root (CI does)"
    );
    ProbeConfig {
        attach,
        runq_threshold_ns: 1_000_000,
        stall_threshold_ns: 10_000_000,
        syscall_wall_threshold_ns: 10_000_000,
        syscall_oncpu_threshold_ns: 1_000_000,
        sample_hz: 1000,
        cgroup_v1_cpu: crate::cgroup::Hierarchy::detect()
            .expect("a cgroup hierarchy")
            .uses_v1_cpu(),
        ksoftirqd: host::ksoftirqd_threads(),
    }
}

/// The cgroup id the probes attribute this process to.
fn own_cgroup_id(config: &ProbeConfig) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let hierarchy = crate::cgroup::Hierarchy::detect().unwrap();
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    let path = cgroups
        .lines()
        .find_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            let wanted = if config.cgroup_v1_cpu {
                controllers.split(',').any(|c| c == "cpu")
            } else {
                controllers.is_empty()
            };
            wanted.then(|| path.to_string())
        })
        .expect("this process's cgroup");
    let dir = hierarchy.root().join(path.trim_start_matches('/'));
    std::fs::metadata(dir).unwrap().ino()
}

/// A thread named `name`, pinned to CPU, busy for SPIN.
fn spinner(name: &'static str) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let cname = std::ffi::CString::new(name).unwrap();
        // SAFETY: PR_SET_NAME reads a NUL-terminated string; cpu_set_t is
        // plain data initialised by CPU_ZERO/CPU_SET.
        unsafe {
            libc::prctl(libc::PR_SET_NAME, cname.as_ptr());
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(CPU, &mut set);
            assert_eq!(
                libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set),
                0
            );
        }
        let end = Instant::now() + SPIN;
        while Instant::now() < end {
            std::hint::spin_loop();
        }
    })
}

fn fight_for_one_cpu(attach: AttachMode) {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let config = config(attach);
    let own_cgroup = own_cgroup_id(&config);
    let mut storage = ObjectStorage::default();
    let mut session = Session::start(&config, &mut storage).expect("probes load");
    let expected_family = match attach {
        AttachMode::RawTp => "raw_tp",
        _ => "tp_btf",
    };
    assert_eq!(session.info().attach, expected_family);

    let threads = [spinner("st-spin-a"), spinner("st-spin-b")];
    let mut records = Vec::new();
    let deadline = Instant::now() + SPIN + Duration::from_millis(300);
    while Instant::now() < deadline {
        records.extend(session.poll(Duration::from_millis(50)));
    }
    threads.into_iter().for_each(|t| t.join().unwrap());
    records.extend(session.poll(Duration::from_millis(10)));
    let snapshot = session.snapshot(host::monotonic_ns());

    let spinners = ["st-spin-a", "st-spin-b"];
    let waits: Vec<_> = event::decode(&records)
        .into_iter()
        .filter_map(|e| match e {
            Ok(Event::Runq(w)) if spinners.contains(&w.waiter.comm.as_str()) => Some(w),
            _ => None,
        })
        .collect();
    assert!(
        waits.iter().any(|w| spinners.contains(&w.ran.comm.as_str())
            && w.ran.comm != w.waiter.comm
            && w.cpu == CPU as u32
            && w.wait_ns >= 1_000_000
            && w.waiter.cgroup == own_cgroup),
        "no wait of one spinner behind the other on cpu {CPU} in cgroup {own_cgroup}: {waits:#?}"
    );

    let ours = snapshot
        .runq
        .iter()
        .find(|r| r.cgroup == own_cgroup)
        .unwrap_or_else(|| panic!("no runq stats for cgroup {own_cgroup}: {:?}", snapshot.runq));
    assert!(ours.count >= waits.len() as u64);
    assert!(ours.max_ns >= 1_000_000, "{ours:?}");
    assert!(ours.preempted_same_cgroup >= 1, "{ours:?}");
    assert!(
        snapshot
            .preemptors
            .iter()
            .any(|p| p.victim_cgroup == own_cgroup
                && p.preemptor_cgroup == own_cgroup
                && spinners.contains(&p.comm.as_str())),
        "{:?}",
        snapshot.preemptors
    );
    assert!(snapshot.counters.lost.iter().all(|(_, n)| *n == 0));

    let ids = program_ids_of_this_process();
    assert!(!ids.is_empty(), "the session's programs are not loaded?");
    drop(session);
    let left: Vec<u32> = program_ids_of_this_process();
    assert!(
        left.is_empty(),
        "programs still loaded after the session ended: {left:?}"
    );
}

/// Ids of the BPF programs this process holds open (from fdinfo).
fn program_ids_of_this_process() -> Vec<u32> {
    let mut ids = Vec::new();
    for fd in std::fs::read_dir("/proc/self/fdinfo").unwrap().flatten() {
        if let Ok(info) = std::fs::read_to_string(fd.path()) {
            ids.extend(
                info.lines()
                    .find_map(|l| l.strip_prefix("prog_id:"))
                    .and_then(|id| id.trim().parse::<u32>().ok()),
            );
        }
    }
    ids
}

#[test]
fn tp_btf_probes_see_a_thread_preempted_by_its_sibling() {
    fight_for_one_cpu(AttachMode::TpBtf);
}

#[test]
fn raw_tp_probes_see_a_thread_preempted_by_its_sibling() {
    fight_for_one_cpu(AttachMode::RawTp);
}

#[test]
fn auto_mode_picks_tp_btf_on_this_kernel() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let config = config(AttachMode::Auto);
    let mut storage = ObjectStorage::default();
    let session = Session::start(&config, &mut storage).expect("probes load");
    assert_eq!(session.info().attach, "tp_btf");
}
