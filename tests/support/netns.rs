//! Network namespaces a test makes (as root, with iproute2): made with [`Namespaces::add`],
//! deleted on drop, panic or not; `volley` run inside one with [`volley_in`]. Threads join one
//! with [`super::in_netns`].

use std::process::Command;

use super::volley_bin;

/// Network namespaces this test made; deleted (with their veth pairs and bridges) on drop.
pub struct Namespaces {
    names: Vec<String>,
}

impl Namespaces {
    pub fn new() -> Self {
        Namespaces { names: Vec::new() }
    }

    pub fn add(&mut self, name: &str) -> Result<(), String> {
        ip(&["netns", "add", name])?;
        self.names.push(name.to_string());
        Ok(())
    }
}

impl Default for Namespaces {
    fn default() -> Self {
        Namespaces::new()
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        for name in self.names.iter().rev() {
            if let Err(e) = ip(&["netns", "del", name]) {
                eprintln!("cleaning up: {e}");
            }
        }
    }
}

/// True when this test may make network namespaces: root, with iproute2 (`ip`).
pub fn can_make_namespaces() -> bool {
    // SAFETY: geteuid(2) has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    root && Command::new("ip").arg("-V").output().is_ok()
}

/// `ip ARGS`, its stderr the error.
pub fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip").args(args).output().map_err(|e| format!("cannot run ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()))
    }
}

/// Narrows the local port range of namespace `netns` to `low..=high` (the range is per
/// namespace).
pub fn set_local_port_range(netns: &str, low: u16, high: u16) {
    let range = format!("net.ipv4.ip_local_port_range={low} {high}");
    let sysctl = Command::new("ip").args(["netns", "exec", netns, "sysctl", "-qw", &range]).output().expect("sysctl");
    assert!(sysctl.status.success(), "{}", String::from_utf8_lossy(&sysctl.stderr));
}

/// `ip netns exec NETNS volley ARGS...`.
pub fn volley_in(netns: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", netns]).arg(volley_bin()).args(args).env_remove("VOLLEY_TOKEN");
    cmd
}
