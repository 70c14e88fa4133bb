//! Why the kernel refused a probe family, in plain words, from libbpf's
//! error and the verifier log it printed. Pure: text in, text out.

/// The kernel's reason, e.g. "the 6.1 verifier finds btf_sys_exit too
/// complex (it gave up after 1,000,000 instructions)".
pub fn explain(kernel: &str, error: &str, log: &[String]) -> String {
    let program = failed_program(log);
    let subject = program.as_deref().unwrap_or("a program");
    if let Some(line) = log.iter().find(|l| l.contains("BPF program is too large")) {
        let processed = line
            .rsplit("Processed ")
            .next()
            .and_then(|n| n.split_whitespace().next())
            .and_then(|n| n.parse::<u64>().ok())
            .map_or_else(String::new, |n| {
                format!(" (it gave up after {} instructions)", thousands(n))
            });
        return format!("the {kernel} verifier finds {subject} too complex{processed}");
    }
    if let Some(line) = log
        .iter()
        .find(|l| l.contains("unknown func") || l.contains("invalid func"))
    {
        return format!(
            "the {kernel} kernel lacks a helper {subject} calls ({})",
            line.trim()
        );
    }
    if let Some(map) = failed_map(log) {
        return format!("the {kernel} kernel cannot create map {map} ({error})");
    }
    if let Some(program) = &program {
        if let Some(reason) = verifier_reason(log) {
            return format!("the {kernel} verifier rejects {program}: {reason}");
        }
        return format!("the {kernel} kernel refuses {program} ({error})");
    }
    format!("the {kernel} kernel refuses them ({error})")
}

/// The program libbpf says failed to load ("prog 'NAME': failed to load").
fn failed_program(log: &[String]) -> Option<String> {
    log.iter().find_map(|l| {
        let rest = l.split("prog '").nth(1)?;
        let (name, tail) = rest.split_once('\'')?;
        (tail.contains("failed to load") || tail.contains("BPF program load failed"))
            .then(|| name.to_string())
    })
}

/// The map libbpf says it could not create ("map 'NAME': failed to create").
fn failed_map(log: &[String]) -> Option<String> {
    log.iter().find_map(|l| {
        let rest = l.split("map '").nth(1)?;
        let (name, tail) = rest.split_once('\'')?;
        tail.contains("failed to create").then(|| name.to_string())
    })
}

/// The verifier's last word: the last log line before its statistics.
fn verifier_reason(log: &[String]) -> Option<String> {
    let begin = log.iter().position(|l| l.contains("BEGIN PROG LOAD LOG"))?;
    log[begin + 1..]
        .iter()
        .take_while(|l| !l.contains("END PROG LOAD LOG"))
        .filter(|l| {
            let l = l.trim();
            !l.is_empty()
                && !l.starts_with("processed ")
                && !l.starts_with("verification time")
                && !l.starts_with("stack depth")
                && !l.starts_with(';')
        })
        .last()
        .map(|l| l.trim().to_string())
}

fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<String> {
        text.lines().map(str::to_string).collect()
    }

    /// What Debian 12's 6.1 kernel said of the old path walk.
    #[test]
    fn a_program_over_the_instruction_budget_is_too_complex() {
        let log = lines(
            "libbpf: prog 'btf_sys_exit': BPF program load failed: Argument list too long\n\
             libbpf: prog 'btf_sys_exit': -- BEGIN PROG LOAD LOG --\n\
             536: (bf) r9 = r7\n\
             BPF program is too large. Processed 1000001 insn\n\
             processed 1000001 insns (limit 1000000) max_states_per_insn 20\n\
             -- END PROG LOAD LOG --\n\
             libbpf: prog 'btf_sys_exit': failed to load: -E2BIG",
        );
        assert_eq!(
            explain("6.1", "Argument list too long (os error 7)", &log),
            "the 6.1 verifier finds btf_sys_exit too complex (it gave up after 1,000,001 instructions)"
        );
    }

    #[test]
    fn a_missing_helper_is_named() {
        let log = lines(
            "libbpf: prog 'raw_sys_exit': BPF program load failed: Invalid argument\n\
             libbpf: prog 'raw_sys_exit': -- BEGIN PROG LOAD LOG --\n\
             invalid func unknown#158\n\
             -- END PROG LOAD LOG --",
        );
        assert_eq!(
            explain("5.8", "Invalid argument (os error 22)", &log),
            "the 5.8 kernel lacks a helper raw_sys_exit calls (invalid func unknown#158)"
        );
    }

    #[test]
    fn another_rejection_quotes_the_verifier() {
        let log = lines(
            "libbpf: prog 'btf_sched_switch': BPF program load failed: Permission denied\n\
             libbpf: prog 'btf_sched_switch': -- BEGIN PROG LOAD LOG --\n\
             ; return FIELD(btf, p, __state);\n\
             func 'sched_switch' arg3 type INT is not a struct\n\
             processed 12 insns (limit 1000000)\n\
             -- END PROG LOAD LOG --\n\
             libbpf: prog 'btf_sched_switch': failed to load: -13",
        );
        assert_eq!(
            explain("5.15", "Permission denied (os error 13)", &log),
            "the 5.15 verifier rejects btf_sched_switch: func 'sched_switch' arg3 type INT is not a struct"
        );
    }

    #[test]
    fn a_map_the_kernel_cannot_create_is_named() {
        let log = lines("libbpf: map 'task_store': failed to create: Invalid argument(-22)");
        assert_eq!(
            explain("5.8", "Invalid argument (os error 22)", &log),
            "the 5.8 kernel cannot create map task_store (Invalid argument (os error 22))"
        );
    }

    #[test]
    fn without_a_log_the_error_is_given() {
        assert_eq!(
            explain("6.1", "Operation not permitted (os error 1)", &[]),
            "the 6.1 kernel refuses them (Operation not permitted (os error 1))"
        );
    }
}
