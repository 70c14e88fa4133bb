//! Two private network namespaces joined by a veth pair: the receiving end's RX is
//! steered by RPS to one CPU, and a tc-bpf filter on its ingress can give every packet a cost
//! (a `bpf_loop` burner compiled with clang at run time). Traffic never leaves the pair. Dropping
//! `NetPair` removes the filter and both namespaces, which takes the veth pair with them.

use std::fs::{self, File};
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::thread;

use anyhow::{anyhow, Context, Result};

use super::command;

/// The sending and the receiving namespace, their veth ends and addresses.
const TX_NETNS: &str = "stalltop_tx";
const RX_NETNS: &str = "stalltop_rx";
const TX_DEV: &str = "stl_tx";
const RX_DEV: &str = "stl_rx";
pub const TX_ADDR: Ipv4Addr = Ipv4Addr::new(10, 213, 77, 1);
pub const RX_ADDR: Ipv4Addr = Ipv4Addr::new(10, 213, 77, 2);
const PREFIX_LEN: u8 = 24;

/// The per-packet burner; `LOOPS` is set with -D. `bpf_loop` needs BTF for its callback, hence
/// `-g` below.
const BURNER_SOURCE: &str = r#"// stalltop scenario: a per-packet cost on tc ingress.
#include <linux/bpf.h>
#include <linux/pkt_cls.h>

static long (*bpf_loop)(__u32 nr_loops, void *callback_fn, void *callback_ctx, __u64 flags) =
	(void *)BPF_FUNC_loop;

static long burn_step(__u64 index, void *ctx)
{
	volatile __u64 *acc = ctx;

	*acc += index;
	return 0;
}

__attribute__((section("tc"), used)) int burn(struct __sk_buff *skb)
{
	__u64 acc = 0;

	bpf_loop(LOOPS, burn_step, &acc, 0);
	return TC_ACT_OK;
}

char _license[] __attribute__((section("license"), used)) = "GPL";
"#;

/// Which end of the pair.
#[derive(Clone, Copy, Debug)]
pub enum Side {
    Tx,
    Rx,
}

/// The namespaces, removed on drop.
pub struct NetPair {
    rx_filter: bool,
}

impl Side {
    fn netns(self) -> &'static str {
        match self {
            Side::Tx => TX_NETNS,
            Side::Rx => RX_NETNS,
        }
    }
}

impl NetPair {
    /// Creates the pair with addresses and steers the receiving end's RX to `rps_cpu`.
    pub fn create(rps_cpu: usize) -> Result<Self> {
        command::require(
            "ip",
            "the ksoftirqd scenario builds its netns with iproute2",
        )?;
        for netns in [TX_NETNS, RX_NETNS] {
            if netns_path(netns).exists() {
                eprintln!("removing stale netns {netns} from an earlier run");
                command::run("ip", &["netns", "del", netns])?;
            }
        }
        command::run("ip", &["netns", "add", TX_NETNS])?;
        let pair = NetPair { rx_filter: false };
        command::run("ip", &["netns", "add", RX_NETNS])?;
        command::run(
            "ip",
            &[
                "link", "add", TX_DEV, "netns", TX_NETNS, "type", "veth", "peer", "name", RX_DEV,
                "netns", RX_NETNS,
            ],
        )?;
        for (netns, dev, addr) in [(TX_NETNS, TX_DEV, TX_ADDR), (RX_NETNS, RX_DEV, RX_ADDR)] {
            let cidr = format!("{addr}/{PREFIX_LEN}");
            command::run("ip", &["-n", netns, "addr", "add", &cidr, "dev", dev])?;
            command::run("ip", &["-n", netns, "link", "set", dev, "up"])?;
            command::run("ip", &["-n", netns, "link", "set", "lo", "up"])?;
        }
        // sysfs shows a netns's devices only to a mount made inside it: `ip netns exec` makes one.
        let mask = format!("{:x}", 1u64 << rps_cpu);
        let rps = format!("echo {mask} > /sys/class/net/{RX_DEV}/queues/rx-0/rps_cpus");
        command::run("ip", &["netns", "exec", RX_NETNS, "sh", "-c", &rps])?;
        Ok(pair)
    }

    /// Compiles the burner with `loops` iterations in `scratch` and attaches it to the receiving
    /// end's ingress.
    pub fn add_rx_cost(&mut self, loops: u32, scratch: &Path) -> Result<()> {
        command::require(
            "clang",
            "the per-packet cost is a tc-bpf program built at run time",
        )?;
        command::require("tc", "the per-packet cost is attached with tc (iproute2)")?;
        let source = scratch.join("burn.bpf.c");
        let object = scratch.join("burn.bpf.o");
        fs::write(&source, BURNER_SOURCE).with_context(|| format!("write {}", source.display()))?;
        let include = format!("-I/usr/include/{}-linux-gnu", std::env::consts::ARCH);
        let loops = format!("-DLOOPS={loops}");
        command::run(
            "clang",
            &[
                "-O2",
                "-g",
                "-target",
                "bpf",
                &include,
                &loops,
                "-c",
                path_str(&source)?,
                "-o",
                path_str(&object)?,
            ],
        )?;
        self.tc(&["qdisc", "add", "dev", RX_DEV, "clsact"])?;
        self.rx_filter = true;
        self.tc(&[
            "filter",
            "add",
            "dev",
            RX_DEV,
            "ingress",
            "bpf",
            "obj",
            path_str(&object)?,
            "sec",
            "tc",
            "da",
        ])?;
        Ok(())
    }

    fn tc(&self, args: &[&str]) -> Result<String> {
        let mut line = vec!["netns", "exec", RX_NETNS, "tc"];
        line.extend_from_slice(args);
        command::run("ip", &line)
    }

    /// A UDP socket bound to `addr` inside `side`'s namespace (a socket stays in the namespace
    /// it was made in, so a short-lived thread enters it and hands the socket back).
    pub fn udp_socket(&self, side: Side, addr: SocketAddrV4) -> Result<UdpSocket> {
        let netns = side.netns();
        let file = File::open(netns_path(netns)).with_context(|| format!("open netns {netns}"))?;
        thread::scope(|scope| {
            scope
                .spawn(|| {
                    // SAFETY: setns on a namespace file we hold open; it changes only the calling
                    // thread's network namespace, and this thread ends right after.
                    if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                        return Err(std::io::Error::last_os_error())
                            .with_context(|| format!("enter netns {netns}"));
                    }
                    UdpSocket::bind(addr).with_context(|| format!("bind {addr} in {netns}"))
                })
                .join()
                .map_err(|_| anyhow!("the thread entering netns {netns} panicked"))?
        })
    }
}

impl Drop for NetPair {
    fn drop(&mut self) {
        if self.rx_filter {
            if let Err(err) = self.tc(&["qdisc", "del", "dev", RX_DEV, "clsact"]) {
                eprintln!("warning: tc filter on {RX_DEV} not removed (the netns removal below takes it): {err:#}");
            }
        }
        for netns in [RX_NETNS, TX_NETNS] {
            if netns_path(netns).exists() {
                if let Err(err) = command::run("ip", &["netns", "del", netns]) {
                    eprintln!("warning: netns {netns} was not removed: {err:#}");
                }
            }
        }
    }
}

fn netns_path(netns: &str) -> PathBuf {
    Path::new("/run/netns").join(netns)
}

fn path_str(path: &Path) -> Result<&str> {
    path.to_str()
        .with_context(|| format!("{} is not UTF-8", path.display()))
}
