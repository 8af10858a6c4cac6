//! Facts about this machine that Hello reports: its name and physical cores (the kernel
//! release comes from the engine, which checks it for io_uring).

use std::collections::HashSet;
use std::ffi::CStr;

/// The host name, as `hostname` prints it; empty if the system will not say.
pub(crate) fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is writable for its whole length, which is what we pass.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return String::new();
    }
    // A name that filled the buffer may lack its terminator; the last byte stands in for it.
    buf[buf.len() - 1] = 0;
    CStr::from_bytes_until_nul(&buf).map(|s| s.to_string_lossy().into_owned()).unwrap_or_default()
}

/// Physical cores: the default thread count of a shard (and of a local run), since a second engine thread on a
/// hyper-thread sibling mostly competes with the first.
pub fn physical_cores() -> usize {
    let logical = std::thread::available_parallelism().map_or(1, |n| n.get());
    match std::fs::read_to_string("/proc/cpuinfo") {
        // Within the logical CPUs this process may use (a cgroup or affinity limit counts).
        Ok(text) => physical_cores_in(&text).map_or(logical, |physical| physical.min(logical)),
        Err(_) => logical,
    }
}

/// Counts the distinct (physical id, core id) pairs; None when the file has no such fields
/// (some virtual machines and architectures leave them out).
fn physical_cores_in(cpuinfo: &str) -> Option<usize> {
    let mut cores = HashSet::new();
    for block in cpuinfo.split("\n\n") {
        let field = |name: &str| {
            block.lines().find_map(|line| {
                let (key, value) = line.split_once(':')?;
                (key.trim() == name).then(|| value.trim().to_string())
            })
        };
        if let (Some(package), Some(core)) = (field("physical id"), field("core id")) {
            cores.insert((package, core));
        }
    }
    (!cores.is_empty()).then_some(cores.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu(processor: u32, package: u32, core: u32) -> String {
        format!(
            "processor\t: {processor}\nvendor_id\t: GenuineIntel\nphysical id\t: {package}\nsiblings\t: 4\ncore id\t\t: {core}\ncpu cores\t: 2\n"
        )
    }

    #[test]
    fn hyper_thread_siblings_count_once() {
        let text = [cpu(0, 0, 0), cpu(1, 0, 1), cpu(2, 0, 0), cpu(3, 0, 1)].join("\n");
        assert_eq!(physical_cores_in(&text), Some(2));
    }

    #[test]
    fn the_same_core_id_on_two_packages_is_two_cores() {
        let text = [cpu(0, 0, 0), cpu(1, 1, 0), cpu(2, 0, 1), cpu(3, 1, 1)].join("\n");
        assert_eq!(physical_cores_in(&text), Some(4));
    }

    #[test]
    fn without_topology_fields_there_is_no_answer() {
        assert_eq!(physical_cores_in("processor\t: 0\nBogoMIPS\t: 50.00\n\nprocessor\t: 1\n"), None);
        assert_eq!(physical_cores_in(""), None);
    }

    #[test]
    fn this_machine_has_a_name_and_cores() {
        assert!(physical_cores() >= 1);
        // A container may have an empty host name, but never one with a NUL in it.
        assert!(!hostname().contains('\0'));
    }
}
