//! The flight directory: dumps are written there as normal recordings
//! (`<host>-<UTC time>.stl`, mode 0600, chunk by chunk so a crash leaves a
//! readable file), and the oldest are deleted to stay within its size.

use std::fs;
use std::path::{Path, PathBuf};

use crate::record::Writer;
use crate::stream::Header;

/// Recordings this directory holds are named with this suffix.
const SUFFIX: &str = ".stl";

pub struct FlightDir {
    dir: PathBuf,
    max_bytes: u64,
}

impl FlightDir {
    /// Creates the directory (mode 0700) if it does not exist.
    pub fn open(dir: &Path, max_bytes: u64) -> std::io::Result<FlightDir> {
        use std::os::unix::fs::DirBuilderExt;
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        Ok(FlightDir {
            dir: dir.to_owned(),
            max_bytes,
        })
    }

    /// Writes a recording of `header` and `chunks`, named after the host and
    /// `wall_clock_ns` (UTC); returns its path.
    pub fn write<'a>(
        &self,
        header: &Header,
        wall_clock_ns: i64,
        chunks: impl Iterator<Item = &'a [u8]>,
    ) -> Result<PathBuf, String> {
        let path = self
            .dir
            .join(file_name(&header.host.hostname, wall_clock_ns));
        let fail = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
        let mut writer = Writer::create(&path, header).map_err(|e| fail(&e))?;
        for chunk in chunks {
            writer.write_chunk(chunk).map_err(|e| fail(&e))?;
        }
        writer.finish().map_err(|e| fail(&e))?;
        Ok(path)
    }

    /// Deletes the oldest recordings until the rest fit in the size bound;
    /// returns how many went. The newest always stays.
    pub fn prune(&self) -> std::io::Result<u64> {
        let mut files: Vec<(PathBuf, u64)> = fs::read_dir(&self.dir)?
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().ends_with(SUFFIX))
            .filter_map(|e| Some((e.path(), e.metadata().ok()?.len())))
            .collect();
        // Names start with the host and a sortable UTC time.
        files.sort();
        let mut total: u64 = files.iter().map(|(_, len)| len).sum();
        let mut deleted = 0;
        for (path, len) in &files[..files.len().saturating_sub(1)] {
            if total <= self.max_bytes {
                break;
            }
            fs::remove_file(path)?;
            total -= len;
            deleted += 1;
        }
        Ok(deleted)
    }
}

/// `<host>-<YYYYMMDD>T<HHMMSS.mmm>Z.stl`: sorts by time for one host.
fn file_name(host: &str, wall_clock_ns: i64) -> String {
    let time = humantime::format_rfc3339_millis(
        std::time::UNIX_EPOCH + std::time::Duration::from_nanos(wall_clock_ns.max(0) as u64),
    )
    .to_string()
    .replace([':', '-'], "");
    let host: String = host
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{host}-{time}{SUFFIX}")
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;
    use crate::record::ChunkBuilder;
    use crate::stream::{Entry, KernelSnapshot};

    #[test]
    fn file_names_sort_by_time_and_carry_no_path() {
        assert_eq!(
            file_name("node-7", 1_764_072_000_123_000_000),
            "node_7-20251125T120000.123Z.stl"
        );
        assert_eq!(file_name("../x", 0), ".._x-19700101T000000.000Z.stl");
    }

    #[test]
    fn a_dump_is_a_private_readable_recording() {
        let dir = tempfile::tempdir().unwrap();
        let flight = FlightDir::open(&dir.path().join("flight"), 1 << 30).unwrap();
        let mut builder = ChunkBuilder::default();
        let snapshot = KernelSnapshot {
            ts_ns: 7,
            ..KernelSnapshot::default()
        };
        builder.push(&Entry::Kernel(snapshot.clone())).unwrap();
        let chunk = builder.finish().unwrap();
        let header = crate::model::tests::header();
        let path = flight
            .write(
                &header,
                1_764_072_000_000_000_000,
                [chunk.as_slice()].into_iter(),
            )
            .unwrap();
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let recording = crate::record::read(&path).unwrap();
        assert_eq!(recording.entries, vec![Entry::Kernel(snapshot)]);
    }

    #[test]
    fn the_oldest_go_first_to_stay_within_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let flight = FlightDir::open(dir.path(), 2_500).unwrap();
        for minute in 0..4 {
            let name = format!("node-2025112{minute}T000000.000Z.stl");
            fs::write(dir.path().join(name), vec![0; 1_000]).unwrap();
        }
        fs::write(dir.path().join("notes.txt"), vec![0; 10_000]).unwrap();
        assert_eq!(flight.prune().unwrap(), 2);
        let mut left: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                "node-20251122T000000.000Z.stl",
                "node-20251123T000000.000Z.stl",
                "notes.txt"
            ]
        );
    }
}
