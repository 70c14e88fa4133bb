//! Parsing of the CFS bandwidth control files of cgroup v1 and v2 from
//! their text. Pure: no I/O; odd contents give None or zero, never a panic.

/// The counters of a `cpu.stat` file that matter for throttling.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct CpuStat {
    pub nr_periods: u64,
    pub nr_throttled: u64,
    pub throttled_ns: u64,
    /// v2 only (`usage_usec`); v1 keeps usage in cpuacct.
    pub usage_ns: Option<u64>,
}

/// `cpu.stat` of either version: parsed by key, unknown keys ignored.
/// Throttled time is `throttled_time` (ns, v1) or `throttled_usec` (v2,
/// and some v1 kernels), preferring the finer one.
pub(super) fn parse_cpu_stat(text: &str) -> CpuStat {
    let mut stat = CpuStat::default();
    let mut throttled_time_ns = None;
    let mut throttled_usec = None;
    for line in text.lines() {
        let mut fields = line.split_whitespace();
        let (Some(key), Some(value), None) = (fields.next(), fields.next(), fields.next()) else {
            continue;
        };
        let Ok(value) = value.parse::<u64>() else {
            continue;
        };
        match key {
            "nr_periods" => stat.nr_periods = value,
            "nr_throttled" => stat.nr_throttled = value,
            "throttled_time" => throttled_time_ns = Some(value),
            "throttled_usec" => throttled_usec = Some(value),
            "usage_usec" => stat.usage_ns = Some(value.saturating_mul(1000)),
            _ => {}
        }
    }
    stat.throttled_ns = throttled_time_ns
        .or(throttled_usec.map(|us| us.saturating_mul(1000)))
        .unwrap_or(0);
    stat
}

/// v1 `cpu.cfs_quota_us`: None for -1 (no quota) or anything unparsable.
pub(super) fn parse_v1_quota(text: &str) -> Option<u64> {
    let quota: i64 = text.trim().parse().ok()?;
    u64::try_from(quota).ok().filter(|&q| q > 0)
}

/// v2 `cpu.max`, "<quota> <period>": `(quota_us, period_us)`, None for
/// "max <period>" (no quota) or anything unparsable.
pub(super) fn parse_cpu_max(text: &str) -> Option<(u64, u64)> {
    let mut fields = text.split_whitespace();
    let quota = fields.next()?.parse().ok().filter(|&q: &u64| q > 0)?;
    let period = fields.next()?.parse().ok()?;
    fields.next().is_none().then_some((quota, period))
}

/// A file holding one unsigned number (`cpu.cfs_period_us`,
/// `cpu.cfs_burst_us`, `cpu.max.burst`, `cpuacct.usage`).
pub(super) fn parse_u64(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}

/// A cpuset list as the kernel prints it ("0-3,8"); None when empty (a
/// cpuset that does not restrict by itself).
pub(super) fn parse_cpus(text: &str) -> Option<String> {
    let cpus = text.trim();
    (!cpus.is_empty()).then(|| cpus.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v1_cpu_stat_of_an_older_kernel() {
        let text = "nr_periods 3071\nnr_throttled 1422\nthrottled_time 86410275914\n";
        assert_eq!(
            parse_cpu_stat(text),
            CpuStat {
                nr_periods: 3071,
                nr_throttled: 1422,
                throttled_ns: 86_410_275_914,
                usage_ns: None,
            }
        );
    }

    #[test]
    fn v1_cpu_stat_with_burst_counters() {
        // Linux 5.14+ appends the burst counters.
        let text = "nr_periods 12\nnr_throttled 5\nthrottled_time 250000000\n\
                    nr_bursts 2\nburst_time 1000000\n";
        let stat = parse_cpu_stat(text);
        assert_eq!((stat.nr_periods, stat.nr_throttled), (12, 5));
        assert_eq!(stat.throttled_ns, 250_000_000);
    }

    #[test]
    fn v1_cpu_stat_with_usec_keys_prefers_the_nanoseconds() {
        let text = "nr_periods 10\nnr_throttled 4\nthrottled_time 1234567\n\
                    throttled_usec 1234\nnr_bursts 0\nburst_usec 0\n";
        assert_eq!(parse_cpu_stat(text).throttled_ns, 1_234_567);
    }

    #[test]
    fn v2_cpu_stat() {
        let text = "usage_usec 8523114\nuser_usec 6103114\nsystem_usec 2420000\n\
                    core_sched.force_idle_usec 0\nnr_periods 2410\nnr_throttled 311\n\
                    throttled_usec 9120555\nnr_bursts 0\nburst_usec 0\n";
        assert_eq!(
            parse_cpu_stat(text),
            CpuStat {
                nr_periods: 2410,
                nr_throttled: 311,
                throttled_ns: 9_120_555_000,
                usage_ns: Some(8_523_114_000),
            }
        );
    }

    #[test]
    fn v2_cpu_stat_without_the_cpu_controller_has_only_usage() {
        let text = "usage_usec 100\nuser_usec 60\nsystem_usec 40\n";
        assert_eq!(
            parse_cpu_stat(text),
            CpuStat {
                usage_ns: Some(100_000),
                ..CpuStat::default()
            }
        );
    }

    #[test]
    fn odd_cpu_stat_lines_are_skipped() {
        let text = "nr_periods\nnr_throttled x\nthrottled_usec 18446744073709551615\n\
                    nr_periods 1 2\n\n  \nnr_periods -4\n";
        assert_eq!(
            parse_cpu_stat(text),
            CpuStat {
                throttled_ns: u64::MAX,
                ..CpuStat::default()
            }
        );
        assert_eq!(parse_cpu_stat(""), CpuStat::default());
    }

    #[test]
    fn v1_quota() {
        assert_eq!(parse_v1_quota("-1\n"), None);
        assert_eq!(parse_v1_quota("50000\n"), Some(50_000));
        assert_eq!(parse_v1_quota("0"), None);
        assert_eq!(parse_v1_quota(""), None);
        assert_eq!(parse_v1_quota("max"), None);
    }

    #[test]
    fn v2_cpu_max() {
        assert_eq!(parse_cpu_max("max 100000\n"), None);
        assert_eq!(parse_cpu_max("15000 100000\n"), Some((15_000, 100_000)));
        assert_eq!(parse_cpu_max("15000"), None);
        assert_eq!(parse_cpu_max("15000 100000 7"), None);
        assert_eq!(parse_cpu_max("15000 max"), None);
        assert_eq!(parse_cpu_max(""), None);
    }

    #[test]
    fn single_numbers() {
        assert_eq!(parse_u64("100000\n"), Some(100_000));
        assert_eq!(parse_u64("0"), Some(0));
        assert_eq!(parse_u64("-1"), None);
        assert_eq!(parse_u64(""), None);
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpus("0-3,8\n").as_deref(), Some("0-3,8"));
        assert_eq!(parse_cpus("\n"), None);
        assert_eq!(parse_cpus(""), None);
    }
}
