//! The `notify` route (§11.1): the desktop's own notification service over D-Bus
//! (org.freedesktop.Notifications, which honours do-not-disturb) when a session bus is
//! present; otherwise a configured push webhook; the inbox always keeps the receipt.

use crate::host::Notifier;
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

impl Notifier for DesktopNotifier {
    fn notify(&self, row: &OutboxRow) -> Result<(), String> {
        let (title, body) = title_and_body(row);
        if Self::session_bus_present() {
            return notify_rust::Notification::new()
                .appname("vouch")
                .summary(&title)
                .body(&body)
                .show()
                .map(|_| ())
                .map_err(|e| format!("desktop notification: {e}"));
        }
        if let Some(url) = &self.push_url {
            let agent = ureq::AgentBuilder::new()
                .timeout(std::time::Duration::from_millis(self.timeout_ms))
                .build();
            return agent
                .post(url)
                .set("Idempotency-Key", &row.dedup_key)
                .send_json(serde_json::json!({"title": title, "body": body, "run": row.run_id}))
                .map(|_| ())
                .map_err(|e| format!("push webhook {url}: {e}"));
        }
        // No channel to interrupt the person: the inbox holds it (`vouch inbox`).
        Ok(())
    }
}
