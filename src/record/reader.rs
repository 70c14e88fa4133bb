//! Reads recording files, stopping at the first damaged chunk and saying
//! where. Only parses bytes: never writes files, never interprets entries.

use std::fmt;
use std::path::Path;

use serde::de::DeserializeOwned;

use super::{
    CHUNK_FRAME_LEN, CHUNK_MAGIC, MAGIC, MAX_CHUNK_LEN, MAX_HEADER_LEN, OLDEST_VERSION, TAG_KERNEL,
    TAG_NAMES, TAG_PRESSURE, TAG_RECORDS, TAG_THROTTLE, VERSION,
};
use crate::stream::{Entry, Header};

/// Nothing usable could be read. Damage after the header is not an error:
/// see `Recording::damage`. Messages do not name the file; callers do.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("cannot read: {0}")]
    Io(#[from] std::io::Error),
    #[error("the file is empty")]
    Empty,
    #[error("not a stalltop recording")]
    NotRecording,
    #[error("recording format version {found}; this stalltop reads versions {oldest} to {newest}")]
    UnsupportedVersion {
        found: u32,
        oldest: u32,
        newest: u32,
    },
    #[error("damaged header: {0}")]
    DamagedHeader(String),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Recording {
    pub header: Header,
    /// Every entry of every good chunk before the damage, if any.
    pub entries: Vec<Entry>,
    pub damage: Option<Damage>,
}

/// Where reading stopped: usually the chunk being written when the
/// recorder died.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Damage {
    /// File offset of the first bad chunk.
    pub offset: u64,
    pub chunks_read: usize,
    pub reason: String,
}

impl fmt::Display for Damage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "damaged at byte {} after {} good chunks: {}",
            self.offset, self.chunks_read, self.reason
        )
    }
}

pub fn read(path: &Path) -> Result<Recording, ReadError> {
    let data = std::fs::read(path)?;
    let (header, mut rest) = read_header(&data)?;
    let mut entries = Vec::new();
    let mut chunks_read = 0;
    let mut damage = None;
    while !rest.is_empty() {
        // `rest` is always a tail of `data`.
        let offset = (data.len() - rest.len()) as u64;
        match read_chunk(&mut rest) {
            Ok(chunk) => {
                entries.extend(chunk);
                chunks_read += 1;
            }
            Err(reason) => {
                damage = Some(Damage {
                    offset,
                    chunks_read,
                    reason,
                });
                break;
            }
        }
    }
    Ok(Recording {
        header,
        entries,
        damage,
    })
}

/// The header and the bytes after it.
fn read_header(data: &[u8]) -> Result<(Header, &[u8]), ReadError> {
    let damaged = ReadError::DamagedHeader;
    let truncated = || {
        damaged(format!(
            "the file ends inside it, after {} bytes",
            data.len()
        ))
    };
    if data.is_empty() {
        return Err(ReadError::Empty);
    }
    let mut rest = data;
    match take(&mut rest, MAGIC.len()) {
        Some(magic) if magic == MAGIC => {}
        // A cut-off magic is still a (truncated) recording.
        None if MAGIC.starts_with(data) => return Err(truncated()),
        _ => return Err(ReadError::NotRecording),
    }
    let version = take_u32(&mut rest).ok_or_else(truncated)?;
    if !(OLDEST_VERSION..=VERSION).contains(&version) {
        return Err(ReadError::UnsupportedVersion {
            found: version,
            oldest: OLDEST_VERSION,
            newest: VERSION,
        });
    }
    let (Some(len), Some(crc)) = (take_u32(&mut rest), take_u32(&mut rest)) else {
        return Err(truncated());
    };
    if len as usize > MAX_HEADER_LEN {
        return Err(damaged(format!(
            "it claims {len} bytes, over the {MAX_HEADER_LEN} limit"
        )));
    }
    let json = take(&mut rest, len as usize).ok_or_else(truncated)?;
    if crc32fast::hash(json) != crc {
        return Err(damaged("checksum mismatch".into()));
    }
    let header = serde_json::from_slice(json).map_err(|e| damaged(format!("bad JSON: {e}")))?;
    Ok((header, rest))
}

/// One chunk's entries, all or nothing; the error is the damage reason.
fn read_chunk(rest: &mut &[u8]) -> Result<Vec<Entry>, String> {
    let available = rest.len();
    let (Some(magic), Some(compressed_len), Some(uncompressed_len), Some(crc)) = (
        take(rest, CHUNK_MAGIC.len()),
        take_u32(rest),
        take_u32(rest),
        take_u32(rest),
    ) else {
        return Err(format!(
            "truncated chunk frame ({available} of {CHUNK_FRAME_LEN} bytes)"
        ));
    };
    if magic != CHUNK_MAGIC {
        return Err("no chunk starts here (bad chunk magic)".into());
    }
    let (compressed_len, uncompressed_len) = (compressed_len as usize, uncompressed_len as usize);
    if compressed_len > MAX_CHUNK_LEN || uncompressed_len > MAX_CHUNK_LEN {
        return Err(format!(
            "chunk claims {compressed_len} compressed, {uncompressed_len} uncompressed bytes, over the {MAX_CHUNK_LEN} limit"
        ));
    }
    let compressed = take(rest, compressed_len).ok_or_else(|| {
        format!(
            "truncated chunk ({} of {compressed_len} compressed bytes)",
            rest.len()
        )
    })?;
    if crc32fast::hash(compressed) != crc {
        return Err("chunk checksum mismatch".into());
    }
    // `uncompressed_len` caps the allocation and the output.
    let plain = zstd::bulk::decompress(compressed, uncompressed_len)
        .map_err(|e| format!("cannot decompress chunk: {e}"))?;
    if plain.len() != uncompressed_len {
        return Err(format!(
            "chunk decompressed to {} bytes, its frame says {uncompressed_len}",
            plain.len()
        ));
    }
    read_entries(&plain)
}

fn read_entries(plain: &[u8]) -> Result<Vec<Entry>, String> {
    let mut entries = Vec::new();
    let mut rest = plain;
    while !rest.is_empty() {
        let at = plain.len() - rest.len();
        let (Some(tag), Some(len)) = (take_u8(&mut rest), take_u32(&mut rest)) else {
            return Err(format!("truncated entry header at byte {at} of the chunk"));
        };
        let payload = take(&mut rest, len as usize).ok_or_else(|| {
            format!(
                "entry at byte {at} of the chunk claims {len} bytes, {} are left",
                rest.len()
            )
        })?;
        let entry = match tag {
            TAG_RECORDS => Entry::Records(payload.to_vec()),
            TAG_KERNEL => Entry::Kernel(from_json(payload, at)?),
            TAG_THROTTLE => Entry::Throttle(from_json(payload, at)?),
            TAG_NAMES => Entry::Names(from_json(payload, at)?),
            TAG_PRESSURE => Entry::Pressure(from_json(payload, at)?),
            other => {
                return Err(format!(
                    "unknown entry tag {other} at byte {at} of the chunk"
                ))
            }
        };
        entries.push(entry);
    }
    Ok(entries)
}

fn from_json<T: DeserializeOwned>(payload: &[u8], at: usize) -> Result<T, String> {
    serde_json::from_slice(payload)
        .map_err(|e| format!("bad JSON in the entry at byte {at} of the chunk: {e}"))
}

/// The next `n` bytes, or None (consuming nothing) if fewer are left.
fn take<'a>(bytes: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    let (head, tail) = bytes.split_at_checked(n)?;
    *bytes = tail;
    Some(head)
}

fn take_u8(bytes: &mut &[u8]) -> Option<u8> {
    take(bytes, 1)?.first().copied()
}

fn take_u32(bytes: &mut &[u8]) -> Option<u32> {
    take(bytes, 4)?.try_into().ok().map(u32::from_le_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::tests::{header, kernel, names, records, throttle, write_chunks};
    use crate::record::Writer;

    fn sample_chunks() -> Vec<Vec<Entry>> {
        vec![
            vec![names(), records(3, 0)],
            vec![kernel(1), throttle(1)],
            vec![records(2, 1)],
            vec![records(60, 9), kernel(99), throttle(99)],
        ]
    }

    /// A chunk built independently of the writer, around `plain` entries.
    fn chunk(plain: &[u8]) -> Vec<u8> {
        let compressed = zstd::bulk::compress(plain, 3).unwrap();
        let mut bytes = CHUNK_MAGIC.to_vec();
        bytes.extend_from_slice(&(compressed.len() as u32).to_le_bytes());
        bytes.extend_from_slice(&(plain.len() as u32).to_le_bytes());
        bytes.extend_from_slice(&crc32fast::hash(&compressed).to_le_bytes());
        bytes.extend_from_slice(&compressed);
        bytes
    }

    fn entry(tag: u8, payload: &[u8]) -> Vec<u8> {
        let mut bytes = vec![tag];
        bytes.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        bytes.extend_from_slice(payload);
        bytes
    }

    /// A good one-chunk recording (`names()`) followed by `tail`.
    fn read_with_tail(tail: &[u8]) -> Recording {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rec.stalltop");
        let ends = write_chunks(&path, &[vec![names()]]);
        let mut data = std::fs::read(&path).unwrap();
        data.extend_from_slice(tail);
        std::fs::write(&path, &data).unwrap();
        let recording = read(&path).unwrap();
        assert_eq!(recording.entries, vec![names()]);
        let damage = recording.damage.clone().expect("damage");
        assert_eq!((damage.offset, damage.chunks_read), (ends[0], 1));
        recording
    }

    fn reason(recording: &Recording) -> &str {
        &recording.damage.as_ref().expect("damage").reason
    }

    #[test]
    fn cut_inside_last_chunk_keeps_earlier_chunks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rec.stalltop");
        let chunks = sample_chunks();
        let ends = write_chunks(&path, &chunks);
        let data = std::fs::read(&path).unwrap();
        let last_start = ends[2];
        let earlier = chunks[..3].concat();
        let cut_path = dir.path().join("cut.stalltop");

        for cut in last_start..ends[3] {
            std::fs::write(&cut_path, &data[..cut as usize]).unwrap();
            let recording = read(&cut_path).unwrap();
            assert_eq!(recording.header, header());
            assert_eq!(recording.entries, earlier, "cut at {cut}");
            if cut == last_start {
                assert_eq!(recording.damage, None);
                continue;
            }
            let damage = recording.damage.expect("damage");
            assert_eq!(
                (damage.offset, damage.chunks_read),
                (last_start, 3),
                "cut at {cut}"
            );
            let expected = if cut < last_start + CHUNK_FRAME_LEN as u64 {
                "truncated chunk frame"
            } else {
                "truncated chunk ("
            };
            assert!(
                damage.reason.starts_with(expected),
                "cut at {cut}: {}",
                damage.reason
            );
            assert!(damage.to_string().starts_with(&format!(
                "damaged at byte {last_start} after 3 good chunks: "
            )));
        }
    }

    #[test]
    fn cut_inside_header_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rec.stalltop");
        Writer::create(&path, &header()).unwrap().finish().unwrap();
        let data = std::fs::read(&path).unwrap();
        let cut_path = dir.path().join("cut.stalltop");
        for cut in 1..data.len() {
            std::fs::write(&cut_path, &data[..cut]).unwrap();
            let error = read(&cut_path).unwrap_err();
            assert!(matches!(error, ReadError::DamagedHeader(_)), "cut at {cut}");
            assert_eq!(
                error.to_string(),
                format!("damaged header: the file ends inside it, after {cut} bytes")
            );
        }
    }

    #[test]
    fn flipped_byte_is_caught_by_crc() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rec.stalltop");
        let chunks = sample_chunks();
        let ends = write_chunks(&path, &chunks);
        let mut data = std::fs::read(&path).unwrap();
        let middle = (ends[0] + CHUNK_FRAME_LEN as u64 + ends[1]) / 2;
        data[middle as usize] ^= 0x5a;
        std::fs::write(&path, &data).unwrap();

        let recording = read(&path).unwrap();
        assert_eq!(recording.entries, chunks[0]);
        let damage = recording.damage.expect("damage");
        assert_eq!(
            damage,
            Damage {
                offset: ends[0],
                chunks_read: 1,
                reason: "chunk checksum mismatch".into()
            }
        );
    }

    #[test]
    fn every_flipped_byte_is_detected_without_panic() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rec.stalltop");
        let chunks = vec![vec![names(), kernel(1)], vec![records(4, 1)]];
        write_chunks(&path, &chunks);
        let data = std::fs::read(&path).unwrap();
        let all = chunks.concat();
        let flipped_path = dir.path().join("flipped.stalltop");
        for i in 0..data.len() {
            let mut flipped = data.clone();
            flipped[i] ^= 0x5a;
            std::fs::write(&flipped_path, &flipped).unwrap();
            match read(&flipped_path) {
                Err(_) => {}
                Ok(recording) => {
                    assert!(recording.damage.is_some(), "byte {i}: flip not detected");
                    assert!(
                        all.starts_with(&recording.entries),
                        "byte {i}: entries changed"
                    );
                }
            }
        }
    }

    #[test]
    fn damaged_entries_drop_their_whole_chunk() {
        let good = entry(TAG_RECORDS, b"kept only if the chunk is good");
        let unknown = read_with_tail(&chunk(&[good.clone(), entry(9, b"{}")].concat()));
        assert_eq!(
            reason(&unknown),
            "unknown entry tag 9 at byte 35 of the chunk"
        );

        let bad_json = read_with_tail(&chunk(
            &[good.clone(), entry(TAG_KERNEL, b"{\"ts_ns\":")].concat(),
        ));
        assert!(
            reason(&bad_json).starts_with("bad JSON in the entry at byte 35 of the chunk"),
            "{}",
            reason(&bad_json)
        );

        let mut overlong = entry(TAG_NAMES, b"{}");
        overlong[1] = 200;
        let overlong = read_with_tail(&chunk(&[good.clone(), overlong].concat()));
        assert_eq!(
            reason(&overlong),
            "entry at byte 35 of the chunk claims 200 bytes, 2 are left"
        );

        let cut_header = read_with_tail(&chunk(&[good, vec![TAG_NAMES, 1]].concat()));
        assert_eq!(
            reason(&cut_header),
            "truncated entry header at byte 35 of the chunk"
        );
    }

    #[test]
    fn bad_chunk_frames_are_damage() {
        let huge = [CHUNK_MAGIC.as_slice(), &u32::MAX.to_le_bytes(), &[0; 8]].concat();
        assert!(reason(&read_with_tail(&huge)).ends_with("over the 67108864 limit"));

        let mut too_long = chunk(&entry(TAG_RECORDS, b"abc"));
        too_long[8] += 1; // uncompressed_len
        assert_eq!(
            reason(&read_with_tail(&too_long)),
            "chunk decompressed to 8 bytes, its frame says 9"
        );

        let mut too_short = chunk(&entry(TAG_RECORDS, b"abc"));
        too_short[8] -= 1; // too small for the output
        assert!(reason(&read_with_tail(&too_short)).starts_with("cannot decompress chunk: "));

        let not_zstd = [
            CHUNK_MAGIC.as_slice(),
            &3u32.to_le_bytes(),
            &3u32.to_le_bytes(),
            &crc32fast::hash(b"abc").to_le_bytes(),
            b"abc",
        ]
        .concat();
        assert!(reason(&read_with_tail(&not_zstd)).starts_with("cannot decompress chunk"));

        let garbage = read_with_tail(b"trailing garbage after a chunk");
        assert_eq!(reason(&garbage), "no chunk starts here (bad chunk magic)");
    }

    #[test]
    fn files_that_are_not_recordings() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("file");

        std::fs::write(&path, b"").unwrap();
        let error = read(&path).unwrap_err();
        assert!(matches!(error, ReadError::Empty));
        assert_eq!(error.to_string(), "the file is empty");

        std::fs::write(&path, b"runq 2ms\nsoftirq 5ms\n").unwrap();
        let error = read(&path).unwrap_err();
        assert!(matches!(error, ReadError::NotRecording));
        assert_eq!(error.to_string(), "not a stalltop recording");

        let error = read(&dir.path().join("missing")).unwrap_err();
        assert!(matches!(&error, ReadError::Io(e) if e.kind() == std::io::ErrorKind::NotFound));
        assert!(error.to_string().starts_with("cannot read: "), "{error}");
    }

    /// `path`'s format version set to `version`.
    fn set_version(path: &Path, version: u32) {
        let mut data = std::fs::read(path).unwrap();
        data[MAGIC.len()..MAGIC.len() + 4].copy_from_slice(&version.to_le_bytes());
        std::fs::write(path, &data).unwrap();
    }

    #[test]
    fn future_version_says_which() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rec.stalltop");
        write_chunks(&path, &[vec![names()]]);
        set_version(&path, 3);

        let error = read(&path).unwrap_err();
        assert!(matches!(
            error,
            ReadError::UnsupportedVersion {
                found: 3,
                oldest: 1,
                newest: 2
            }
        ));
        assert_eq!(
            error.to_string(),
            "recording format version 3; this stalltop reads versions 1 to 2"
        );
    }

    /// Version 1 (before the Pressure entry) differs only by lacking it.
    #[test]
    fn a_version_1_recording_still_reads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rec.stalltop");
        write_chunks(&path, &[vec![names()]]);
        set_version(&path, 1);
        let recording = read(&path).unwrap();
        assert_eq!(recording.entries.len(), 1);
        assert!(recording.damage.is_none());
    }

    #[test]
    fn corrupt_header_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rec.stalltop");
        write_chunks(&path, &[vec![names()]]);
        let mut data = std::fs::read(&path).unwrap();
        data[30] ^= 0x01; // inside the header JSON
        std::fs::write(&path, &data).unwrap();
        let error = read(&path).unwrap_err();
        assert_eq!(error.to_string(), "damaged header: checksum mismatch");
    }
}
