//! Tests only: a kernel's BTF rebuilt from excerpts of `bpftool btf dump`
//! (raw format), so that the lookups of features.rs run on the real layout
//! of a kernel this host does not run. Types the excerpt does not hold are
//! one stand-in integer.

use std::collections::HashMap;
use std::ffi::CString;
use std::io::Write;

use libbpf_rs::btf::Btf;
use libbpf_rs::libbpf_sys;

/// The BTF of `dump`, written to a file and parsed back as libbpf parses a
/// kernel's.
pub fn parse(dump: &str) -> Btf<'static> {
    let raw = build(dump);
    let mut file = tempfile::NamedTempFile::new().expect("a temporary file");
    file.write_all(&raw).expect("writing the BTF");
    Btf::from_path(file.path()).expect("libbpf parses the BTF it wrote")
}

/// A type's line: `[ID] KIND 'NAME' key=value...`.
struct TypeLine<'a> {
    id: u32,
    kind: &'a str,
    name: Option<&'a str>,
    attrs: HashMap<&'a str, &'a str>,
}

fn type_line(line: &str) -> Option<TypeLine<'_>> {
    let (id, rest) = line.strip_prefix('[')?.split_once("] ")?;
    let (kind, rest) = rest.split_once(' ')?;
    let (name, attrs) = quoted(rest);
    Some(TypeLine {
        id: id.parse().ok()?,
        kind,
        name,
        attrs: key_values(attrs),
    })
}

/// `'NAME' REST` -> (NAME, REST); (None, text) without a leading name.
fn quoted(text: &str) -> (Option<&str>, &str) {
    let Some(rest) = text.strip_prefix('\'') else {
        return (None, text);
    };
    let (name, rest) = rest.split_once('\'').expect("a closing quote");
    (Some(name), rest)
}

fn key_values(text: &str) -> HashMap<&str, &str> {
    text.split_whitespace()
        .filter_map(|word| word.trim_end_matches(',').split_once('='))
        .collect()
}

fn number(attrs: &HashMap<&str, &str>, key: &str) -> u32 {
    attrs
        .get(key)
        .and_then(|value| value.parse().ok())
        .unwrap_or_else(|| panic!("no number {key}= in {attrs:?}"))
}

/// A name for libbpf; none for bpftool's `(anon)`.
fn c_name(name: Option<&str>) -> Option<CString> {
    name.filter(|n| *n != "(anon)")
        .map(|n| CString::new(n).expect("a name without NUL"))
}

/// Raw BTF (header, types, strings) of the dump's types, renumbered in
/// their order, with id 1 the stand-in.
fn build(dump: &str) -> Vec<u8> {
    let lines: Vec<&str> = dump.lines().filter(|l| !l.starts_with('#')).collect();
    let ids: HashMap<u32, u32> = lines
        .iter()
        .filter_map(|line| type_line(line))
        .enumerate()
        .map(|(i, t)| (t.id, i as u32 + 2))
        .collect();
    let id = |attrs: &HashMap<&str, &str>, key: &str| -> i32 {
        match number(attrs, key) {
            0 => 0,
            old => *ids.get(&old).unwrap_or(&1) as i32,
        }
    };
    // SAFETY: btf__new_empty has no preconditions; every call below gets
    // the pointer it returned (checked) and strings that outlive the call.
    unsafe {
        let btf = libbpf_sys::btf__new_empty();
        assert!(!btf.is_null(), "btf__new_empty");
        let stand_in = CString::new("stand_in").unwrap();
        assert_eq!(libbpf_sys::btf__add_int(btf, stand_in.as_ptr(), 8, 0), 1);
        for line in &lines {
            let rc = if let Some(t) = type_line(line) {
                let name = c_name(t.name);
                let name_ptr = name.as_ref().map_or(std::ptr::null(), |n| n.as_ptr());
                let a = &t.attrs;
                match t.kind {
                    "INT" => {
                        let encoding = match a["encoding"] {
                            "SIGNED" => libbpf_sys::BTF_INT_SIGNED,
                            "CHAR" => libbpf_sys::BTF_INT_CHAR,
                            "BOOL" => libbpf_sys::BTF_INT_BOOL,
                            _ => 0,
                        };
                        libbpf_sys::btf__add_int(
                            btf,
                            name_ptr,
                            number(a, "size") as u64,
                            encoding as i32,
                        )
                    }
                    "TYPEDEF" => libbpf_sys::btf__add_typedef(btf, name_ptr, id(a, "type_id")),
                    "CONST" => libbpf_sys::btf__add_const(btf, id(a, "type_id")),
                    "PTR" => libbpf_sys::btf__add_ptr(btf, id(a, "type_id")),
                    "ARRAY" => libbpf_sys::btf__add_array(
                        btf,
                        id(a, "index_type_id"),
                        id(a, "type_id"),
                        number(a, "nr_elems"),
                    ),
                    "STRUCT" => libbpf_sys::btf__add_struct(btf, name_ptr, number(a, "size")),
                    "UNION" => libbpf_sys::btf__add_union(btf, name_ptr, number(a, "size")),
                    "VAR" => libbpf_sys::btf__add_var(
                        btf,
                        name_ptr,
                        libbpf_sys::BTF_VAR_GLOBAL_ALLOCATED as i32,
                        id(a, "type_id"),
                    ),
                    "DATASEC" => libbpf_sys::btf__add_datasec(btf, name_ptr, number(a, "size")),
                    kind => panic!("the excerpt has a {kind}, which this reader does not build"),
                }
            } else {
                // A member of the type above: a field, or a DATASEC's variable.
                let (name, rest) = quoted(line.trim_start());
                let a = key_values(rest);
                if a.contains_key("bits_offset") {
                    let name = c_name(name);
                    libbpf_sys::btf__add_field(
                        btf,
                        name.as_ref().map_or(std::ptr::null(), |n| n.as_ptr()),
                        id(&a, "type_id"),
                        number(&a, "bits_offset"),
                        0,
                    )
                } else {
                    libbpf_sys::btf__add_datasec_var_info(
                        btf,
                        id(&a, "type_id"),
                        number(&a, "offset"),
                        number(&a, "size"),
                    )
                }
            };
            assert!(rc >= 0, "libbpf refused {line:?}: {rc}");
        }
        let mut size = 0u32;
        let data = libbpf_sys::btf__raw_data(btf, &mut size);
        assert!(!data.is_null(), "btf__raw_data");
        let raw = std::slice::from_raw_parts(data.cast::<u8>(), size as usize).to_vec();
        libbpf_sys::btf__free(btf);
        raw
    }
}
