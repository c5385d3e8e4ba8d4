//! The kernel's socket diagnostics (`sock_diag(7)`, Linux): the inode of one TCP socket, asked
//! for by its addresses in one request. `/proc/net/tcp` lists every socket instead, those in
//! `TIME_WAIT` included — thousands of rows, read for each new connection, under a test suite
//! that opens a connection per request.
//!
//! The messages are the kernel's C structures, written and read here by offset: one request
//! and one reply of fixed layout, which a netlink message crate would only wrap.

use std::io;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use netlink_sys::protocols::NETLINK_SOCK_DIAG;
use netlink_sys::{Socket, SocketAddr as KernelAddr};

/// `nlmsg_type` of a request (and of its answer).
const SOCK_DIAG_BY_FAMILY: u16 = 20;
/// `nlmsg_type` of an error (or, with errno 0, an acknowledgement).
const NLMSG_ERROR: u16 = 2;
const NLM_F_REQUEST: u16 = 1;
const IPPROTO_TCP: u8 = 6;
const AF_INET: u8 = 2;
const AF_INET6: u8 = 10;
/// `struct nlmsghdr`.
const HEADER: usize = 16;
/// `struct nlmsghdr` and `struct inet_diag_req_v2`.
const REQUEST: usize = HEADER + 56;
/// Where `idiag_inode` lies in an answer: in `struct inet_diag_msg`, after the header.
const INODE_AT: usize = HEADER + 68;
/// `ENOENT`: no such socket.
const ENOENT: i32 = 2;

/// The inode of the TCP socket whose own address is `local` and whose peer is `remote`;
/// `None` when the kernel knows no such socket, or it has no inode (it is closing). An IPv4
/// pair is looked for as an IPv4 socket, then as an IPv6 one with mapped addresses.
///
/// # Errors
///
/// When the kernel cannot be asked: no socket diagnostics, or netlink not allowed.
pub(crate) fn inode(local: SocketAddr, remote: SocketAddr) -> io::Result<Option<u64>> {
    let socket = Socket::new(NETLINK_SOCK_DIAG)?;
    // The kernel answers within the send; a reply that is not there is an error, not a wait.
    socket.set_non_blocking(true)?;
    let (ip, peer_ip) = (local.ip().to_canonical(), remote.ip().to_canonical());
    if let (IpAddr::V4(own), IpAddr::V4(peer)) = (ip, peer_ip) {
        let mut src = [0u8; 16];
        let mut dst = [0u8; 16];
        src[..4].copy_from_slice(&own.octets());
        dst[..4].copy_from_slice(&peer.octets());
        let found = ask(&socket, AF_INET, (src, local.port()), (dst, remote.port()))?;
        if found.is_some() {
            return Ok(found);
        }
    }
    let v6 = |ip: IpAddr| match ip {
        IpAddr::V4(ip) => ip.to_ipv6_mapped(),
        IpAddr::V6(ip) => ip,
    };
    let (src, dst): (Ipv6Addr, Ipv6Addr) = (v6(ip), v6(peer_ip));
    ask(
        &socket,
        AF_INET6,
        (src.octets(), local.port()),
        (dst.octets(), remote.port()),
    )
}

/// One exact lookup: `src` is the socket's own address and port, `dst` its peer's.
fn ask(
    socket: &Socket,
    family: u8,
    src: ([u8; 16], u16),
    dst: ([u8; 16], u16),
) -> io::Result<Option<u64>> {
    socket.send_to(&request(family, src, dst), &KernelAddr::new(0, 0), 0)?;
    let mut answer = vec![0u8; 8192];
    let read = socket.recv(&mut &mut answer[..], 0)?;
    read_answer(&answer[..read])
}

/// `struct nlmsghdr` + `struct inet_diag_req_v2` for one socket, in any state.
fn request(family: u8, src: ([u8; 16], u16), dst: ([u8; 16], u16)) -> [u8; REQUEST] {
    let mut message = [0u8; REQUEST];
    message[0..4].copy_from_slice(&(REQUEST as u32).to_ne_bytes());
    message[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    message[6..8].copy_from_slice(&NLM_F_REQUEST.to_ne_bytes());
    // nlmsg_seq and nlmsg_pid stay 0.
    let body = &mut message[HEADER..];
    body[0] = family;
    body[1] = IPPROTO_TCP;
    // idiag_ext and a pad byte stay 0; idiag_states: every state.
    body[4..8].copy_from_slice(&u32::MAX.to_ne_bytes());
    // struct inet_diag_sockid: ports and addresses in network order, no interface, and
    // INET_DIAG_NOCOOKIE (all ones).
    body[8..10].copy_from_slice(&src.1.to_be_bytes());
    body[10..12].copy_from_slice(&dst.1.to_be_bytes());
    body[12..28].copy_from_slice(&src.0);
    body[28..44].copy_from_slice(&dst.0);
    body[48..56].fill(0xff);
    message
}

/// The inode in the kernel's answer; `None` for "no such socket" or a socket without one.
fn read_answer(answer: &[u8]) -> io::Result<Option<u64>> {
    let field = |at: usize| -> io::Result<[u8; 4]> {
        answer
            .get(at..at + 4)
            .and_then(|bytes| bytes.try_into().ok())
            .ok_or_else(|| io::Error::other("a socket diagnostics answer too short"))
    };
    let kind = answer
        .get(4..6)
        .map(|bytes| u16::from_ne_bytes([bytes[0], bytes[1]]))
        .ok_or_else(|| io::Error::other("a socket diagnostics answer too short"))?;
    match kind {
        SOCK_DIAG_BY_FAMILY => {
            let inode = u32::from_ne_bytes(field(INODE_AT)?);
            Ok((inode != 0).then_some(u64::from(inode)))
        }
        NLMSG_ERROR => match -i32::from_ne_bytes(field(HEADER)?) {
            ENOENT => Ok(None),
            errno => Err(io::Error::from_raw_os_error(errno)),
        },
        other => Err(io::Error::other(format!(
            "a socket diagnostics answer of type {other}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;

    use super::*;

    #[test]
    fn knows_no_socket_that_is_not_there() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let nobody: SocketAddr = "127.0.0.1:9".parse().unwrap();
        if let Ok(found) = inode(nobody, listener.local_addr().unwrap()) {
            assert_eq!(found, None);
        }
    }

    #[test]
    fn reads_an_error_answer_as_no_socket_or_an_error() {
        let mut answer = [0u8; 36];
        answer[4..6].copy_from_slice(&NLMSG_ERROR.to_ne_bytes());
        answer[16..20].copy_from_slice(&(-ENOENT).to_ne_bytes());
        assert_eq!(read_answer(&answer).unwrap(), None);
        answer[16..20].copy_from_slice(&(-1i32).to_ne_bytes());
        assert!(read_answer(&answer).is_err());
        assert!(read_answer(&answer[..3]).is_err());
    }
}
