//! Writes recording files: header at create, then entries batched into
//! compressed chunks. Owns the file it creates; does not read it back.

use std::fs::{File, OpenOptions, Permissions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use super::{
    CHUNK_FLUSH_LEN, CHUNK_FRAME_LEN, CHUNK_MAGIC, ENTRY_HEADER_LEN, HEADER_PREFIX_LEN, MAGIC,
    MAX_ENTRY_LEN, MAX_HEADER_LEN, TAG_KERNEL, TAG_NAMES, TAG_PRESSURE, TAG_RECORDS, TAG_THROTTLE,
    VERSION,
};
use crate::stream::{Entry, Header};

/// zstd's default level: fast enough to keep up with a busy ring buffer.
const ZSTD_LEVEL: i32 = 3;

/// Messages do not name the file; callers do.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("cannot write: {0}")]
    Io(#[from] io::Error),
    #[error("cannot encode a recording entry: {0}")]
    Encode(#[from] serde_json::Error),
    #[error("{what} is {len} bytes, more than the {max} a recording accepts")]
    TooLarge {
        what: &'static str,
        len: usize,
        max: usize,
    },
}

pub struct Writer {
    file: File,
    /// Encoded entries not yet written as a chunk.
    pending: ChunkBuilder,
    written: u64,
}

/// Entries encoded into one chunk, in memory: the writer's buffer, and what
/// the flight recorder keeps of the last minutes.
#[derive(Default)]
pub struct ChunkBuilder {
    pending: Vec<u8>,
}

impl ChunkBuilder {
    pub fn push(&mut self, entry: &Entry) -> Result<(), WriteError> {
        let (tag, json) = match entry {
            Entry::Records(bytes) => return self.push_payload(TAG_RECORDS, bytes),
            Entry::Kernel(snapshot) => (TAG_KERNEL, serde_json::to_vec(snapshot)?),
            Entry::Throttle(snapshot) => (TAG_THROTTLE, serde_json::to_vec(snapshot)?),
            Entry::Names(names) => (TAG_NAMES, serde_json::to_vec(names)?),
            Entry::Pressure(snapshot) => (TAG_PRESSURE, serde_json::to_vec(snapshot)?),
        };
        self.push_payload(tag, &json)
    }

    fn push_payload(&mut self, tag: u8, payload: &[u8]) -> Result<(), WriteError> {
        if payload.len() > MAX_ENTRY_LEN {
            return Err(WriteError::TooLarge {
                what: "entry",
                len: payload.len(),
                max: MAX_ENTRY_LEN,
            });
        }
        self.pending.reserve(ENTRY_HEADER_LEN + payload.len());
        self.pending.push(tag);
        self.pending
            .extend_from_slice(&len_u32(payload.len()).to_le_bytes());
        self.pending.extend_from_slice(payload);
        Ok(())
    }

    /// Uncompressed bytes buffered.
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// The buffered entries as one framed, compressed chunk; the builder is
    /// empty again.
    pub fn finish(&mut self) -> Result<Vec<u8>, WriteError> {
        let compressed = zstd::bulk::compress(&self.pending, ZSTD_LEVEL)?;
        let mut chunk = Vec::with_capacity(CHUNK_FRAME_LEN + compressed.len());
        chunk.extend_from_slice(CHUNK_MAGIC);
        chunk.extend_from_slice(&len_u32(compressed.len()).to_le_bytes());
        chunk.extend_from_slice(&len_u32(self.pending.len()).to_le_bytes());
        chunk.extend_from_slice(&crc32fast::hash(&compressed).to_le_bytes());
        chunk.extend_from_slice(&compressed);
        self.pending.clear();
        Ok(chunk)
    }
}

impl Writer {
    /// Creates (or truncates) `path` with mode 0600 and writes the header.
    pub fn create(path: &Path, header: &Header) -> Result<Writer, WriteError> {
        // O_NOFOLLOW: root must not write through a symlink someone
        // planted at the output path (e.g. in /tmp).
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)?;
        // `mode` only applies to a new file; an existing one keeps its mode.
        file.set_permissions(Permissions::from_mode(0o600))?;

        let json = serde_json::to_vec(header)?;
        if json.len() > MAX_HEADER_LEN {
            return Err(WriteError::TooLarge {
                what: "header",
                len: json.len(),
                max: MAX_HEADER_LEN,
            });
        }
        let mut bytes = Vec::with_capacity(HEADER_PREFIX_LEN + json.len());
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&VERSION.to_le_bytes());
        bytes.extend_from_slice(&len_u32(json.len()).to_le_bytes());
        bytes.extend_from_slice(&crc32fast::hash(&json).to_le_bytes());
        bytes.extend_from_slice(&json);
        file.write_all(&bytes)?;

        Ok(Writer {
            file,
            pending: ChunkBuilder::default(),
            written: bytes.len() as u64,
        })
    }

    /// Buffers `entry`; writes a chunk once enough is buffered.
    pub fn write(&mut self, entry: &Entry) -> Result<(), WriteError> {
        self.pending.push(entry)?;
        if self.pending.len() >= CHUNK_FLUSH_LEN {
            self.flush_chunk()?;
        }
        Ok(())
    }

    /// Writes the buffered entries as one chunk.
    pub fn flush_chunk(&mut self) -> Result<(), WriteError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let chunk = self.pending.finish()?;
        self.write_chunk(&chunk)
    }

    /// Writes a chunk a `ChunkBuilder` made, with a single `write_all` so
    /// that a crash leaves either the whole chunk or a detectable stub.
    pub fn write_chunk(&mut self, chunk: &[u8]) -> Result<(), WriteError> {
        self.file.write_all(chunk)?;
        self.written += chunk.len() as u64;
        Ok(())
    }

    /// Writes what is buffered, syncs the file; returns the bytes written.
    pub fn finish(mut self) -> Result<u64, WriteError> {
        self.flush_chunk()?;
        self.file.sync_all()?;
        Ok(self.written)
    }
}

/// Lengths written are bounded by MAX_HEADER_LEN / MAX_ENTRY_LEN and the
/// flush size (plus zstd's small worst-case overhead), all far below 4 GiB.
fn len_u32(len: usize) -> u32 {
    u32::try_from(len).expect("recording lengths are bounded far below 4 GiB")
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;
    use crate::record::read;
    use crate::record::tests::{header, kernel, names, records};

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn new_file_is_private() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rec.stalltop");
        Writer::create(&path, &header()).unwrap().finish().unwrap();
        assert_eq!(mode(&path), 0o600);
    }

    #[test]
    fn overwritten_file_is_truncated_and_private() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rec.stalltop");
        std::fs::write(&path, vec![b'x'; 100_000]).unwrap();
        std::fs::set_permissions(&path, Permissions::from_mode(0o644)).unwrap();

        let mut writer = Writer::create(&path, &header()).unwrap();
        writer.write(&names()).unwrap();
        let written = writer.finish().unwrap();

        assert_eq!(mode(&path), 0o600);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), written);
        let recording = read(&path).unwrap();
        assert_eq!(recording.entries, vec![names()]);
        assert_eq!(recording.damage, None);
    }

    #[test]
    fn a_symlink_at_the_output_path_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("precious");
        std::fs::write(&victim, b"keep me").unwrap();
        let path = dir.path().join("rec.stalltop");
        std::os::unix::fs::symlink(&victim, &path).unwrap();
        assert!(Writer::create(&path, &header()).is_err());
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep me");
    }

    #[test]
    fn dropped_writer_keeps_flushed_chunks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rec.stalltop");
        let mut writer = Writer::create(&path, &header()).unwrap();
        writer.write(&names()).unwrap();
        writer.write(&records(30, 1)).unwrap();
        writer.flush_chunk().unwrap();
        writer.flush_chunk().unwrap(); // nothing buffered: writes nothing
        let flushed_len = std::fs::metadata(&path).unwrap().len();
        writer.write(&kernel(5)).unwrap();
        drop(writer); // like SIGKILL: the unflushed kernel snapshot is lost

        assert_eq!(std::fs::metadata(&path).unwrap().len(), flushed_len);
        let recording = read(&path).unwrap();
        assert_eq!(recording.header, header());
        assert_eq!(recording.entries, vec![names(), records(30, 1)]);
        assert_eq!(recording.damage, None);
    }

    #[test]
    fn large_buffer_flushes_without_being_asked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rec.stalltop");
        let mut writer = Writer::create(&path, &header()).unwrap();
        // 104 KB per entry: every 11th passes the 1 MiB flush size, so 22 of
        // the 25 reach the disk before the drop.
        let entries: Vec<Entry> = (0..25).map(|i| records(1000, i)).collect();
        for entry in &entries {
            writer.write(entry).unwrap();
        }
        drop(writer);

        let recording = read(&path).unwrap();
        assert_eq!(recording.entries, entries[..22]);
        assert_eq!(recording.damage, None);
    }

    #[test]
    fn oversized_entry_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rec.stalltop");
        let mut writer = Writer::create(&path, &header()).unwrap();
        let error = writer
            .write(&Entry::Records(vec![0; MAX_ENTRY_LEN + 1]))
            .unwrap_err();
        assert!(
            matches!(error, WriteError::TooLarge { what: "entry", len, .. } if len == MAX_ENTRY_LEN + 1)
        );
        writer.write(&names()).unwrap();
        writer.finish().unwrap();
        assert_eq!(read(&path).unwrap().entries, vec![names()]);
    }
}
