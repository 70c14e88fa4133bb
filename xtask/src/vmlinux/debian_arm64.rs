//! Debian 12's newest stock arm64 6.1 kernel image, and other arm64 packages, fetched with apt
//! into a state of its own under `dir` (the host's apt configuration, architectures and package
//! lists are left alone) and cached there.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, ensure, Context, Result};

/// Where the arm64 packages come from (the kernel moves to bookworm-security between point
/// releases).
const SOURCES: &str = "\
deb [arch=arm64] http://deb.debian.org/debian bookworm main
deb [arch=arm64] http://deb.debian.org/debian bookworm-updates main
deb [arch=arm64] http://deb.debian.org/debian-security bookworm-security main
";
/// The stock kernels: `linux-image-6.1.0-<abi>-arm64-unsigned`.
const PACKAGE_PREFIX: &str = "linux-image-6.1.0-";
const PACKAGE_SUFFIX: &str = "-arm64-unsigned";
/// An uncompressed arm64 Image has this magic at offset 0x38 (Documentation/arch/arm64/booting).
const IMAGE_MAGIC: (usize, &[u8; 4]) = (0x38, b"ARM\x64");

pub struct Kernel {
    /// The .deb it came from, e.g. linux-image-6.1.0-56-arm64-unsigned_6.1.192-2_arm64.deb.
    pub deb: String,
    /// The uncompressed kernel Image.
    pub image: Vec<u8>,
    /// Where it is unpacked: `<dir>/extracted/boot/vmlinuz-<release>`.
    pub vmlinuz: PathBuf,
}

impl Kernel {
    /// What `uname -r` says on it: `6.1.0-56-arm64`.
    pub fn release(&self) -> String {
        let name = self
            .vmlinuz
            .file_name()
            .unwrap_or_default()
            .to_string_lossy();
        name.trim_start_matches("vmlinuz-").to_owned()
    }
}

/// Where the packages, apt's state and the unpacked kernel are kept.
pub fn cache_dir() -> PathBuf {
    crate::workspace::workspace_root().join("target/debian-arm64")
}

/// Fetches (or reuses from `dir`) the newest stock arm64 6.1 kernel and reads its Image.
pub fn newest_kernel(dir: &Path) -> Result<Kernel> {
    let apt = Apt::new(&dir.join("apt"))?;
    apt.run("apt-get", &["update", "-qq"])?;
    let listed = apt.output(
        "apt-cache",
        &[
            "search",
            "--names-only",
            &format!("^{PACKAGE_PREFIX}[0-9]+{PACKAGE_SUFFIX}$"),
        ],
    )?;
    let names = listed.lines().filter_map(|l| l.split_whitespace().next());
    let package = newest(names).context("Debian lists no arm64 6.1 kernel")?;
    let deb = match cached_deb(dir, &package)? {
        Some(deb) => deb,
        None => {
            eprintln!("downloading {package} (arm64, about 60 MB)");
            apt.run_in(dir, "apt-get", &["download", "-qq", &package])?;
            cached_deb(dir, &package)?.context("apt-get download left no .deb")?
        }
    };
    let vmlinuz = image_of(dir, &deb)?;
    let image = fs::read(&vmlinuz).with_context(|| format!("read {}", vmlinuz.display()))?;
    ensure!(
        image.get(IMAGE_MAGIC.0..IMAGE_MAGIC.0 + 4) == Some(&IMAGE_MAGIC.1[..]),
        "{} is not an uncompressed arm64 Image",
        deb.display()
    );
    let deb = deb.file_name().unwrap_or_default().to_string_lossy().into();
    Ok(Kernel {
        deb,
        image,
        vmlinuz,
    })
}

/// Downloads (or reuses from `dir`) the arm64 build of each of `packages`; their .debs. Reads
/// the package lists `newest_kernel` updated in `dir`.
pub fn download(dir: &Path, packages: &[&str]) -> Result<Vec<PathBuf>> {
    let apt = Apt::new(&dir.join("apt"))?;
    let mut debs = Vec::new();
    for package in packages {
        let deb = match cached_deb(dir, package)? {
            Some(deb) => deb,
            None => {
                apt.run_in(dir, "apt-get", &["download", "-qq", package])?;
                cached_deb(dir, package)?
                    .with_context(|| format!("apt-get download {package} left no .deb"))?
            }
        };
        debs.push(deb);
    }
    Ok(debs)
}

/// The package with the highest ABI number among `names`.
fn newest<'n>(names: impl Iterator<Item = &'n str>) -> Option<String> {
    names
        .filter_map(|name| {
            let abi = name
                .strip_prefix(PACKAGE_PREFIX)?
                .strip_suffix(PACKAGE_SUFFIX)?;
            Some((abi.parse::<u32>().ok()?, name))
        })
        .max()
        .map(|(_, name)| name.to_owned())
}

/// The .deb of `package` already in `dir`, if any.
fn cached_deb(dir: &Path, package: &str) -> Result<Option<PathBuf>> {
    let prefix = format!("{package}_");
    for entry in fs::read_dir(dir).with_context(|| format!("read {}", dir.display()))? {
        let path = entry?.path();
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if name.starts_with(&prefix) && name.ends_with("_arm64.deb") {
            return Ok(Some(path));
        }
    }
    Ok(None)
}

/// The kernel Image inside `deb` (./boot/vmlinuz-*), extracted alone; its path.
fn image_of(dir: &Path, deb: &Path) -> Result<PathBuf> {
    let out = dir.join("extracted");
    if out.exists() {
        fs::remove_dir_all(&out).with_context(|| format!("clear {}", out.display()))?;
    }
    fs::create_dir_all(&out).with_context(|| format!("mkdir {}", out.display()))?;
    let mut tarball = Command::new("dpkg-deb")
        .arg("--fsys-tarfile")
        .arg(deb)
        .stdout(Stdio::piped())
        .spawn()
        .context("run dpkg-deb")?;
    let untar = Command::new("tar")
        .args(["-x", "--wildcards", "-C"])
        .arg(&out)
        .args(["-f", "-", "./boot/vmlinuz-*"])
        .stdin(tarball.stdout.take().context("dpkg-deb's stdout")?)
        .status()
        .context("run tar")?;
    let unpacked = tarball.wait().context("wait for dpkg-deb")?;
    ensure!(
        unpacked.success() && untar.success(),
        "extracting the kernel from {} failed (dpkg-deb {unpacked}, tar {untar})",
        deb.display()
    );
    let boot = out.join("boot");
    let image = fs::read_dir(&boot)
        .with_context(|| format!("read {}", boot.display()))?
        .next()
        .context("no vmlinuz in the package")??
        .path();
    Ok(image)
}

/// apt with its own lists, cache and sources: arm64 only.
struct Apt {
    options: Vec<String>,
}

impl Apt {
    fn new(state: &Path) -> Result<Self> {
        for sub in ["lists/partial", "cache/archives/partial", "sources.list.d"] {
            let dir = state.join(sub);
            fs::create_dir_all(&dir).with_context(|| format!("mkdir {}", dir.display()))?;
        }
        let sources = state.join("sources.list");
        fs::write(&sources, SOURCES).with_context(|| format!("write {}", sources.display()))?;
        let at = |sub: &str| state.join(sub).display().to_string();
        let options = [
            ("Dir::State::Lists", at("lists")),
            ("Dir::Cache", at("cache")),
            ("Dir::Etc::SourceList", at("sources.list")),
            ("Dir::Etc::SourceParts", at("sources.list.d")),
            ("APT::Architecture", "arm64".into()),
            ("APT::Architectures::", "arm64".into()),
            // The files land in directories apt's own user cannot write to.
            ("APT::Sandbox::User", "root".into()),
        ];
        let options = options
            .iter()
            .flat_map(|(key, value)| ["-o".to_owned(), format!("{key}={value}")])
            .collect();
        Ok(Self { options })
    }

    fn command(&self, program: &str, args: &[&str]) -> Command {
        let mut command = Command::new(program);
        command.args(&self.options).args(args);
        command
    }

    fn run(&self, program: &str, args: &[&str]) -> Result<()> {
        run(&mut self.command(program, args))
    }

    fn run_in(&self, dir: &Path, program: &str, args: &[&str]) -> Result<()> {
        run(self.command(program, args).current_dir(dir))
    }

    fn output(&self, program: &str, args: &[&str]) -> Result<String> {
        let output = self
            .command(program, args)
            .output()
            .with_context(|| format!("run {program}"))?;
        if !output.status.success() {
            bail!(
                "{program} {} failed ({}): {}",
                args.join(" "),
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }
}

fn run(command: &mut Command) -> Result<()> {
    let status = command
        .status()
        .with_context(|| format!("run {command:?}"))?;
    ensure!(status.success(), "{command:?} failed: {status}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_kernel_is_the_highest_abi_number_not_the_last_listed() {
        let listed = [
            "linux-image-6.1.0-9-arm64-unsigned",
            "linux-image-6.1.0-56-arm64-unsigned",
            "linux-image-6.1.0-56-cloud-arm64-unsigned",
            "linux-image-6.1.0-55-arm64-unsigned",
            "linux-image-6.1.0-rt-arm64-unsigned",
        ];
        assert_eq!(
            newest(listed.into_iter()).as_deref(),
            Some("linux-image-6.1.0-56-arm64-unsigned")
        );
        assert_eq!(newest(std::iter::empty()), None);
    }
}
