//! ksoftirqd takeover (CASES.md case 1's mechanism, repro.md A2): UDP from CPU 0 crosses a veth
//! pair between two private netns, RPS steers its RX to CPU 1, and a tc-bpf burner makes every
//! packet cost tens of microseconds, so NET_RX saturates CPU 1 while packets flow. A CFS hog in a
//! cpu cgroup of weight 262144 runs 50 ms bursts on CPU 1. NET_RX then runs inline at irq exits
//! inside the hog's slices until the kernel defers it to ksoftirqd/1, which waits out the rest of
//! the burst. Packets flow only from `LEAD_NS` before each burst to its end, so CPU 1 is busy for
//! about a third of the time (the host stalls a vCPU that stays busy long). The hog times its own
//! bursts and the time it lost to interrupts; the scenario also reads CPU 1's softnet counters
//! and ksoftirqd/1's CPU time.

use std::fs;
use std::io;
use std::net::{SocketAddrV4, UdpSocket};
use std::thread;

use anyhow::{bail, ensure, Context, Result};
use serde::Serialize;

use super::cgroup::CpuCgroup;
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
/// Packets start flowing this long before a burst, so ksoftirqd/1 is already busy (runnable)
/// when the hog wakes and preempts it.
const LEAD_NS: u64 = 20_000_000;
/// Offered load while flowing, sent in 1 ms batches; the UDP send buffer pushes back beyond
/// what CPU 1 drains (~18k pps with this cost).
const PACKETS_PER_SEC: u64 = 40_000;
const BATCH_NS: u64 = 1_000_000;
const PAYLOAD_BYTES: usize = 64;
const SINK_PORT: u16 = 9999;
/// bpf_loop iterations per packet: ~35-100 us each (repro.md A).
const BURN_LOOPS: u32 = 20_000;
/// A gap between the hog's clock reads longer than this: something else had the CPU.
const INTERRUPTION_NS: u64 = 2_000;
/// A gap no softirq explains: net_rx_action stops after netdev_budget_usecs (8 ms here) plus one
/// 64-packet NAPI batch (~3 ms); anything this long is the host stalling the vCPU.
pub const VCPU_STALL_NS: u64 = 15_000_000;

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
    /// ksoftirqd/1's own CPU time (schedstat) from the window's start until packets drained.
    pub ksoftirqd_oncpu_ns: u64,
}

impl Fixture {
    pub fn prepare() -> Result<Self> {
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
    for entry in fs::read_dir("/proc").context("list /proc")? {
        let entry = entry?;
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if fs::read_to_string(entry.path().join("comm")).is_ok_and(|comm| comm.trim() == name) {
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
fn flood(window: &Window, socket: &UdpSocket, starts: &[u64]) -> Result<Flood> {
    setup::pin_current_thread(FLOOD_CPU)?;
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
                return Ok(totals);
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
    }
    Ok(totals)
}

pub fn run(window: &Window, fixture: Fixture) -> Result<(Measured, Injected)> {
    let starts = schedule(window);
    ensure!(
        starts.len() >= 5,
        "the ksoftirqd scenario needs a window of at least {} ms for 5 bursts",
        (FIRST_BURST_NS + 4 * PERIOD_NS + BURST_NS) / 1_000_000
    );
    let hog_cgroup = CpuCgroup::create(HOG_CGROUP)?;
    hog_cgroup.set_shares(HOG_SHARES)?;
    let flood_cgroup = CpuCgroup::create(FLOOD_CGROUP)?;
    let softnet_before = softnet(CPU)?;
    let ksoftirqd_before = oncpu_ns(fixture.ksoftirqd_pid)?;
    let ((bursts, hog_tid), flood) = thread::scope(|scope| {
        let _cancel = window.cancel_on_drop();
        // Window::spawn pins to CPU 1; the flood moves itself to CPU 0 first thing.
        let flood = window.spawn(scope, FLOOD_COMM, &flood_cgroup, || {
            flood(window, &fixture.flood_socket, &starts)
        })?;
        let hog = window.spawn(scope, hog::COMM, &hog_cgroup, || hog(window, &starts))?;
        anyhow::Ok((hog.join()?, flood.join()?))
    })?;
    // The backlog drains within ~50 ms of the last packet.
    thread::sleep(std::time::Duration::from_millis(200));
    let softnet = softnet(CPU)?.since(softnet_before);
    let ksoftirqd_oncpu_ns = oncpu_ns(fixture.ksoftirqd_pid)?.saturating_sub(ksoftirqd_before);
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
        }),
        ..Injected::default()
    };
    Ok((measured, injected))
}
