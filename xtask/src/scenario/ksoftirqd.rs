//! ksoftirqd takeover (docs/cases.md, case 1's mechanism): UDP from CPU 0 crosses a veth
//! pair between two private netns, RPS steers its RX to CPU 1, and a tc-bpf burner makes every
//! packet cost tens of microseconds, so NET_RX saturates CPU 1 while packets flow. A CFS hog in a
//! cpu cgroup of weight 262144 runs 50 ms bursts on CPU 1. NET_RX then runs inline at irq exits
//! inside the hog's slices until the kernel defers it to ksoftirqd/1, which waits out the rest of
//! the burst. Packets flow only from `LEAD_NS` before each burst to its end, so CPU 1 is busy
//! for less than half of the time, in phases of ~100 ms (the host stalls a vCPU that stays busy
//! long). The hog times its own bursts and the time it lost to interrupts; a watcher on CPU 0
//! polls when ksoftirqd/1 next runs after each burst; the scenario also reads CPU 1's softnet
//! counters and steal time and ksoftirqd/1's CPU time.

use std::fs;
use std::io;
use std::net::{SocketAddrV4, UdpSocket};
use std::os::unix::fs::FileExt;
use std::thread;
use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};
use serde::Serialize;

use super::cgroup::CpuCgroup;
use super::host;
use super::netns::{NetPair, Side, RX_ADDR, TX_ADDR};
use super::setup;
use super::task::{self, Window};
use super::{hog, Cgroups, Injected, Measured, CPU};

/// v1 cpu cgroup of the hog: a weight that leaves ksoftirqd/1 (weight 1024) about 0.4%.
const HOG_CGROUP: &str = "stalltop_hog";
const HOG_SHARES: u64 = 262_144;
pub const FLOOD_COMM: &str = "flood";
const FLOOD_CGROUP: &str = "stalltop_flood";
/// The sender's CPU: RPS then carries every packet to `CPU` by IPI; on `CPU` itself the RX would
/// run inline in the sender's own bottom-half enable.
const FLOOD_CPU: usize = 0;

const BURST_NS: u64 = 50_000_000;
/// Burst every 200 ms: the hog's duty cycle is 25%.
const PERIOD_NS: u64 = 200_000_000;
const FIRST_BURST_NS: u64 = 300_000_000;
/// The checks judge 10 bursts at least (`checks::contamination::MIN_CLEAN_BURSTS`): room for a
/// few stalled.
const MIN_BURSTS: u64 = 12;
/// Packets start flowing this long before a burst, so ksoftirqd/1 is already busy (runnable)
/// when the hog wakes and preempts it.
const LEAD_NS: u64 = 20_000_000;
/// Offered load while flowing, sent in 1 ms batches; the UDP send buffer pushes back beyond
/// what CPU 1 drains (~18k pps with this cost).
const PACKETS_PER_SEC: u64 = 40_000;
const BATCH_NS: u64 = 1_000_000;
const PAYLOAD_BYTES: usize = 64;
const SINK_PORT: u16 = 9999;
/// After a burst the flood watches this long for ksoftirqd/1 to run (it drains a full backlog
/// in ~50 ms; it is normally switched in within 50 us of the burst's end).
const WATCH_NS: u64 = 60_000_000;

/// bpf_loop iterations per packet: ~35-100 us each.
const BURN_LOOPS: u32 = 20_000;
/// A gap between the hog's clock reads longer than this: something else had the CPU.
const INTERRUPTION_NS: u64 = 2_000;
/// A gap no softirq explains: net_rx_action stops after netdev_budget_usecs (8 ms here) plus
/// one 64-packet NAPI batch (up to ~6 ms at 100 us a packet), measured up to 13 ms; anything this
/// long is the host stalling the vCPU.
pub const VCPU_STALL_NS: u64 = 20_000_000;

/// Built before the window: the namespaces with the burner and the sink; removed on drop.
pub struct Fixture {
    /// Never read: packets pile up in its receive buffer and are dropped there, after NET_RX.
    _sink: UdpSocket,
    flood_socket: UdpSocket,
    _net: NetPair,
    _scratch: Scratch,
    ksoftirqd_pid: u32,
}

/// The directory the burner is compiled in.
struct Scratch(std::path::PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Err(err) = fs::remove_dir_all(&self.0) {
            eprintln!("warning: {} was not removed: {err}", self.0.display());
        }
    }
}

/// One burst of the hog, as it timed it.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Burst {
    pub start_ns: u64,
    pub end_ns: u64,
    /// Time taken from the hog inside the burst by interrupts, softirqs or other tasks (gaps
    /// over 2 us between its clock reads), vCPU stalls excluded.
    pub interrupted_ns: u64,
    pub longest_gap_ns: u64,
    /// Gaps of at least `VCPU_STALL_NS`: the host stopped the vCPU.
    pub vcpu_stall_ns: u64,
    /// ksoftirqd/1's first switch-in after the burst's planned end, as polled from CPU 0.
    pub ksoftirqd: Switch,
}

/// What the watcher on CPU 0 saw of ksoftirqd/1 after a burst.
#[derive(Clone, Copy, Debug, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Switch {
    /// Switched in by `at_ns`, and not yet `within_ns` before it.
    In { at_ns: u64, within_ns: u64 },
    /// Not within `WATCH_NS` of the burst's end.
    NotWithin,
    /// The watcher itself got to run only after the burst ended (CPU 0 was busy or stalled):
    /// it could have missed the switch-in.
    WatcherLate { by_ns: u64 },
}

/// CPU 1's row of /proc/net/softnet_stat, as a delta.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Softnet {
    pub processed: u64,
    pub dropped: u64,
    pub time_squeeze: u64,
    pub received_rps: u64,
}

#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Flood {
    pub sent: u64,
    /// Sends refused because the socket's send buffer was full (backpressure).
    pub refused: u64,
    pub packets_per_sec: u64,
    pub burn_loops: u32,
}

#[derive(Debug, Serialize)]
pub struct Truth {
    pub hog_comm: &'static str,
    pub hog_pid: u32,
    pub hog_tid: u32,
    pub hog_cgroup: String,
    pub hog_shares: u64,
    pub bursts: Vec<Burst>,
    pub flood: Flood,
    pub softnet: Softnet,
    pub ksoftirqd_pid: u32,
    /// ksoftirqd/1's own CPU time (schedstat) from the window's start until packets drained;
    /// time the host stole from the vCPU is not in it (PARAVIRT_TIME_ACCOUNTING).
    pub ksoftirqd_oncpu_ns: u64,
    /// CPU 1's steal time over the same interval (/proc/stat, in USER_HZ ticks).
    pub steal_ns: u64,
    pub steal_tick_ns: u64,
}

impl Fixture {
    pub fn prepare(duration: Duration) -> Result<Self> {
        let bursts =
            (duration.as_nanos() as u64).saturating_sub(FIRST_BURST_NS + BURST_NS) / PERIOD_NS + 1;
        ensure!(
            duration.as_nanos() as u64 >= FIRST_BURST_NS + BURST_NS && bursts >= MIN_BURSTS,
            "the ksoftirqd scenario needs a window of at least {} ms for {MIN_BURSTS} bursts",
            (FIRST_BURST_NS + (MIN_BURSTS - 1) * PERIOD_NS + BURST_NS) / 1_000_000
        );
        let scratch = std::env::temp_dir().join("stalltop-ksoftirqd");
        if scratch.exists() {
            fs::remove_dir_all(&scratch)
                .with_context(|| format!("rm -r stale {}", scratch.display()))?;
        }
        fs::create_dir(&scratch).with_context(|| format!("mkdir {}", scratch.display()))?;
        let scratch = Scratch(scratch);
        let mut net = NetPair::create(CPU)?;
        net.add_rx_cost(BURN_LOOPS, &scratch.0)?;
        let sink = net.udp_socket(Side::Rx, SocketAddrV4::new(RX_ADDR, SINK_PORT))?;
        let flood_socket = net.udp_socket(Side::Tx, SocketAddrV4::new(TX_ADDR, 0))?;
        flood_socket
            .connect(SocketAddrV4::new(RX_ADDR, SINK_PORT))
            .context("connect the flood socket")?;
        flood_socket
            .set_nonblocking(true)
            .context("make the flood socket non-blocking")?;
        Ok(Fixture {
            _sink: sink,
            flood_socket,
            _net: net,
            _scratch: scratch,
            ksoftirqd_pid: ksoftirqd_pid(CPU)?,
        })
    }
}

/// The pid of `ksoftirqd/<cpu>`.
fn ksoftirqd_pid(cpu: usize) -> Result<u32> {
    let name = format!("ksoftirqd/{cpu}");
    for (pid, dir) in host::proc_pids()? {
        if fs::read_to_string(dir.join("comm")).is_ok_and(|comm| comm.trim() == name) {
            return Ok(pid);
        }
    }
    bail!("no {name} thread in /proc")
}

/// A task's total on-CPU time (first field of /proc/<pid>/schedstat).
fn oncpu_ns(pid: u32) -> Result<u64> {
    let path = format!("/proc/{pid}/schedstat");
    let text = fs::read_to_string(&path).with_context(|| format!("read {path}"))?;
    text.split_whitespace()
        .next()
        .and_then(|field| field.parse().ok())
        .with_context(|| format!("{path}: {text:?}"))
}

/// `cpu`'s row of /proc/net/softnet_stat (rows are per online CPU; the last column names it).
fn softnet(cpu: usize) -> Result<Softnet> {
    let text = fs::read_to_string("/proc/net/softnet_stat").context("read softnet_stat")?;
    for line in text.lines() {
        let fields: Vec<u64> = line
            .split_whitespace()
            .map(|field| u64::from_str_radix(field, 16))
            .collect::<Result<_, _>>()
            .with_context(|| format!("softnet_stat line {line:?}"))?;
        if fields.len() >= 13 && fields[12] == cpu as u64 {
            return Ok(Softnet {
                processed: fields[0],
                dropped: fields[1],
                time_squeeze: fields[2],
                received_rps: fields[9],
            });
        }
    }
    bail!("/proc/net/softnet_stat has no row for CPU {cpu}")
}

impl Softnet {
    fn since(self, earlier: Softnet) -> Softnet {
        Softnet {
            processed: self.processed.wrapping_sub(earlier.processed) & 0xffff_ffff,
            dropped: self.dropped.wrapping_sub(earlier.dropped) & 0xffff_ffff,
            time_squeeze: self.time_squeeze.wrapping_sub(earlier.time_squeeze) & 0xffff_ffff,
            received_rps: self.received_rps.wrapping_sub(earlier.received_rps) & 0xffff_ffff,
        }
    }
}

/// Nanoseconds per /proc/stat tick (USER_HZ).
/// The planned start of every burst that ends before the deadline.
fn schedule(window: &Window) -> Vec<u64> {
    let mut starts = Vec::new();
    let mut start = window.start_ns() + FIRST_BURST_NS;
    while start + BURST_NS <= window.deadline_ns() {
        starts.push(start);
        start += PERIOD_NS;
    }
    starts
}

/// The hog: sleeps until each planned start, then spins for `BURST_NS`, timing the gaps.
fn hog(window: &Window, starts: &[u64]) -> Result<(Vec<Burst>, u32)> {
    let tid = setup::gettid();
    let mut bursts = Vec::with_capacity(starts.len());
    for &planned in starts {
        task::sleep_until(window, planned)?;
        if window.cancelled() {
            break;
        }
        let start_ns = task::monotonic_ns();
        let until = start_ns + BURST_NS;
        let mut burst = Burst {
            start_ns,
            end_ns: start_ns,
            interrupted_ns: 0,
            longest_gap_ns: 0,
            vcpu_stall_ns: 0,
            ksoftirqd: Switch::NotWithin,
        };
        let mut last = start_ns;
        while last < until {
            let now = task::monotonic_ns();
            let gap = now - last;
            if gap >= VCPU_STALL_NS {
                burst.vcpu_stall_ns += gap;
            } else if gap > INTERRUPTION_NS {
                burst.interrupted_ns += gap;
            }
            burst.longest_gap_ns = burst.longest_gap_ns.max(gap);
            last = now;
        }
        burst.end_ns = last;
        bursts.push(burst);
    }
    Ok((bursts, tid))
}

/// The flood, on CPU 0: `PACKETS_PER_SEC` in 1 ms batches from `LEAD_NS` before each burst to
/// its planned end.
/// Watches ksoftirqd/N from another CPU: its schedstat's timeslice count goes up each time it
/// is switched in.
struct Watch {
    file: fs::File,
}

impl Watch {
    fn open(pid: u32) -> Result<Self> {
        let path = format!("/proc/{pid}/schedstat");
        Ok(Watch {
            file: fs::File::open(&path).with_context(|| format!("open {path}"))?,
        })
    }

    fn switch_ins(&self) -> Result<u64> {
        let mut buffer = [0u8; 96];
        let n = self
            .file
            .read_at(&mut buffer, 0)
            .context("read ksoftirqd's schedstat")?;
        let text = std::str::from_utf8(&buffer[..n]).context("schedstat is not text")?;
        text.split_whitespace()
            .nth(2)
            .and_then(|field| field.parse().ok())
            .with_context(|| format!("schedstat: {text:?}"))
    }

    /// Polls from now (before `end_ns`) until ksoftirqd is switched in, at most `WATCH_NS`
    /// after `end_ns`. A read that still shows the old count proves only that the switch-in
    /// came after the read began (the watcher can be preempted between a read and its clock
    /// read), so the window runs from the start of the last such read to the end of the read
    /// that shows the new count.
    fn first_switch_in_after(&self, end_ns: u64) -> Result<Switch> {
        let mut unchanged_since = task::monotonic_ns();
        let before = self.switch_ins()?;
        let read = task::monotonic_ns();
        if read >= end_ns {
            return Ok(Switch::WatcherLate {
                by_ns: read - end_ns,
            });
        }
        loop {
            let started = task::monotonic_ns();
            if started >= end_ns + WATCH_NS {
                return Ok(Switch::NotWithin);
            }
            let count = self.switch_ins()?;
            let read = task::monotonic_ns();
            if count != before {
                return Ok(Switch::In {
                    at_ns: read,
                    within_ns: read - unchanged_since,
                });
            }
            unchanged_since = started;
        }
    }
}

/// The flood, on CPU 0: `PACKETS_PER_SEC` in 1 ms batches from `LEAD_NS` before each burst to
/// its planned end; right after the last batch (~0.8 ms before the end) it watches for
/// ksoftirqd/1's first switch-in after the burst (for `WATCH_NS` at most).
fn flood(
    window: &Window,
    socket: &UdpSocket,
    starts: &[u64],
    ksoftirqd: &Watch,
) -> Result<(Flood, Vec<Switch>)> {
    task::pin_to_cpu(FLOOD_CPU)?;
    let mut switch_ins = Vec::with_capacity(starts.len());
    let per_batch = PACKETS_PER_SEC * BATCH_NS / 1_000_000_000;
    let payload = [0u8; PAYLOAD_BYTES];
    let mut totals = Flood {
        packets_per_sec: PACKETS_PER_SEC,
        burn_loops: BURN_LOOPS,
        ..Flood::default()
    };
    for &start in starts {
        let end = start + BURST_NS;
        let mut batch = start - LEAD_NS;
        while batch < end {
            task::sleep_until(window, batch)?;
            if window.cancelled() {
                return Ok((totals, switch_ins));
            }
            for _ in 0..per_batch {
                match socket.send(&payload) {
                    Ok(_) => totals.sent += 1,
                    Err(err)
                        if err.kind() == io::ErrorKind::WouldBlock
                            || err.raw_os_error() == Some(libc::ENOBUFS) =>
                    {
                        totals.refused += 1
                    }
                    Err(err) => return Err(err).context("send to the sink"),
                }
            }
            batch += BATCH_NS;
        }
        switch_ins.push(ksoftirqd.first_switch_in_after(end)?);
    }
    Ok((totals, switch_ins))
}

pub fn run(window: &Window, fixture: Fixture) -> Result<(Measured, Injected)> {
    let starts = schedule(window);
    let hog_cgroup = CpuCgroup::create(HOG_CGROUP)?;
    hog_cgroup.set_shares(HOG_SHARES)?;
    let flood_cgroup = CpuCgroup::create(FLOOD_CGROUP)?;
    let softnet_before = softnet(CPU)?;
    let ksoftirqd_before = oncpu_ns(fixture.ksoftirqd_pid)?;
    let steal_before = host::steal_ns(CPU)?;
    let watch = Watch::open(fixture.ksoftirqd_pid)?;
    let ((mut bursts, hog_tid), (flood, switch_ins)) = thread::scope(|scope| {
        let _cancel = window.cancel_on_drop();
        // Window::spawn pins to CPU 1; the flood moves itself to CPU 0 first thing.
        let flood = window.spawn(scope, FLOOD_COMM, &flood_cgroup, || {
            flood(window, &fixture.flood_socket, &starts, &watch)
        })?;
        let hog = window.spawn(scope, hog::COMM, &hog_cgroup, || hog(window, &starts))?;
        anyhow::Ok((hog.join()?, flood.join()?))
    })?;
    for (burst, seen) in bursts.iter_mut().zip(switch_ins) {
        burst.ksoftirqd = seen;
    }
    // The backlog drains within ~50 ms of the last packet.
    thread::sleep(Duration::from_millis(200));
    let softnet = softnet(CPU)?.since(softnet_before);
    let ksoftirqd_oncpu_ns = oncpu_ns(fixture.ksoftirqd_pid)?.saturating_sub(ksoftirqd_before);
    let steal_ns = host::steal_ns(CPU)?.saturating_sub(steal_before);
    let ksoftirqd_pid = fixture.ksoftirqd_pid;
    drop(fixture);
    if !window.cancelled() {
        ensure!(
            softnet.processed > 0,
            "CPU {CPU} processed none of the {} packets sent: RPS did not steer them \
             (softnet_stat delta {softnet:?})",
            flood.sent
        );
    }
    let measured = Measured {
        cgroups: Cgroups {
            noisy: Some(hog_cgroup.path().to_owned()),
            ..Cgroups::default()
        },
        ..Measured::default()
    };
    let injected = Injected {
        ksoftirqd: Some(Truth {
            hog_comm: hog::COMM,
            hog_pid: std::process::id(),
            hog_tid,
            hog_cgroup: hog_cgroup.path().to_owned(),
            hog_shares: HOG_SHARES,
            bursts,
            flood,
            softnet,
            ksoftirqd_pid,
            ksoftirqd_oncpu_ns,
            steal_ns,
            steal_tick_ns: host::tick_ns(),
        }),
        ..Injected::default()
    };
    Ok((measured, injected))
}
