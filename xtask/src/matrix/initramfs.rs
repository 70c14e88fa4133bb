//! The guests' initramfs: a newc cpio archive of busybox, the `/init` script, the static release
//! `stalltop`, the unit-test binary and the shared libraries `ldd` names for the latter.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{self, BufWriter, Cursor, Read, Seek, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::scenario::command;

/// busybox-static's binary: every tool the guest script uses (`--install -s` at boot).
const BUSYBOX: &str = "/bin/busybox";
/// Where the guest script mounts proc, sysfs, devtmpfs and tmpfs.
pub const MOUNT_POINTS: [&str; 4] = ["/proc", "/sys", "/dev", "/tmp"];

/// What an archive entry holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Content {
    /// A copy of a host file.
    HostFile(PathBuf),
    /// Text written as an executable file.
    Script(String),
    /// An empty directory (a mount point).
    Directory,
}

/// A file of the archive at `path` (absolute, as the guest sees it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub path: String,
    pub content: Content,
}

/// The guest's files: `/init`, busybox, the two binaries and the unit-test binary's libraries at
/// the paths the host has them (where the dynamic loader looks); stalltop is static and needs none.
pub fn guest_entries(init: String, stalltop: &Path, probe_tests: &Path) -> Result<Vec<Entry>> {
    let mut entries = vec![
        Entry {
            path: "/init".into(),
            content: Content::Script(init),
        },
        Entry {
            path: BUSYBOX.into(),
            content: Content::HostFile(BUSYBOX.into()),
        },
        Entry {
            path: super::guest_script::STALLTOP.into(),
            content: Content::HostFile(stalltop.to_owned()),
        },
        Entry {
            path: super::guest_script::PROBE_TESTS.into(),
            content: Content::HostFile(probe_tests.to_owned()),
        },
    ];
    entries.extend(MOUNT_POINTS.iter().map(|&path| Entry {
        path: path.into(),
        content: Content::Directory,
    }));
    let probe_tests = probe_tests.to_str().context("a binary path in UTF-8")?;
    let libraries = library_paths(&command::run("ldd", &[probe_tests])?);
    entries.extend(libraries.into_iter().map(|library| Entry {
        content: Content::HostFile(library.clone().into()),
        path: library,
    }));
    Ok(entries)
}

/// The files `ldd` output names: `libz.so.1 => /lib/x86_64-linux-gnu/libz.so.1 (0x...)` and the
/// loader `/lib64/ld-linux-x86-64.so.2 (0x...)`; the vDSO has no file.
pub fn library_paths(ldd_output: &str) -> Vec<String> {
    ldd_output
        .lines()
        .filter_map(|line| {
            let line = line.trim();
            let path = match line.split_once(" => ") {
                Some((_, resolved)) => resolved.split_whitespace().next()?,
                None => line.split_whitespace().next()?,
            };
            path.starts_with('/').then(|| path.to_string())
        })
        .collect()
}

/// Writes `entries` as a newc archive to `path`.
pub fn write(entries: &[Entry], path: &Path) -> Result<()> {
    let file = File::create(path).with_context(|| format!("create {}", path.display()))?;
    let mut out = BufWriter::new(file);
    write_archive(entries, &mut out)?;
    out.flush()
        .with_context(|| format!("write {}", path.display()))
}

/// The archive: each entry's parent directories (once, before it), then the entry.
pub fn write_archive(entries: &[Entry], out: &mut impl Write) -> Result<()> {
    let mut directories = BTreeSet::new();
    let mut inode = 0u32;
    let mut next_inode = || {
        inode += 1;
        inode
    };
    for entry in entries {
        let Some(relative) = entry.path.strip_prefix('/') else {
            bail!("{}: archive paths are absolute", entry.path);
        };
        let mut parent = PathBuf::new();
        for component in Path::new(relative)
            .parent()
            .into_iter()
            .flat_map(Path::components)
        {
            parent.push(component);
            let name = parent.to_str().context("a UTF-8 path")?.to_string();
            if directories.insert(name.clone()) {
                write_directory(&name, next_inode(), out)?;
            }
        }
        match &entry.content {
            Content::Directory => {
                if directories.insert(relative.to_string()) {
                    write_directory(relative, next_inode(), out)?;
                }
            }
            Content::HostFile(host) => {
                let file = File::open(host).with_context(|| format!("open {}", host.display()))?;
                write_file(relative, next_inode(), file, out)?;
            }
            Content::Script(text) => {
                write_file(relative, next_inode(), Cursor::new(text.as_bytes()), out)?;
            }
        }
    }
    cpio::newc::trailer(&mut *out)?;
    Ok(())
}

fn write_directory(name: &str, inode: u32, out: &mut impl Write) -> Result<()> {
    cpio::NewcBuilder::new(name)
        .ino(inode)
        .mode(0o040755)
        .nlink(2)
        .write(out, 0)
        .finish()?;
    Ok(())
}

fn write_file(
    name: &str,
    inode: u32,
    mut content: impl Read + Seek,
    out: &mut impl Write,
) -> Result<()> {
    let size = content.seek(io::SeekFrom::End(0))?;
    content.seek(io::SeekFrom::Start(0))?;
    let size = u32::try_from(size).with_context(|| format!("{name} is over 4 GiB"))?;
    let mut writer = cpio::NewcBuilder::new(name)
        .ino(inode)
        .mode(0o100755)
        .write(out, size);
    io::copy(&mut content, &mut writer).with_context(|| format!("archive {name}"))?;
    writer.finish()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_output_gives_the_resolved_libraries_and_the_loader() {
        let ldd = "\tlinux-vdso.so.1 (0x00007ffd)\n\
                   \tlibelf.so.1 => /lib/x86_64-linux-gnu/libelf.so.1 (0x00007f28)\n\
                   \tlibz.so.1 => /lib/x86_64-linux-gnu/libz.so.1 (0x00007f29)\n\
                   \t/lib64/ld-linux-x86-64.so.2 (0x00007f2a)\n";
        assert_eq!(
            library_paths(ldd),
            [
                "/lib/x86_64-linux-gnu/libelf.so.1",
                "/lib/x86_64-linux-gnu/libz.so.1",
                "/lib64/ld-linux-x86-64.so.2"
            ]
        );
    }

    #[test]
    fn the_archive_holds_each_parent_directory_once_before_its_files() {
        let entries = [
            Entry {
                path: "/init".into(),
                content: Content::Script("#!/bin/sh\n".into()),
            },
            Entry {
                path: "/usr/bin/a".into(),
                content: Content::Script("aa".into()),
            },
            Entry {
                path: "/usr/libexec/b".into(),
                content: Content::Script("b".into()),
            },
            Entry {
                path: "/usr".into(),
                content: Content::Directory,
            },
            Entry {
                path: "/tmp".into(),
                content: Content::Directory,
            },
        ];
        let mut archive = Vec::new();
        write_archive(&entries, &mut archive).unwrap();

        let mut read = Vec::new();
        let mut input = Cursor::new(archive);
        loop {
            let mut reader = cpio::NewcReader::new(input).unwrap();
            if reader.entry().is_trailer() {
                break;
            }
            let (name, mode) = (reader.entry().name().to_string(), reader.entry().mode());
            let mut content = String::new();
            reader.read_to_string(&mut content).unwrap();
            read.push((name, mode, content));
            input = reader.finish().unwrap();
        }
        let expected = [
            ("init", 0o100755, "#!/bin/sh\n"),
            ("usr", 0o040755, ""),
            ("usr/bin", 0o040755, ""),
            ("usr/bin/a", 0o100755, "aa"),
            ("usr/libexec", 0o040755, ""),
            ("usr/libexec/b", 0o100755, "b"),
            ("tmp", 0o040755, ""),
        ];
        let expected: Vec<(String, u32, String)> = expected
            .iter()
            .map(|(n, m, c)| (n.to_string(), *m, c.to_string()))
            .collect();
        assert_eq!(read, expected);
    }
}
