//! Real outbound providers (§6.2): webhooks over HTTP, e-mail over SMTP, calendar events as
//! iCalendar files, and a webhook-shaped payment provider. Timeouts are bounded; a timeout
//! after the request went out is a lost result (`AttemptReply::Lost`), never a blind retry.

use crate::config::{CalendarConfig, EmailConfig, PaymentConfig};
use lettre::message::header::{HeaderName, HeaderValue};
use lettre::transport::smtp::client::{Tls, TlsParameters};
use lettre::{Message, SmtpTransport, Transport};
use serde_json::Value;
use vouch_core::{sha256_hex, Destination, DestinationKind, Verb};
use vouch_runtime::fsroot::{host_name, FolderRoot};
use vouch_runtime::provider::{
    payload_text, AttemptReply, AttemptRequest, Confirms, Observation, Provider,
};

fn field(payload: &Value, k: &str) -> Option<String> {
    payload
        .get(k)
        .and_then(Value::as_str)
        .map(String::from)
        .filter(|s| !s.is_empty())
}

/// The Message-ID the host generates: derived from the ledger key (or the payload hash),
/// so the same act always carries the same id.
pub fn message_id(req: &AttemptRequest) -> String {
    let basis = req
        .idempotency_key
        .clone()
        .unwrap_or_else(|| format!("{}:{}:{}", req.run_id, req.delivery, req.payload_hash));
    format!("<{}@vouch.local>", &sha256_hex(basis.as_bytes())[..32])
}

/// The SMTP reply that means the server took responsibility for the message (RFC 5321 §4.2).
pub const SMTP_OK: u16 = 250;

/// The `[email]` setting that fixes a failed TLS handshake, when the failure is about TLS:
/// the server may speak plain SMTP (a local relay) or implicit TLS (port 465).
fn tls_hint(tls: &str, port: u16, error: &str) -> String {
    if !error.to_ascii_lowercase().contains("tls") {
        return String::new();
    }
    match tls {
        "starttls" if port == 465 => "; port 465 speaks implicit TLS: set `tls = \"tls\"` under [email] in vouch.toml".into(),
        "starttls" => "; the server may not offer STARTTLS: set `tls = \"tls\"` under [email] in vouch.toml for implicit TLS (port 465), or `tls = \"none\"` for a plain local relay".into(),
        "tls" => "; the server may not speak implicit TLS on this port: set `tls = \"starttls\"` under [email] in vouch.toml (port 587), or `tls = \"none\"` for a plain local relay".into(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tls_hint_tests {
    use super::tls_hint;

    #[test]
    fn a_tls_failure_names_the_setting_that_fixes_it() {
        assert!(tls_hint("starttls", 25, "STARTTLS is not supported").contains("tls = \"none\""));
        assert!(tls_hint("starttls", 465, "tls handshake eof").contains("tls = \"tls\""));
        assert!(tls_hint("tls", 587, "invalid TLS record").contains("tls = \"starttls\""));
        assert_eq!(tls_hint("starttls", 25, "connection refused"), "");
        assert_eq!(tls_hint("none", 25, "tls"), "");
    }
}

pub struct EmailProvider {
    pub config: EmailConfig,
}

impl EmailProvider {
    fn transport(&self) -> Result<SmtpTransport, String> {
        let c = &self.config;
        let mut b = match c.tls.as_str() {
            "none" => SmtpTransport::builder_dangerous(&c.host),
            "tls" | "starttls" => {
                let params = TlsParameters::new(c.host.clone())
                    .map_err(|e| format!("TLS setup for {}: {e}", c.host))?;
                let tls = if c.tls == "tls" {
                    Tls::Wrapper(params)
                } else {
                    Tls::Required(params)
                };
                SmtpTransport::builder_dangerous(&c.host).tls(tls)
            }
            other => {
                return Err(format!(
                    "email.tls must be none, starttls or tls (got `{other}`)"
                ))
            }
        };
        b = b
            .port(c.port)
            .timeout(Some(std::time::Duration::from_millis(c.timeout_ms)));
        if let (Some(u), Some(p)) = (&c.username, &c.password) {
            let user = u.resolve()?;
            let pass = p.resolve()?;
            b = b.credentials(lettre::transport::smtp::authentication::Credentials::new(
                user, pass,
            ));
        }
        Ok(b.build())
    }

    pub fn build(&self, req: &AttemptRequest) -> Result<Message, String> {
        let p = &req.payload;
        let to = field(p, "to").unwrap_or_else(|| req.destination.address.clone());
        let subject =
            field(p, "subject").unwrap_or_else(|| format!("Message from vouch ({})", req.delivery));
        let body = field(p, "body").unwrap_or_else(|| payload_text(p));
        let mut b = Message::builder()
            .from(
                self.config
                    .from
                    .parse()
                    .map_err(|e| format!("email.from `{}`: {e}", self.config.from))?,
            )
            .to(to.parse().map_err(|e| format!("recipient `{to}`: {e}"))?)
            .subject(subject)
            .message_id(Some(message_id(req)));
        for cc in p
            .get("cc")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            b = b.cc(cc.parse().map_err(|e| format!("cc `{cc}`: {e}"))?);
        }
        if req.verb == Verb::Reply {
            if let Some(parent) = field(p, "in_reply_to") {
                b = b
                    .in_reply_to(parent.clone())
                    .references(field(p, "references").unwrap_or(parent));
            }
        }
        let mut m = b
            .body(body)
            .map_err(|e| format!("build the message: {e}"))?;
        m.headers_mut().insert_raw(HeaderValue::new(
            HeaderName::new_from_ascii_str("X-Vouch-Delivery"),
            req.delivery.clone(),
        ));
        Ok(m)
    }
}

impl Provider for EmailProvider {
    fn kind(&self) -> DestinationKind {
        DestinationKind::Email
    }
    fn idempotent_by_key(&self, _dest: &Destination) -> bool {
        false // SMTP has no idempotency key: a lost result is `unknown` (§8.3).
    }
    fn exists(&self, _dest: &Destination) -> bool {
        false
    }
    fn attempt(&self, req: &AttemptRequest) -> AttemptReply {
        let msg = match self.build(req) {
            Ok(m) => m,
            Err(e) => return AttemptReply::Rejected { reason: e },
        };
        let transport = match self.transport() {
            Ok(t) => t,
            Err(e) => return AttemptReply::Rejected { reason: e },
        };
        match transport.send(&msg) {
            Ok(resp) if resp.is_positive() => {
                let (code, message_id) = (u16::from(resp.code()), message_id(req));
                AttemptReply::Accepted {
                    reference: format!("SMTP {code} {message_id}"),
                    confirms: Confirms::Smtp { code, message_id },
                }
            }
            Ok(resp) => AttemptReply::Rejected {
                reason: format!("SMTP {}", resp.code()),
            },
            Err(e) if e.is_timeout() => AttemptReply::Lost {
                reason: format!("the mail server did not answer in time: {e}"),
            },
            Err(e) if e.is_permanent() || e.is_transient() => AttemptReply::Rejected {
                reason: format!("the mail server refused it: {e}"),
            },
            Err(e) => AttemptReply::Rejected {
                reason: format!(
                    "could not reach the mail server: {e}{}",
                    tls_hint(&self.config.tls, self.config.port, &e.to_string())
                ),
            },
        }
    }
    fn observe(&self, req: &AttemptRequest, reply: Option<&AttemptReply>) -> Observation {
        // The evidence is the server's final 250 to the message with our Message-ID.
        match reply {
            Some(AttemptReply::Accepted {
                reference,
                confirms:
                    Confirms::Smtp {
                        code,
                        message_id: id,
                    },
            }) if *code == SMTP_OK && *id == message_id(req) => Observation::Present {
                evidence: format!("accepted by the server: {reference}"),
            },
            Some(AttemptReply::Accepted { reference, .. }) => Observation::Absent {
                reason: format!("the server answered {reference}, not 250 to this message"),
            },
            _ => Observation::Unobservable,
        }
    }
}

/// `calendar`: `schedule` writes an iCalendar event (with a UID) into the calendar folder and
/// re-reads it by that UID.
pub struct CalendarProvider {
    pub config: CalendarConfig,
}

impl CalendarProvider {
    pub fn uid(req: &AttemptRequest) -> String {
        format!(
            "{}-{}@vouch",
            req.delivery,
            &req.payload_hash[..16.min(req.payload_hash.len())]
        )
    }
    /// The event's file beneath the calendar folder, named by the host (§3.2.1).
    fn name(req: &AttemptRequest) -> String {
        let hash = &req.payload_hash[..16.min(req.payload_hash.len())];
        format!("{}-{}_vouch.ics", host_name(&req.delivery), host_name(hash))
    }
    fn root(&self) -> FolderRoot {
        FolderRoot::new(&self.config.dir)
    }
    pub fn ics(req: &AttemptRequest) -> String {
        let p = &req.payload;
        let clean = |s: String| s.replace(['\r', '\n'], " ");
        let mut lines = vec![
            "BEGIN:VCALENDAR".to_string(),
            "VERSION:2.0".into(),
            "PRODID:-//vouch//EN".into(),
            "BEGIN:VEVENT".into(),
            format!("UID:{}", Self::uid(req)),
            format!(
                "SUMMARY:{}",
                clean(
                    field(p, "title")
                        .or_else(|| field(p, "summary"))
                        .unwrap_or_else(|| payload_text(p))
                )
            ),
        ];
        // `{start, end, tz}` (a local time in a zone) → `DTSTART;TZID=…:YYYYMMDDTHHMMSS`;
        // an older payload's `start` is written as it came.
        let tz = field(p, "tz").map(clean);
        for (k, name) in [("start", "DTSTART"), ("end", "DTEND")] {
            if let Some(t) = field(p, k).map(clean) {
                lines.push(match &tz {
                    Some(tz) => format!("{name};TZID={tz}:{}", ics_local(&t)),
                    None => format!("{name}:{t}"),
                });
            }
        }
        for a in p
            .get("attendees")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            lines.push(format!("ATTENDEE:mailto:{}", clean(a.to_string())));
        }
        lines.extend(["END:VEVENT".to_string(), "END:VCALENDAR".into()]);
        lines.join("\r\n") + "\r\n"
    }
}

/// `2026-12-08T15:00[:SS]` → `20261208T150000` (iCalendar's local date-time form).
fn ics_local(t: &str) -> String {
    let digits: String = t.chars().filter(|c| *c != '-' && *c != ':').collect();
    if digits.len() == 13 {
        format!("{digits}00")
    } else {
        digits
    }
}

impl Provider for CalendarProvider {
    fn kind(&self) -> DestinationKind {
        DestinationKind::Calendar
    }
    fn idempotent_by_key(&self, _dest: &Destination) -> bool {
        false
    }
    fn exists(&self, _dest: &Destination) -> bool {
        false
    }
    fn attempt(&self, req: &AttemptRequest) -> AttemptReply {
        let name = Self::name(req);
        let res = if req.verb == Verb::Delete {
            self.root().remove(&name)
        } else {
            self.root().write_atomic(&name, Self::ics(req).as_bytes())
        };
        match res {
            Ok(()) => AttemptReply::Accepted {
                reference: format!("UID {}", Self::uid(req)),
                confirms: Confirms::Reference,
            },
            Err(e) => AttemptReply::Rejected {
                reason: format!("calendar folder: {e}"),
            },
        }
    }
    fn observe(&self, req: &AttemptRequest, _reply: Option<&AttemptReply>) -> Observation {
        let uid = Self::uid(req);
        let want = Self::ics(req);
        let read = self
            .root()
            .read(&Self::name(req), want.len() + 1)
            .map(|b| String::from_utf8_lossy(&b).into_owned());
        match read {
            Ok(t) if req.verb != Verb::Delete && t.contains(&format!("UID:{uid}")) && t == want => {
                Observation::Present {
                    evidence: format!("event UID {uid} re-read"),
                }
            }
            Err(_) if req.verb == Verb::Delete => Observation::Present {
                evidence: format!("event UID {uid} is gone"),
            },
            _ => Observation::Absent {
                reason: format!("event UID {uid} is not in the calendar"),
            },
        }
    }
}

/// `payment`: a webhook-shaped transfer provider. A 2xx with a transfer `id` is the evidence.
pub struct PaymentProvider {
    pub config: PaymentConfig,
}

impl Provider for PaymentProvider {
    fn kind(&self) -> DestinationKind {
        DestinationKind::Payment
    }
    fn idempotent_by_key(&self, _dest: &Destination) -> bool {
        self.config.idempotent
    }
    fn exists(&self, _dest: &Destination) -> bool {
        false
    }
    fn attempt(&self, req: &AttemptRequest) -> AttemptReply {
        let agent = ureq::AgentBuilder::new()
            .timeout(std::time::Duration::from_millis(self.config.timeout_ms))
            .build();
        let mut r = agent
            .post(&self.config.url)
            .set("Content-Type", "application/json");
        if let Some(k) = &req.idempotency_key {
            r = r.set("Idempotency-Key", k);
        }
        if let Some(t) = &self.config.token {
            match t.resolve() {
                Ok(tok) => r = r.set("Authorization", &format!("Bearer {tok}")),
                Err(step) => {
                    return AttemptReply::Rejected {
                        reason: format!("payment token missing: {step}"),
                    }
                }
            }
        }
        let body = serde_json::json!({"to": req.destination.address, "payload": req.payload});
        match r.send_string(&body.to_string()) {
            Ok(resp) => {
                let status = resp.status();
                let v: Value = resp.into_json().unwrap_or(Value::Null);
                match v.get("id").and_then(Value::as_str) {
                    Some(id) => AttemptReply::Accepted {
                        reference: format!("transfer {id}"),
                        confirms: Confirms::Transfer { id: id.to_string() },
                    },
                    None => AttemptReply::AcceptedUnverifiable {
                        reference: format!("HTTP {status} without a transfer id"),
                    },
                }
            }
            Err(ureq::Error::Status(code, resp)) => AttemptReply::Rejected {
                reason: format!(
                    "HTTP {code} {}",
                    resp.into_string()
                        .unwrap_or_default()
                        .chars()
                        .take(120)
                        .collect::<String>()
                ),
            },
            Err(ureq::Error::Transport(t)) => match t.kind() {
                ureq::ErrorKind::Io => AttemptReply::Lost {
                    reason: format!("no answer: {t}"),
                },
                _ => AttemptReply::Rejected {
                    reason: format!("could not reach the payment provider: {t}"),
                },
            },
        }
    }
    fn observe(&self, req: &AttemptRequest, reply: Option<&AttemptReply>) -> Observation {
        // §6.3: a configured read-back decides; otherwise the transfer id in the reply is the
        // observation, named as exactly that.
        let id = match reply {
            Some(AttemptReply::Accepted {
                confirms: Confirms::Transfer { id },
                ..
            }) => Some(id.as_str()),
            _ => None,
        };
        if let Some(o) = read_back(
            self.config.status_url.as_deref(),
            id,
            req.idempotency_key.as_deref(),
            self.config.timeout_ms,
        ) {
            return o;
        }
        match reply {
            Some(AttemptReply::Accepted {
                reference,
                confirms: Confirms::Transfer { .. },
            }) => Observation::Present {
                evidence: format!("accepted by the provider: {reference}"),
            },
            _ => Observation::Unobservable,
        }
    }
}

/// A configured status URL read back (§6.3): `{id}` and `{key}` are filled from the reply's id
/// and the idempotency key. `None` when there is no read-back to do (none configured, a value
/// it needs is missing, or the status service could not be asked — then the reply stands);
/// otherwise 2xx → the effect is there, 404/410 → it is not.
pub fn read_back(
    template: Option<&str>,
    id: Option<&str>,
    key: Option<&str>,
    timeout_ms: u64,
) -> Option<Observation> {
    let mut url = template?.to_string();
    for (name, value) in [("{id}", id), ("{key}", key)] {
        if url.contains(name) {
            url = url.replace(name, value?);
        }
    }
    let agent = ureq::AgentBuilder::new()
        .timeout(std::time::Duration::from_millis(timeout_ms))
        .build();
    match agent.get(&url).call() {
        Ok(resp) => Some(Observation::Present {
            evidence: format!("read back: HTTP {} from {url}", resp.status()),
        }),
        Err(ureq::Error::Status(code @ (404 | 410), _)) => Some(Observation::Absent {
            reason: format!("the status URL {url} answered HTTP {code}: the effect is not there"),
        }),
        Err(_) => None,
    }
}

/// The request body of a webhook payload: its `json` text (the object the model wrote, as
/// the schema carries it), else the payload itself.
pub fn webhook_body(payload: &serde_json::Value) -> String {
    match payload.get("json").and_then(|j| j.as_str()) {
        Some(text) => text.to_string(),
        None => payload.to_string(),
    }
}

/// `webhook`: POST the payload as JSON with an `Idempotency-Key` header (§6.2).
/// 2xx with a body → accepted (the response is the evidence); 202 → unverifiable;
/// other statuses → rejected; a timeout after sending → lost.
pub struct WebhookProvider {
    pub timeout_ms: u64,
    /// Destination patterns known to deduplicate by key.
    pub idempotent: Vec<String>,
    /// A configured read-back (§6.3), see `WebhookConfig::status_url`.
    pub status_url: Option<String>,
}

impl Provider for WebhookProvider {
    fn kind(&self) -> DestinationKind {
        DestinationKind::Webhook
    }
    fn idempotent_by_key(&self, dest: &Destination) -> bool {
        let key = dest.key();
        self.idempotent
            .iter()
            .any(|p| vouch_runtime::capability::pattern_matches(p, &key))
    }
    fn exists(&self, _dest: &Destination) -> bool {
        false
    }
    fn attempt(&self, req: &AttemptRequest) -> AttemptReply {
        let agent = ureq::AgentBuilder::new()
            .timeout(std::time::Duration::from_millis(self.timeout_ms))
            .build();
        let mut r = agent
            .post(&req.destination.address)
            .set("Content-Type", "application/json");
        if let Some(k) = &req.idempotency_key {
            r = r.set("Idempotency-Key", k);
        }
        match r.send_string(&webhook_body(&req.payload)) {
            Ok(resp) => {
                let status = resp.status();
                let body = resp.into_string().unwrap_or_default();
                if status == 202 {
                    AttemptReply::AcceptedUnverifiable {
                        reference: "HTTP 202".into(),
                    }
                } else if body.trim().is_empty() {
                    AttemptReply::AcceptedUnverifiable {
                        reference: format!("HTTP {status}, empty response"),
                    }
                } else {
                    let id = serde_json::from_str::<serde_json::Value>(&body)
                        .ok()
                        .and_then(|v| v.get("id").and_then(|i| i.as_str()).map(String::from));
                    let named = id
                        .clone()
                        .unwrap_or_else(|| format!("{} bytes", body.len()));
                    AttemptReply::Accepted {
                        reference: format!("HTTP {status}, response {named}"),
                        confirms: Confirms::Http { status, id },
                    }
                }
            }
            Err(ureq::Error::Status(code, resp)) => {
                let text = resp.into_string().unwrap_or_default();
                AttemptReply::Rejected {
                    reason: format!("HTTP {code} {}", text.chars().take(120).collect::<String>()),
                }
            }
            Err(ureq::Error::Transport(t)) => match t.kind() {
                ureq::ErrorKind::Io => AttemptReply::Lost {
                    reason: format!("no answer: {t}"),
                },
                _ => AttemptReply::Rejected {
                    reason: format!("could not reach {}: {t}", req.destination.address),
                },
            },
        }
    }
    fn observe(&self, req: &AttemptRequest, reply: Option<&AttemptReply>) -> Observation {
        // §6.3: a configured read-back decides; otherwise the reply is the observation and
        // the evidence names exactly that.
        // `{id}` is the response's own id as the attempt read it; a response without one
        // leaves a `{id}` read-back nothing to ask, and the reply stands.
        let id = match reply {
            Some(AttemptReply::Accepted {
                confirms: Confirms::Http { id, .. },
                ..
            }) => id.as_deref(),
            _ => None,
        };
        if let Some(o) = read_back(
            self.status_url.as_deref(),
            id,
            req.idempotency_key.as_deref(),
            self.timeout_ms,
        ) {
            return o;
        }
        match reply {
            Some(AttemptReply::Accepted {
                reference,
                confirms: Confirms::Http { .. },
            }) => Observation::Present {
                evidence: format!("accepted by the server: {reference}"),
            },
            _ => Observation::Unobservable,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req() -> AttemptRequest {
        AttemptRequest {
            run_id: "r1".into(),
            delivery: "d1".into(),
            verb: Verb::Send,
            destination: Destination {
                kind: DestinationKind::Email,
                address: "ann@example.org".into(),
            },
            payload: serde_json::json!({"text": "hi"}),
            payload_hash: "ab".repeat(32),
            idempotency_key: Some("k1".into()),
        }
    }

    fn email() -> EmailProvider {
        EmailProvider {
            config: EmailConfig {
                host: "127.0.0.1".into(),
                port: 25,
                from: "vouch@example.org".into(),
                tls: "none".into(),
                username: None,
                password: None,
                timeout_ms: 100,
            },
        }
    }

    fn accepted(reference: &str, confirms: Confirms) -> AttemptReply {
        AttemptReply::Accepted {
            reference: reference.into(),
            confirms,
        }
    }

    #[test]
    fn email_is_verified_by_the_typed_250_to_this_message_not_by_the_words() {
        let (p, r) = (email(), req());
        let ours = message_id(&r);
        let reference = format!("SMTP 250 {ours}");
        let smtp = |code: u16, id: &str| Confirms::Smtp {
            code,
            message_id: id.into(),
        };
        assert_eq!(
            p.observe(&r, Some(&accepted(&reference, smtp(250, &ours)))),
            Observation::Present {
                evidence: format!("accepted by the server: {reference}"),
            }
        );
        // Positive but not the final 250 (251: forwarded), or a 250 to another message.
        for confirms in [smtp(251, &ours), smtp(250, "<other@vouch.local>")] {
            assert!(matches!(
                p.observe(&r, Some(&accepted(&reference, confirms))),
                Observation::Absent { .. }
            ));
        }
        // A reference that merely reads like a 250 confirms nothing.
        assert!(matches!(
            p.observe(&r, Some(&accepted(&reference, Confirms::Reference))),
            Observation::Absent { .. }
        ));
        assert_eq!(p.observe(&r, None), Observation::Unobservable);
    }

    #[test]
    fn payment_evidence_needs_a_transfer_the_provider_named() {
        let p = PaymentProvider {
            config: PaymentConfig {
                url: "http://127.0.0.1:9/pay".into(),
                token: None,
                idempotent: true,
                timeout_ms: 100,
                status_url: None,
            },
        };
        let r = req();
        let transfer = accepted("transfer t-9", Confirms::Transfer { id: "t-9".into() });
        assert_eq!(
            p.observe(&r, Some(&transfer)),
            Observation::Present {
                evidence: "accepted by the provider: transfer t-9".into(),
            }
        );
        assert_eq!(
            p.observe(&r, Some(&accepted("transfer t-9", Confirms::Reference))),
            Observation::Unobservable
        );
    }
}
