//! A TCP listener that never accepts, so connects hang until the client gives up.

use std::io::{self};
use std::net::SocketAddr;

/// A TCP listener on 127.0.0.1 with a backlog of 0 that never accepts: once its tiny queue is
/// full, the kernel drops further SYNs, so connects hang until the client gives up. Closed on
/// drop.
pub struct UnacceptingListener {
    fd: i32,
    addr: SocketAddr,
}

pub fn unaccepting_listener() -> UnacceptingListener {
    // SAFETY: plain socket calls on a descriptor this function owns.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0, "socket: {}", io::Error::last_os_error());
        let mut sin: libc::sockaddr_in = std::mem::zeroed();
        sin.sin_family = libc::AF_INET as libc::sa_family_t;
        sin.sin_addr.s_addr = u32::from_ne_bytes([127, 0, 0, 1]);
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        assert_eq!(libc::bind(fd, (&raw const sin).cast(), len), 0, "bind: {}", io::Error::last_os_error());
        assert_eq!(libc::listen(fd, 0), 0, "listen: {}", io::Error::last_os_error());
        let mut len = len;
        assert_eq!(libc::getsockname(fd, (&raw mut sin).cast(), &mut len), 0);
        let addr = SocketAddr::from(([127, 0, 0, 1], u16::from_be(sin.sin_port)));
        UnacceptingListener { fd, addr }
    }
}

impl UnacceptingListener {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for UnacceptingListener {
    fn drop(&mut self) {
        // SAFETY: closing the descriptor this struct owns.
        unsafe { libc::close(self.fd) };
    }
}
