//! The panes of the screen in Tab order, the tables among them, and the
//! selection each pane keeps.

/// The panes, in Tab order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pane {
    Timeline,
    Feed,
    Culprits,
    Containers,
    Syscalls,
}

pub const PANES: [Pane; 5] = [
    Pane::Timeline,
    Pane::Feed,
    Pane::Culprits,
    Pane::Containers,
    Pane::Syscalls,
];

/// The table panes, in the order of their tabs.
pub const TABLES: [Pane; 4] = [Pane::Feed, Pane::Culprits, Pane::Containers, Pane::Syscalls];

impl Pane {
    /// Where the pane is in `PANES`.
    pub fn index(self) -> usize {
        PANES.iter().position(|&p| p == self).unwrap_or(0)
    }

    pub fn is_table(self) -> bool {
        self != Pane::Timeline
    }

    /// The pane's name in titles and tabs.
    pub fn title(self) -> &'static str {
        match self {
            Pane::Timeline => "CPU stall timeline",
            Pane::Feed => "Stalls & takeovers",
            Pane::Culprits => "Culprits",
            Pane::Containers => "Containers",
            Pane::Syscalls => "Syscalls",
        }
    }

    /// The pane `delta` Tab presses away, cycling.
    pub fn step(self, delta: isize) -> Pane {
        let n = PANES.len() as isize;
        PANES[(self.index() as isize + delta).rem_euclid(n) as usize]
    }
}

/// The selected row of a pane; `key` follows a row when rows move (None:
/// stay on the first row, so a newest-first feed keeps showing the newest).
#[derive(Clone, Debug, Default)]
pub struct Selection {
    pub index: usize,
    pub offset: usize,
    pub key: Option<String>,
}

impl Selection {
    /// Keep the selection on its row (by key), inside the rows, and
    /// visible in a pane of `visible` rows.
    pub fn settle(&mut self, keys: &[String], visible: usize) {
        if let Some(index) = self
            .key
            .as_ref()
            .and_then(|key| keys.iter().position(|k| k == key))
        {
            self.index = index;
        }
        self.index = self.index.min(keys.len().saturating_sub(1));
        if self.key.is_some() {
            self.key = keys.get(self.index).cloned();
        }
        let visible = visible.max(1);
        if self.index < self.offset {
            self.offset = self.index;
        }
        if self.index >= self.offset + visible {
            self.offset = self.index + 1 - visible;
        }
        self.offset = self.offset.min(keys.len().saturating_sub(visible));
    }
}
