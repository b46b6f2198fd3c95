//! The way out of a sandbox (contract §14.0.6): none by default; a profile may grant hosts,
//! reached only through this proxy, which the host runs for one attempt on a Unix socket and
//! which checks every connection against the allow-list. A refused host gets a clear 403 and
//! is noted. Keys stay on the host: the sandbox holds a placeholder, and the proxy puts the
//! real key in its place on the way out — in a request to the key's own host only: plain
//! HTTP as it passes, HTTPS by ending the sandbox's TLS with the attempt's own certificate
//! authority and opening a verified one to the server (`egress_tls`).
//!
//! Inside the sandbox, [`relay_main`] listens on the sandbox's own loopback and forwards each
//! connection to the proxy's socket (the sandbox has no other network), so ordinary clients
//! reach it through `HTTP_PROXY`/`HTTPS_PROXY`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A request head is this large at most.
pub const HEAD_BYTES_MAX: usize = 16 * 1024;
/// Connections the proxy serves at once; more wait for the kernel's backlog.
pub const CONNECTIONS_MAX: usize = 32;
/// Refusals kept per attempt.
pub const REFUSALS_MAX: usize = 50;
const CONNECT_TIMEOUT_S: u64 = 10;
pub(crate) const IDLE_TIMEOUT_S: u64 = 300;

/// A key the sandbox knows only by its placeholder.
#[derive(Clone, PartialEq, Eq)]
pub struct Key {
    /// What the sandbox's environment holds instead of the key.
    pub placeholder: String,
    /// The real key (never shown).
    pub secret: String,
    /// The one host (`host` or `host:port`) it is sent to.
    pub host: String,
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Key")
            .field("placeholder", &self.placeholder)
            .field("host", &self.host)
            .finish_non_exhaustive()
    }
}

/// Whether `allow` (entries `host` — any port — or `host:port`, lower-case) lets a
/// connection to `host:port` out.
pub fn allows(allow: &[String], host: &str, port: u16) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    allow.iter().any(|a| {
        let a = a.to_ascii_lowercase();
        match a.rsplit_once(':') {
            Some((h, p)) if p.parse::<u16>().is_ok() => h == host && p == port.to_string(),
            _ => a == host,
        }
    })
}

/// The proxy of one attempt; stops when dropped.
pub struct Proxy {
    pub socket: PathBuf,
    /// The attempt's certificate authority (PEM), for the sandbox's trust store; `None` when
    /// HTTPS passes through unopened (no keys swapped in it).
    pub ca: Option<PathBuf>,
    refusals: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    _dir: tempfile::TempDir,
}

struct Shared {
    allow: Vec<String>,
    keys: Vec<Key>,
    refusals: Arc<Mutex<Vec<String>>>,
    busy: Mutex<usize>,
    tls: Option<crate::egress_tls::Tls>,
}

impl Proxy {
    /// Listen on a fresh socket in a private folder, allowing `allow`, swapping `keys`.
    pub fn start(allow: Vec<String>, keys: Vec<Key>) -> Result<Proxy, String> {
        let dir = tempfile::Builder::new()
            .prefix("vouch-egress")
            .tempdir()
            .map_err(|e| format!("make the egress proxy's folder: {e}"))?;
        let socket = dir.path().join("egress.sock");
        let listener =
            UnixListener::bind(&socket).map_err(|e| format!("start the egress proxy: {e}"))?;
        let refusals = Arc::new(Mutex::new(vec![]));
        let stop = Arc::new(AtomicBool::new(false));
        let (tls, ca) = match crate::egress_tls::Tls::new() {
            Ok(tls) => {
                let ca = dir.path().join("ca.pem");
                std::fs::write(&ca, tls.ca_pem())
                    .map_err(|e| format!("write the attempt's certificate authority: {e}"))?;
                (Some(tls), Some(ca))
            }
            Err(e) => {
                let why =
                    format!("network: HTTPS passes through unopened, no key swapped in it: {e}");
                refusals.lock().unwrap_or_else(|p| p.into_inner()).push(why);
                (None, None)
            }
        };
        let shared = Arc::new(Shared {
            allow,
            keys,
            refusals: refusals.clone(),
            busy: Mutex::new(0),
            tls,
        });
        let stopping = stop.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let shared = shared.clone();
                {
                    let mut busy = shared.busy.lock().unwrap_or_else(|p| p.into_inner());
                    if *busy >= CONNECTIONS_MAX {
                        let _ = refuse(conn, 503, "too many connections at once");
                        continue;
                    }
                    *busy += 1;
                }
                std::thread::spawn(move || {
                    let _ = serve(&shared, conn);
                    *shared.busy.lock().unwrap_or_else(|p| p.into_inner()) -= 1;
                });
            }
        });
        Ok(Proxy {
            socket,
            ca,
            refusals,
            stop,
            _dir: dir,
        })
    }

    /// What was refused so far (in order).
    pub fn refusals(&self) -> Vec<String> {
        self.refusals
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the stop.
        let _ = UnixStream::connect(&self.socket);
    }
}

fn refuse(mut conn: UnixStream, code: u16, why: &str) -> std::io::Result<()> {
    let reason = if code == 403 {
        "Forbidden"
    } else {
        "Service Unavailable"
    };
    let body = format!("vouch egress: {why}\n");
    write!(
        conn,
        "HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// Read the request head (up to the blank line), bounded.
pub(crate) fn read_head(r: &mut impl BufRead) -> Result<String, String> {
    let mut head = String::new();
    loop {
        let mut line = String::new();
        let n = r
            .by_ref()
            .take((HEAD_BYTES_MAX - head.len()) as u64)
            .read_line(&mut line)
            .map_err(|e| format!("read the request: {e}"))?;
        if n == 0 || !line.ends_with('\n') {
            return Err(format!("a request head longer than {HEAD_BYTES_MAX} bytes"));
        }
        head.push_str(&line);
        if line == "\r\n" || line == "\n" {
            return Ok(head);
        }
    }
}

/// `host:port` (or `[v6]:port`) with a default port.
fn host_port(s: &str, default: u16) -> Option<(String, u16)> {
    let (h, p) = match s.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || h.starts_with('[') => match p.parse() {
            Ok(p) => (h, p),
            Err(_) => (s, default),
        },
        _ => (s, default),
    };
    let h = h.trim_start_matches('[').trim_end_matches(']');
    let ok = !h.is_empty()
        && h.len() <= 253
        && h.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-.:".contains(&b));
    ok.then(|| (h.to_ascii_lowercase(), p))
}

fn serve(shared: &Shared, conn: UnixStream) -> std::io::Result<()> {
    conn.set_read_timeout(Some(Duration::from_secs(IDLE_TIMEOUT_S)))?;
    let mut reader = BufReader::new(conn.try_clone()?);
    let head = match read_head(&mut reader) {
        Ok(h) => h,
        Err(e) => return refuse(conn, 403, &e),
    };
    let first = head.lines().next().unwrap_or("");
    let mut parts = first.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let connect = method.eq_ignore_ascii_case("CONNECT");
    let (authority, rest) = if connect {
        (target, "")
    } else if let Some(t) = target.strip_prefix("http://") {
        t.find('/').map_or((t, "/"), |i| (&t[..i], &t[i..]))
    } else {
        let why = format!("`{first}` is not a proxy request (CONNECT host:port, or a plain-HTTP request with an absolute URL)");
        note(shared, &why);
        return refuse(conn, 403, &why);
    };
    let Some((host, port)) = host_port(authority, if connect { 443 } else { 80 }) else {
        let why = format!("`{authority}` is not a host name");
        note(shared, &why);
        return refuse(conn, 403, &why);
    };
    if !allows(&shared.allow, &host, port) {
        let why = format!(
            "{host}:{port} is not on this runtime profile's network allow-list ({})",
            if shared.allow.is_empty() {
                "it allows none".to_string()
            } else {
                shared.allow.join(", ")
            }
        );
        note(shared, &why);
        return refuse(conn, 403, &why);
    }
    if connect && shared.tls.is_some() {
        return connect_opened(shared, &host, port, reader, conn);
    }
    let upstream = match open(&host, port) {
        Ok(s) => s,
        Err(e) => return refuse(conn, 503, &format!("{host}:{port} cannot be reached: {e}")),
    };
    // A silent upstream does not hold the proxy's thread past the idle limit.
    upstream.set_read_timeout(Some(Duration::from_secs(IDLE_TIMEOUT_S)))?;
    let mut up = upstream.try_clone()?;
    if connect {
        // TLS passes through untouched: the proxy sees only the host it allowed.
        (&conn).write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")?;
    } else {
        let head = swap_keys(shared, &host, port, &head, method, rest);
        up.write_all(head.as_bytes())?;
    }
    splice(reader, conn, upstream, up)
}

/// A CONNECT to an allowed host: established, then a TLS client is served by ending its TLS
/// here (`egress_tls::terminate`: keys swapped, the server verified); anything else passes.
fn connect_opened(
    shared: &Shared,
    host: &str,
    port: u16,
    mut reader: BufReader<UnixStream>,
    conn: UnixStream,
) -> std::io::Result<()> {
    (&conn).write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")?;
    // A TLS record starts with its content type: 22, a handshake.
    let hello = reader.fill_buf()?.first() == Some(&0x16);
    if let (true, Some(tls)) = (hello, &shared.tls) {
        let rewrite = |head: &str| {
            let mut first = head.lines().next().unwrap_or("").split_whitespace();
            let (method, path) = (first.next().unwrap_or(""), first.next().unwrap_or(""));
            if !path.starts_with('/') {
                return Err(format!(
                    "`{method} {path}` inside TLS to {host}:{port} is not a request for a path"
                ));
            }
            Ok(swap_keys(shared, host, port, head, method, path))
        };
        let t = crate::egress_tls::Terminate {
            tls,
            host,
            port,
            rewrite: &rewrite,
            note: &|why: &str| note(shared, why),
        };
        return crate::egress_tls::terminate(&t, reader, conn);
    }
    let upstream = match open(host, port) {
        Ok(s) => s,
        Err(e) => {
            note(shared, &format!("{host}:{port} cannot be reached: {e}"));
            return Ok(());
        }
    };
    upstream.set_read_timeout(Some(Duration::from_secs(IDLE_TIMEOUT_S)))?;
    let up = upstream.try_clone()?;
    splice(reader, conn, upstream, up)
}

/// The plain-HTTP request head as sent upstream: the request line in origin form, each
/// placeholder of a key for this host replaced by the key, and the connection closed after.
fn swap_keys(
    shared: &Shared,
    host: &str,
    port: u16,
    head: &str,
    method: &str,
    path: &str,
) -> String {
    let mut lines = head.lines();
    let version = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(2))
        .unwrap_or("HTTP/1.1");
    let mut out = format!("{method} {path} {version}\r\n");
    for l in lines.filter(|l| !l.is_empty()) {
        let lower = l.to_ascii_lowercase();
        if lower.starts_with("proxy-") || lower.starts_with("connection:") {
            continue;
        }
        let mut l = l.to_string();
        for k in shared
            .keys
            .iter()
            .filter(|k| allows(std::slice::from_ref(&k.host), host, port))
        {
            l = l.replace(&k.placeholder, &k.secret);
        }
        out.push_str(&l);
        out.push_str("\r\n");
    }
    out.push_str("Connection: close\r\n\r\n");
    out
}

pub(crate) fn open(host: &str, port: u16) -> std::io::Result<TcpStream> {
    let addrs: Vec<_> = (host, port).to_socket_addrs()?.collect();
    let mut last = std::io::Error::other("no address");
    for a in addrs {
        match TcpStream::connect_timeout(&a, Duration::from_secs(CONNECT_TIMEOUT_S)) {
            Ok(s) => return Ok(s),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Copy both ways until either side closes.
fn splice(
    mut from_client: BufReader<UnixStream>,
    mut to_client: UnixStream,
    mut from_up: TcpStream,
    mut to_up: TcpStream,
) -> std::io::Result<()> {
    let t = std::thread::spawn(move || {
        let _ = std::io::copy(&mut from_client, &mut to_up);
        let _ = to_up.shutdown(std::net::Shutdown::Write);
    });
    let _ = std::io::copy(&mut from_up, &mut to_client);
    let _ = to_client.shutdown(std::net::Shutdown::Both);
    let _ = t.join();
    Ok(())
}

fn note(shared: &Shared, why: &str) {
    let mut r = shared.refusals.lock().unwrap_or_else(|p| p.into_inner());
    if r.len() < REFUSALS_MAX {
        r.push(format!("network: {why}"));
    }
}

/// Inside the sandbox: `sandbox-relay PORT SOCKET -- PROGRAM ARGS…` listens on
/// `127.0.0.1:PORT` (the sandbox's own loopback), forwards each connection to the proxy's
/// `SOCKET`, runs the program and exits with its status.
pub fn relay_main(args: &[String]) -> i32 {
    let (port, socket, argv) = match args {
        [port, socket, dashes, program, rest @ ..] if dashes == "--" => match port.parse::<u16>() {
            Ok(p) => (p, PathBuf::from(socket), (program, rest)),
            Err(_) => return usage(),
        },
        _ => return usage(),
    };
    let listener = match TcpListener::bind(("127.0.0.1", port)) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("vouch sandbox-relay: listen on 127.0.0.1:{port}: {e}");
            return 126;
        }
    };
    std::thread::spawn(move || relay(listener, &socket));
    match std::process::Command::new(argv.0).args(argv.1).status() {
        Ok(s) => {
            use std::os::unix::process::ExitStatusExt as _;
            s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0))
        }
        Err(e) => {
            eprintln!("vouch sandbox-relay: cannot start `{}`: {e}", argv.0);
            127
        }
    }
}

fn usage() -> i32 {
    eprintln!("usage: vouch sandbox-relay PORT SOCKET -- PROGRAM ARGS…");
    2
}

fn relay(listener: TcpListener, socket: &Path) {
    for conn in listener.incoming().flatten() {
        let socket = socket.to_path_buf();
        std::thread::spawn(move || {
            let Ok(up) = UnixStream::connect(&socket) else {
                return;
            };
            let (Ok(mut a), Ok(mut b)) = (conn.try_clone(), up.try_clone()) else {
                return;
            };
            let (mut conn, mut up) = (conn, up);
            let t = std::thread::spawn(move || {
                let _ = std::io::copy(&mut a, &mut up);
                let _ = up.shutdown(std::net::Shutdown::Write);
            });
            let _ = std::io::copy(&mut b, &mut conn);
            let _ = conn.shutdown(std::net::Shutdown::Both);
            let _ = t.join();
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_allow_list_reads_hosts_and_host_ports() {
        let allow = vec!["example.com".to_string(), "127.0.0.1:8080".to_string()];
        assert!(allows(&allow, "example.com", 443));
        assert!(allows(&allow, "EXAMPLE.com.", 80));
        assert!(allows(&allow, "127.0.0.1", 8080));
        assert!(!allows(&allow, "127.0.0.1", 8081));
        assert!(!allows(&allow, "evil.example.com", 443));
        assert!(!allows(&[], "example.com", 443));
    }

    /// Send one request through the proxy's socket; its whole answer.
    fn through(p: &Proxy, request: &str) -> String {
        let mut c = UnixStream::connect(&p.socket).unwrap_or_else(|e| panic!("{e}"));
        c.write_all(request.as_bytes())
            .unwrap_or_else(|e| panic!("{e}"));
        let mut out = String::new();
        let _ = c.read_to_string(&mut out);
        out
    }

    #[test]
    fn a_host_off_the_list_is_a_403_and_a_key_goes_only_to_its_own_host() {
        let server = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
        let port = server.local_addr().map(|a| a.port()).unwrap_or(0);
        let seen = std::thread::spawn(move || {
            let (c, _) = server.accept().unwrap_or_else(|e| panic!("{e}"));
            let mut head = String::new();
            let mut r = BufReader::new(c.try_clone().unwrap_or_else(|e| panic!("{e}")));
            while r.read_line(&mut head).map(|n| n > 2).unwrap_or(false) {}
            let _ = (&c).write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
            head
        });
        let key = |host: &str, secret: &str, ph: &str| Key {
            placeholder: ph.into(),
            secret: secret.into(),
            host: host.into(),
        };
        let p = Proxy::start(
            vec![format!("127.0.0.1:{port}")],
            vec![
                key(&format!("127.0.0.1:{port}"), "real-1", "PH1"),
                key("other.example", "real-2", "PH2"),
            ],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let refused = through(&p, "CONNECT evil.example:443 HTTP/1.1\r\n\r\n");
        assert!(refused.starts_with("HTTP/1.1 403"), "{refused}");
        assert!(refused
            .contains("evil.example:443 is not on this runtime profile's network allow-list"));
        let ok = through(
            &p,
            &format!("GET http://127.0.0.1:{port}/x HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer PH1 PH2\r\n\r\n"),
        );
        assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
        let head = seen.join().unwrap_or_default();
        assert!(head.starts_with("GET /x HTTP/1.1"), "{head}");
        assert!(head.contains("Bearer real-1 PH2"), "{head}");
        assert_eq!(p.refusals().len(), 1);
    }

    #[test]
    fn host_ports_parse_with_defaults_and_refuse_junk() {
        assert_eq!(host_port("a.b:81", 80), Some(("a.b".into(), 81)));
        assert_eq!(host_port("a.b", 443), Some(("a.b".into(), 443)));
        assert_eq!(host_port("[::1]:9", 80), Some(("::1".into(), 9)));
        assert_eq!(host_port("a b", 80), None);
        assert_eq!(host_port("", 80), None);
    }
}
