//! HTTP for the fleet test: GET and POST on loopback, waiting for a server to answer, and a
//! free port for each server it starts.

use std::net::TcpListener;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};

use crate::scenario_tests::pause;

/// How long a server the test starts gets to answer.
pub const START_TIMEOUT: Duration = Duration::from_secs(60);

pub fn get(url: &str) -> Result<String> {
    Ok(ureq::get(url).call()?.body_mut().read_to_string()?)
}

pub fn post(url: &str) -> Result<String> {
    Ok(ureq::post(url).send_empty()?.body_mut().read_to_string()?)
}

/// Waits until `url` answers a GET, at most `START_TIMEOUT`.
pub fn wait_for(url: &str, what: &str) -> Result<()> {
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        if get(url).is_ok() {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("{what} did not answer {url} within {START_TIMEOUT:?}");
        }
        pause(Duration::from_millis(200))?;
    }
}

/// A loopback address with a port nobody listens on now (the kernel's pick).
pub fn free_address() -> Result<String> {
    let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    Ok(format!("127.0.0.1:{port}"))
}
