//! The arm64 BPF object build.rs compiles beside the host's, and copies of it that load one
//! program section each. Every program is declared `SEC("?...")`, which libbpf does not load
//! unless asked, and bpftool cannot ask; nor can `bpftool prog loadall` pin an object's
//! programs when any of them is left unloaded. So in a copy the one section's header names it
//! without its `?`, and so do its .BTF.ext records (libbpf finds a section's CO-RE
//! relocations and function info by its name), and the other program sections are no longer
//! executable, which libbpf skips: bpftool loads that section alone, with all the object's
//! maps and their compiled-in knobs.

use std::path::PathBuf;

use anyhow::{ensure, Context, Result};
use serde::Deserialize;

use super::elf::{self, Elf, SHF_EXECINSTR};
use crate::checks::report::SyscallMode;
use crate::matrix::binaries::cargo_messages;

/// build.rs's name of the other architecture's object in its OUT_DIR.
const OBJECT: &str = "stalltop.aarch64.bpf.o";

/// One copy of the object: the section it loads and that section's programs, with the knobs
/// of one syscall mode.
pub struct LoadUnit {
    /// The syscall mode whose knobs the copy holds.
    pub mode: SyscallMode,
    /// Its section's name without the `?`: `tp_btf/sched_switch`, `raw_tp`, `perf_event`.
    pub section: String,
    pub programs: Vec<String>,
    pub object: Vec<u8>,
}

impl LoadUnit {
    /// The tracepoint the section attaches to: `sched_switch` for `tp_btf/sched_switch` and
    /// `raw_tp/sched_switch`; None for programs that are test-run or attach to perf events.
    pub fn tracepoint(&self) -> Option<&str> {
        let (kind, name) = self.section.split_once('/')?;
        matches!(kind, "tp_btf" | "raw_tp").then_some(name)
    }
}

#[derive(Deserialize)]
struct BuildScriptRun {
    reason: String,
    out_dir: Option<PathBuf>,
}

/// Has cargo run build.rs (which compiles the object for both architectures) and finds the
/// arm64 object it wrote. The release build's: `cargo xtask test` has built it already.
pub fn build() -> Result<PathBuf> {
    Ok(out_dir()?.join(OBJECT))
}

/// Has cargo run build.rs, and finds the directory it wrote the objects of both architectures
/// to (`stalltop.<arch>.bpf.o`, Rust's arch names).
pub fn out_dir() -> Result<PathBuf> {
    let messages = cargo_messages(&["build", "--release", "-p", "stalltop"])?;
    messages
        .lines()
        .filter_map(|line| serde_json::from_str::<BuildScriptRun>(line).ok())
        .filter(|message| message.reason == "build-script-executed")
        .filter_map(|message| message.out_dir)
        .find(|dir| dir.join(OBJECT).is_file())
        .with_context(|| format!("no build script of the workspace wrote {OBJECT}"))
}

/// A copy of `object` per `?` section, that section loadable, for syscall mode `mode`.
pub fn load_units(object: &[u8], mode: SyscallMode) -> Result<Vec<LoadUnit>> {
    let elf = Elf::parse(object)?;
    let symbols = elf.symbols()?;
    let mut units = Vec::new();
    for (index, section) in elf.sections.iter().enumerate() {
        let Some(section_name) = section.name.strip_prefix('?') else {
            continue;
        };
        let programs: Vec<String> = symbols
            .iter()
            .filter(|s| s.is_function && s.global && s.section == index)
            .map(|s| s.name.clone())
            .collect();
        ensure!(
            !programs.is_empty(),
            "section {} has no program",
            section.name
        );
        let mut copy = object.to_vec();
        // The name's string starts with the `?`: one byte on, the same string without it.
        let name_offset = elf::u32_at(object, section.name_field)? + 1;
        copy[section.name_field..section.name_field + 4]
            .copy_from_slice(&name_offset.to_le_bytes());
        skip_first_byte_in_btf_ext(&elf, &mut copy, &section.name)?;
        for other in elf.sections.iter().filter(|s| s.name.starts_with('?')) {
            if other.name != section.name {
                let flags = elf::u64_at(object, other.flags_field)? & !SHF_EXECINSTR;
                copy[other.flags_field..other.flags_field + 8]
                    .copy_from_slice(&flags.to_le_bytes());
            }
        }
        units.push(LoadUnit {
            mode,
            section: section_name.to_owned(),
            programs,
            object: copy,
        });
    }
    Ok(units)
}

/// The object's globals in .rodata (its `const volatile` knobs) with their compiled-in values:
/// `syscalls_hooked=1`; an array as `syscall_arg=[512 bytes, 0 non-zero]`.
pub fn knobs(object: &[u8]) -> Result<Vec<String>> {
    let elf = Elf::parse(object)?;
    let Some(index) = elf.sections.iter().position(|s| s.name == ".rodata") else {
        return Ok(Vec::new());
    };
    let rodata = elf.contents(&elf.sections[index])?;
    let mut knobs = Vec::new();
    for symbol in elf.symbols()? {
        if symbol.is_function || !symbol.global || symbol.section != index {
            continue;
        }
        let bytes = rodata
            .get(symbol.offset..symbol.offset + symbol.size)
            .with_context(|| format!("{} runs past .rodata", symbol.name))?;
        let value = match bytes.len() {
            1 | 2 | 4 | 8 => {
                let mut word = [0u8; 8];
                word[..bytes.len()].copy_from_slice(bytes);
                u64::from_le_bytes(word).to_string()
            }
            n => {
                let set = bytes.iter().filter(|&&b| b != 0).count();
                format!("[{n} bytes, {set} non-zero]")
            }
        };
        knobs.push(format!("{}={value}", symbol.name));
    }
    Ok(knobs)
}

/// `object` with its .rodata knobs `knobs` (name, value) set as the loader sets them for a
/// mode; each must be a global of .rodata of 1, 2, 4 or 8 bytes.
pub fn with_knobs(object: &[u8], knobs: &[(&str, i64)]) -> Result<Vec<u8>> {
    let elf = Elf::parse(object)?;
    let index = elf
        .sections
        .iter()
        .position(|s| s.name == ".rodata")
        .context("the object has no .rodata")?;
    let rodata = &elf.sections[index];
    let symbols = elf.symbols()?;
    let mut copy = object.to_vec();
    for &(name, value) in knobs {
        let symbol = symbols
            .iter()
            .find(|s| s.name == name && s.global && s.section == index)
            .with_context(|| format!("no knob {name} in .rodata"))?;
        ensure!(
            matches!(symbol.size, 1 | 2 | 4 | 8),
            "knob {name} is {} bytes, not a number",
            symbol.size
        );
        let at = rodata.offset + symbol.offset;
        copy[at..at + symbol.size].copy_from_slice(&value.to_le_bytes()[..symbol.size]);
    }
    Ok(copy)
}

/// Points each .BTF.ext record group of section `name` (its function info, line info and CO-RE
/// relocations) one byte further into .BTF's strings, past the `?`.
fn skip_first_byte_in_btf_ext(elf: &Elf, copy: &mut [u8], name: &str) -> Result<()> {
    let btf = elf.contents(elf.section(".BTF").context("the object has no .BTF")?)?;
    // The header's length, then the strings' offset after it.
    let strings = elf::u32_at(btf, 4)? as usize + elf::u32_at(btf, 16)? as usize;
    let ext = elf
        .section(".BTF.ext")
        .context("the object has no .BTF.ext")?;
    let ext_bytes = elf.contents(ext)?;
    for field in btf_ext_name_fields(ext_bytes)? {
        let offset = elf::u32_at(ext_bytes, field)?;
        if elf::c_string(btf, strings + offset as usize)? == name {
            let at = ext.offset + field;
            copy[at..at + 4].copy_from_slice(&(offset + 1).to_le_bytes());
        }
    }
    Ok(())
}

/// Where in .BTF.ext each record group names its section: the function info, line info and
/// CO-RE relocation blocks (offsets after the header) each hold a record size, then groups of
/// a section name's offset, a record count and the records.
fn btf_ext_name_fields(ext: &[u8]) -> Result<Vec<usize>> {
    let header = elf::u32_at(ext, 4)? as usize;
    let mut blocks = vec![(8, 12), (16, 20)];
    // The CO-RE relocations' block came later, with a longer header.
    if header >= 32 {
        blocks.push((24, 28));
    }
    let mut fields = Vec::new();
    for (offset_at, length_at) in blocks {
        let start = header + elf::u32_at(ext, offset_at)? as usize;
        let end = start + elf::u32_at(ext, length_at)? as usize;
        if start == end {
            continue;
        }
        let record = elf::u32_at(ext, start)? as usize;
        let mut at = start + 4;
        while at < end {
            fields.push(at);
            at += 8 + elf::u32_at(ext, at + 4)? as usize * record;
        }
    }
    Ok(fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(values: &[u32]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    #[test]
    fn every_group_of_every_btf_ext_block_is_found() {
        let header = [0x0101_eb9f, 32, 0, 28, 28, 12, 40, 0];
        // Function info: 8-byte records, a group of 1 and one of 0.
        let func_info = [8, 100, 1, 0xaa, 0xbb, 200, 0];
        // Line info: 4-byte records, one group of 0.
        let line_info = [4, 300, 0];
        let ext = words(&[&header[..], &func_info, &line_info].concat());
        assert_eq!(btf_ext_name_fields(&ext).unwrap(), [36, 52, 64]);
        let names: Vec<u32> = btf_ext_name_fields(&ext)
            .unwrap()
            .into_iter()
            .map(|at| elf::u32_at(&ext, at).unwrap())
            .collect();
        assert_eq!(names, [100, 200, 300]);
    }
}
