//! The bench's workloads and what one run of each measured: its wall time,
//! and for the server its request rate. Owns the redis-server it drives.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

const GETPID_CALLS: u32 = 2_000_000;
/// Requests of each of GET and SET per redis-benchmark run: a few seconds
/// here (about 35k requests/s over loopback on 2 CPUs).
const REDIS_REQUESTS: u32 = 60_000;
const REDIS_CLIENTS: &str = "20";
/// A redis-benchmark run that takes longer than this is killed.
const REDIS_RUN_LIMIT: Duration = Duration::from_secs(120);
const REDIS_START_LIMIT: Duration = Duration::from_secs(10);

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug, clap::ValueEnum)]
pub enum Workload {
    /// `perf bench sched messaging -g 5 -l 1000`: scheduler and syscall
    /// heavy (about 60k switches, 4M syscalls).
    Messaging,
    /// `perf bench sched pipe -l 100000`: two tasks handing a token back and
    /// forth, about 400k context switches with short waits: the ordinary
    /// path of the scheduler probe.
    Pipe,
    /// `getpid()` called GETPID_CALLS (2M) times: the per-syscall cost, undiluted.
    Getpid,
    /// redis-benchmark against a redis-server on loopback: a real server.
    Redis,
}

pub const WORKLOADS: [Workload; 4] = [
    Workload::Messaging,
    Workload::Pipe,
    Workload::Getpid,
    Workload::Redis,
];

/// What one run of a workload measured.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Outcome {
    pub wall_s: f64,
    /// The server's throughput, for the server workload.
    pub requests_per_s: Option<f64>,
}

impl Outcome {
    /// What the run cost, larger when slower: its wall time, or for the
    /// server the time per request. A ratio of costs is the slowdown.
    pub fn cost(&self) -> f64 {
        match self.requests_per_s {
            Some(rps) => 1.0 / rps,
            None => self.wall_s,
        }
    }
}

impl Workload {
    pub fn name(self) -> String {
        match self {
            Workload::Messaging => "perf bench sched messaging -g 5 -l 1000".into(),
            Workload::Pipe => "perf bench sched pipe -l 100000".into(),
            Workload::Getpid => "getpid() x 2M".into(),
            Workload::Redis => format!(
                "redis-benchmark -c {REDIS_CLIENTS} -t get,set -n {REDIS_REQUESTS} (loopback)"
            ),
        }
    }

    pub fn run(self, redis: &RedisServer) -> Result<Outcome> {
        if self != Workload::Redis {
            return self.wall_time();
        }
        let start = Instant::now();
        let rps = redis.benchmark()?;
        Ok(Outcome {
            wall_s: start.elapsed().as_secs_f64(),
            requests_per_s: Some(rps),
        })
    }

    /// A run of a workload that drives no server: its wall time (perf
    /// bench's own "Total time" for its workloads).
    pub fn wall_time(self) -> Result<Outcome> {
        let start = Instant::now();
        let wall_s = match self {
            Workload::Messaging => perf_bench(&["messaging", "-g", "5", "-l", "1000"])?,
            Workload::Pipe => perf_bench(&["pipe", "-l", "100000"])?,
            Workload::Getpid => {
                for _ in 0..GETPID_CALLS {
                    // SAFETY: getpid has no arguments and cannot fail.
                    unsafe { libc::syscall(libc::SYS_getpid) };
                }
                start.elapsed().as_secs_f64()
            }
            Workload::Redis => bail!("redis-benchmark needs the bench's redis-server"),
        };
        Ok(Outcome {
            wall_s,
            requests_per_s: None,
        })
    }
}

/// `perf bench sched ARGS`; its "Total time" in seconds.
fn perf_bench(args: &[&str]) -> Result<f64> {
    let out = Command::new("perf")
        .args(["bench", "sched"])
        .args(args)
        .stderr(Stdio::inherit())
        .output()
        .context("running `perf bench` (install linux-perf)")?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.trim().strip_prefix("Total time:"))
        .and_then(|t| t.split_whitespace().next()?.parse().ok())
        .with_context(|| format!("no `Total time` in perf bench output: {text}"))
}

/// A redis-server of the bench's own on a free loopback port, with no
/// persistence; stopped on drop.
pub struct RedisServer {
    child: Child,
    port: u16,
}

impl RedisServer {
    pub fn start() -> Result<RedisServer> {
        // The kernel picks a free port; it is free again once the listener
        // is dropped, for redis-server to bind right after.
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let child = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .stdout(Stdio::null())
            .spawn()
            .context("starting redis-server (install redis-server)")?;
        let server = RedisServer { child, port };
        let deadline = Instant::now() + REDIS_START_LIMIT;
        while !server.answers_ping() {
            if Instant::now() > deadline {
                bail!("redis-server on port {port} did not answer within {REDIS_START_LIMIT:?}");
            }
            thread::sleep(Duration::from_millis(100));
        }
        Ok(server)
    }

    fn answers_ping(&self) -> bool {
        Command::new("redis-cli")
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "ping"])
            .output()
            .is_ok_and(|o| o.stdout.starts_with(b"PONG"))
    }

    /// One redis-benchmark run: GET and SET, REDIS_REQUESTS each; the
    /// requests per second over both.
    fn benchmark(&self) -> Result<f64> {
        let mut child = Command::new("redis-benchmark")
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(["-c", REDIS_CLIENTS, "-n", &REDIS_REQUESTS.to_string()])
            .args(["-t", "get,set", "--csv"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("running redis-benchmark (install redis-tools)")?;
        let deadline = Instant::now() + REDIS_RUN_LIMIT;
        while child.try_wait()?.is_none() {
            if Instant::now() > deadline {
                child.kill()?;
                child.wait()?;
                bail!("redis-benchmark took over {REDIS_RUN_LIMIT:?}");
            }
            thread::sleep(Duration::from_millis(20));
        }
        let out = child.wait_with_output()?;
        if !out.status.success() {
            bail!("redis-benchmark failed: {}", out.status);
        }
        overall_requests_per_s(&String::from_utf8_lossy(&out.stdout))
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = super::tool::signal(&self.child, rustix::process::Signal::TERM);
        let deadline = Instant::now() + Duration::from_secs(10);
        while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The throughput over all the tests in redis-benchmark's `--csv` output
/// (a header line, then `"TEST","RPS",...` per test), each test having
/// sent the same number of requests: their count over the sum of their
/// times, the harmonic mean of the rates.
fn overall_requests_per_s(csv: &str) -> Result<f64> {
    let rates: Vec<f64> = csv
        .lines()
        .skip_while(|l| !l.starts_with("\"test\""))
        .skip(1)
        .map(|line| {
            line.split(',')
                .nth(1)
                .and_then(|field| field.trim_matches('"').parse::<f64>().ok())
                .filter(|rps| *rps > 0.0)
                .with_context(|| format!("no request rate in redis-benchmark line {line:?}"))
        })
        .collect::<Result<_>>()?;
    if rates.is_empty() {
        bail!("no test in redis-benchmark output: {csv:?}");
    }
    Ok(rates.len() as f64 / rates.iter().map(|r| 1.0 / r).sum::<f64>())
}

#[cfg(test)]
mod tests {
    use super::*;

    const CSV: &str = r#""test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
"SET","30000.00","0.356","0.080","0.335","0.575","0.695","4.503"
"GET","60000.00","0.400","0.080","0.375","0.615","0.759","25.135"
"#;

    #[test]
    fn redis_throughput_is_all_requests_over_all_the_time_of_the_tests() {
        // 1 request at 30k/s and 1 at 60k/s: 2 requests in 1/20000 s.
        let rps = overall_requests_per_s(CSV).unwrap();
        assert!((rps - 40_000.0).abs() < 1e-6, "{rps}");
    }

    #[test]
    fn redis_output_without_tests_or_with_a_bad_rate_is_an_error() {
        assert!(overall_requests_per_s("").is_err());
        assert!(overall_requests_per_s(CSV.lines().next().unwrap()).is_err());
        let bad = CSV.replace("\"60000.00\"", "\"fast\"");
        assert!(overall_requests_per_s(&bad).is_err());
    }

    #[test]
    fn the_cost_of_a_server_run_is_its_time_per_request_and_of_the_others_their_wall_time() {
        let server = Outcome {
            wall_s: 4.0,
            requests_per_s: Some(25_000.0),
        };
        let slower = Outcome {
            wall_s: 5.0,
            requests_per_s: Some(20_000.0),
        };
        assert!((slower.cost() / server.cost() - 1.25).abs() < 1e-12);
        let timed = Outcome {
            wall_s: 2.5,
            requests_per_s: None,
        };
        assert_eq!(timed.cost(), 2.5);
    }
}
