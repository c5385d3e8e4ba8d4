//! Which process is at the other end of a loopback connection, found under `/proc` (Linux).
//!
//! Under `holdoff run` every client on the machine connects from `127.0.0.1`, so the peer
//! address cannot tell two test processes apart. The kernel can: the client's end of the
//! connection is a row of `/proc/net/tcp` (or `tcp6`) whose local address is the peer's and
//! whose remote address is the proxy's end; that row names the socket's inode, and the process
//! holding `socket:[INODE]` among its `/proc/PID/fd` is the client. It is looked up once per
//! connection, off the async threads, before the connection's first request is identified.
//! Anything that goes wrong (another OS, a peer that is not loopback, a socket owned by a
//! process in another PID namespace or of another user) leaves the peer address as the
//! identity.

use std::fs;
use std::io::{self, BufRead, BufReader};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;

use super::stage::ClientId;
use crate::config::ClientIdMode;

/// The identity a connection's requests fall back to when they do not name their client:
/// the process that owns its other end when `mode` allows and it can be found, else the peer
/// address.
pub(crate) async fn identity(
    mode: ClientIdMode,
    peer: SocketAddr,
    local: io::Result<SocketAddr>,
) -> ClientId {
    let by_peer = ClientId::Peer(peer.ip());
    if mode == ClientIdMode::Peer || !cfg!(target_os = "linux") || !is_loopback(peer.ip()) {
        return by_peer;
    }
    let found = match local {
        Ok(local) => tokio::task::spawn_blocking(move || owner(Path::new("/proc"), peer, local))
            .await
            .unwrap_or_else(|err| Err(io::Error::other(err))),
        Err(err) => Err(err),
    };
    match found {
        Ok(Some((pid, name))) => return ClientId::Process { pid, name },
        Ok(None) => tracing::debug!(client = %peer, "no process owns the client's socket"),
        Err(err) => tracing::debug!(client = %peer, error = %err, "cannot find the client process"),
    }
    by_peer
}

/// The pid of the process at the other end of the loopback connection from `peer` to
/// `local` (Linux), for [`filter`](super::filter); `None` when it cannot be told.
pub(crate) fn pid_of(peer: SocketAddr, local: SocketAddr) -> Option<u32> {
    if !cfg!(target_os = "linux") || !is_loopback(peer.ip()) {
        return None;
    }
    owner(Path::new("/proc"), peer, local)
        .ok()
        .flatten()
        .map(|(pid, _)| pid)
}

/// The pid of another process of this very program (another holdoff) listening on `port` of
/// this machine's loopback, if there is one: a tunnel to it from this proxy would carry the
/// client's next `CONNECT` back here, and then there, without end (Linux; `None` elsewhere, or
/// when it cannot be told).
pub(crate) fn other_instance_listening(port: u16) -> Option<u32> {
    if !cfg!(target_os = "linux") {
        return None;
    }
    let proc = Path::new("/proc");
    let inode = listening_inode(proc, port).ok().flatten()?;
    let pid = holder(proc, inode).ok().flatten()?;
    if pid == std::process::id() {
        return None;
    }
    let exe = |pid: &str| fs::canonicalize(proc.join(pid).join("exe")).ok();
    let (theirs, ours) = (exe(&pid.to_string())?, exe("self")?);
    (theirs == ours).then_some(pid)
}

/// The inode of a socket listening on `port` at a loopback or wildcard address.
fn listening_inode(proc: &Path, port: u16) -> io::Result<Option<u64>> {
    for table in ["net/tcp", "net/tcp6"] {
        let Ok(file) = fs::File::open(proc.join(table)) else {
            continue;
        };
        for line in BufReader::new(file).lines() {
            let Some(row) = parse_row(&line?) else {
                continue;
            };
            let ip = row.local.ip().to_canonical();
            if row.listening
                && row.local.port() == port
                && (ip.is_loopback() || ip.is_unspecified())
                && row.inode != 0
            {
                return Ok(Some(row.inode));
            }
        }
    }
    Ok(None)
}

/// Loopback, including an IPv4-mapped IPv6 loopback address.
fn is_loopback(ip: IpAddr) -> bool {
    ip.to_canonical().is_loopback()
}

/// The pid and name of the process that owns the client end of the connection from `peer` to
/// `local`, under the `proc` file system mounted at `proc`; `None` when no row or no process
/// is found.
///
/// # Errors
///
/// When a table cannot be read. Processes whose descriptors cannot be read are skipped.
fn owner(proc: &Path, peer: SocketAddr, local: SocketAddr) -> io::Result<Option<(u32, Arc<str>)>> {
    let Some(inode) = inode_of(proc, peer, local)? else {
        return Ok(None);
    };
    let Some(pid) = holder(proc, inode)? else {
        return Ok(None);
    };
    let comm = fs::read(proc.join(pid.to_string()).join("comm"))?;
    let name = String::from_utf8_lossy(&comm);
    Ok(Some((pid, name.trim_end_matches('\n').into())))
}

/// The inode of the client's socket: asked of the kernel's socket diagnostics when `proc` is
/// the system's own (one request, where `net/tcp` lists every socket, closing ones included),
/// else, or when the kernel cannot be asked, read from the tables under `proc`.
fn inode_of(proc: &Path, peer: SocketAddr, local: SocketAddr) -> io::Result<Option<u64>> {
    #[cfg(target_os = "linux")]
    if proc == Path::new("/proc") {
        match super::sock_diag::inode(peer, local) {
            Ok(found) => return Ok(found),
            Err(err) => {
                tracing::debug!(error = %err, "no socket diagnostics: reading /proc/net/tcp");
            }
        }
    }
    socket_inode(proc, peer, local)
}

/// The inode of the socket whose local address is `peer` and remote address `local`: an IPv4
/// socket is in `net/tcp`; an IPv6 one, IPv4-mapped addresses included, in `net/tcp6`.
fn socket_inode(proc: &Path, peer: SocketAddr, local: SocketAddr) -> io::Result<Option<u64>> {
    let wanted = (canonical(peer), canonical(local));
    let mut unreadable = None;
    let mut read = false;
    for table in ["net/tcp", "net/tcp6"] {
        let file = match fs::File::open(proc.join(table)) {
            Ok(file) => file,
            // A kernel without IPv6, say: the other table may still have it.
            Err(err) => {
                unreadable = Some(err);
                continue;
            }
        };
        read = true;
        for line in BufReader::new(file).lines() {
            let Some(row) = parse_row(&line?) else {
                continue;
            };
            // An orphaned socket (closed, in TIME_WAIT or FIN_WAIT) has inode 0, and no owner.
            if row.inode != 0 && (canonical(row.local), canonical(row.remote)) == wanted {
                return Ok(Some(row.inode));
            }
        }
    }
    match unreadable {
        Some(err) if !read => Err(err),
        _ => Ok(None),
    }
}

/// `addr` with an IPv4-mapped IPv6 address as the IPv4 one.
fn canonical(addr: SocketAddr) -> SocketAddr {
    SocketAddr::new(addr.ip().to_canonical(), addr.port())
}

/// The highest pid of a process that holds `socket:[inode]` among its file descriptors.
///
/// Newest first: a client is usually younger than the system's long-running processes, so it
/// is found after fewer directories are read; and of a parent and a child that both hold a
/// connection it opened before forking, the child is taken, every time.
///
/// A process that held a client's socket lately is asked first: a client opens connection
/// after connection, and reading its own descriptors costs a fraction of reading every
/// process's. When it holds this one, only processes newer than it can outrank it, so only
/// those are read; the answer is the one the whole scan would give.
fn holder(proc: &Path, inode: u64) -> io::Result<Option<u32>> {
    let target = format!("socket:[{inode}]");
    let mut pids: Vec<u32> = fs::read_dir(proc)?
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    pids.sort_unstable_by(|a, b| b.cmp(a));
    let known = recent().clone();
    let found = match known.into_iter().find(|&pid| holds(proc, pid, &target)) {
        Some(known) => pids
            .iter()
            .copied()
            .take_while(|&pid| pid > known)
            .find(|&pid| holds(proc, pid, &target))
            .or(Some(known)),
        None => pids.into_iter().find(|&pid| holds(proc, pid, &target)),
    };
    if let Some(pid) = found {
        let mut recent = recent();
        recent.retain(|&known| known != pid);
        recent.insert(0, pid);
        recent.truncate(RECENT);
    }
    Ok(found)
}

/// How many recent holders [`holder`] asks first.
const RECENT: usize = 8;

/// The processes that held a client's socket lately, the latest first.
fn recent() -> std::sync::MutexGuard<'static, Vec<u32>> {
    static RECENT_HOLDERS: std::sync::Mutex<Vec<u32>> = std::sync::Mutex::new(Vec::new());
    RECENT_HOLDERS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Whether process `pid` holds `target` (`socket:[INODE]`) among its file descriptors. Another
/// user's process, or one that just exited, holds nothing here.
fn holds(proc: &Path, pid: u32, target: &str) -> bool {
    let Ok(fds) = fs::read_dir(proc.join(pid.to_string()).join("fd")) else {
        return false;
    };
    fds.flatten()
        .any(|fd| fs::read_link(fd.path()).is_ok_and(|link| link.as_os_str() == target))
}

/// What a row of `/proc/net/tcp` or `tcp6` says about one socket.
#[derive(Debug, PartialEq, Eq)]
struct Row {
    local: SocketAddr,
    remote: SocketAddr,
    /// Whether the socket listens (`st` 0A).
    listening: bool,
    inode: u64,
}

/// One row: `sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid
/// timeout inode …`; `None` for the heading or anything else that does not read as a row.
fn parse_row(line: &str) -> Option<Row> {
    let mut fields = line.split_ascii_whitespace();
    let _slot = fields.next().filter(|slot| slot.ends_with(':'))?;
    let local = parse_address(fields.next()?)?;
    let remote = parse_address(fields.next()?)?;
    let listening = fields.next()? == "0A";
    // tx_queue:rx_queue, tr:tm->when, retrnsmt, uid, timeout.
    let inode = fields.nth(5)?.parse().ok()?;
    Some(Row {
        local,
        remote,
        listening,
        inode,
    })
}

/// `0100007F:1F90` (IPv4) or 32 hex digits and a port (IPv6). The kernel prints the address
/// as 32-bit words in the machine's byte order, each `%08X`, and the port in host order.
fn parse_address(text: &str) -> Option<SocketAddr> {
    let (ip, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let ip = match ip.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(ip)?)),
        32 => {
            let mut octets = [0u8; 16];
            for (index, chunk) in octets.chunks_exact_mut(4).enumerate() {
                chunk.copy_from_slice(&word(ip.get(index * 8..index * 8 + 8)?)?);
            }
            IpAddr::V6(Ipv6Addr::from(octets))
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// Eight hex digits as the four bytes they were in memory.
fn word(hex: &str) -> Option<[u8; 4]> {
    if hex.len() != 8 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(hex, 16).ok().map(u32::to_ne_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    mod parse_row {
        use super::*;

        // The kernel's own lines, on a little-endian machine.
        #[cfg(target_endian = "little")]
        #[test]
        fn reads_an_ipv4_row() {
            let line = "   3: 0100007F:9C4E 0100007F:1F40 01 00000000:00000000 00:00000000 \
                        00000000  1000        0 4242424 1 0000000000000000 20 4 30 10 -1";
            assert_eq!(
                parse_row(line),
                Some(Row {
                    local: "127.0.0.1:40014".parse().unwrap(),
                    remote: "127.0.0.1:8000".parse().unwrap(),
                    listening: false,
                    inode: 4_242_424,
                })
            );
            // A listening socket: state 0A, no remote.
            let listening = "   0: 0100007F:1F40 00000000:0000 0A 00000000:00000000 00:00000000 \
                             00000000  1000        0 99 1 0000000000000000 100 0 0 10 0";
            let row = parse_row(listening).expect("a row");
            assert!(row.listening);
            assert_eq!(row.local, "127.0.0.1:8000".parse().unwrap());
            assert_eq!(row.inode, 99);
        }

        #[cfg(target_endian = "little")]
        #[test]
        fn reads_an_ipv6_row_loopback_and_mapped() {
            let line = "   0: 00000000000000000000000001000000:D431 \
                        0000000000000000FFFF00000100007F:1F40 01 00000000:00000000 \
                        00:00000000 00000000  1000        0 77 1 0000000000000000 20 4 0 10 -1";
            assert_eq!(
                parse_row(line),
                Some(Row {
                    local: "[::1]:54321".parse().unwrap(),
                    remote: "[::ffff:127.0.0.1]:8000".parse().unwrap(),
                    listening: false,
                    inode: 77,
                })
            );
        }

        #[test]
        fn skips_the_heading_and_broken_lines() {
            let heading = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when \
                           retrnsmt   uid  timeout inode";
            assert_eq!(parse_row(heading), None);
            assert_eq!(parse_row(""), None);
            assert_eq!(parse_row("   0: 0100007F:1F40"), None);
            assert_eq!(parse_row("   0: 0100007G:1F40 0100007F:1F40 01"), None);
            assert_eq!(
                parse_row("   0: 0100007F:1F40 0100007F:1F40 01 0:0 0:0 0 0 0 notanumber"),
                None
            );
        }
    }

    mod parse_address {
        use super::*;

        #[test]
        fn reads_back_what_the_kernel_writes_for_any_address() {
            // Written as the kernel does: each 32-bit word of the address as it lies in
            // memory, printed as a native integer.
            fn kernel(addr: SocketAddr) -> String {
                let octets = match addr.ip() {
                    IpAddr::V4(ip) => ip.octets().to_vec(),
                    IpAddr::V6(ip) => ip.octets().to_vec(),
                };
                let words: String = octets
                    .chunks_exact(4)
                    .map(|chunk| {
                        let word = u32::from_ne_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
                        format!("{word:08X}")
                    })
                    .collect();
                format!("{words}:{:04X}", addr.port())
            }
            for text in [
                "127.0.0.1:80",
                "10.1.2.3:65535",
                "0.0.0.0:0",
                "[::1]:8000",
                "[fe80::1:2:3:4]:443",
                "[::ffff:127.0.0.1]:1",
            ] {
                let addr: SocketAddr = text.parse().unwrap();
                assert_eq!(parse_address(&kernel(addr)), Some(addr), "{text}");
            }
        }

        #[test]
        fn refuses_other_lengths_and_signs() {
            for text in ["0100007F", "100007F:0050", "+100007F:0050", "0100007F:", ""] {
                assert_eq!(parse_address(text), None, "{text}");
            }
        }
    }

    mod owner {
        use super::*;
        use std::net::{TcpListener, TcpStream};

        /// A connection from this process to itself: the client end, as the proxy sees it
        /// (its peer address and its own address).
        fn connection(ip: IpAddr) -> Option<(TcpStream, TcpStream, SocketAddr, SocketAddr)> {
            let listener = TcpListener::bind((ip, 0)).ok()?;
            let client = TcpStream::connect(listener.local_addr().ok()?).ok()?;
            let (server, peer) = listener.accept().ok()?;
            let local = server.local_addr().ok()?;
            Some((client, server, peer, local))
        }

        #[cfg(target_os = "linux")]
        #[test]
        fn finds_this_test_process_at_the_other_end() {
            let (_client, _server, peer, local) =
                connection(Ipv4Addr::LOCALHOST.into()).expect("a loopback connection");
            let found = owner(Path::new("/proc"), peer, local).unwrap();
            let comm = fs::read_to_string("/proc/self/comm").unwrap();
            assert_eq!(
                found,
                Some((std::process::id(), comm.trim_end().into())),
                "peer {peer}, local {local}"
            );
        }

        #[cfg(target_os = "linux")]
        #[test]
        fn finds_it_over_ipv6_too() {
            // Not every test machine has IPv6 loopback.
            let Some((_client, _server, peer, local)) = connection(Ipv6Addr::LOCALHOST.into())
            else {
                return;
            };
            let found = owner(Path::new("/proc"), peer, local).unwrap();
            assert_eq!(found.map(|(pid, _)| pid), Some(std::process::id()));
        }

        #[cfg(target_os = "linux")]
        #[test]
        fn the_kernel_names_the_inode_the_table_lists() {
            let (_client, _server, peer, local) =
                connection(Ipv4Addr::LOCALHOST.into()).expect("a loopback connection");
            let listed = socket_inode(Path::new("/proc"), peer, local).unwrap();
            assert!(listed.is_some(), "net/tcp lists the client's socket");
            // A sandbox without netlink: `inode_of` reads the table instead.
            if let Ok(asked) = super::super::super::sock_diag::inode(peer, local) {
                assert_eq!(asked, listed, "peer {peer}, local {local}");
            }
            assert_eq!(inode_of(Path::new("/proc"), peer, local).unwrap(), listed);
        }

        /// A `proc` with these processes, each holding these socket inodes.
        #[cfg(unix)]
        fn fake_proc(processes: &[(u32, &[u64])]) -> tempfile::TempDir {
            let proc = tempfile::tempdir().unwrap();
            for (pid, inodes) in processes {
                let fd = proc.path().join(pid.to_string()).join("fd");
                fs::create_dir_all(&fd).unwrap();
                for (n, inode) in inodes.iter().enumerate() {
                    std::os::unix::fs::symlink(format!("socket:[{inode}]"), fd.join(n.to_string()))
                        .unwrap();
                }
            }
            proc
        }

        #[cfg(unix)]
        #[test]
        fn a_recent_holder_asked_first_gives_the_answer_the_whole_scan_gives() {
            // 100 is a client; 300 its child, forked holding 100's connection 7; 200 holds
            // nothing of theirs. Inodes far from any other test's.
            let proc = fake_proc(&[
                (100, &[9_000_005, 9_000_007]),
                (200, &[1]),
                (300, &[9_000_007]),
            ]);
            // 100 found, and remembered.
            assert_eq!(holder(proc.path(), 9_000_005).unwrap(), Some(100));
            // Asked first, 100 holds 7; the child outranks it, as in a whole scan.
            assert_eq!(holder(proc.path(), 9_000_007).unwrap(), Some(300));
            assert_eq!(holder(proc.path(), 9_000_005).unwrap(), Some(100));
            // Nobody holds it: the whole scan says so.
            assert_eq!(holder(proc.path(), 9_000_009).unwrap(), None);
        }

        #[cfg(target_os = "linux")]
        #[test]
        fn finds_nothing_for_a_connection_that_is_gone() {
            let (client, server, peer, local) =
                connection(Ipv4Addr::LOCALHOST.into()).expect("a loopback connection");
            drop((client, server));
            assert_eq!(owner(Path::new("/proc"), peer, local).unwrap(), None);
        }
    }

    mod identity {
        use super::*;

        #[tokio::test]
        async fn is_the_peer_when_told_so_or_the_peer_is_not_loopback() {
            let local = "127.0.0.1:8000".parse().unwrap();
            let peer: SocketAddr = "127.0.0.1:40000".parse().unwrap();
            assert_eq!(
                identity(ClientIdMode::Peer, peer, Ok(local)).await,
                ClientId::Peer(peer.ip())
            );
            let remote: SocketAddr = "192.0.2.7:40000".parse().unwrap();
            assert_eq!(
                identity(ClientIdMode::Auto, remote, Ok(local)).await,
                ClientId::Peer(remote.ip())
            );
        }

        #[cfg(target_os = "linux")]
        #[tokio::test]
        async fn is_the_process_when_it_can_be_found() {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let _client = tokio::net::TcpStream::connect(listener.local_addr().unwrap())
                .await
                .unwrap();
            let (server, peer) = listener.accept().await.unwrap();
            let found = identity(ClientIdMode::Auto, peer, server.local_addr()).await;
            assert!(
                matches!(&found, ClientId::Process { pid, .. } if *pid == std::process::id()),
                "{found:?}"
            );
        }
    }
}
