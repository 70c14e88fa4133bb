//! Checks before anything is loaded: privileges, kernel BTF, tracefs. Each
//! failure is a typed error whose message names the fix; nothing is loaded
//! into the kernel here.

use std::fs;
use std::path::Path;

use super::ProbeError;

const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

const TRACEFS: &str = "/sys/kernel/tracing";

/// Run every check; mounts tracefs when it is missing and we may.
pub fn check() -> Result<(), ProbeError> {
    check_privileges()?;
    check_btf()?;
    ensure_tracefs()
}

fn check_privileges() -> Result<(), ProbeError> {
    let status =
        fs::read_to_string("/proc/self/status").map_err(|e| ProbeError::NotPrivileged {
            detail: format!("cannot read /proc/self/status: {e}"),
        })?;
    let effective = parse_cap_eff(&status).unwrap_or(0);
    let has = |cap: u32| effective & (1u64 << cap) != 0;
    if has(CAP_SYS_ADMIN) || (has(CAP_BPF) && has(CAP_PERFMON)) {
        return Ok(());
    }
    Err(ProbeError::NotPrivileged {
        detail: "needs root, or CAP_BPF and CAP_PERFMON".into(),
    })
}

/// The effective capability mask from the text of /proc/<pid>/status.
fn parse_cap_eff(status: &str) -> Option<u64> {
    let hex = status.lines().find_map(|l| l.strip_prefix("CapEff:"))?;
    u64::from_str_radix(hex.trim(), 16).ok()
}

/// The kernel's BTF where libbpf looks for it: /sys/kernel/btf/vmlinux
/// (CONFIG_DEBUG_INFO_BTF), or a vmlinux with BTF under /boot or
/// /lib/modules/<release>/ (then only raw_tp programs can attach).
fn check_btf() -> Result<(), ProbeError> {
    libbpf_rs::btf::Btf::from_vmlinux()
        .map(|_| ())
        .map_err(|_| ProbeError::NoBtf)
}

fn ensure_tracefs() -> Result<(), ProbeError> {
    if Path::new(TRACEFS).join("events").is_dir() {
        return Ok(());
    }
    mount_tracefs().map_err(|e| ProbeError::NoTracefs {
        detail: format!("mount -t tracefs tracefs {TRACEFS} failed: {e}"),
    })
}

fn mount_tracefs() -> std::io::Result<()> {
    let target = std::ffi::CString::new(TRACEFS).expect("constant has no NUL");
    let fstype = c"tracefs";
    // SAFETY: all pointers are valid NUL-terminated strings for the call's
    // duration; a null data pointer is allowed by mount(2).
    let rc = unsafe {
        libc::mount(
            fstype.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap_eff_is_read_from_status_text() {
        let status = "Name:\tstalltop\nCapInh:\t0000000000000000\nCapEff:\t000001ffffffffff\n";
        let caps = parse_cap_eff(status).unwrap();
        assert_ne!(caps & (1 << CAP_BPF), 0);
        assert_eq!(parse_cap_eff("CapEff:\t0000000000000000\n"), Some(0));
        assert_eq!(parse_cap_eff("Name: x\n"), None);
    }
}
