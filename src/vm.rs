//! Whether this machine is a virtual machine, and whether its kernel is told the time the
//! hypervisor takes from its vCPUs (steal): read from the CPU (x86's hypervisor bit and
//! vendor leaf), /sys/hypervisor, DMI and /proc/stat. Plain facts; the probe configuration
//! decides from them.

use serde::{Deserialize, Serialize};

/// What stalltop could tell of the machine it ran on.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Machine {
    /// x86 with the CPUID hypervisor bit clear.
    BareMetal,
    /// A guest of `hypervisor` (as its signature or firmware names it).
    Vm {
        hypervisor: String,
        /// x86 KVM: the host keeps a per-vCPU steal clock for the guest (KVM_FEATURE_STEAL_TIME).
        #[serde(default)]
        kvm_steal_time: bool,
    },
    /// No sign either way (no x86 CPUID, no /sys/hypervisor, no DMI naming a hypervisor).
    Unknown,
}

impl Machine {
    /// This machine.
    pub fn detect() -> Machine {
        if let Some(machine) = from_cpuid() {
            return machine;
        }
        let read = |path: &str| {
            std::fs::read_to_string(path)
                .ok()
                .map(|s| s.trim().to_string())
        };
        if let Some(kind) = read("/sys/hypervisor/type").filter(|k| !k.is_empty()) {
            return Machine::Vm {
                hypervisor: kind,
                kvm_steal_time: false,
            };
        }
        let dmi = [
            read("/sys/class/dmi/id/sys_vendor"),
            read("/sys/class/dmi/id/product_name"),
        ];
        match hypervisor_of_dmi(dmi.iter().flatten().map(String::as_str)) {
            Some(hypervisor) => Machine::Vm {
                hypervisor: hypervisor.into(),
                kvm_steal_time: false,
            },
            None => Machine::Unknown,
        }
    }

    /// Whether it is, or may be, a VM.
    pub fn may_be_vm(&self) -> bool {
        !matches!(self, Machine::BareMetal)
    }
}

/// x86: the hypervisor bit (CPUID leaf 1, ECX bit 31), which every hypervisor sets for its
/// guests, and the vendor signature of leaf 0x40000000. None on other architectures.
#[cfg(target_arch = "x86_64")]
fn from_cpuid() -> Option<Machine> {
    use std::arch::x86_64::__cpuid;
    /// KVM_FEATURE_STEAL_TIME in the features of leaf 0x40000001.
    const KVM_FEATURE_STEAL_TIME: u32 = 1 << 5;
    if __cpuid(1).ecx & (1 << 31) == 0 {
        return Some(Machine::BareMetal);
    }
    let vendor = __cpuid(0x4000_0000);
    let mut signature = Vec::with_capacity(12);
    for word in [vendor.ebx, vendor.ecx, vendor.edx] {
        signature.extend_from_slice(&word.to_le_bytes());
    }
    let hypervisor = hypervisor_of_signature(&signature);
    let kvm = hypervisor == "KVM" && vendor.eax >= 0x4000_0001;
    Some(Machine::Vm {
        hypervisor: hypervisor.into(),
        kvm_steal_time: kvm && __cpuid(0x4000_0001).eax & KVM_FEATURE_STEAL_TIME != 0,
    })
}

#[cfg(not(target_arch = "x86_64"))]
fn from_cpuid() -> Option<Machine> {
    None
}

/// The hypervisor a CPUID vendor signature names.
fn hypervisor_of_signature(signature: &[u8]) -> &'static str {
    match signature {
        b"KVMKVMKVM\0\0\0" => "KVM",
        b"Microsoft Hv" => "Hyper-V",
        b"VMwareVMware" => "VMware",
        b"XenVMMXenVMM" => "Xen",
        b"TCGTCGTCGTCG" => "QEMU (TCG)",
        b"bhyve bhyve " => "bhyve",
        b"ACRNACRNACRN" => "ACRN",
        b" lrpepyh  vr" => "Parallels",
        _ => "unknown hypervisor",
    }
}

/// The hypervisor DMI's vendor or product strings name, if any.
fn hypervisor_of_dmi<'a>(strings: impl Iterator<Item = &'a str>) -> Option<&'static str> {
    const KNOWN: [(&str, &str); 8] = [
        ("QEMU", "QEMU"),
        ("KVM", "KVM"),
        ("VMware", "VMware"),
        ("VirtualBox", "VirtualBox"),
        ("Xen", "Xen"),
        ("Amazon EC2", "Amazon EC2"),
        ("Google Compute Engine", "Google Compute Engine"),
        ("Virtual Machine", "Hyper-V"),
    ];
    strings.into_iter().find_map(|s| {
        KNOWN
            .iter()
            .find(|(needle, _)| s.contains(needle))
            .map(|&(_, name)| name)
    })
}

/// Whether the kernel has accounted any steal time since boot (the steal column of
/// /proc/stat): then it reads a paravirt steal clock, and the run queue keeps its copies of it.
pub fn steal_accounted() -> bool {
    std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|stat| {
            let line = stat.lines().find(|l| l.starts_with("cpu "))?;
            line.split_whitespace().nth(8)?.parse::<u64>().ok()
        })
        .is_some_and(|steal| steal > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_and_firmware_name_their_hypervisors() {
        assert_eq!(hypervisor_of_signature(b"KVMKVMKVM\0\0\0"), "KVM");
        assert_eq!(hypervisor_of_signature(b"XenVMMXenVMM"), "Xen");
        assert_eq!(hypervisor_of_signature(b"TCGTCGTCGTCG"), "QEMU (TCG)");
        assert_eq!(
            hypervisor_of_signature(b"NoSuchVendor"),
            "unknown hypervisor"
        );
        assert_eq!(
            hypervisor_of_dmi(["Microsoft Corporation", "Virtual Machine"].into_iter()),
            Some("Hyper-V")
        );
        assert_eq!(
            hypervisor_of_dmi(["Dell Inc.", "PowerEdge R640"].into_iter()),
            None
        );
    }

    /// This development machine is a Firecracker (KVM) guest whose host keeps steal time.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn this_machine_is_a_kvm_guest_with_steal_time() {
        assert_eq!(
            Machine::detect(),
            Machine::Vm {
                hypervisor: "KVM".into(),
                kvm_steal_time: true
            }
        );
    }
}
