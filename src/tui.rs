//! The terminal: raw mode, alternate screen and mouse capture on the way
//! in; all of it undone on every way out (drop, error, panic); the input
//! event stream. The only module that writes to the terminal; knows
//! nothing of what is drawn (ui) or why (app).

use std::future::poll_fn;
use std::io::{self, Stdout};
use std::pin::Pin;
use std::sync::Once;

use crossterm::cursor::{Hide, Show};
use crossterm::event::{DisableMouseCapture, EnableMouseCapture, Event, EventStream};
use crossterm::execute;
use crossterm::terminal::{
    disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen,
};
use futures_core::Stream;
use ratatui::backend::CrosstermBackend;
use ratatui::layout::Size;
use ratatui::{Frame, Terminal};

/// The terminal in raw mode on the alternate screen; restored when dropped.
pub struct Tui {
    terminal: Terminal<CrosstermBackend<Stdout>>,
}

impl Tui {
    pub fn enter() -> io::Result<Tui> {
        install_panic_hook();
        enable_raw_mode().map_err(|e| {
            io::Error::new(e.kind(), format!("the live view needs a terminal ({e})"))
        })?;
        // From here on, every failure must undo what was done.
        let entered = execute!(io::stdout(), EnterAlternateScreen, EnableMouseCapture, Hide)
            .and_then(|()| Terminal::new(CrosstermBackend::new(io::stdout())));
        match entered {
            Ok(terminal) => Ok(Tui { terminal }),
            Err(e) => {
                restore();
                Err(e)
            }
        }
    }

    pub fn size(&self) -> io::Result<Size> {
        self.terminal.size()
    }

    pub fn draw(&mut self, render: impl FnOnce(&mut Frame<'_>)) -> io::Result<()> {
        self.terminal.draw(render).map(|_| ())
    }

    /// Put `text` on the clipboard of the terminal (OSC 52: xterm, kitty,
    /// iTerm2, tmux with set-clipboard on; over ssh too).
    pub fn copy(&mut self, text: &str) -> io::Result<()> {
        execute!(
            io::stdout(),
            crossterm::clipboard::CopyToClipboard::to_clipboard_from(text)
        )
    }
}

impl Drop for Tui {
    fn drop(&mut self) {
        restore();
    }
}

/// Put the terminal back as the shell had it. Safe to call twice.
fn restore() {
    let _ = execute!(
        io::stdout(),
        DisableMouseCapture,
        LeaveAlternateScreen,
        Show
    );
    let _ = disable_raw_mode();
}

/// A panic restores the terminal before the message prints, so the
/// message is readable and the shell usable.
fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
    });
}

/// Keys, mouse and resizes, as they come.
pub struct Input(EventStream);

impl Input {
    pub fn new() -> Input {
        Input(EventStream::new())
    }

    /// The next event; None once the terminal is gone.
    pub async fn next(&mut self) -> Option<io::Result<Event>> {
        poll_fn(|cx| Pin::new(&mut self.0).poll_next(cx)).await
    }
}
