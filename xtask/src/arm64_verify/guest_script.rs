//! The arm64 guest's `/init`: pins the verified-instructions iterator, loads each copy of the
//! object (one program section each) with `bpftool prog loadall`, says on the console, one
//! marked line each, whether its tracepoint exists, each program's `bpftool -j prog show` and
//! the iterator's lines, or the end of the failed load's log, and powers off.

use std::fmt::Write;

use super::guest_files::{BPFTOOL, BUSYBOX, LIBRARY_DIR};
use super::object::LoadUnit;

/// Starts every line meant for the host (the console also carries the kernel's messages).
pub const MARK: &str = "arm64-verify:";
/// Where the guest has load unit N's object: `/objects/N.bpf.o`.
pub const OBJECTS: &str = "/objects";
/// Where the guest has the compiled iterator (`iterator.rs`).
pub const ITERATOR: &str = "/verified_insns.bpf.o";
/// Lines of a failed load's log sent back: the verifier's verdict is at its end.
const LOG_LINES: u32 = 40;

pub fn init_script(units: &[LoadUnit]) -> String {
    let mut script = format!(
        r#"#!{BUSYBOX} sh
# /init of the arm64 verifier guest, written by `cargo xtask arm64-verify`.
{BUSYBOX} --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
mount -t tracefs tracefs /sys/kernel/tracing
mount -t bpf bpf /sys/fs/bpf
# The initramfs has no /dev/console for the kernel to give init.
exec > /dev/console 2>&1
export LD_LIBRARY_PATH={LIBRARY_DIR}
# A heartbeat, so that the host tells a long verification from a frozen guest.
(while :; do echo "<3>{MARK} alive" > /dev/kmsg; sleep 15; done) &
echo "{MARK} kernel $(uname -r)"
# Lines "ID VERIFIED_INSNS", one per loaded program.
insns=/sys/fs/bpf/verified_insns
if ! {BPFTOOL} iter pin {ITERATOR} $insns > /tmp/iter.log 2>&1; then
	tail -n {LOG_LINES} /tmp/iter.log | sed "s/^/{MARK} iterator-log /"
fi

# verify UNIT TRACEPOINT PROGRAMS...: loads /objects/UNIT.bpf.o (TRACEPOINT "-" for none).
verify() {{
	unit=$1
	tracepoint=$2
	shift 2
	if [ "$tracepoint" != - ] && ! grep -q ":$tracepoint\$" /sys/kernel/tracing/available_events; then
		echo "{MARK} no-tracepoint $unit"
	fi
	pins=/sys/fs/bpf/$unit
	mkdir $pins
	if {BPFTOOL} prog loadall {OBJECTS}/$unit.bpf.o $pins > /tmp/load.log 2>&1; then
		for program in "$@"; do
			echo "{MARK} show $unit $program $({BPFTOOL} -j prog show pinned $pins/$program 2>&1)"
		done
		[ -e $insns ] && sed "s/^/{MARK} insns /" $insns
	else
		echo "{MARK} failed $unit"
		tail -n {LOG_LINES} /tmp/load.log | sed "s/^/{MARK} log $unit /"
	fi
	rm -rf $pins
}}

"#
    );
    for (index, unit) in units.iter().enumerate() {
        let _ = writeln!(
            script,
            "verify {index} {} {}",
            unit.tracepoint().unwrap_or("-"),
            unit.programs.join(" ")
        );
    }
    let _ = write!(script, "\necho \"{MARK} done\"\npoweroff -f\n");
    script
}
