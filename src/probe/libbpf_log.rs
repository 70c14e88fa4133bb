//! libbpf's messages: always forwarded to the log (`--log FILE`), and
//! also kept while a probe family loads, so a refusal can be explained
//! from what the kernel's verifier said.

use std::sync::Mutex;

/// Lines captured since `capture_start`, or None when not capturing.
static CAPTURED: Mutex<Option<Vec<String>>> = Mutex::new(None);

/// Route libbpf's messages through here (once; later calls do nothing).
pub fn install() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        libbpf_rs::set_print(Some((libbpf_rs::PrintLevel::Debug, forward)));
    });
}

fn forward(level: libbpf_rs::PrintLevel, msg: String) {
    let msg = msg.trim_end();
    match level {
        libbpf_rs::PrintLevel::Warn => tracing::warn!(target: "libbpf", "{msg}"),
        libbpf_rs::PrintLevel::Info => tracing::info!(target: "libbpf", "{msg}"),
        libbpf_rs::PrintLevel::Debug => tracing::debug!(target: "libbpf", "{msg}"),
    }
    // Debug lines are libbpf's own chatter; the verifier's log and load
    // failures come at warn level.
    if level != libbpf_rs::PrintLevel::Debug {
        if let Some(lines) = CAPTURED.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            lines.extend(msg.lines().map(str::to_string));
        }
    }
}

/// Keep libbpf's messages from now until the returned guard's `finish`.
pub fn capture() -> Capture {
    install();
    *CAPTURED.lock().unwrap_or_else(|e| e.into_inner()) = Some(Vec::new());
    Capture
}

pub struct Capture;

impl Capture {
    /// The lines captured; capturing stops.
    pub fn finish(self) -> Vec<String> {
        CAPTURED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .unwrap_or_default()
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        CAPTURED.lock().unwrap_or_else(|e| e.into_inner()).take();
    }
}
