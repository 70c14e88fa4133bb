//! Keys and the mouse: a key becomes an action through the keymap, and the
//! action means what it means where the user is (a prompt, a popup, the
//! panes). Handlers change state and say what they changed.

use crossterm::event::{KeyEvent, KeyEventKind, MouseButton, MouseEvent, MouseEventKind};

use super::keymap::{self, Action};
use super::layout;
use super::pane::{Pane, Selection};
use super::prompt::PromptKind;
use super::{App, Change, Mode, Overlay, ZOOMS_S};
use crate::app::format;

/// Rows a popup scrolls per PgUp / PgDn.
const POPUP_PAGE: u16 = 10;

impl App {
    pub(super) fn key(&mut self, key: KeyEvent) -> Change {
        if key.kind == KeyEventKind::Release {
            return Change::Nothing;
        }
        if keymap::quits_anywhere(&key) {
            self.quit = true;
            return Change::Nothing;
        }
        if self.prompt.is_some() {
            return self.prompt_key(key);
        }
        // A status line lasts until the next key.
        let cleared = if self.status.take().is_some() {
            Change::View
        } else {
            Change::Nothing
        };
        let replay = matches!(self.mode, Mode::Replay(_));
        let action = keymap::action(&key, replay);
        let change = match self.overlay.clone() {
            Some(Overlay::Help { scroll }) => self.help_action(action, scroll),
            Some(Overlay::Detail { scroll, .. }) => self.detail_action(action, scroll),
            None => action.map_or(Change::Nothing, |a| self.pane_action(a)),
        };
        change.max(cleared)
    }

    /// In the help: arrows scroll, q quits, any other key closes it.
    fn help_action(&mut self, action: Option<Action>, scroll: u16) -> Change {
        match action {
            Some(Action::Up) => self.scroll_overlay(scroll.saturating_sub(1)),
            Some(Action::Down) => self.scroll_overlay(scroll.saturating_add(1)),
            Some(Action::Quit) => {
                self.quit = true;
                Change::Nothing
            }
            Some(Action::Copy) => self.copy_overlay(),
            _ => self.close_overlay(),
        }
    }

    /// In a detail popup: arrows and pages scroll, Esc / Enter go back.
    fn detail_action(&mut self, action: Option<Action>, scroll: u16) -> Change {
        match action {
            Some(Action::Up) => self.scroll_overlay(scroll.saturating_sub(1)),
            Some(Action::Down) => self.scroll_overlay(scroll.saturating_add(1)),
            Some(Action::PageUp) => self.scroll_overlay(scroll.saturating_sub(POPUP_PAGE)),
            Some(Action::PageDown) => self.scroll_overlay(scroll.saturating_add(POPUP_PAGE)),
            Some(Action::Quit) => {
                self.quit = true;
                Change::Nothing
            }
            Some(Action::Back | Action::Details) => self.close_overlay(),
            Some(Action::Help) => self.open_overlay(Overlay::Help { scroll: 0 }),
            Some(Action::Copy) => self.copy_overlay(),
            _ => Change::Nothing,
        }
    }

    fn pane_action(&mut self, action: Action) -> Change {
        match action {
            Action::Quit => {
                self.quit = true;
                Change::Nothing
            }
            Action::Help => self.open_overlay(Overlay::Help { scroll: 0 }),
            Action::NextPane => self.focus_step(1),
            Action::PreviousPane => self.focus_step(-1),
            Action::Up => self.move_selection(self.focus, -1),
            Action::Down => self.move_selection(self.focus, 1),
            Action::PageUp => self.move_selection(self.focus, -self.page()),
            Action::PageDown => self.move_selection(self.focus, self.page()),
            Action::First => {
                self.selections[self.focus.index()] = Selection::default();
                Change::View
            }
            Action::Last => self.move_selection(self.focus, isize::MAX / 2),
            Action::Details => self.open_details(),
            Action::Back => Change::View,
            Action::SortNext => self.sort_step(1),
            Action::SortPrevious => self.sort_step(-1),
            Action::Filter => self.open_prompt(PromptKind::Filter),
            Action::PickCpus => self.open_prompt(PromptKind::Cpus),
            Action::Threshold => self.open_prompt(PromptKind::Threshold),
            Action::ZoomIn => self.zoom_step(-1),
            Action::ZoomOut => self.zoom_step(1),
            Action::Reset => self.reset(),
            Action::Pause => self.toggle_pause(),
            Action::NextStall => self.jump_to_stall(true),
            Action::PreviousStall => self.jump_to_stall(false),
            Action::StepForward => self.step(true),
            Action::StepBack => self.step(false),
            Action::SeekForward => self.seek_step(true),
            Action::SeekBack => self.seek_step(false),
            Action::Start => self.seek_to_edge(false),
            Action::End => self.seek_to_edge(true),
            Action::WorstStall => self.jump_to_worst_stall(),
            Action::GoTo => self.open_prompt(PromptKind::GoTo),
            Action::Copy => {
                self.status = Some("y copies an open popup: Enter opens one".into());
                Change::View
            }
        }
    }

    /// y: the popup's lines as plain text, for the loop to put on the
    /// terminal's clipboard.
    fn copy_overlay(&mut self) -> Change {
        let Some(view) = &self.view.overlay else {
            return Change::Nothing;
        };
        let mut text = format!("{}\n", view.title);
        for line in &view.lines {
            let line: String = line.iter().map(|s| s.text.as_str()).collect();
            text.push_str(line.trim_end());
            text.push('\n');
        }
        self.status = Some(format!(
            "copied {} lines to the clipboard (the terminal's, by OSC 52)",
            view.lines.len() + 1
        ));
        self.clipboard = Some(text);
        Change::View
    }

    fn open_overlay(&mut self, overlay: Overlay) -> Change {
        self.overlay = Some(overlay);
        Change::View
    }

    fn close_overlay(&mut self) -> Change {
        self.overlay = None;
        Change::View
    }

    /// Scroll the popup, no further than its last full page.
    fn scroll_overlay(&mut self, to: u16) -> Change {
        let max = self.view.overlay.as_ref().map_or(0, |o| o.max_scroll);
        if let Some(Overlay::Help { scroll } | Overlay::Detail { scroll, .. }) = &mut self.overlay {
            *scroll = to.min(max);
        }
        Change::View
    }

    fn open_details(&mut self) -> Change {
        match self.selected_target() {
            Some(target) => self.open_overlay(Overlay::Detail { target, scroll: 0 }),
            None => Change::Nothing,
        }
    }

    fn focus_step(&mut self, delta: isize) -> Change {
        self.focus_on(self.focus.step(delta));
        Change::View
    }

    pub(super) fn focus_on(&mut self, pane: Pane) {
        self.focus = pane;
        if pane.is_table() {
            self.shown_table = pane;
        }
        if pane.is_table() && pane != Pane::Feed {
            self.lower_table = Some(pane);
        }
    }

    /// Rows of a page in the focused pane.
    fn page(&self) -> isize {
        let rows = self
            .layout
            .rect_of(self.focus)
            .map_or(1, |r| match self.focus {
                Pane::Timeline => layout::timeline_rows(r),
                _ => layout::table_rows(r),
            });
        rows.max(1) as isize
    }

    fn move_selection(&mut self, pane: Pane, delta: isize) -> Change {
        let keys = self.rows.keys(pane);
        if keys.is_empty() {
            return Change::Nothing;
        }
        let selection = &mut self.selections[pane.index()];
        let index = (selection.index as isize)
            .saturating_add(delta)
            .clamp(0, keys.len() as isize - 1) as usize;
        selection.index = index;
        selection.key = Some(keys[index].clone());
        Change::View
    }

    fn sort_step(&mut self, delta: isize) -> Change {
        use super::tables::Column;
        let sorts = &mut self.sorts;
        match self.focus {
            Pane::Timeline => {
                self.status = Some("the timeline is not sortable; Tab to a table".into());
                return Change::View;
            }
            Pane::Feed => sorts.feed = sorts.feed.step(delta),
            Pane::Culprits => sorts.culprits = sorts.culprits.step(delta),
            Pane::Containers => sorts.containers = sorts.containers.step(delta),
            Pane::Syscalls => sorts.syscalls = sorts.syscalls.step(delta),
        }
        self.selections[self.focus.index()] = Selection::default();
        Change::Rows
    }

    fn zoom_step(&mut self, delta: isize) -> Change {
        self.zoom = (self.zoom as isize + delta).clamp(0, ZOOMS_S.len() as isize - 1) as usize;
        Change::View
    }

    fn reset(&mut self) -> Change {
        let at = self.now_ns();
        self.data.reset(at);
        self.status = Some(format!(
            "counters reset at {}",
            format::clock(at.saturating_sub(self.header.start_ns))
        ));
        self.refresh()
    }

    pub(super) fn mouse(&mut self, mouse: MouseEvent) -> Change {
        let hit = self.layout.hit(mouse.column, mouse.row);
        match mouse.kind {
            MouseEventKind::ScrollUp | MouseEventKind::ScrollDown => {
                let delta = if mouse.kind == MouseEventKind::ScrollUp {
                    -1
                } else {
                    1
                };
                if let Some(Overlay::Help { scroll } | Overlay::Detail { scroll, .. }) =
                    self.overlay.clone()
                {
                    self.scroll_overlay(scroll.saturating_add_signed(delta))
                } else if let Some((pane, _)) = hit {
                    self.move_selection(pane, delta as isize)
                } else {
                    Change::Nothing
                }
            }
            MouseEventKind::Down(MouseButton::Left) if self.overlay.is_none() => {
                let Some((pane, row)) = hit else {
                    return Change::Nothing;
                };
                self.focus_on(pane);
                match row {
                    Some(row) => {
                        let selection = &self.selections[pane.index()];
                        let target = selection.offset + row;
                        let delta = target as isize - selection.index as isize;
                        self.move_selection(pane, delta).max(Change::View)
                    }
                    None => Change::View,
                }
            }
            _ => Change::Nothing,
        }
    }

    fn selected_target(&self) -> Option<super::detail::Target> {
        use super::detail::Target;
        let selection = &self.selections[self.focus.index()];
        match self.focus {
            Pane::Timeline => self
                .rows
                .cpus
                .get(selection.index)
                .map(|&cpu| Target::Cpu(cpu)),
            pane => self
                .rows
                .keys(pane)
                .get(selection.index)
                .map(|key| Target::Row(pane, key.clone())),
        }
    }
}
