//! HTTPS through the egress proxy (contract §14.0.6): for an allowed host the proxy ends the
//! sandbox's TLS itself, with a certificate authority made for this one attempt and trusted
//! only inside its sandbox, and opens its own TLS to the real server, verified against the
//! host's roots (`SSL_CERT_FILE`/`SSL_CERT_DIR` when set, else the system's). In between it
//! sees the request head, so a key's placeholder is swapped for the key on the way out, as
//! for plain HTTP — the key never enters the sandbox. One request per connection: the head
//! goes out with `Connection: close`, the body as its length or chunks say, and the answer
//! comes back until the server closes.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::sync::Arc;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};

/// A request body forwarded through a terminated connection is this large at most.
pub const BODY_BYTES_MAX: u64 = 64 << 20;

/// The attempt's certificate authority and the proxy's own client configuration.
pub struct Tls {
    ca: rcgen::Certificate,
    ca_key: rcgen::KeyPair,
    upstream: Arc<rustls::ClientConfig>,
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl Tls {
    /// A fresh authority (its key never leaves this process) and the roots the real servers
    /// are verified against.
    pub fn new() -> Result<Tls, String> {
        let fail = |e: rcgen::Error| format!("make the attempt's certificate authority: {e}");
        let ca_key = rcgen::KeyPair::generate().map_err(fail)?;
        let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).map_err(fail)?;
        p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Constrained(0));
        p.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::CrlSign,
        ];
        p.distinguished_name = rcgen::DistinguishedName::new();
        p.distinguished_name.push(
            rcgen::DnType::CommonName,
            "vouch egress proxy (one attempt)",
        );
        let ca = p.self_signed(&ca_key).map_err(fail)?;
        let mut roots = rustls::RootCertStore::empty();
        let found = rustls_native_certs::load_native_certs();
        let (added, _) = roots.add_parsable_certificates(found.certs);
        if added == 0 {
            return Err(format!(
                "no trusted roots to verify servers with ({})",
                found
                    .errors
                    .first()
                    .map_or("none found".to_string(), |e| e.to_string())
            ));
        }
        let mut upstream = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS to servers: {e}"))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        upstream.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Tls {
            ca,
            ca_key,
            upstream: Arc::new(upstream),
        })
    }

    /// The authority's certificate, PEM, for the sandbox's trust store.
    pub fn ca_pem(&self) -> String {
        self.ca.pem()
    }

    /// The sandbox's side: a certificate for `host` signed by the attempt's authority.
    fn server_config(&self, host: &str) -> Result<Arc<rustls::ServerConfig>, String> {
        let fail = |e: rcgen::Error| format!("a certificate for {host}: {e}");
        let key = rcgen::KeyPair::generate().map_err(fail)?;
        let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).map_err(fail)?;
        p.subject_alt_names = vec![match host.parse::<std::net::IpAddr>() {
            Ok(ip) => rcgen::SanType::IpAddress(ip),
            Err(_) => rcgen::SanType::DnsName(host.try_into().map_err(fail)?),
        }];
        let leaf = p.signed_by(&key, &self.ca, &self.ca_key).map_err(fail)?;
        let chain = vec![
            leaf.der().clone(),
            CertificateDer::from(self.ca.der().to_vec()),
        ];
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS to the sandbox: {e}"))?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map(Arc::new)
            .map_err(|e| format!("TLS to the sandbox: {e}"))
    }
}

/// The sandbox's end of a CONNECT: what the proxy already buffered, then the socket.
struct Client {
    r: BufReader<UnixStream>,
    w: UnixStream,
}

impl Read for Client {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.r.read(buf)
    }
}

impl Write for Client {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.w.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.w.flush()
    }
}

type Inner = rustls::StreamOwned<rustls::ServerConnection, Client>;
type Outer = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// What one terminated request needs from the proxy: its TLS, and how to swap keys in a head.
pub struct Terminate<'a> {
    pub tls: &'a Tls,
    pub host: &'a str,
    pub port: u16,
    /// The request head as it goes out (keys swapped, `Connection: close`), from the head
    /// read inside TLS; `Err` refuses it with the reason.
    pub rewrite: &'a dyn Fn(&str) -> Result<String, String>,
    /// Note a refusal (the attempt's evidence).
    pub note: &'a dyn Fn(&str),
}

/// Serve one CONNECT whose client speaks TLS: the sandbox's handshake with the attempt's
/// authority, one request read, rewritten and sent over the proxy's own verified TLS, the
/// answer copied back until the server closes.
pub fn terminate(
    t: &Terminate<'_>,
    r: BufReader<UnixStream>,
    w: UnixStream,
) -> std::io::Result<()> {
    let config = match t.tls.server_config(t.host) {
        Ok(c) => c,
        Err(e) => {
            (t.note)(&e);
            return Ok(());
        }
    };
    let conn = rustls::ServerConnection::new(config).map_err(std::io::Error::other)?;
    let mut inner = BufReader::new(rustls::StreamOwned::new(conn, Client { r, w }));
    let head = match crate::egress::read_head(&mut inner) {
        Ok(h) => h,
        Err(e) => return answer(inner.get_mut(), 400, &e),
    };
    let out = match (t.rewrite)(&head) {
        Ok(h) => h,
        Err(e) => {
            (t.note)(&e);
            return answer(inner.get_mut(), 403, &e);
        }
    };
    let mut up = match connect(t) {
        Ok(up) => up,
        Err(e) => {
            (t.note)(&e);
            return answer(inner.get_mut(), 502, &e);
        }
    };
    if expects_continue(&head) {
        inner
            .get_mut()
            .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
    }
    up.write_all(out.as_bytes())?;
    if let Err(e) = copy_body(&head, &mut inner, &mut up) {
        (t.note)(&e);
        return answer(inner.get_mut(), 400, &e);
    }
    up.flush()?;
    let inner = inner.get_mut();
    let _ = std::io::copy(&mut up, inner);
    inner.conn.send_close_notify();
    inner.flush()
}

/// The proxy's own TLS to the real server, verified against the host's roots.
fn connect(t: &Terminate<'_>) -> Result<Outer, String> {
    let name = ServerName::try_from(t.host.to_string())
        .map_err(|e| format!("`{}` is not a server name: {e}", t.host))?;
    let tcp = crate::egress::open(t.host, t.port)
        .map_err(|e| format!("{}:{} cannot be reached: {e}", t.host, t.port))?;
    let _ = tcp.set_read_timeout(Some(std::time::Duration::from_secs(
        crate::egress::IDLE_TIMEOUT_S,
    )));
    let conn = rustls::ClientConnection::new(t.tls.upstream.clone(), name)
        .map_err(|e| format!("TLS to {}: {e}", t.host))?;
    let mut s = rustls::StreamOwned::new(conn, tcp);
    // The handshake now, so an unverifiable server is refused before anything is sent.
    while s.conn.is_handshaking() {
        s.conn
            .complete_io(&mut s.sock)
            .map_err(|e| format!("{}:{} is not who it says (TLS: {e})", t.host, t.port))?;
    }
    Ok(s)
}

fn answer(c: &mut Inner, code: u16, why: &str) -> std::io::Result<()> {
    let body = format!("vouch egress: {why}\n");
    write!(
        c,
        "HTTP/1.1 {code} Refused\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    c.conn.send_close_notify();
    c.flush()
}

fn header<'h>(head: &'h str, name: &str) -> Option<&'h str> {
    head.lines().skip(1).find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

fn expects_continue(head: &str) -> bool {
    header(head, "expect").is_some_and(|v| v.eq_ignore_ascii_case("100-continue"))
}

/// The request's body, as its head says: `Content-Length` bytes, or chunks up to the last
/// (trailers included), at most [`BODY_BYTES_MAX`].
fn copy_body(head: &str, from: &mut impl BufRead, to: &mut impl Write) -> Result<(), String> {
    let io = |e: std::io::Error| format!("the request body: {e}");
    if header(head, "transfer-encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked"))
    {
        return copy_chunks(from, to);
    }
    let Some(n) = header(head, "content-length") else {
        return Ok(());
    };
    let n: u64 = n
        .parse()
        .map_err(|_| format!("`Content-Length: {n}` is not a length"))?;
    if n > BODY_BYTES_MAX {
        return Err(format!(
            "a request body of {n} bytes; at most {BODY_BYTES_MAX}"
        ));
    }
    let copied = std::io::copy(&mut from.take(n), to).map_err(io)?;
    if copied < n {
        return Err(format!(
            "the request body ended after {copied} of {n} bytes"
        ));
    }
    Ok(())
}

fn copy_chunks(from: &mut impl BufRead, to: &mut impl Write) -> Result<(), String> {
    let io = |e: std::io::Error| format!("the request body: {e}");
    let mut total = 0u64;
    loop {
        let line = line_of(from)?;
        to.write_all(line.as_bytes()).map_err(io)?;
        let size = line.trim_end().split(';').next().unwrap_or("").trim();
        let size = u64::from_str_radix(size, 16)
            .map_err(|_| format!("`{}` is not a chunk size", size.escape_debug()))?;
        total += size;
        if total > BODY_BYTES_MAX {
            return Err(format!("a request body over {BODY_BYTES_MAX} bytes"));
        }
        if size == 0 {
            // Trailers, up to the blank line.
            loop {
                let t = line_of(from)?;
                to.write_all(t.as_bytes()).map_err(io)?;
                if t == "\r\n" || t == "\n" {
                    return Ok(());
                }
            }
        }
        let copied = std::io::copy(&mut from.take(size + 2), to).map_err(io)?;
        if copied < size + 2 {
            return Err("the request body ended inside a chunk".into());
        }
    }
}

fn line_of(from: &mut impl BufRead) -> Result<String, String> {
    let mut line = String::new();
    from.take(1024)
        .read_line(&mut line)
        .map_err(|e| format!("the request body: {e}"))?;
    if !line.ends_with('\n') {
        return Err("a chunk line longer than 1024 bytes, or the body ended".into());
    }
    Ok(line)
}
