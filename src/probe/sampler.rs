//! The CPU X-ray sampler: one cpu-clock perf event per online CPU, each
//! running the `btf_cpu_sample` or `raw_cpu_sample` program; its period can
//! change while it runs.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use libbpf_rs::libbpf_sys;
use libbpf_rs::{Link, ProgramMut};
use rustix::ioctl::{self, opcode, Setter};

/// `PERF_EVENT_IOC_PERIOD` (linux/perf_event.h): a new sample period for a
/// running event, from its next overflow.
const PERF_EVENT_IOC_PERIOD: ioctl::Opcode = opcode::write::<u64>(b'$', 4);

/// A sampler attached on every online CPU.
pub struct Attached {
    pub links: Vec<Link>,
    /// Duplicates of the perf events the links own, for `set_period`.
    pub events: Vec<OwnedFd>,
}

/// Open a cpu-clock event on every online CPU and attach `prog` to each.
/// Fails as a whole: a partial sampler would report false irqs-off gaps.
pub fn attach(prog: &ProgramMut<'_>, hz: u32) -> Result<Attached, String> {
    let period_ns = super::loader::sample_period_ns(hz);
    let mut attached = Attached {
        links: Vec::new(),
        events: Vec::new(),
    };
    for cpu in crate::cpulist::CpuList::online()?.iter() {
        let fd = open_cpu_clock(cpu, period_ns)
            .map_err(|e| format!("perf_event_open(cpu-clock, cpu {cpu}): {e}"))?;
        let kept = fd
            .try_clone()
            .map_err(|e| format!("dup of the cpu {cpu} perf event: {e}"))?;
        // libbpf's perf link takes the event fd over and closes it on detach.
        let link = prog
            .attach_perf_event(fd.as_raw_fd())
            .map_err(|e| format!("attaching to the cpu {cpu} perf event: {e}"))?;
        std::mem::forget(fd);
        attached.links.push(link);
        attached.events.push(kept);
    }
    Ok(attached)
}

/// Give every event a new sample period.
pub fn set_period(events: &[OwnedFd], period_ns: u64) -> std::io::Result<()> {
    for event in events {
        // SAFETY: PERF_EVENT_IOC_PERIOD takes a pointer to a u64, which
        // Setter passes; `event` is a perf event fd we hold.
        unsafe { ioctl::ioctl(event, Setter::<PERF_EVENT_IOC_PERIOD, u64>::new(period_ns)) }?;
    }
    Ok(())
}

fn open_cpu_clock(cpu: u32, period_ns: u64) -> std::io::Result<OwnedFd> {
    // SAFETY: perf_event_attr is plain C data; all-zero is its documented
    // default ("disabled nothing, sample nothing").
    let mut attr: libbpf_sys::perf_event_attr = unsafe { std::mem::zeroed() };
    attr.type_ = libbpf_sys::PERF_TYPE_SOFTWARE;
    attr.size = std::mem::size_of::<libbpf_sys::perf_event_attr>() as u32;
    attr.config = u64::from(libbpf_sys::PERF_COUNT_SW_CPU_CLOCK);
    attr.__bindgen_anon_1.sample_period = period_ns;
    // SAFETY: `attr` is a valid perf_event_attr for the call's duration;
    // pid -1 with a cpu means "every task on that CPU".
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const libbpf_sys::perf_event_attr,
            -1,
            cpu as libc::c_int,
            -1,
            libbpf_sys::PERF_FLAG_FD_CLOEXEC as libc::c_ulong,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the syscall returned a new file descriptor that we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}
