//! TLS to the server with rustls, never OpenSSL. The URL says what is wanted as libpq spells
//! it: `sslmode=disable` (the default: plain, for a server on loopback), `require` (encrypted,
//! the server's certificate not checked) or `verify-full` (encrypted, the certificate chains
//! to a trusted root and names the host connected to); `sslrootcert=FILE` gives the roots
//! (PEM), otherwise the public web roots are trusted. Both parameters are taken out of the
//! URL here; the rest goes to the client as it is.

use postgres::config::SslMode as ClientSslMode;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::path::PathBuf;
use std::sync::Arc;
use tokio_postgres_rustls::MakeRustlsConnect;
use vouch_store::{StoreError, StoreResult};

/// What the URL asks of TLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    Disable,
    Require,
    VerifyFull,
}

/// The TLS settings taken out of a URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    pub mode: SslMode,
    pub root_cert: Option<PathBuf>,
}

fn bad(m: String) -> StoreError {
    StoreError::Fatal(m)
}

/// The URL without `sslmode` and `sslrootcert`, and what they said. Both URL forms
/// (`postgres://…?sslmode=require`) and key=value strings (`host=… sslmode=require`).
pub fn split_url(url: &str) -> StoreResult<(String, TlsSettings)> {
    let mut mode = None;
    let mut root_cert = None;
    let mut take = |key: &str, value: &str| -> StoreResult<bool> {
        match key {
            "sslmode" => {
                mode = Some(match value {
                    "disable" => SslMode::Disable,
                    "require" => SslMode::Require,
                    "verify-full" => SslMode::VerifyFull,
                    other => {
                        return Err(bad(format!(
                            "sslmode `{other}` in the PostgreSQL URL: use disable, require or verify-full"
                        )))
                    }
                });
                Ok(true)
            }
            "sslrootcert" => {
                root_cert = Some(PathBuf::from(value));
                Ok(true)
            }
            _ => Ok(false),
        }
    };
    let rest = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        match url.split_once('?') {
            Some((base, query)) => {
                let mut kept = vec![];
                for pair in query.split('&').filter(|p| !p.is_empty()) {
                    let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                    if !take(k, &percent_decode(v))? {
                        kept.push(pair);
                    }
                }
                if kept.is_empty() {
                    base.to_string()
                } else {
                    format!("{base}?{}", kept.join("&"))
                }
            }
            None => url.to_string(),
        }
    } else {
        let mut kept = vec![];
        for word in url.split_whitespace() {
            let (k, v) = word.split_once('=').unwrap_or((word, ""));
            if !take(k.trim(), v.trim_matches('\''))? {
                kept.push(word);
            }
        }
        kept.join(" ")
    };
    let mode = mode.unwrap_or(SslMode::Disable);
    if mode == SslMode::Disable && root_cert.is_some() {
        return Err(bad(
            "sslrootcert in the PostgreSQL URL without sslmode=verify-full (or require): the certificate would not be used".into(),
        ));
    }
    Ok((rest, TlsSettings { mode, root_cert }))
}

/// `%XX` escapes in a URL's query value (a root certificate's path may hold them).
fn percent_decode(v: &str) -> String {
    let bytes = v.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The client's own TLS setting for `mode`.
pub fn client_mode(mode: SslMode) -> ClientSslMode {
    match mode {
        SslMode::Disable => ClientSslMode::Disable,
        SslMode::Require | SslMode::VerifyFull => ClientSslMode::Require,
    }
}

/// The connector for `s`, `None` for plain connections.
pub fn connector(s: &TlsSettings) -> StoreResult<Option<MakeRustlsConnect>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| bad(format!("set up TLS: {e}")))?;
    let config = match s.mode {
        SslMode::Disable => return Ok(None),
        SslMode::Require => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Unverified(provider)))
            .with_no_client_auth(),
        SslMode::VerifyFull => builder
            .with_root_certificates(roots(s.root_cert.as_deref())?)
            .with_no_client_auth(),
    };
    Ok(Some(MakeRustlsConnect::new(config)))
}

fn roots(file: Option<&std::path::Path>) -> StoreResult<RootCertStore> {
    let mut roots = RootCertStore::empty();
    let Some(file) = file else {
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        return Ok(roots);
    };
    let certs = CertificateDer::pem_file_iter(file)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| {
            bad(format!(
                "sslrootcert {}: cannot read PEM certificates ({e}); give the file of the server's CA certificate",
                file.display()
            ))
        })?;
    let (added, _) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(bad(format!(
            "sslrootcert {}: no usable certificate in it; give the file of the server's CA certificate (PEM)",
            file.display()
        )));
    }
    Ok(roots)
}

/// `sslmode=require`: the connection is encrypted and the handshake's signatures checked,
/// but the certificate is not (as libpq's `require` without a root certificate).
#[derive(Debug)]
struct Unverified(Arc<CryptoProvider>);

impl ServerCertVerifier for Unverified {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn sslmode_and_sslrootcert_are_taken_out_of_the_url() {
        let (u, s) =
            split_url("postgres://u@db:5432/x?sslmode=verify-full&sslrootcert=%2Ftmp%2Fca.pem&connect_timeout=5")
                .unwrap();
        assert_eq!(u, "postgres://u@db:5432/x?connect_timeout=5");
        assert_eq!(s.mode, SslMode::VerifyFull);
        assert_eq!(s.root_cert, Some(PathBuf::from("/tmp/ca.pem")));
        let (u, s) = split_url("host=db user=u sslmode=require").unwrap();
        assert_eq!((u.as_str(), s.mode), ("host=db user=u", SslMode::Require));
        let (u, s) = split_url("postgres://u@db/x").unwrap();
        assert_eq!(
            (u.as_str(), s.mode),
            ("postgres://u@db/x", SslMode::Disable)
        );
    }

    #[test]
    fn an_unknown_sslmode_or_a_useless_root_is_refused_by_name() {
        let e = split_url("postgres://u@db/x?sslmode=verify-ca").unwrap_err();
        assert!(e.to_string().contains("verify-ca"), "{e}");
        let e = split_url("postgres://u@db/x?sslrootcert=/ca.pem").unwrap_err();
        assert!(e.to_string().contains("sslrootcert"), "{e}");
    }

    #[test]
    fn a_root_file_that_is_not_pem_is_refused_by_name() {
        let dir = std::env::temp_dir().join(format!("vouch-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("ca.pem");
        std::fs::write(&f, "not a certificate").unwrap();
        let s = TlsSettings {
            mode: SslMode::VerifyFull,
            root_cert: Some(f.clone()),
        };
        let e = connector(&s).err().unwrap();
        assert!(e.to_string().contains(&f.display().to_string()), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
