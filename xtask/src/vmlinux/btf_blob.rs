//! Finds a kernel's BTF (the contents of its .BTF section) inside an uncompressed kernel image,
//! which has no ELF sections to look it up by: by the BTF header (magic 0xeb9f, version 1, a
//! 24-byte header, then the type and string sections back to back, as pahole writes them). Pure.

const MAGIC: [u8; 2] = 0xeb9f_u16.to_le_bytes();
const VERSION: u8 = 1;
const HEADER_LEN: u32 = 24;

/// The one BTF blob in `image`; an error when there is none or more than one.
pub fn find(image: &[u8]) -> Result<&[u8], String> {
    let mut found: Vec<&[u8]> = (0..image.len().saturating_sub(HEADER_LEN as usize))
        .filter(|&at| image[at..].starts_with(&MAGIC))
        .filter_map(|at| blob_at(image, at))
        .collect();
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => Err("no BTF in the kernel image (is it built with CONFIG_DEBUG_INFO_BTF?)".into()),
        n => Err(format!(
            "{n} candidate BTF blobs in the kernel image, expected one"
        )),
    }
}

/// The BTF blob whose header starts at `at`, if the header is one.
fn blob_at(image: &[u8], at: usize) -> Option<&[u8]> {
    let header = image.get(at..at + HEADER_LEN as usize)?;
    let word = |i: usize| u32::from_le_bytes(header[i..i + 4].try_into().expect("4 bytes"));
    let (version, flags, header_len) = (header[2], header[3], word(4));
    let (type_off, type_len, str_off, str_len) = (word(8), word(12), word(16), word(20));
    if version != VERSION || flags != 0 || header_len != HEADER_LEN {
        return None;
    }
    if type_off != 0 || type_len == 0 || str_off != type_len || str_len == 0 {
        return None;
    }
    let len = HEADER_LEN as usize + str_off as usize + str_len as usize;
    let blob = image.get(at..at + len)?;
    // The string section starts with the empty string and ends with a NUL.
    let strings = &blob[HEADER_LEN as usize + str_off as usize..];
    (strings[0] == 0 && strings[strings.len() - 1] == 0).then_some(blob)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A BTF blob with `types` and `strings` sections.
    fn blob(types: &[u8], strings: &[u8]) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        out.extend([VERSION, 0]);
        for word in [HEADER_LEN, 0, types.len() as u32, types.len() as u32] {
            out.extend(word.to_le_bytes());
        }
        out.extend((strings.len() as u32).to_le_bytes());
        out.extend(types);
        out.extend(strings);
        out
    }

    fn image(parts: &[&[u8]]) -> Vec<u8> {
        parts.concat()
    }

    #[test]
    fn finds_the_blob_among_code_and_data() {
        let btf = blob(&[1, 2, 3, 4, 5, 6, 7, 8], b"\0task_struct\0rq\0");
        // A stray magic with a header that is not BTF's, before the real one.
        let decoy = [MAGIC[0], MAGIC[1], VERSION, 0, 99, 0, 0, 0];
        let kernel = image(&[&[0x14; 100], &decoy, &[0; 40], &btf, &[0xd5; 64]]);
        assert_eq!(find(&kernel), Ok(&btf[..]));
    }

    #[test]
    fn rejects_no_blob_two_blobs_and_a_truncated_one() {
        let btf = blob(&[1, 2, 3, 4], b"\0a\0");
        assert!(find(&[0; 256]).unwrap_err().contains("no BTF"));
        let twice = image(&[&btf, &[0; 8], &btf]);
        assert!(find(&twice).unwrap_err().contains("2 candidate"));
        let truncated = &btf[..btf.len() - 1];
        assert!(find(&image(&[&[0; 8], truncated])).is_err());
        let unterminated = blob(&[1, 2, 3, 4], b"\0a");
        assert!(find(&unterminated).is_err());
    }
}
