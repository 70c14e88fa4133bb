//! SIGINT/SIGTERM become a stop flag that every workload loop and wait polls, so cleanup always runs.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock};

use signal_hook::consts::{SIGINT, SIGTERM};

static REQUESTED: LazyLock<Arc<AtomicBool>> = LazyLock::new(Default::default);

/// Replaces the default "terminate at once" action of SIGINT and SIGTERM with setting the flag.
pub fn install() -> io::Result<()> {
    for signal in [SIGINT, SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&REQUESTED))?;
    }
    Ok(())
}

/// True once SIGINT or SIGTERM has arrived.
pub fn requested() -> bool {
    REQUESTED.load(Ordering::SeqCst)
}
