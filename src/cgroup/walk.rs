//! Lists every cgroup (directory) of one mounted hierarchy with its path
//! relative to the mount and its inode. Reads directories only, never the
//! control files; a cgroup removed mid-walk is silently left out.

use std::fs;
use std::os::unix::fs::{DirEntryExt, MetadataExt};
use std::path::{Path, PathBuf};

/// One cgroup directory found by `cgroups`.
pub(super) struct CgroupDir {
    /// "/" for the root, else "/a/b".
    pub relative: String,
    pub absolute: PathBuf,
    /// The kernfs node id the BPF side reports as the cgroup id.
    pub inode: u64,
}

/// Every cgroup at or below `root` in tree order (a parent, then each
/// child's subtree, siblings by name). Empty if `root` cannot be read.
pub(super) fn cgroups(root: &Path) -> Vec<CgroupDir> {
    let Ok(meta) = fs::metadata(root) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    // An explicit stack rather than recursion: depth is no concern.
    let mut stack = vec![CgroupDir {
        relative: "/".to_string(),
        absolute: root.to_path_buf(),
        inode: meta.ino(),
    }];
    while let Some(dir) = stack.pop() {
        let parent = dir.relative.trim_end_matches('/');
        let children = subdirectories(&dir.absolute).into_iter().rev();
        stack.extend(children.map(|(name, absolute, inode)| CgroupDir {
            relative: format!("{parent}/{name}"),
            absolute,
            inode,
        }));
        found.push(dir);
    }
    found
}

/// `(name, path, inode)` of each subdirectory, sorted by name; symlinks are
/// not followed (cgroupfs has none, a fake tree might). The inode is the
/// readdir one, which kernfs fills with the same id as stat, so the walk
/// costs no stat per cgroup.
fn subdirectories(dir: &Path) -> Vec<(String, PathBuf, u64)> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<(String, PathBuf, u64)> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (name, e.path(), e.ino())
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_root_and_nested_directories_with_their_inodes() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        fs::create_dir_all(root.join("b/deep/er")).unwrap();
        fs::create_dir_all(root.join("a")).unwrap();
        fs::write(root.join("cpu.stat"), "nr_periods 0\n").unwrap();
        fs::write(root.join("a/cgroup.procs"), "").unwrap();

        let dirs = cgroups(root);
        let relative: Vec<&str> = dirs.iter().map(|d| d.relative.as_str()).collect();
        assert_eq!(relative, ["/", "/a", "/b", "/b/deep", "/b/deep/er"]);
        for d in &dirs {
            assert_eq!(d.inode, fs::metadata(&d.absolute).unwrap().ino());
        }
        assert_eq!(dirs[4].absolute, root.join("b/deep/er"));
    }

    #[test]
    fn a_missing_root_gives_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(cgroups(&tmp.path().join("gone")).is_empty());
    }

    #[test]
    fn symlinks_are_not_followed() {
        let tmp = tempfile::tempdir().unwrap();
        fs::create_dir(tmp.path().join("real")).unwrap();
        std::os::unix::fs::symlink(tmp.path().join("real"), tmp.path().join("link")).unwrap();
        let relative: Vec<String> = cgroups(tmp.path())
            .into_iter()
            .map(|d| d.relative)
            .collect();
        assert_eq!(relative, ["/", "/real"]);
    }
}
