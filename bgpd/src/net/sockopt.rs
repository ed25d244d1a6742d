//! Raw setsockopt calls that neither std nor socket2 offer.
use std::io;
use std::mem::size_of;
use std::net::{IpAddr, Ipv6Addr};
use std::os::fd::{AsRawFd, BorrowedFd};

/// Linux `struct tcp_md5sig` (include/uapi/linux/tcp.h).
#[repr(C)]
struct TcpMd5Sig {
    addr: libc::sockaddr_storage,
    flags: u8,
    prefixlen: u8,
    keylen: u16,
    ifindex: libc::c_int,
    key: [u8; 80],
}

fn is_v6_socket(fd: BorrowedFd<'_>) -> io::Result<bool> {
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: storage is large enough for any socket address.
    let rc = unsafe {
        libc::getsockname(
            fd.as_raw_fd(),
            &mut storage as *mut _ as *mut libc::sockaddr,
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(storage.ss_family as libc::c_int == libc::AF_INET6)
}

fn setsockopt<T>(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    value: &T,
) -> io::Result<()> {
    // SAFETY: value points to a T that lives for the call; len is its size.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            value as *const T as *const libc::c_void,
            size_of::<T>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Sets (Some) or removes (None) the RFC 2385 key for `peer` on a socket.
/// On an IPv6 socket an IPv4 peer is given as a v4-mapped address, which is
/// how the kernel sees it on a dual-stack listener.
pub fn set_md5(fd: BorrowedFd<'_>, peer: IpAddr, key: Option<&[u8]>) -> io::Result<()> {
    let key = key.unwrap_or(&[]);
    if key.len() > 80 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "TCP MD5 key longer than 80 bytes",
        ));
    }
    // SAFETY: an all-zero tcp_md5sig is valid.
    let mut sig: TcpMd5Sig = unsafe { std::mem::zeroed() };
    let v6 = is_v6_socket(fd)?;
    match (peer, v6) {
        (IpAddr::V4(a), false) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: 0,
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_in fits in sockaddr_storage.
            unsafe { std::ptr::write(&mut sig.addr as *mut _ as *mut libc::sockaddr_in, sin) };
        }
        (peer, true) => {
            let a: Ipv6Addr = match peer {
                IpAddr::V4(a) => a.to_ipv6_mapped(),
                IpAddr::V6(a) => a,
            };
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: 0,
                sin6_flowinfo: 0,
                sin6_addr: libc::in6_addr {
                    s6_addr: a.octets(),
                },
                sin6_scope_id: 0,
            };
            // SAFETY: sockaddr_in6 fits in sockaddr_storage.
            unsafe { std::ptr::write(&mut sig.addr as *mut _ as *mut libc::sockaddr_in6, sin6) };
        }
        (IpAddr::V6(_), false) => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "IPv6 peer on an IPv4 socket",
            ));
        }
    }
    sig.keylen = key.len() as u16;
    sig.key[..key.len()].copy_from_slice(key);
    setsockopt(fd, libc::IPPROTO_TCP, libc::TCP_MD5SIG, &sig)
}

/// The TTL (hop limit) of packets we send.
pub fn set_ttl(fd: BorrowedFd<'_>, ttl: u8) -> io::Result<()> {
    let v = libc::c_int::from(ttl);
    if is_v6_socket(fd)? {
        setsockopt(fd, libc::IPPROTO_IPV6, libc::IPV6_UNICAST_HOPS, &v)?;
        // A dual-stack socket may carry IPv4: set both, the v4 one may fail
        // on a v6-only socket and that is fine.
        let _ = setsockopt(fd, libc::IPPROTO_IP, libc::IP_TTL, &v);
        Ok(())
    } else {
        setsockopt(fd, libc::IPPROTO_IP, libc::IP_TTL, &v)
    }
}

/// RFC 5082: drop packets that arrive with a TTL below `min`.
pub fn set_min_ttl(fd: BorrowedFd<'_>, min: u8) -> io::Result<()> {
    let v = libc::c_int::from(min);
    if is_v6_socket(fd)? {
        setsockopt(fd, libc::IPPROTO_IPV6, libc::IPV6_MINHOPCOUNT, &v)?;
        let _ = setsockopt(fd, libc::IPPROTO_IP, libc::IP_MINTTL, &v);
        Ok(())
    } else {
        setsockopt(fd, libc::IPPROTO_IP, libc::IP_MINTTL, &v)
    }
}
