//! The kernels of the matrix: the newest Debian 6.1 and 6.12 kernel of each flavour the archive
//! has, downloaded with apt once and kept, unpacked, under the cache directory.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::scenario::command;

/// A Debian kernel series: how its package names number the builds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Series {
    /// The package name up to the build number: `linux-image-6.1.0-` (ABI 56 of Debian 12's
    /// 6.1), `linux-image-6.12.` (patch level 117 of the 6.12 Debian 12 has from bookworm's
    /// security updates).
    prefix: &'static str,
    /// Whether the number is followed by the Debian release it was built for: `117+deb12`.
    deb_release: bool,
}

const DEBIAN_6_1: Series = Series {
    prefix: "linux-image-6.1.0-",
    deb_release: false,
};
const DEBIAN_6_12: Series = Series {
    prefix: "linux-image-6.12.",
    deb_release: true,
};

/// One Debian kernel flavour of one series.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flavour {
    /// Short name for output and options: `6.1-generic`, `6.12-cloud`, ...
    pub name: &'static str,
    pub series: Series,
    /// What follows the build number in the package name:
    /// `linux-image-6.1.0-56-<suffix>-unsigned`, `linux-image-6.12.117+deb12-<suffix>-unsigned`.
    pub suffix: &'static str,
    /// A PREEMPT_RT kernel: softirqs run in threads.
    pub preempt_rt: bool,
    /// What the flavour does differently that the checks account for (for docs/kernels.md).
    pub note: &'static str,
}

pub const FLAVOURS: &[Flavour] = &[
    Flavour {
        name: "6.1-generic",
        series: DEBIAN_6_1,
        suffix: "amd64",
        preempt_rt: false,
        note: "PREEMPT_DYNAMIC, voluntary preemption",
    },
    Flavour {
        name: "6.1-cloud",
        series: DEBIAN_6_1,
        suffix: "cloud-amd64",
        preempt_rt: false,
        note: "trimmed drivers (no 9p)",
    },
    Flavour {
        name: "6.1-rt",
        series: DEBIAN_6_1,
        suffix: "rt-amd64",
        preempt_rt: true,
        note: "PREEMPT_RT: TIMER softirqs run in the ktimers/N threads, NET_RX in the thread \
               that raised it; stalltop charges their time to those threads",
    },
    Flavour {
        name: "6.12-generic",
        series: DEBIAN_6_12,
        suffix: "amd64",
        preempt_rt: false,
        note: "PREEMPT_DYNAMIC, voluntary preemption; the preempt count and the pending \
               softirq mask inside `pcpu_hot`",
    },
    Flavour {
        name: "6.12-cloud",
        series: DEBIAN_6_12,
        suffix: "cloud-amd64",
        preempt_rt: false,
        note: "trimmed drivers (no 9p); the preempt count and the pending softirq mask inside \
               `pcpu_hot`",
    },
];

/// A kernel ready to boot.
#[derive(Clone, Debug)]
pub struct Kernel {
    pub flavour: Flavour,
    /// `linux-image-6.1.0-56-amd64-unsigned`, `linux-image-6.12.117+deb12-amd64-unsigned`.
    pub package: String,
    /// The package's version: `6.1.192-2`, `6.12.117-1~deb12u1`.
    pub version: String,
    /// What `uname -r` says in the guest: `6.1.0-56-amd64`, `6.12.117+deb12-amd64`.
    pub release: String,
    pub vmlinuz: PathBuf,
}

impl Flavour {
    /// The `apt-cache search --names-only` pattern of this flavour's packages.
    fn search_pattern(&self) -> String {
        let deb_release = if self.series.deb_release {
            "\\+deb[0-9]+"
        } else {
            ""
        };
        format!(
            "^{}[0-9]+{deb_release}-{}-unsigned$",
            self.series.prefix.replace('.', "\\."),
            self.suffix
        )
    }

    /// The package of this flavour with the highest build number in `apt-cache search` output
    /// (lines `NAME - DESCRIPTION`).
    pub fn newest_package(&self, search_output: &str) -> Option<String> {
        let suffix = format!("-{}-unsigned", self.suffix);
        search_output
            .lines()
            .filter_map(|line| line.split_whitespace().next())
            .filter_map(|name| {
                let build = name
                    .strip_prefix(self.series.prefix)?
                    .strip_suffix(&suffix)?;
                let number = match build.split_once("+deb") {
                    Some((number, release)) if self.series.deb_release => {
                        release.parse::<u32>().ok()?;
                        number
                    }
                    None if !self.series.deb_release => build,
                    _ => return None,
                };
                Some((number.parse::<u32>().ok()?, name))
            })
            .max_by_key(|&(number, _)| number)
            .map(|(_, name)| name.to_string())
    }
}

/// The `Candidate:` version in `apt-cache policy PACKAGE` output.
pub fn candidate_version(policy_output: &str) -> Option<String> {
    policy_output
        .lines()
        .find_map(|line| line.trim().strip_prefix("Candidate:"))
        .map(str::trim)
        .filter(|version| *version != "(none)")
        .map(str::to_string)
}

/// The newest kernel of `flavour`, downloaded and unpacked under `cache` unless it already is.
pub fn fetch(flavour: Flavour, cache: &Path) -> Result<Kernel> {
    let package = match search_newest(flavour)? {
        Some(package) => package,
        None => {
            // A fresh machine may have no (or old) package lists.
            apt_get(&["update", "-qq"], cache)?;
            search_newest(flavour)?.with_context(|| {
                format!(
                    "apt-cache finds no package matching {}",
                    flavour.search_pattern()
                )
            })?
        }
    };
    let policy = command::run("apt-cache", &["policy", &package])?;
    let version = candidate_version(&policy)
        .with_context(|| format!("apt-cache policy {package} names no candidate version"))?;
    let release = package
        .strip_prefix("linux-image-")
        .and_then(|rest| rest.strip_suffix("-unsigned"))
        .context("a kernel package name")?
        .to_string();

    fs::create_dir_all(cache).with_context(|| format!("mkdir -p {}", cache.display()))?;
    let deb = cache.join(format!("{package}_{version}_amd64.deb"));
    if !deb.is_file() {
        eprintln!("kernel-matrix: downloading {package} {version}");
        apt_get(&["download", &format!("{package}={version}")], cache)?;
        if !deb.is_file() {
            bail!("apt-get download did not write {}", deb.display());
        }
    }
    let unpacked = cache.join(format!("{package}_{version}"));
    if !unpacked.is_dir() {
        // Unpacked beside, then renamed: an interrupted unpack is never taken for a whole one.
        let partial = cache.join(format!("{package}_{version}.partial"));
        if partial.exists() {
            fs::remove_dir_all(&partial).with_context(|| format!("rm -r {}", partial.display()))?;
        }
        run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&partial))?;
        fs::rename(&partial, &unpacked)
            .with_context(|| format!("mv {} {}", partial.display(), unpacked.display()))?;
    }
    let vmlinuz = unpacked.join(format!("boot/vmlinuz-{release}"));
    if !vmlinuz.is_file() {
        bail!("{} has no {}", deb.display(), vmlinuz.display());
    }
    Ok(Kernel {
        flavour,
        package,
        version,
        release,
        vmlinuz,
    })
}

fn search_newest(flavour: Flavour) -> Result<Option<String>> {
    let found = command::run(
        "apt-cache",
        &["search", "--names-only", &flavour.search_pattern()],
    )?;
    Ok(flavour.newest_package(&found))
}

/// apt-get in `dir` (where `download` writes), with its own progress output.
fn apt_get(args: &[&str], dir: &Path) -> Result<()> {
    run(Command::new("apt-get")
        .args(args)
        .current_dir(dir)
        .env("DEBIAN_FRONTEND", "noninteractive"))
}

fn run(command: &mut Command) -> Result<()> {
    let status = command
        .status()
        .with_context(|| format!("running {command:?}"))?;
    if !status.success() {
        bail!("{command:?} failed: {status}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEARCH: &str = "\
linux-image-6.1.0-47-amd64-unsigned - Linux 6.1 for 64-bit PCs
linux-image-6.1.0-9-amd64-unsigned - Linux 6.1 for 64-bit PCs
linux-image-6.1.0-56-cloud-amd64-unsigned - Linux 6.1 for x86-64 cloud
linux-image-6.1.0-53-amd64-unsigned - Linux 6.1 for 64-bit PCs
linux-image-6.1.0-53-rt-amd64-unsigned - Linux 6.1 for 64-bit PCs, PREEMPT_RT
linux-image-6.12.99+deb12-amd64-unsigned - Linux 6.12 for 64-bit PCs
linux-image-6.12.117+deb12-amd64-unsigned - Linux 6.12 for 64-bit PCs
linux-image-6.12.117+deb12-cloud-amd64-unsigned - Linux 6.12 for x86-64 cloud
linux-image-6.12.120+deb13-rt-amd64-unsigned - Linux 6.12 for 64-bit PCs, PREEMPT_RT
";

    fn flavour(name: &str) -> Flavour {
        *FLAVOURS.iter().find(|f| f.name == name).unwrap()
    }

    #[test]
    fn the_newest_package_is_the_highest_build_of_the_flavour_compared_as_a_number() {
        let newest = |name: &str| flavour(name).newest_package(SEARCH);
        assert_eq!(
            newest("6.1-generic").as_deref(),
            Some("linux-image-6.1.0-53-amd64-unsigned")
        );
        assert_eq!(
            newest("6.1-cloud").as_deref(),
            Some("linux-image-6.1.0-56-cloud-amd64-unsigned")
        );
        assert_eq!(
            newest("6.1-rt").as_deref(),
            Some("linux-image-6.1.0-53-rt-amd64-unsigned")
        );
        assert_eq!(
            newest("6.12-generic").as_deref(),
            Some("linux-image-6.12.117+deb12-amd64-unsigned")
        );
        assert_eq!(
            newest("6.12-cloud").as_deref(),
            Some("linux-image-6.12.117+deb12-cloud-amd64-unsigned")
        );
        assert_eq!(flavour("6.1-rt").newest_package(""), None);
    }

    #[test]
    fn the_search_patterns_name_each_series_packages() {
        assert_eq!(
            flavour("6.1-rt").search_pattern(),
            "^linux-image-6\\.1\\.0-[0-9]+-rt-amd64-unsigned$"
        );
        assert_eq!(
            flavour("6.12-cloud").search_pattern(),
            "^linux-image-6\\.12\\.[0-9]+\\+deb[0-9]+-cloud-amd64-unsigned$"
        );
    }

    #[test]
    fn the_candidate_version_is_read_from_apt_cache_policy() {
        let policy = "linux-image-6.1.0-56-amd64-unsigned:\n  Installed: (none)\n  \
                      Candidate: 6.1.192-2\n  Version table:\n     6.1.192-2 500\n";
        assert_eq!(candidate_version(policy).as_deref(), Some("6.1.192-2"));
        assert_eq!(candidate_version("x:\n  Candidate: (none)\n"), None);
    }
}
