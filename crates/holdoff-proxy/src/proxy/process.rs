//! Which process is at the other end of a loopback connection, found under `/proc` (Linux).
//!
//! Under `holdoff run` every client on the machine connects from `127.0.0.1`, so the peer
//! address cannot tell two test processes apart. The kernel can: the client's end of the
//! connection is a socket whose inode the kernel's socket diagnostics name (or a row of
//! `/proc/net/tcp`), and the process holding `socket:[INODE]` among its `/proc/PID/fd` is the
//! client. Anything that goes wrong (another OS, a peer that is not loopback, a socket owned by
//! a process in another PID namespace or of another user) leaves the peer address as the
//! identity.
//!
//! Reading a process's descriptors costs a system call each, and a client that opens a
//! connection per request would pay it for every request. So one thread does every lookup,
//! off the async threads and the accept loop, taking those that queued while it worked in one
//! go; and it keeps what it read: every socket in the descriptor tables it has read, with its
//! holder. Most connections are then one map lookup, the first of a batch reads its client's
//! table once for the rest. What it keeps holds while no process is created (`loadavg`'s last
//! pid stays the same): a fork makes a new holder of its parent's sockets, and outranks it.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::io::{self, BufRead, BufReader};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, OnceLock, PoisonError, mpsc};

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
    if !tells_processes_apart(mode, peer.ip()) {
        return by_peer;
    }
    let found = match local {
        Ok(local) => ask(peer, local).await,
        Err(err) => Err(err),
    };
    match found {
        Ok(Some((pid, name))) => return ClientId::Process { pid, name },
        Ok(None) => tracing::debug!(client = %peer, "no process owns the client's socket"),
        Err(err) => tracing::debug!(client = %peer, error = %err, "cannot find the client process"),
    }
    by_peer
}

/// The process at the other end of a connection, by pid and name, when one is found.
type Owner = Option<(u32, Arc<str>)>;

/// Whether a connection from `ip` is told apart by the process at its other end (under
/// `mode`, on this OS): then the per-peer limit counts processes too.
pub(crate) fn tells_processes_apart(mode: ClientIdMode, ip: IpAddr) -> bool {
    mode != ClientIdMode::Peer && cfg!(target_os = "linux") && is_loopback(ip)
}

/// A lookup for the finder's thread, and where its answer goes.
struct Job {
    peer: SocketAddr,
    local: SocketAddr,
    answer: tokio::sync::oneshot::Sender<io::Result<Owner>>,
}

/// The owner of the client end of `peer` → `local`, looked up on the finder's thread.
async fn ask(peer: SocketAddr, local: SocketAddr) -> io::Result<Owner> {
    let (answer, answered) = tokio::sync::oneshot::channel();
    let job = Job {
        peer,
        local,
        answer,
    };
    let Some(jobs) = jobs() else {
        return Err(io::Error::other("the client lookup thread could not start"));
    };
    if jobs.send(job).is_err() {
        return Err(io::Error::other("the client lookup thread has stopped"));
    }
    answered
        .await
        .unwrap_or_else(|_| Err(io::Error::other("the client lookup thread has stopped")))
}

/// The queue of the one thread that looks clients up, started on first use; `None` when the
/// thread cannot start.
fn jobs() -> Option<&'static mpsc::Sender<Job>> {
    static JOBS: OnceLock<Option<mpsc::Sender<Job>>> = OnceLock::new();
    JOBS.get_or_init(|| {
        let (jobs, queued) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("holdoff-client-id".into())
            .spawn(move || {
                while let Ok(first) = queued.recv() {
                    let batch: Vec<Job> = std::iter::once(first).chain(queued.try_iter()).collect();
                    let mut finder = finder();
                    for job in batch {
                        let found = finder.owner(Path::new("/proc"), job.peer, job.local);
                        // The connection may be gone, and its answer with it.
                        let _ = job.answer.send(found);
                    }
                }
            })
            .ok()?;
        Some(jobs)
    })
    .as_ref()
}

/// What the lookups have learnt of the system's `/proc`.
fn finder() -> MutexGuard<'static, Finder> {
    static FINDER: LazyLock<Mutex<Finder>> = LazyLock::new(Mutex::default);
    FINDER.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The pid of the process at the other end of the loopback connection from `peer` to
/// `local` (Linux), for [`filter`](super::filter); `None` when it cannot be told.
pub(crate) fn pid_of(peer: SocketAddr, local: SocketAddr) -> Option<u32> {
    if !cfg!(target_os = "linux") || !is_loopback(peer.ip()) {
        return None;
    }
    finder()
        .owner(Path::new("/proc"), peer, local)
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
    let pid = finder().holder(proc, inode).ok().flatten()?;
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

/// How many recent holders [`Finder::holder`] reads first.
const RECENT: usize = 8;

/// How many sockets a [`Finder`] keeps before it forgets them all and reads afresh.
const KEPT_SOCKETS: usize = 1 << 16;

/// The descriptor tables read under one `proc`, kept while no process is created there.
///
/// Which process holds a socket is the highest pid among its holders, as a scan of every
/// process, newest first, would find: a client is usually younger than the system's
/// long-running processes, and of a parent and a child that both hold a connection it opened
/// before forking, the child is taken, every time.
#[derive(Debug, Default)]
struct Finder {
    /// `loadavg`'s last pid when `pids` was listed: while it reads the same, no process has
    /// been created since. `None` when it cannot be read, and then nothing is kept.
    generation: Option<u32>,
    /// The processes, highest pid first, as listed in this generation.
    pids: Vec<u32>,
    /// Every socket seen in the tables read in this generation, with its highest holder.
    sockets: HashMap<u64, u32>,
    /// The processes whose table was read in this generation.
    read: HashSet<u32>,
    /// The processes that held a client's socket lately, the latest first.
    recent: Vec<u32>,
}

impl Finder {
    /// The pid and name of the process that owns the client end of the connection from
    /// `peer` to `local`, under the `proc` file system mounted at `proc`; `None` when no
    /// socket or no process is found.
    ///
    /// # Errors
    ///
    /// When the socket's table or the process list cannot be read. Processes whose
    /// descriptors cannot be read are skipped.
    fn owner(&mut self, proc: &Path, peer: SocketAddr, local: SocketAddr) -> io::Result<Owner> {
        let Some(inode) = inode_of(proc, peer, local)? else {
            return Ok(None);
        };
        let Some(pid) = self.holder(proc, inode)? else {
            return Ok(None);
        };
        let comm = fs::read(proc.join(pid.to_string()).join("comm"))?;
        let name = String::from_utf8_lossy(&comm);
        Ok(Some((pid, name.trim_end_matches('\n').into())))
    }

    /// The highest pid of a process that holds `socket:[inode]` among its file descriptors.
    fn holder(&mut self, proc: &Path, inode: u64) -> io::Result<Option<u32>> {
        self.refresh(proc)?;
        let found = match self.sockets.get(&inode) {
            Some(&pid) => Some(pid),
            None => self.search(proc, inode),
        };
        if let Some(pid) = found {
            self.recent.retain(|&known| known != pid);
            self.recent.insert(0, pid);
            self.recent.truncate(RECENT);
        }
        Ok(found)
    }

    /// Forgets what was read when a process has been created since (or it cannot be told),
    /// and lists the processes again.
    fn refresh(&mut self, proc: &Path) -> io::Result<()> {
        let generation = last_pid(proc);
        if generation.is_some()
            && generation == self.generation
            && self.sockets.len() < KEPT_SOCKETS
        {
            return Ok(());
        }
        let mut pids: Vec<u32> = fs::read_dir(proc)?
            .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
            .collect();
        pids.sort_unstable_by(|a, b| b.cmp(a));
        self.pids = pids;
        self.sockets.clear();
        self.read.clear();
        self.generation = generation;
        Ok(())
    }

    /// Finds a socket opened since the tables were read: in a recent holder's table first,
    /// where a client's next connection usually is; then only processes newer than that
    /// holder can outrank it, and only those not read yet are read. Failing that, every
    /// process, newest first, until one holds it.
    fn search(&mut self, proc: &Path, inode: u64) -> Option<u32> {
        for pid in self.recent.clone() {
            self.read_table(proc, pid);
            if self.sockets.contains_key(&inode) {
                break;
            }
        }
        if let Some(&known) = self.sockets.get(&inode) {
            let newer: Vec<u32> = (self.pids.iter().copied())
                .take_while(|&pid| pid > known)
                .filter(|pid| !self.read.contains(pid))
                .collect();
            for pid in newer {
                self.read_table(proc, pid);
            }
            return self.sockets.get(&inode).copied();
        }
        for pid in self.pids.clone() {
            if self.recent.contains(&pid) {
                continue;
            }
            self.read_table(proc, pid);
            if let Some(&holder) = self.sockets.get(&inode) {
                return Some(holder);
            }
        }
        None
    }

    /// Reads process `pid`'s descriptors and keeps every socket among them. Another user's
    /// process, or one that just exited, holds nothing here.
    fn read_table(&mut self, proc: &Path, pid: u32) {
        self.read.insert(pid);
        let Ok(fds) = fs::read_dir(proc.join(pid.to_string()).join("fd")) else {
            return;
        };
        for fd in fds.flatten() {
            let Ok(link) = fs::read_link(fd.path()) else {
                continue;
            };
            let Some(inode) = link
                .to_str()
                .and_then(|link| link.strip_prefix("socket:["))
                .and_then(|rest| rest.strip_suffix(']'))
                .and_then(|inode| inode.parse().ok())
            else {
                continue;
            };
            let holder = self.sockets.entry(inode).or_insert(pid);
            *holder = (*holder).max(pid);
        }
    }
}

/// The last pid the kernel gave out in `proc`'s namespace: the last field of `loadavg`.
fn last_pid(proc: &Path) -> Option<u32> {
    let text = fs::read_to_string(proc.join("loadavg")).ok()?;
    text.split_ascii_whitespace().last()?.parse().ok()
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
            let found = Finder::default()
                .owner(Path::new("/proc"), peer, local)
                .unwrap();
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
            let found = Finder::default()
                .owner(Path::new("/proc"), peer, local)
                .unwrap();
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

        /// A `proc` with these processes, each holding these socket inodes, and no `loadavg`.
        #[cfg(unix)]
        fn fake_proc(processes: &[(u32, &[u64])]) -> tempfile::TempDir {
            let proc = tempfile::tempdir().unwrap();
            for (pid, inodes) in processes {
                give(proc.path(), *pid, inodes);
            }
            proc
        }

        /// Process `pid` under `proc` opens these sockets (as descriptors after its others).
        #[cfg(unix)]
        fn give(proc: &Path, pid: u32, inodes: &[u64]) {
            let fd = proc.join(pid.to_string()).join("fd");
            fs::create_dir_all(&fd).unwrap();
            let held = fs::read_dir(&fd).unwrap().count();
            for (n, inode) in inodes.iter().enumerate() {
                let link = fd.join((held + n).to_string());
                std::os::unix::fs::symlink(format!("socket:[{inode}]"), link).unwrap();
            }
        }

        /// `proc`'s `loadavg`, whose last field is the last pid given out.
        fn last_pid_is(proc: &Path, pid: u32) {
            fs::write(proc.join("loadavg"), format!("0.10 0.20 0.30 1/99 {pid}\n")).unwrap();
        }

        #[cfg(unix)]
        #[test]
        fn a_recent_holder_asked_first_gives_the_answer_the_whole_scan_gives() {
            // 100 is a client; 300 its child, forked holding 100's connection 7; 200 holds
            // nothing of theirs.
            let proc = fake_proc(&[(100, &[5, 7]), (200, &[1]), (300, &[7])]);
            let mut finder = Finder::default();
            // 100 found, and remembered.
            assert_eq!(finder.holder(proc.path(), 5).unwrap(), Some(100));
            // Asked first, 100 holds 7; the child outranks it, as in a whole scan.
            assert_eq!(finder.holder(proc.path(), 7).unwrap(), Some(300));
            assert_eq!(finder.holder(proc.path(), 5).unwrap(), Some(100));
            // Nobody holds it: the whole scan says so.
            assert_eq!(finder.holder(proc.path(), 9).unwrap(), None);
        }

        #[cfg(unix)]
        #[test]
        fn while_no_process_is_created_a_new_socket_is_found_in_its_holders_table() {
            let proc = fake_proc(&[(100, &[5]), (200, &[1])]);
            last_pid_is(proc.path(), 200);
            let mut finder = Finder::default();
            assert_eq!(finder.holder(proc.path(), 5).unwrap(), Some(100));
            // 100 connects again, twice; the first lookup reads its table for both.
            give(proc.path(), 100, &[6, 8]);
            assert_eq!(finder.holder(proc.path(), 6).unwrap(), Some(100));
            let read_before = finder.read.len();
            assert_eq!(finder.holder(proc.path(), 8).unwrap(), Some(100));
            assert_eq!(finder.read.len(), read_before, "kept, not read again");
            // 200 connects: not a recent holder, so found by the whole scan.
            give(proc.path(), 200, &[9]);
            assert_eq!(finder.holder(proc.path(), 9).unwrap(), Some(200));
        }

        #[cfg(unix)]
        #[test]
        fn a_fork_is_a_new_generation_and_its_child_outranks_the_parent() {
            let proc = fake_proc(&[(100, &[5, 7]), (200, &[1])]);
            last_pid_is(proc.path(), 200);
            let mut finder = Finder::default();
            assert_eq!(finder.holder(proc.path(), 7).unwrap(), Some(100));
            // 100 forks 300, which inherits connection 7: the kernel gave out pid 300.
            give(proc.path(), 300, &[7]);
            last_pid_is(proc.path(), 300);
            assert_eq!(finder.holder(proc.path(), 7).unwrap(), Some(300));
            assert_eq!(finder.holder(proc.path(), 5).unwrap(), Some(100));
        }

        #[cfg(target_os = "linux")]
        #[test]
        fn finds_nothing_for_a_connection_that_is_gone() {
            let (client, server, peer, local) =
                connection(Ipv4Addr::LOCALHOST.into()).expect("a loopback connection");
            drop((client, server));
            assert_eq!(
                Finder::default()
                    .owner(Path::new("/proc"), peer, local)
                    .unwrap(),
                None
            );
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
