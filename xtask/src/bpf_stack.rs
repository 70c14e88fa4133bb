//! `cargo xtask bpf-stack`: the stack of every BPF program's deepest chain of calls, in the
//! objects build.rs compiles for x86_64 and aarch64, against the verifier's limit. The
//! verifier adds up the frames of a chain, each rounded up to 32 bytes, global functions as
//! much as static ones, and refuses a program whose chain passes 512 bytes (MAX_BPF_STACK).
//! A frame's depth is the deepest slot below the frame pointer (r10) its code touches; the
//! verifier counts the slots of the paths it walks, so the compiled code's is an upper bound.
//! A chain the host's kernel loaded has been one Debian's 6.1 refused (raw_sched_switch at 544
//! bytes), which the kernel matrix told twenty minutes on: this tells in milliseconds.

use std::collections::HashMap;
use std::fs;

use anyhow::{bail, ensure, Context, Result};

use crate::arm64_verify::elf::Elf;
use crate::arm64_verify::object;

/// The verifier's limit on a chain's frames together (MAX_BPF_STACK).
pub const MAX_BPF_STACK: u32 = 512;
/// Each frame counts rounded up to this (the interpreter's stack granularity).
const FRAME_GRANULE: u32 = 32;
/// Rust's names of the architectures build.rs compiles the object for.
const ARCHES: [&str; 2] = ["x86_64", "aarch64"];
/// Programs listed when all are under the limit: the deepest, the ones to watch.
const LISTED: usize = 4;

/// The BPF frame pointer, a read-only register.
const FP: u8 = 10;
const CLASS_LDX: u8 = 0x01;
const CLASS_ST: u8 = 0x02;
const CLASS_STX: u8 = 0x03;
const CLASS_ALU: u8 = 0x04;
const CLASS_JMP: u8 = 0x05;
const CLASS_ALU64: u8 = 0x07;
/// `rX = rY`, 64-bit.
const MOV64_REG: u8 = 0xbf;
/// `rX += imm`, 64-bit.
const ADD64_IMM: u8 = 0x07;
const CALL: u8 = 0x85;
/// A call's source field: to a function of the object (else a helper or kfunc).
const PSEUDO_CALL: u8 = 1;
/// The 16-byte load of a 64-bit immediate; source BPF_PSEUDO_FUNC makes it a callback's address.
const LD_IMM64: u8 = 0x18;
const PSEUDO_FUNC: u8 = 4;

pub fn main() -> Result<()> {
    let dir = object::out_dir()?;
    let mut over = Vec::new();
    for arch in ARCHES {
        let path = dir.join(format!("stalltop.{arch}.bpf.o"));
        let data = fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        let mut chains = deepest_chains(&data).with_context(|| format!("{}", path.display()))?;
        chains.sort_by(|a, b| {
            b.bytes
                .cmp(&a.bytes)
                .then_with(|| a.names[0].cmp(&b.names[0]))
        });
        println!(
            "{arch}: {} programs, deepest chains of calls:",
            chains.len()
        );
        for chain in chains
            .iter()
            .enumerate()
            .filter(|(i, chain)| *i < LISTED || chain.bytes > MAX_BPF_STACK)
            .map(|(_, chain)| chain)
        {
            println!("  {}", chain.describe());
            if chain.bytes > MAX_BPF_STACK {
                over.push(format!("{arch}: {}", chain.describe()));
            }
        }
    }
    ensure!(
        over.is_empty(),
        "chains of calls over the verifier's {MAX_BPF_STACK} bytes of stack (6.1 refuses them):\n{}",
        over.join("\n")
    );
    Ok(())
}

/// A program's deepest chain: its functions' names from the program down, the stack each
/// counts for (rounded up) and their sum.
#[derive(Debug, PartialEq)]
pub struct Chain {
    pub names: Vec<String>,
    pub frames: Vec<u32>,
    pub bytes: u32,
}

impl Chain {
    fn describe(&self) -> String {
        let frames: Vec<String> = self
            .names
            .iter()
            .zip(&self.frames)
            .map(|(name, frame)| format!("{name} {frame}"))
            .collect();
        format!("{} bytes: {}", self.bytes, frames.join(" + "))
    }
}

/// A function of the object: its section's index, where its instructions start (an index of
/// 8-byte instructions in that section) and how many slots they take.
struct Function {
    name: String,
    section: usize,
    start: usize,
    len: usize,
    /// In a program's section (not .text): where the verifier starts.
    program: bool,
}

/// Every program's deepest chain of calls in BPF object `data`.
pub fn deepest_chains(data: &[u8]) -> Result<Vec<Chain>> {
    let elf = Elf::parse(data)?;
    let table = elf.symbol_table()?;
    let mut functions = Vec::new();
    for symbol in table.iter().filter(|s| s.is_function()) {
        let section = elf
            .sections
            .get(symbol.section)
            .with_context(|| format!("{} is in no section", symbol.name))?;
        if !elf.executable(section)? {
            continue;
        }
        ensure!(symbol.size > 0, "function {} has no size", symbol.name);
        functions.push(Function {
            name: symbol.name.clone(),
            section: symbol.section,
            start: symbol.value / 8,
            len: symbol.size / 8,
            program: section.name != ".text",
        });
    }
    let by_start: HashMap<(usize, usize), usize> = functions
        .iter()
        .enumerate()
        .map(|(i, f)| ((f.section, f.start), i))
        .collect();
    let relocated: HashMap<(usize, usize), usize> = elf
        .relocations()?
        .into_iter()
        .map(|r| ((r.section, r.offset), r.symbol))
        .collect();
    let mut frames = Vec::with_capacity(functions.len());
    let mut callees = Vec::with_capacity(functions.len());
    for function in &functions {
        let code = elf.contents(&elf.sections[function.section])?;
        let code = code
            .get(function.start * 8..(function.start + function.len) * 8)
            .with_context(|| format!("{} runs past its section", function.name))?;
        frames.push(frame_depth(code));
        let mut called = Vec::new();
        for (index, insn) in decode(code) {
            if insn.code == LD_IMM64 && insn.src == PSEUDO_FUNC {
                bail!(
                    "{} takes a callback's address: its frames are not added up here",
                    function.name
                );
            }
            if insn.code != CALL || insn.src != PSEUDO_CALL {
                continue;
            }
            let at = function.start + index;
            // A call the linker left to libbpf names its target by a symbol (libbpf: the
            // symbol's instruction + imm + 1); one inside a section, by imm from the next one.
            let target = match relocated.get(&(function.section, at * 8)) {
                Some(&symbol) => {
                    let symbol = table.get(symbol).context("a relocation's symbol")?;
                    let base = (symbol.value / 8) as i64;
                    (symbol.section, base + i64::from(insn.imm) + 1)
                }
                None => (function.section, at as i64 + i64::from(insn.imm) + 1),
            };
            let callee = usize::try_from(target.1)
                .ok()
                .and_then(|start| by_start.get(&(target.0, start)))
                .with_context(|| format!("{} calls into no function's start", function.name))?;
            called.push(*callee);
        }
        callees.push(called);
    }
    let mut memo = vec![None; functions.len()];
    let mut chains = Vec::new();
    for (index, function) in functions.iter().enumerate() {
        if !function.program {
            continue;
        }
        let path = deepest_path(index, &frames, &callees, &mut memo, &mut Vec::new())?;
        let counted: Vec<u32> = path.iter().map(|&f| counted_frame(frames[f])).collect();
        chains.push(Chain {
            names: path.iter().map(|&f| functions[f].name.clone()).collect(),
            bytes: counted.iter().sum(),
            frames: counted,
        });
    }
    Ok(chains)
}

/// The stack a frame of `depth` bytes counts for in a chain.
fn counted_frame(depth: u32) -> u32 {
    depth.max(1).div_ceil(FRAME_GRANULE) * FRAME_GRANULE
}

/// The functions of `from`'s deepest chain, `from` first (memoized; BPF has no recursion, a
/// cycle is an error).
fn deepest_path(
    from: usize,
    frames: &[u32],
    callees: &[Vec<usize>],
    memo: &mut [Option<Vec<usize>>],
    walking: &mut Vec<usize>,
) -> Result<Vec<usize>> {
    if let Some(path) = &memo[from] {
        return Ok(path.clone());
    }
    ensure!(!walking.contains(&from), "a cycle of calls");
    walking.push(from);
    let mut deepest: Vec<usize> = Vec::new();
    let mut deepest_bytes = 0;
    for &callee in &callees[from] {
        let path = deepest_path(callee, frames, callees, memo, walking)?;
        let bytes: u32 = path.iter().map(|&f| counted_frame(frames[f])).sum();
        if bytes > deepest_bytes {
            deepest_bytes = bytes;
            deepest = path;
        }
    }
    walking.pop();
    let mut path = vec![from];
    path.extend(deepest);
    memo[from] = Some(path.clone());
    Ok(path)
}

/// One instruction's fields.
#[derive(Clone, Copy)]
struct Insn {
    code: u8,
    dst: u8,
    src: u8,
    off: i16,
    imm: i32,
}

/// The instructions of `code`, each with its index; the second half of a 16-byte load is
/// skipped (it has no fields of its own).
fn decode(code: &[u8]) -> impl Iterator<Item = (usize, Insn)> + '_ {
    let mut wide_half = false;
    code.chunks_exact(8)
        .enumerate()
        .filter_map(move |(index, b)| {
            if std::mem::take(&mut wide_half) {
                return None;
            }
            let insn = Insn {
                code: b[0],
                dst: b[1] & 0xf,
                src: b[1] >> 4,
                off: i16::from_le_bytes([b[2], b[3]]),
                imm: i32::from_le_bytes([b[4], b[5], b[6], b[7]]),
            };
            wide_half = insn.code == LD_IMM64;
            Some((index, insn))
        })
}

/// The deepest byte below the frame pointer that `code` touches: by a load or store based on
/// r10, or on a register holding r10 plus a constant (a pointer to a stack slot handed to a
/// helper or dereferenced). In the order of the code, not of its paths: a register set so on
/// one path and used on another is not seen, which clang's code for a slot's pointer (set
/// right where it is used) does not do.
fn frame_depth(code: &[u8]) -> u32 {
    let mut slot_of: [Option<i64>; 11] = [None; 11];
    let mut deepest: i64 = 0;
    for (_, insn) in decode(code) {
        let dst = usize::from(insn.dst).min(10);
        let touched = match insn.code & 0x07 {
            CLASS_LDX => {
                let at = slot_base(&slot_of, insn.src).map(|at| at + i64::from(insn.off));
                slot_of[dst] = None;
                at
            }
            CLASS_ST | CLASS_STX => {
                slot_base(&slot_of, insn.dst).map(|at| at + i64::from(insn.off))
            }
            CLASS_ALU64 if insn.code == MOV64_REG => {
                slot_of[dst] = slot_base(&slot_of, insn.src);
                None
            }
            CLASS_ALU64 if insn.code == ADD64_IMM => {
                slot_of[dst] = slot_of[dst].map(|at| at + i64::from(insn.imm));
                slot_of[dst]
            }
            CLASS_ALU | CLASS_ALU64 => {
                slot_of[dst] = None;
                None
            }
            CLASS_JMP if insn.code == CALL => {
                slot_of[..6].fill(None);
                None
            }
            _ if insn.code == LD_IMM64 => {
                slot_of[dst] = None;
                None
            }
            _ => None,
        };
        if let Some(at) = touched {
            deepest = deepest.max(-at);
        }
    }
    u32::try_from(deepest).unwrap_or(u32::MAX)
}

/// What register `reg` holds as an offset from the frame pointer, if it holds one.
fn slot_base(slot_of: &[Option<i64>; 11], reg: u8) -> Option<i64> {
    if reg == FP {
        Some(0)
    } else {
        slot_of.get(usize::from(reg)).copied().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One 8-byte instruction.
    fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Vec<u8> {
        let mut b = vec![code, dst | src << 4];
        b.extend(off.to_le_bytes());
        b.extend(imm.to_le_bytes());
        b
    }

    const STX_DW: u8 = 0x7b;
    const LDX_DW: u8 = 0x79;
    const EXIT: u8 = 0x95;

    #[test]
    fn a_frame_is_as_deep_as_its_deepest_slot_by_r10_or_a_pointer_made_from_it() {
        // *(u64 *)(r10 - 24) = r1; r1 = *(u64 *)(r10 - 8)
        let direct = [insn(STX_DW, FP, 1, -24, 0), insn(LDX_DW, 1, FP, -8, 0)].concat();
        assert_eq!(frame_depth(&direct), 24);
        // r2 = r10; r2 += -40: a slot handed to a helper
        let pointer = [insn(MOV64_REG, 2, FP, 0, 0), insn(ADD64_IMM, 2, 0, 0, -40)].concat();
        assert_eq!(frame_depth(&pointer), 40);
        // r3 = r10; r3 += -64; *(u64 *)(r3 + 8) = r1: the add reaches 64
        let through = [
            insn(MOV64_REG, 3, FP, 0, 0),
            insn(ADD64_IMM, 3, 0, 0, -64),
            insn(STX_DW, 3, 1, 8, 0),
        ]
        .concat();
        assert_eq!(frame_depth(&through), 64);
        // r2 = r10; r2 += -16; call a helper (r2 clobbered); r2 += -100 is no slot
        let clobbered = [
            insn(MOV64_REG, 2, FP, 0, 0),
            insn(ADD64_IMM, 2, 0, 0, -16),
            insn(CALL, 0, 0, 0, 14),
            insn(ADD64_IMM, 2, 0, 0, -100),
            insn(EXIT, 0, 0, 0, 0),
        ]
        .concat();
        assert_eq!(frame_depth(&clobbered), 16);
        // a 16-byte load's second half is no instruction: its bytes say r10 - 200 here
        let wide = [
            insn(LD_IMM64, 1, 0, 0, 7),
            insn(STX_DW, FP, 1, -200, 0),
            insn(EXIT, 0, 0, 0, 0),
        ]
        .concat();
        assert_eq!(frame_depth(&wide), 0);
    }

    /// The chain 6.1 refused, as frames of raw_sched_switch (200 bytes) -> wait_end ->
    /// throttle_cover (144), beside another program's function that no chain reaches.
    fn chain_with(wait_end: u32) -> u32 {
        let frames = [200, wait_end, 144, 300];
        let callees = vec![vec![1], vec![2], vec![], vec![]];
        let path = deepest_path(
            0,
            &frames,
            &callees,
            &mut [None, None, None, None],
            &mut Vec::new(),
        )
        .unwrap();
        assert_eq!(path, [0, 1, 2]);
        path.iter().map(|&f| counted_frame(frames[f])).sum()
    }

    #[test]
    fn frames_are_rounded_up_to_32_and_added_along_the_deepest_chain() {
        assert_eq!(chain_with(128), 512, "224 + 128 + 160: at the limit");
        assert_eq!(chain_with(136), 544, "224 + 160 + 160: over it");
        assert_eq!(counted_frame(0), 32, "an empty frame counts 32");
    }

    #[test]
    fn the_deeper_of_two_callees_makes_the_chain_and_a_cycle_is_an_error() {
        let frames = [64, 32, 256];
        let callees = vec![vec![1, 2], vec![], vec![]];
        let path = deepest_path(
            0,
            &frames,
            &callees,
            &mut [None, None, None],
            &mut Vec::new(),
        )
        .unwrap();
        assert_eq!(path, [0, 2]);
        let cycle = vec![vec![1], vec![0]];
        assert!(deepest_path(0, &[32, 32], &cycle, &mut [None, None], &mut Vec::new()).is_err());
    }
}
