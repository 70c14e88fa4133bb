//! CONTRIBUTING.md's code map names every module of src/main.rs and every file of bpf/, so a
//! newcomer can get from it to any signal's code; these tests fail when one is missing.

use std::fs;

use crate::workspace::workspace_root;

fn contributing() -> String {
    fs::read_to_string(workspace_root().join("CONTRIBUTING.md")).expect("CONTRIBUTING.md")
}

/// The modules src/main.rs declares (`mod name;`).
fn main_modules(main_rs: &str) -> Vec<String> {
    main_rs
        .lines()
        .filter_map(|l| l.trim().strip_prefix("mod "))
        .filter_map(|rest| rest.strip_suffix(';'))
        .map(str::to_string)
        .collect()
}

/// The names of `modules` that `map` does not mention as `src/NAME.rs` or `src/NAME/`.
fn unmapped<'a>(map: &str, modules: &'a [String]) -> Vec<&'a str> {
    modules
        .iter()
        .filter(|m| {
            !map.contains(&format!("`src/{m}.rs`")) && !map.contains(&format!("`src/{m}/`"))
        })
        .map(String::as_str)
        .collect()
}

#[test]
fn every_module_of_main_is_in_the_code_map() {
    let main_rs = fs::read_to_string(workspace_root().join("src/main.rs")).unwrap();
    let modules = main_modules(&main_rs);
    assert!(
        modules.len() > 10,
        "read no modules from src/main.rs: {modules:?}"
    );
    let missing = unmapped(&contributing(), &modules);
    assert!(
        missing.is_empty(),
        "CONTRIBUTING.md's code map does not name these modules of src/main.rs: {missing:?}"
    );
}

#[test]
fn every_bpf_source_is_in_the_code_map() {
    let map = contributing();
    let mut missing = Vec::new();
    for entry in fs::read_dir(workspace_root().join("bpf")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if (name.ends_with(".h") || name.ends_with(".c")) && !map.contains(&format!("`bpf/{name}`"))
        {
            missing.push(name);
        }
    }
    assert!(
        missing.is_empty(),
        "CONTRIBUTING.md's code map does not name these files of bpf/: {missing:?}"
    );
}

#[test]
fn a_module_missing_from_the_map_is_found() {
    let modules = main_modules("mod app;\nmod probe;\n#[cfg(test)]\nmod tests;\n");
    assert_eq!(modules, ["app", "probe", "tests"]);
    let map = "| `src/app.rs`, `src/app/` | ... |\n| `src/tests.rs` | ... |";
    assert_eq!(unmapped(map, &modules), ["probe"]);
}
