//! The `notify` route (§11.1): the desktop's own notification service over D-Bus
//! (org.freedesktop.Notifications, which honours do-not-disturb) when a session bus is
//! present; otherwise a configured push webhook; the inbox always keeps the receipt.

use vouch_runtime::host::{Notifier, NotifyError};
use vouch_store::OutboxRow;

fn title_and_body(row: &OutboxRow) -> (String, String) {
    let title = row
        .body
        .get("title")
        .and_then(|t| t.as_str())
        .unwrap_or("vouch")
        .to_string();
    let body = format!(
        "{} — `vouch receipt {}`",
        row.body
            .get("outcome")
            .and_then(|o| o.as_str())
            .unwrap_or(""),
        row.run_id
    );
    (title, body)
}

/// Sends nothing: the outbox rows stay in the store (a simulated world, a test).
pub struct Quiet;

impl Notifier for Quiet {
    fn notify(&self, _row: &OutboxRow) -> Result<(), NotifyError> {
        Ok(())
    }
}

/// Sends through D-Bus when `DBUS_SESSION_BUS_ADDRESS` is set, else POSTs to `push_url`.
pub struct DesktopNotifier {
    pub push_url: Option<String>,
    pub timeout_ms: u64,
}

impl DesktopNotifier {
    pub fn session_bus_present() -> bool {
        std::env::var("DBUS_SESSION_BUS_ADDRESS")
            .map(|v| !v.is_empty())
            .unwrap_or(false)
    }
}

impl DesktopNotifier {
    /// POST the notification to the push URL, with its dedup key as `Idempotency-Key`.
    fn push(&self, url: &str, row: &OutboxRow) -> Result<(), NotifyError> {
        let (title, body) = title_and_body(row);
        let agent = ureq::AgentBuilder::new()
            .timeout(std::time::Duration::from_millis(self.timeout_ms))
            .build();
        agent
            .post(url)
            .set("Idempotency-Key", &row.dedup_key)
            .send_json(serde_json::json!({"title": title, "body": body, "run": row.run_id}))
            .map(|_| ())
            .map_err(|e| push_error(url, e))
    }
}

impl Notifier for DesktopNotifier {
    fn notify(&self, row: &OutboxRow) -> Result<(), NotifyError> {
        let (title, body) = title_and_body(row);
        if Self::session_bus_present() {
            // The bus is there but its notification service did not take it (not started
            // yet, busy): worth another try, never a reason to drop the notification.
            return notify_rust::Notification::new()
                .appname("vouch")
                .summary(&title)
                .body(&body)
                .show()
                .map(|_| ())
                .map_err(|e| NotifyError::Retry(format!("desktop notification: {e}")));
        }
        if let Some(url) = &self.push_url {
            return self.push(url, row);
        }
        // No channel to interrupt the person: the inbox holds it (`vouch inbox`).
        Ok(())
    }
}

/// What a failed push means for the dispatcher, from ureq's typed error: a server that is down,
/// busy or unreachable now is tried again; a URL that is not one, or a server that refuses the
/// request itself (a 4xx other than 408/429: wrong path, missing credentials), will refuse
/// every row alike until `[notify] push_url` is fixed.
fn push_error(url: &str, e: ureq::Error) -> NotifyError {
    let retry = |what: String| NotifyError::Retry(format!("push webhook {url}: {what}"));
    let fix = |what: String| {
        NotifyError::Misconfigured(format!(
            "push webhook {url}: {what}; fix [notify] push_url in vouch.toml"
        ))
    };
    match e {
        ureq::Error::Status(code @ (408 | 429 | 500..=599), _) => retry(format!("HTTP {code}")),
        ureq::Error::Status(code, _) => fix(format!("HTTP {code}")),
        ureq::Error::Transport(t) => match t.kind() {
            ureq::ErrorKind::InvalidUrl
            | ureq::ErrorKind::UnknownScheme
            | ureq::ErrorKind::InsecureRequestHttpsOnly
            | ureq::ErrorKind::InvalidProxyUrl
            | ureq::ErrorKind::ProxyUnauthorized => fix(t.to_string()),
            _ => retry(t.to_string()),
        },
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn row() -> OutboxRow {
        OutboxRow {
            id: 1,
            dedup_key: "r1:terminal".into(),
            run_id: "r1".into(),
            route: "notify".into(),
            body: serde_json::json!({"title": "vouch: failed", "outcome": "failed"}),
            created_ms: 1,
            sent_ms: None,
            failure: None,
        }
    }

    /// A one-shot HTTP server answering `status`; returns its URL.
    fn answer_once(status: u16) -> String {
        use std::io::{Read, Write};
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/push", l.local_addr().unwrap());
        std::thread::spawn(move || {
            if let Ok((mut c, _)) = l.accept() {
                let mut buf = [0u8; 4096];
                let _ = c.read(&mut buf);
                let _ = write!(
                    c,
                    "HTTP/1.1 {status} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                );
            }
        });
        url
    }

    fn push(url: &str) -> Result<(), NotifyError> {
        DesktopNotifier {
            push_url: Some(url.into()),
            timeout_ms: 2_000,
        }
        .push(url, &row())
    }

    #[test]
    fn a_push_failure_says_whether_to_try_again_or_fix_the_configuration() {
        assert_eq!(push(&answer_once(200)), Ok(()));
        assert!(matches!(
            push(&answer_once(503)),
            Err(NotifyError::Retry(_))
        ));
        assert!(matches!(
            push(&answer_once(429)),
            Err(NotifyError::Retry(_))
        ));
        match push(&answer_once(404)) {
            Err(NotifyError::Misconfigured(m)) => assert!(m.contains("push_url"), "{m}"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            push("ftp://example.org/push"),
            Err(NotifyError::Misconfigured(_))
        ));
        // Nothing listening: the server may be back later.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/push", closed.local_addr().unwrap());
        drop(closed);
        assert!(matches!(push(&url), Err(NotifyError::Retry(_))));
    }
}
