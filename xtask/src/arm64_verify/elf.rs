//! The little of 64-bit little-endian ELF xtask reads: section headers and names, function
//! symbols, globals and relocations of a BPF object, and what an executable needs to run (its
//! interpreter and shared libraries).

use anyhow::{bail, ensure, Context, Result};

const SHT_SYMTAB: u32 = 2;
const SHT_DYNAMIC: u32 = 6;
const SHT_REL: u32 = 9;
const STT_OBJECT: u8 = 1;
const STT_FUNC: u8 = 2;
const STB_GLOBAL: u8 = 1;
const DT_NEEDED: u64 = 1;
/// A section flag: it holds instructions (libbpf's programs).
pub const SHF_EXECINSTR: u64 = 0x4;

pub struct Elf<'a> {
    data: &'a [u8],
    pub sections: Vec<Section>,
}

pub struct Section {
    pub name: String,
    /// Where the section header's name offset (sh_name) is in the file.
    pub name_field: usize,
    /// Where its flags (sh_flags) are in the file.
    pub flags_field: usize,
    kind: u32,
    /// Where its contents are in the file.
    pub offset: usize,
    size: usize,
    link: usize,
    /// For a relocation section, the index of the section it applies to (sh_info).
    info: usize,
}

/// A relocation: the symbol (an index of `Elf::symbol_table`) that the bytes at `offset` of
/// the section at `section` refer to.
pub struct Relocation {
    pub section: usize,
    pub offset: usize,
    pub symbol: usize,
}

/// Any entry of the symbol table: the section it is in (its index), its value (an offset in
/// that section in an object file), its size, type (STT_*) and binding (STB_*).
pub struct TableSymbol {
    pub name: String,
    pub section: usize,
    pub value: usize,
    pub size: usize,
    kind: u8,
    binding: u8,
}

impl TableSymbol {
    pub fn is_function(&self) -> bool {
        self.kind == STT_FUNC
    }
}

/// A function or data symbol, in the section at `section` (an index of `Elf::sections`).
pub struct Symbol {
    pub name: String,
    pub section: usize,
    /// Its offset in its section (an object file's st_value).
    pub offset: usize,
    pub size: usize,
    pub is_function: bool,
    /// Bound globally: a program or a `const volatile` knob, not a static helper or table.
    pub global: bool,
}

impl<'a> Elf<'a> {
    pub fn parse(data: &'a [u8]) -> Result<Self> {
        ensure!(
            data.get(..6) == Some(b"\x7fELF\x02\x01"),
            "not a 64-bit little-endian ELF file"
        );
        let table = u64_at(data, 0x28)? as usize;
        let entry_size = u16_at(data, 0x3a)? as usize;
        let count = u16_at(data, 0x3c)? as usize;
        let names_index = u16_at(data, 0x3e)? as usize;
        let header = |index: usize| table + index * entry_size;
        let field = |index: usize, at: usize| u64_at(data, header(index) + at).map(|v| v as usize);
        let names_offset = field(names_index, 0x18)?;
        let mut sections = Vec::with_capacity(count);
        for index in 0..count {
            let name_field = header(index);
            let name = c_string(data, names_offset + u32_at(data, name_field)? as usize)?;
            sections.push(Section {
                name,
                name_field,
                flags_field: name_field + 8,
                kind: u32_at(data, header(index) + 4)?,
                offset: field(index, 0x18)?,
                size: field(index, 0x20)?,
                link: u32_at(data, header(index) + 0x28)? as usize,
                info: u32_at(data, header(index) + 0x2c)? as usize,
            });
        }
        Ok(Elf { data, sections })
    }

    pub fn section(&self, name: &str) -> Option<&Section> {
        self.sections.iter().find(|section| section.name == name)
    }

    pub fn contents(&self, section: &Section) -> Result<&'a [u8]> {
        self.data
            .get(section.offset..section.offset + section.size)
            .with_context(|| format!("section {} runs past the file", section.name))
    }

    /// Whether section `section` holds instructions (a BPF object's programs and functions).
    pub fn executable(&self, section: &Section) -> Result<bool> {
        Ok(u64_at(self.data, section.flags_field)? & SHF_EXECINSTR != 0)
    }

    /// Every entry of the symbol table, in its order (relocations name them by index).
    pub fn symbol_table(&self) -> Result<Vec<TableSymbol>> {
        let Some(table) = self.sections.iter().find(|s| s.kind == SHT_SYMTAB) else {
            return Ok(Vec::new());
        };
        let names = &self.sections[table.link];
        let mut symbols = Vec::new();
        for entry in self.contents(table)?.chunks_exact(24) {
            symbols.push(TableSymbol {
                name: c_string(self.data, names.offset + u32_at(entry, 0)? as usize)?,
                section: u16_at(entry, 6)? as usize,
                value: u64_at(entry, 8)? as usize,
                size: u64_at(entry, 16)? as usize,
                kind: entry[4] & 0xf,
                binding: entry[4] >> 4,
            });
        }
        Ok(symbols)
    }

    /// The relocations of every section (SHT_REL: BPF objects have no addends).
    pub fn relocations(&self) -> Result<Vec<Relocation>> {
        let mut relocations = Vec::new();
        for table in self.sections.iter().filter(|s| s.kind == SHT_REL) {
            for entry in self.contents(table)?.chunks_exact(16) {
                relocations.push(Relocation {
                    section: table.info,
                    offset: u64_at(entry, 0)? as usize,
                    symbol: (u64_at(entry, 8)? >> 32) as usize,
                });
            }
        }
        Ok(relocations)
    }

    /// The function and data symbols of the symbol table.
    pub fn symbols(&self) -> Result<Vec<Symbol>> {
        Ok(self
            .symbol_table()?
            .into_iter()
            .filter(|s| s.kind == STT_FUNC || s.kind == STT_OBJECT)
            .map(|s| Symbol {
                is_function: s.is_function(),
                global: s.binding == STB_GLOBAL,
                name: s.name,
                section: s.section,
                offset: s.value,
                size: s.size,
            })
            .collect())
    }

    /// The program interpreter an executable names (.interp), if it has one.
    pub fn interpreter(&self) -> Result<Option<String>> {
        match self.section(".interp") {
            Some(interp) => Ok(Some(c_string(self.contents(interp)?, 0)?)),
            None => Ok(None),
        }
    }

    /// The shared libraries an executable or library needs (DT_NEEDED).
    pub fn needed(&self) -> Result<Vec<String>> {
        let Some(dynamic) = self.sections.iter().find(|s| s.kind == SHT_DYNAMIC) else {
            return Ok(Vec::new());
        };
        let names = &self.sections[dynamic.link];
        let mut needed = Vec::new();
        for entry in self.contents(dynamic)?.chunks_exact(16) {
            if u64_at(entry, 0)? == DT_NEEDED {
                needed.push(c_string(
                    self.data,
                    names.offset + u64_at(entry, 8)? as usize,
                )?);
            }
        }
        Ok(needed)
    }
}

pub fn u16_at(data: &[u8], at: usize) -> Result<u16> {
    Ok(u16::from_le_bytes(bytes_at(data, at)?))
}

pub fn u32_at(data: &[u8], at: usize) -> Result<u32> {
    Ok(u32::from_le_bytes(bytes_at(data, at)?))
}

pub fn u64_at(data: &[u8], at: usize) -> Result<u64> {
    Ok(u64::from_le_bytes(bytes_at(data, at)?))
}

fn bytes_at<const N: usize>(data: &[u8], at: usize) -> Result<[u8; N]> {
    match data.get(at..at + N) {
        Some(bytes) => Ok(bytes.try_into().expect("N bytes")),
        None => bail!("offset {at} is past the end ({} bytes)", data.len()),
    }
}

/// The NUL-terminated string at `at`.
pub fn c_string(data: &[u8], at: usize) -> Result<String> {
    let rest = data.get(at..).context("a string offset past the end")?;
    let end = rest
        .iter()
        .position(|&b| b == 0)
        .context("an unterminated string")?;
    Ok(String::from_utf8_lossy(&rest[..end]).into_owned())
}
