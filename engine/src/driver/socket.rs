//! The TCP transport's system calls: a socket as volley wants it, and the target's address as
//! connect(2) takes it.

use std::io;

/// A TCP socket with Nagle off (requests are small and must leave at once), and with
/// `stamped`, a receive timestamp on every read (see `arrival`).
pub(super) fn new_socket(addr: &std::net::SocketAddr, stamped: bool) -> io::Result<i32> {
    let domain = if addr.is_ipv4() { libc::AF_INET } else { libc::AF_INET6 };
    // SAFETY: plain syscalls on a descriptor we own.
    unsafe {
        let fd = libc::socket(domain, libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK, 0);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let one: libc::c_int = 1;
        let size = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        libc::setsockopt(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, (&raw const one).cast(), size);
        if stamped {
            // Failing (no kernel refuses it), receives come without one and the loop wakes
            // for each as in the closed model.
            libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, (&raw const one).cast(), size);
        }
        Ok(fd)
    }
}

/// The address in the form connect(2) takes, encoded once per run.
pub(crate) fn encode_sockaddr(addr: &std::net::SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain old data; all-zero is a valid value.
    let mut out: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = write_sockaddr(addr, &mut out);
    (out, len)
}

fn write_sockaddr(addr: &std::net::SocketAddr, out: &mut libc::sockaddr_storage) -> libc::socklen_t {
    match addr {
        std::net::SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(a.ip().octets()) },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is large enough and aligned for any sockaddr.
            unsafe { std::ptr::write((out as *mut libc::sockaddr_storage).cast(), sin) };
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t
        }
        std::net::SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr { s6_addr: a.ip().octets() },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: as above.
            unsafe { std::ptr::write((out as *mut libc::sockaddr_storage).cast(), sin6) };
            std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t
        }
    }
}
