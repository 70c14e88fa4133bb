//! The arm64 guest's programs: Debian's busybox-static and bpftool with the shared libraries
//! bpftool needs, unpacked from their arm64 packages, as initramfs entries.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, ensure, Context, Result};

use super::elf::Elf;
use crate::matrix::initramfs::{Content, Entry};
use crate::scenario::command;
use crate::vmlinux::debian_arm64;

pub const BUSYBOX: &str = "/bin/busybox";
pub const BPFTOOL: &str = "/usr/sbin/bpftool";
/// Where the guest has every library (the dynamic loader looks there first).
pub const LIBRARY_DIR: &str = "/lib/aarch64-linux-gnu";
/// Where Debian's arm64 packages put libraries.
const PACKAGE_LIBRARY_DIRS: [&str; 2] = ["lib/aarch64-linux-gnu", "usr/lib/aarch64-linux-gnu"];

/// Downloads (or reuses) the packages into `cache`, unpacks them under `cache`/guest-root and
/// names the files the guest needs.
pub fn entries(cache: &Path) -> Result<Vec<Entry>> {
    // In the order asked: bpftool's second.
    let debs = debian_arm64::download(cache, &["busybox-static", "bpftool"])?;
    let depends = command::run("dpkg-deb", &["-f", &path_str(&debs[1])?, "Depends"])?;
    let libraries: Vec<String> = package_names(&depends);
    let library_refs: Vec<&str> = libraries.iter().map(String::as_str).collect();
    let library_debs = debian_arm64::download(cache, &library_refs)?;

    let root = cache.join("guest-root");
    if root.exists() {
        fs::remove_dir_all(&root).with_context(|| format!("rm -r {}", root.display()))?;
    }
    for deb in debs.iter().chain(&library_debs) {
        let status = Command::new("dpkg-deb")
            .arg("-x")
            .arg(deb)
            .arg(&root)
            .status()
            .context("run dpkg-deb")?;
        ensure!(status.success(), "dpkg-deb -x {} failed", deb.display());
    }

    let mut entries = vec![host_file(BUSYBOX, &root), host_file(BPFTOOL, &root)];
    let bpftool = fs::read(root.join(&BPFTOOL[1..])).context("read the unpacked bpftool")?;
    let interpreter = Elf::parse(&bpftool)?
        .interpreter()?
        .context("bpftool names no program interpreter")?;
    entries.push(host_file(&interpreter, &root));
    for library in needed_libraries(&bpftool, &root)? {
        entries.push(Entry {
            path: format!("{LIBRARY_DIR}/{}", library.name),
            content: Content::HostFile(library.path),
        });
    }
    Ok(entries)
}

/// The file at `guest_path` in the unpacked packages, at the same place in the guest.
fn host_file(guest_path: &str, root: &Path) -> Entry {
    Entry {
        path: guest_path.to_owned(),
        content: Content::HostFile(root.join(guest_path.trim_start_matches('/'))),
    }
}

struct Library {
    name: String,
    path: PathBuf,
}

/// The shared libraries `executable` needs, and those they need in turn, found in `root`.
fn needed_libraries(executable: &[u8], root: &Path) -> Result<Vec<Library>> {
    let mut wanted = Elf::parse(executable)?.needed()?;
    let mut seen = BTreeSet::new();
    let mut found = Vec::new();
    while let Some(name) = wanted.pop() {
        if !seen.insert(name.clone()) {
            continue;
        }
        let Some(path) = PACKAGE_LIBRARY_DIRS
            .iter()
            .map(|dir| root.join(dir).join(&name))
            .find(|path| path.exists())
        else {
            bail!("no package unpacked in {} has {name}", root.display());
        };
        let bytes = fs::read(&path).with_context(|| format!("read {}", path.display()))?;
        wanted.extend(Elf::parse(&bytes)?.needed()?);
        found.push(Library { name, path });
    }
    Ok(found)
}

/// The package names of a Depends field: `libc6 (>= 2.34), libcap2 (>= 1:2.10) | libcap`
/// gives libc6 and libcap2 (the first of alternatives).
fn package_names(depends: &str) -> Vec<String> {
    depends
        .split(',')
        .filter_map(|dependency| dependency.split('|').next())
        .filter_map(|choice| choice.split_whitespace().next())
        .map(|name| name.split(':').next().unwrap_or(name).to_owned())
        .collect()
}

fn path_str(path: &Path) -> Result<String> {
    Ok(path.to_str().context("a path in UTF-8")?.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_depends_field_gives_the_first_package_of_each_dependency() {
        let depends = "libc6 (>= 2.34), libcap2 (>= 1:2.10), libelf1 (>= 0.144) | libelf, \
                       zlib1g:any (>= 1:1.2.3.3)\n";
        assert_eq!(
            package_names(depends),
            ["libc6", "libcap2", "libelf1", "zlib1g"]
        );
    }
}
