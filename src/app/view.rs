//! What render reads: every string already formatted, every row already
//! filtered, sorted and cut to what fits, every scroll offset applied.
//! Plain data; `ui` maps tones to colours and draws, nothing more.

/// How a piece of text should look; the ui's theme picks the colours.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Tone {
    #[default]
    Normal,
    Dim,
    Strong,
    /// A key name in hints and help.
    Key,
    Good,
    Warn,
    Bad,
    /// Stall kinds, as the timeline and the feed colour them.
    Runq,
    Ksoftirqd,
    Softirq,
    Irqoff,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Segment {
    pub text: String,
    pub tone: Tone,
}

impl Segment {
    pub fn new(text: impl Into<String>, tone: Tone) -> Segment {
        Segment {
            text: text.into(),
            tone,
        }
    }

    pub fn plain(text: impl Into<String>) -> Segment {
        Segment::new(text, Tone::Normal)
    }
}

pub type Line = Vec<Segment>;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct View {
    /// Host, rates, costs, thresholds, filters, then one line per warning.
    pub header: Vec<Line>,
    pub timeline: TimelineView,
    /// In the order of `Layout::tables`.
    pub tables: Vec<TableView>,
    /// Key hints, a prompt being typed, or a status message.
    pub footer: Line,
    pub overlay: Option<OverlayView>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TimelineView {
    pub title: Line,
    /// The visible CPU rows only.
    pub rows: Vec<TimelineRow>,
    /// Time labels under the cells.
    pub axis: String,
    pub legend: Line,
    /// Index into `rows`.
    pub selected: Option<usize>,
    pub focused: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TimelineRow {
    pub label: String,
    /// One character per time bucket, runs of one tone merged.
    pub cells: Line,
    /// The longest stall of the row in the window.
    pub summary: Segment,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TableView {
    pub title: Line,
    pub columns: Vec<ColumnView>,
    /// The visible rows only.
    pub rows: Vec<RowView>,
    /// Index into `rows`.
    pub selected: Option<usize>,
    pub focused: bool,
    /// Shown instead of rows when there are none.
    pub empty: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ColumnView {
    pub title: String,
    pub width: u16,
    pub right: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RowView {
    /// One per column.
    pub cells: Vec<Segment>,
}

/// The detail popup or the help overlay.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OverlayView {
    pub title: String,
    pub lines: Vec<Line>,
    pub scroll: u16,
    /// The last scroll offset that still fills the popup.
    pub max_scroll: u16,
    pub hint: String,
}
