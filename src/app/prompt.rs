//! The line the user types into after `/`, `c` or `t`: editing keys, and
//! what Enter applies (a text filter, a CPU pick, a display threshold).

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::filter::{CpuSet, TextFilter};
use super::format;
use super::{App, Change};
use crate::model::TimeSpec;

/// What the typed line sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PromptKind {
    Filter,
    Cpus,
    Threshold,
    GoTo,
}

impl PromptKind {
    /// The footer's label in front of the text.
    pub fn label(self) -> &'static str {
        match self {
            PromptKind::Filter => "filter (comm:X container:X path:X cpu:N or words)",
            PromptKind::Cpus => "CPUs (e.g. 0-3,8; empty = all)",
            PromptKind::Threshold => "hide stalls shorter than (e.g. 20ms; empty = none)",
            PromptKind::GoTo => "go to (+90s, 12:03:05 UTC, 2026-11-26T12:03:05Z)",
        }
    }
}

pub struct Prompt {
    pub kind: PromptKind,
    pub text: String,
}

impl App {
    /// A key while a prompt is open: edit, apply (Enter) or cancel (Esc).
    pub(super) fn prompt_key(&mut self, key: KeyEvent) -> Change {
        let Some(prompt) = &mut self.prompt else {
            return Change::Nothing;
        };
        match key.code {
            KeyCode::Esc => self.prompt = None,
            KeyCode::Enter => {
                let Prompt { kind, text } = self.prompt.take().expect("checked above");
                return self.apply_prompt(kind, &text);
            }
            KeyCode::Backspace => {
                prompt.text.pop();
            }
            // Readline's kill-line: start the text over.
            KeyCode::Char('u') if key.modifiers.contains(KeyModifiers::CONTROL) => {
                prompt.text.clear()
            }
            KeyCode::Char(c) => prompt.text.push(c),
            _ => return Change::Nothing,
        }
        Change::View
    }

    /// Open a prompt holding what it set last.
    pub(super) fn open_prompt(&mut self, kind: PromptKind) -> Change {
        let text = match kind {
            PromptKind::Filter => self.filter.source.clone(),
            PromptKind::Cpus => self.cpus.source.clone(),
            PromptKind::Threshold if self.display_threshold_ns > 0 => {
                format::duration(self.display_threshold_ns)
            }
            PromptKind::Threshold | PromptKind::GoTo => String::new(),
        };
        self.prompt = Some(Prompt { kind, text });
        Change::View
    }

    fn apply_prompt(&mut self, kind: PromptKind, text: &str) -> Change {
        if kind == PromptKind::GoTo {
            return match TimeSpec::parse(text) {
                Ok(at) => self.go_to(at.resolve(&self.header)),
                Err(e) => {
                    self.status = Some(e);
                    Change::View
                }
            };
        }
        let applied = match kind {
            PromptKind::Filter => TextFilter::parse(text).map(|f| self.filter = f),
            PromptKind::Cpus => {
                CpuSet::parse(text, &self.header.host.online_cpus()).map(|c| self.cpus = c)
            }
            PromptKind::Threshold => parse_threshold(text).map(|ns| {
                self.display_threshold_ns = ns;
                let probes = format!(
                    "the probes report runq waits over {} and softirq/ksoftirqd/irqs-off stalls over {} (fixed at load)",
                    format::duration(self.header.settings.runq_threshold_ns),
                    format::duration(self.header.settings.stall_threshold_ns),
                );
                self.status = Some(if ns == 0 {
                    format!("showing every stall; {probes}")
                } else {
                    format!(
                        "hiding stalls under {} on screen; {probes}",
                        format::duration(ns)
                    )
                });
            }),
            PromptKind::GoTo => Ok(()),
        };
        if let Err(e) = applied {
            self.status = Some(e);
        }
        self.selections = Default::default();
        Change::Rows
    }
}

/// "20ms", "1s"; empty or 0 shows everything.
fn parse_threshold(text: &str) -> Result<u64, String> {
    let text = text.trim();
    if text.is_empty() || text == "0" {
        return Ok(0);
    }
    crate::cli::parse_duration(text).map(|d| d.as_nanos() as u64)
}
