//! What a guest wrote on its results port, split into tagged sections, and the probe tests'
//! pass/fail per test name read from libtest's output.

use std::collections::BTreeMap;

/// Marker lines: `BEGIN TAG`, then the section's text, then `END TAG STATUS`; `DONE` once the
/// guest has run every step.
pub const BEGIN: &str = "@@kernel-matrix begin";
pub const END: &str = "@@kernel-matrix end";
pub const DONE: &str = "@@kernel-matrix done";
/// Written to the kernel console (through /dev/kmsg, which the kernel sends by polling the
/// UART, no interrupt needed) before and after each section goes to the results port.
pub const SENDING: &str = "kernel-matrix: sending";
pub const SENT: &str = "kernel-matrix: sent";
/// Written to the kernel console every `guest_script::HEARTBEAT` while the guest's script runs:
/// a guest silent on both ports for long froze whole.
pub const ALIVE: &str = "kernel-matrix: alive";

/// The section the guest's script was sending on its results port when it stopped there: its
/// console says it began sending the section and never finished. An emulated UART that lost its
/// transmit interrupt does that; the guest itself went on running.
pub fn stalled_section(console: &str) -> Option<String> {
    let mut sending: Option<&str> = None;
    for line in console.lines() {
        if let Some((_, tag)) = line.split_once(SENDING) {
            sending = Some(tag.trim());
        } else if let Some((_, tag)) = line.split_once(SENT) {
            if sending == Some(tag.trim()) {
                sending = None;
            }
        }
    }
    sending.map(str::to_string)
}

/// The section a guest last sent before it fell silent: its console's last marker says a
/// section was sent, and no other began. Every step in the guest runs under its own limit, past
/// which its section is sent anyway, and a heartbeat writes to the console meanwhile; a guest
/// silent on both ports with nothing sent since froze whole (no watchdog, no timer of its own
/// fired): the emulator, as in the TCG text-patching livelocks, not a step that hung.
pub fn silent_after(console: &str) -> Option<String> {
    let last = console
        .lines()
        .rev()
        .find(|line| line.contains(SENDING) || line.contains(SENT))?;
    let (_, tag) = last.split_once(SENT)?;
    Some(tag.trim().to_string())
}

/// The lockup line of a guest that livelocked in the emulator while kernel text was patched (a
/// tracepoint's static key switched as programs attach or detach): a soft lockup or an RCU stall
/// (seen by another CPU or by the stuck one itself), with a CPU in the int3 handler of the
/// patching, or the stuck CPU on a static key's 5-byte site: its nop (`0f 1f 44 00 00`) or the
/// `jmp` (`e9`) it becomes once the key is on. Under TCG a CPU can keep running its stale
/// translation of the patched code; on hardware the patch completes in microseconds. Any other
/// lockup is not this.
pub fn text_patching_lockup(console: &str) -> Option<String> {
    let lockup = console.lines().find(|line| {
        line.contains("watchdog: BUG: soft lockup")
            || line.contains("detected stalls on CPUs")
            || line.contains("self-detected stall on CPU")
    })?;
    let at_patch_site = console.lines().any(|line| {
        line.contains("Code:") && (line.contains("<0f> 1f 44 00 00") || line.contains("<e9> "))
    });
    (console.contains("asm_exc_int3") || at_patch_site).then(|| lockup.trim().to_string())
}

/// One step's output and exit status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Section {
    pub status: i32,
    pub text: String,
}

/// Everything a guest reported.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct GuestOutput {
    pub sections: BTreeMap<String, Section>,
    /// The guest reached the end of its script.
    pub done: bool,
    /// A section that began and never ended (the guest died or was killed inside it).
    pub unfinished: Option<String>,
}

impl GuestOutput {
    pub fn parse(output: &str) -> Self {
        let mut parsed = GuestOutput::default();
        let mut open: Option<(String, Vec<&str>)> = None;
        for line in output.lines() {
            // The serial line may add carriage returns.
            let line = line.trim_end_matches('\r');
            if let Some(tag) = line.strip_prefix(BEGIN) {
                open = Some((tag.trim().to_string(), Vec::new()));
            } else if let Some(rest) = line.strip_prefix(END) {
                let mut words = rest.split_whitespace();
                let (Some(tag), Some(status)) = (words.next(), words.next()) else {
                    continue;
                };
                if let Some((open_tag, lines)) = open.take_if(|(open_tag, _)| open_tag == tag) {
                    let section = Section {
                        status: status.parse().unwrap_or(-1),
                        text: lines.join("\n").trim_end().to_string(),
                    };
                    parsed.sections.insert(open_tag, section);
                }
            } else if line == DONE {
                parsed.done = true;
            } else if let Some((_, lines)) = open.as_mut() {
                lines.push(line);
            }
        }
        parsed.unfinished = open.map(|(tag, _)| tag);
        parsed
    }

    pub fn section(&self, tag: &str) -> Option<&Section> {
        self.sections.get(tag)
    }
}

/// How one test ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TestResult {
    Ok,
    Failed,
    Ignored,
    /// Started and never ended: the binary was killed in it.
    Unfinished,
}

/// `test NAME ... ok|FAILED|ignored` lines of libtest's output, by test name.
pub fn test_results(libtest_output: &str) -> BTreeMap<String, TestResult> {
    let mut results = BTreeMap::new();
    for line in libtest_output.lines() {
        let Some(rest) = line.trim_end_matches('\r').strip_prefix("test ") else {
            continue;
        };
        let Some((name, result)) = rest.split_once(" ...") else {
            continue;
        };
        let result = match result.trim() {
            "ok" => TestResult::Ok,
            "ignored" => TestResult::Ignored,
            "" => TestResult::Unfinished,
            _ => TestResult::Failed,
        };
        results.insert(name.to_string(), result);
    }
    results
}

/// What libtest printed of a failed test (its panic message), from the `---- NAME stdout ----`
/// block of the `failures:` list.
pub fn failure_output(libtest_output: &str, name: &str) -> Option<String> {
    let header = format!("---- {name} stdout ----");
    let mut lines = libtest_output
        .lines()
        .map(|line| line.trim_end_matches('\r'));
    lines.find(|line| *line == header)?;
    let block: Vec<&str> = lines
        .take_while(|line| !line.starts_with("---- ") && *line != "failures:")
        .collect();
    Some(block.join("\n").trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_section_sent_in_full_is_no_stall_and_the_last_unfinished_one_is() {
        let console = "[ 70.1] kernel-matrix: sending record:tp-btf/off\r\n\
                       [ 70.2] kernel-matrix: sent record:tp-btf/off\r\n\
                       [ 71.0] kernel-matrix: sending report:tp-btf/off\r\n\
                       [ 99.0] rcu: something else\n";
        assert_eq!(
            stalled_section(console).as_deref(),
            Some("report:tp-btf/off")
        );
        let finished =
            "[ 70.1] kernel-matrix: sending kernel\n[ 70.2] kernel-matrix: sent kernel\n";
        assert_eq!(stalled_section(finished), None);
        assert_eq!(stalled_section("Booting from ROM...\n"), None);
    }

    #[test]
    fn only_a_soft_lockup_beside_text_patching_is_the_emulator_s() {
        let lockup =
            "[   64.418438] watchdog: BUG: soft lockup - CPU#0 stuck for 26s! [timeout:102]\n\
                      [   64.421229] Kernel panic - not syncing: softlockup: hung tasks\n";
        let patching = "[   64.431535] RIP: 0010:asm_exc_int3+0x0/0x40\n";
        assert_eq!(
            text_patching_lockup(&format!("{lockup}{patching}")).as_deref(),
            Some("[   64.418438] watchdog: BUG: soft lockup - CPU#0 stuck for 26s! [timeout:102]")
        );
        assert_eq!(text_patching_lockup(lockup), None);
        assert_eq!(text_patching_lockup(patching), None);
    }

    #[test]
    fn a_guest_silent_since_its_last_section_is_found() {
        let sent = "[    2.355359] kernel-matrix: sending kernel\n\
                    [    2.365093] kernel-matrix: sent kernel\n";
        assert_eq!(silent_after(sent).as_deref(), Some("kernel"));
        let sending = format!("{sent}[   40.1] kernel-matrix: sending probe-tests\n");
        assert_eq!(silent_after(&sending), None);
        assert_eq!(silent_after("Booting from ROM...\n"), None);
    }

    #[test]
    fn an_rcu_stall_on_a_patchable_nop_is_the_emulator_s() {
        let stall = "[   37.082123] rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:\n";
        let at_nop = "[   37.082123] Code: 4c 89 ef e8 b9 86 d5 00 <0f> 1f 44 00 00 65 44 8b 0d\n";
        let elsewhere = "[   37.082123] Code: 4c 89 ef e8 b9 86 d5 00 <f3> 90 eb f0 65 44 8b 0d\n";
        assert_eq!(
            text_patching_lockup(&format!("{stall}{at_nop}")).as_deref(),
            Some("[   37.082123] rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:")
        );
        assert_eq!(text_patching_lockup(&format!("{stall}{elsewhere}")), None);
        assert_eq!(text_patching_lockup(at_nop), None);
    }

    /// The PREEMPT_RT guest, under emulation: ksoftirqd/0 stuck on the enabled softirq_entry
    /// tracepoint's jump, its RCU stall seen by that CPU itself.
    #[test]
    fn a_self_detected_rcu_stall_on_a_static_key_s_jump_is_the_emulator_s() {
        let stall = "[   32.962293] rcu: INFO: rcu_preempt self-detected stall on CPU\n";
        let at_jump =
            "[   32.962293] Code: 2d da 31 b7 44 41 89 d5 4c 89 f7 e8 35 4b d5 00 <e9> c2 00 \
                       00 00 65 44 8b 0d\n";
        let elsewhere = "[   32.962293] Code: 2d da 31 b7 44 41 89 d5 <f3> 90 eb f0 65 44 8b 0d\n";
        assert_eq!(
            text_patching_lockup(&format!("{stall}{at_jump}")).as_deref(),
            Some("[   32.962293] rcu: INFO: rcu_preempt self-detected stall on CPU")
        );
        assert_eq!(text_patching_lockup(&format!("{stall}{elsewhere}")), None);
    }

    #[test]
    fn sections_are_split_on_their_markers_with_status_and_text() {
        let output = format!(
            "{BEGIN} kernel\r\n6.1.0-56-amd64\r\n\r\n{END} kernel 0\r\n\
             {BEGIN} record:tp-btf/exact\nline 1\nline 2\n\n{END} record:tp-btf/exact 6\n\
             {DONE}\n"
        );
        let parsed = GuestOutput::parse(&output);
        assert!(parsed.done);
        assert_eq!(parsed.unfinished, None);
        assert_eq!(
            parsed.section("kernel"),
            Some(&Section {
                status: 0,
                text: "6.1.0-56-amd64".into()
            })
        );
        assert_eq!(
            parsed.section("record:tp-btf/exact"),
            Some(&Section {
                status: 6,
                text: "line 1\nline 2".into()
            })
        );
    }

    #[test]
    fn a_guest_that_died_inside_a_section_leaves_it_unfinished_and_not_done() {
        let output = format!("{BEGIN} kernel\nx\n{END} kernel 0\n{BEGIN} probe-tests\nrunning");
        let parsed = GuestOutput::parse(&output);
        assert!(!parsed.done);
        assert_eq!(parsed.unfinished.as_deref(), Some("probe-tests"));
        assert!(parsed.section("probe-tests").is_none());
        assert!(parsed.section("kernel").is_some());
    }

    #[test]
    fn test_results_are_read_per_name_and_a_test_without_a_result_is_unfinished() {
        let output = "\nrunning 3 tests\n\
                      test probe::tests::a ... ok\n\
                      test probe::tests::b ... FAILED\n\
                      test probe::tests::c ... ignored\n\
                      test probe::tests::d ... \n\
                      failures:\n\n---- probe::tests::b stdout ----\npanicked\n";
        let results = test_results(output);
        assert_eq!(results.len(), 4);
        assert_eq!(results["probe::tests::a"], TestResult::Ok);
        assert_eq!(results["probe::tests::b"], TestResult::Failed);
        assert_eq!(results["probe::tests::c"], TestResult::Ignored);
        assert_eq!(results["probe::tests::d"], TestResult::Unfinished);
    }

    #[test]
    fn a_failed_test_s_panic_message_is_found_in_the_failures_list() {
        let output = "test a ... FAILED\ntest b ... FAILED\n\nfailures:\n\n\
                      ---- a stdout ----\nthread 'a' panicked at x.rs:1:1:\nprobes load: E2BIG\n\n\
                      ---- b stdout ----\nb went wrong\n\nfailures:\n    a\n    b\n";
        assert_eq!(
            failure_output(output, "a").as_deref(),
            Some("thread 'a' panicked at x.rs:1:1:\nprobes load: E2BIG")
        );
        assert_eq!(failure_output(output, "b").as_deref(), Some("b went wrong"));
        assert_eq!(failure_output(output, "c"), None);
    }
}
