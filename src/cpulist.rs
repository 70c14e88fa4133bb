//! CPU lists as the kernel writes them ("0-3,8"): parsed, printed, and the
//! host's online CPUs, the one list every per-CPU view uses (a host whose
//! online CPUs are 0-3 and 8 has a row for CPU 8, none for 4-7).

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};

/// Where the kernel lists the online CPUs.
const ONLINE: &str = "/sys/devices/system/cpu/online";

/// A set of CPU numbers; serialized as the kernel writes it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct CpuList(BTreeSet<u32>);

impl CpuList {
    /// "0-3,8", "0, 2-4"; empty is the empty list.
    pub fn parse(text: &str) -> Result<CpuList, String> {
        let mut cpus = BTreeSet::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let number = |s: &str| {
                s.trim()
                    .parse::<u32>()
                    .map_err(|_| format!("`{part}` is not a CPU number or range (e.g. 0-3,8)"))
            };
            let (low, high) = match part.split_once('-') {
                Some((a, b)) => (number(a)?, number(b)?),
                None => (number(part)?, number(part)?),
            };
            if low > high {
                return Err(format!("`{part}` is a range backwards"));
            }
            cpus.extend(low..=high);
        }
        Ok(CpuList(cpus))
    }

    /// The first `count` CPUs, for hosts (and recordings) that only said
    /// how many.
    pub fn first(count: u32) -> CpuList {
        CpuList((0..count).collect())
    }

    /// The host's online CPUs.
    pub fn online() -> Result<CpuList, String> {
        let text = std::fs::read_to_string(ONLINE).map_err(|e| format!("{ONLINE}: {e}"))?;
        CpuList::parse(&text).map_err(|e| format!("{ONLINE}: {e}"))
    }

    pub fn contains(&self, cpu: u32) -> bool {
        self.0.contains(&cpu)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.iter().copied()
    }
}

impl fmt::Display for CpuList {
    /// Runs collapsed: "0-3,8".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut runs: Vec<(u32, u32)> = Vec::new();
        for cpu in self.iter() {
            match runs.last_mut() {
                Some((_, high)) if *high + 1 == cpu => *high = cpu,
                _ => runs.push((cpu, cpu)),
            }
        }
        let text: Vec<String> = runs
            .iter()
            .map(|&(low, high)| {
                if low == high {
                    low.to_string()
                } else {
                    format!("{low}-{high}")
                }
            })
            .collect();
        f.write_str(&text.join(","))
    }
}

impl TryFrom<String> for CpuList {
    type Error = String;

    fn try_from(text: String) -> Result<CpuList, String> {
        CpuList::parse(&text)
    }
}

impl From<CpuList> for String {
    fn from(list: CpuList) -> String {
        list.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse_and_print_as_the_kernel_writes_them() {
        let list = CpuList::parse("0-3,8\n").unwrap();
        assert_eq!(list.iter().collect::<Vec<_>>(), [0, 1, 2, 3, 8]);
        assert_eq!(list.to_string(), "0-3,8");
        assert_eq!(CpuList::parse(" 2, 0-1 ").unwrap().to_string(), "0-2");
        assert!(CpuList::parse("").unwrap().is_empty());
        assert!(CpuList::parse("a")
            .unwrap_err()
            .contains("not a CPU number"));
        assert!(CpuList::parse("3-1").unwrap_err().contains("backwards"));
        let json = serde_json::to_string(&list).unwrap();
        assert_eq!(json, "\"0-3,8\"");
        assert_eq!(serde_json::from_str::<CpuList>(&json).unwrap(), list);
    }

    #[test]
    fn this_host_has_online_cpus() {
        let online = CpuList::online().unwrap();
        assert!(online.contains(0), "{online}");
    }
}
