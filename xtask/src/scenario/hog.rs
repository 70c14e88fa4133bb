//! CPU hogs: busy loops named `hog` that spin until the window closes.

use anyhow::Result;

use super::task::Window;

pub const COMM: &str = "hog";

/// Spins on the calling (already pinned) thread until the window closes.
pub fn run(window: &Window) -> Result<()> {
    while !window.over() {
        std::hint::spin_loop();
    }
    Ok(())
}
