//! The reconciler (§9.2): the one terminal path, missed schedule slots, and dispatch of
//! the outbox.

use super::rooms::Cards;
use super::*;

/// The duty the outbox dispatcher holds across processes (`Store::with_duty`).
pub const DUTY_OUTBOX: &str = "outbox";

impl Host {
    /// The one terminal path (§9.2). Idempotent.
    pub fn reconcile(&self, run_id: &str, ended_by: EndedBy) -> HostResult<vouch_core::Outcome> {
        self.reconcile_with(run_id, ended_by, None)
    }

    /// End a run a schedule slot created as `missed` (§12.3), through the one terminal path;
    /// `why` names what it waited on when the slot was skipped for an overlap (§12.1.2).
    pub(crate) fn end_missed(
        &self,
        run_id: &str,
        why: Option<&str>,
    ) -> HostResult<vouch_core::Outcome> {
        if let Some(why) = why {
            self.journal(
                run_id,
                self.ev(j::LoopEnded {
                    cause: "overlap_skip".into(),
                    reason: why.to_string(),
                }),
            )?;
        }
        self.reconcile_with(run_id, EndedBy::Schedule, Some(vouch_core::Outcome::Missed))
    }

    /// The cancel of a run this process holds (§9.4): close its cards, withdraw what is not
    /// yet attempted or decided, and end it `cancel`.
    pub(super) fn cancel_owned(&self, run_id: &str) -> HostResult<vouch_core::Outcome> {
        self.withdraw_and_end(run_id, "cancelled at your request")
    }

    /// End a run this process holds the way a cancel does, each withdrawn item saying `why`.
    pub(super) fn withdraw_and_end(
        &self,
        run_id: &str,
        why: &str,
    ) -> HostResult<vouch_core::Outcome> {
        self.settle_unsettled_and_end(run_id, DeliveryStatus::Denied, why, EndedBy::Cancel)
    }

    /// Close the run's cards, give every item not yet attempted or decided `status` with
    /// `why`, and end the run `ended_by`: a cancel withdraws them (`denied`, "at your
    /// request"); a run whose attempt ended leaves them `not_attempted`, saying why.
    pub(super) fn settle_unsettled_and_end(
        &self,
        run_id: &str,
        status: DeliveryStatus,
        why: &str,
        ended_by: EndedBy,
    ) -> HostResult<vouch_core::Outcome> {
        // Every open card closes — approvals and the run's question alike (issue 21): an
        // ended run leaves nothing to decide in the inbox.
        Cards::of(self).close_all(run_id)?;
        let view = self.view(run_id)?;
        if let Some(m) = &view.manifest {
            for d in &m.deliveries {
                let unsettled = matches!(
                    view.final_status(&d.id),
                    DeliveryStatus::NotAttempted
                        | DeliveryStatus::Awaiting
                        | DeliveryStatus::Blocked
                ) && view
                    .items
                    .get(&d.id)
                    .map(|i| i.open_attempt.is_none())
                    .unwrap_or(true);
                if unsettled {
                    self.journal(run_id, self.evd(&d.id, j::Evidence::of(status, "", why)))?;
                }
            }
        }
        self.reconcile(run_id, ended_by)
    }

    pub(super) fn reconcile_with(
        &self,
        run_id: &str,
        ended_by: EndedBy,
        forced: Option<vouch_core::Outcome>,
    ) -> HostResult<vouch_core::Outcome> {
        let (outcome, queued) = self.end_with(run_id, ended_by, forced)?;
        // Deliver what this end queued (with anything still waiting). An end that queued
        // nothing leaves the waiting rows to the next dispatch: every command's start-up and
        // every scheduler tick dispatch too, so nothing waits longer than the next command.
        if queued {
            self.dispatch()?;
        }
        Ok(outcome)
    }

    /// The terminal path without the outbox's dispatch (the caller dispatches: start-up once
    /// for every run it ends). Also says whether this end queued a notification.
    pub(super) fn end_with(
        &self,
        run_id: &str,
        ended_by: EndedBy,
        forced: Option<vouch_core::Outcome>,
    ) -> HostResult<(vouch_core::Outcome, bool)> {
        // A run this process drives holds its lease, so it has not ended; whoever ended it
        // anyway (a cancel from elsewhere) is answered by `end_run` below.
        let run = match self.drives.record(run_id) {
            Some(r) => r,
            None => std::sync::Arc::new(self.record(run_id)?),
        };
        if run.state == RunState::Ended {
            return Ok((run.outcome.unwrap_or(vouch_core::Outcome::Failed), false));
        }
        let view = self.settle_for_end(&run)?;
        let (spec_presence, quiet) = presence_of(&run);
        let presence = self
            .presence
            .as_ref()
            .and_then(|p| p.presence(&run, self.now()))
            .unwrap_or(spec_presence);
        let rec = terminal_record(
            &view,
            &TerminalFacts {
                run_id,
                trigger: run.trigger.as_str(),
                scope: &run.scope,
                ended_by,
                forced,
                presence,
                quiet,
            },
        );
        let outcome = rec.outcome;
        let terminal = Terminal {
            outcome,
            ended_by,
            receipt: rec.receipt,
            body: rec.body,
            at_ms: self.now(),
            outbox: rec.outbox,
        };
        // The terminal transaction also clears the run's lease; only a run that had already
        // ended (nothing written now) still needs this process's lease let go.
        if let EndResult::Ended(_) = self.store.end_run(run_id, &terminal)? {
            self.crash_point("terminal", None)?;
            self.say(&format!(
                "■ run {run_id} ended: {outcome} ({})",
                ended_by.as_str()
            ));
        } else {
            let _ = self.store.release_run(run_id, &self.owner);
            // Ended elsewhere first: its own terminal record says how.
            let ended = self.record(run_id)?;
            return Ok((ended.outcome.unwrap_or(outcome), false));
        }
        Ok((outcome, terminal.outbox.is_some()))
    }

    /// Before the terminal record: settle every attempt a crash left open, and give items the
    /// run never pre-flighted (it died right after the manifest) their posture, so the
    /// receipt can say what would have happened. Returns the view to end from.
    fn settle_for_end(&self, run: &RunRecord) -> HostResult<RunView> {
        let run_id = run.id.as_str();
        let mut view = self.view(run_id)?;
        let open: Vec<String> = view
            .items
            .iter()
            .filter(|(_, i)| i.open_attempt.is_some())
            .map(|(k, _)| k.clone())
            .collect();
        for id in &open {
            self.attempts().settle_open_attempt(run, &view, id)?;
        }
        // The view is read again only when something was journaled since.
        if !open.is_empty() {
            view = self.view(run_id)?;
        }
        // Items the run never pre-flighted (it died right after the manifest) get their
        // posture now, so the receipt can say what would have happened.
        let mut flighted = false;
        if let Some(m) = view.manifest.clone() {
            for d in &m.deliveries {
                let unflighted = view
                    .items
                    .get(&d.id)
                    .map(|i| i.posture.is_none() && i.status.is_none())
                    .unwrap_or(true);
                if unflighted {
                    self.preflight().item(run, &m, d)?;
                    flighted = true;
                }
            }
        }
        if flighted {
            view = self.view(run_id)?;
        }
        Ok(view)
    }

    /// The outbox dispatcher: deliver every pending row once, then mark it (§11.4). A row the
    /// route cannot take now stays pending and the next row is tried; a misconfigured route
    /// ends the pass (the rest would fail alike), leaving every undelivered row pending for
    /// the next dispatch. Returns the rows delivered.
    pub fn dispatch(&self) -> HostResult<usize> {
        // One pass at a time in this process: runs ending on several threads at once would
        // otherwise read the same pending row and deliver it twice.
        static PASS: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _pass = PASS.lock().unwrap_or_else(|p| p.into_inner());
        // Nothing pending, nothing to fence (most runs end without a notification left).
        if self.store.outbox_pending()?.is_empty() {
            return Ok(0);
        }
        // One dispatcher across every process on the store: rows are read and marked sent
        // while the duty is held, so no row is delivered by two hosts. A duty held elsewhere
        // for longer than a lock wait leaves the rows to that holder and the next pass.
        let outbox = Outbox {
            store: self.store.as_ref(),
            notifier: self.notifier.as_ref(),
            clock: self.clock.as_ref(),
            progress: self.progress.as_ref(),
        };
        let mut sent = Ok(0);
        self.store
            .with_duty(DUTY_OUTBOX, true, &mut || sent = outbox.pending())?;
        sent
    }
}

/// What the outbox dispatcher may touch: the outbox table, the notifier and the clock —
/// never a run, its journal or a provider.
struct Outbox<'h> {
    store: &'h dyn Store,
    notifier: &'h dyn Notifier,
    clock: &'h dyn Clock,
    progress: Option<&'h Progress>,
}

impl Outbox<'_> {
    fn say(&self, line: &str) {
        if let Some(p) = self.progress {
            p(line);
        }
    }

    fn pending(&self) -> HostResult<usize> {
        let pending = self.store.outbox_pending()?;
        let total = pending.len();
        let mut n = 0;
        for (i, row) in pending.iter().enumerate() {
            let result = self.notifier.notify(row);
            if let Err(e) = &result {
                self.record_failure(row, e);
            }
            match result {
                Ok(()) => {
                    self.store.outbox_mark_sent(row.id, self.clock.now_ms())?;
                    n += 1;
                }
                Err(e @ NotifyError::Retry(_)) => self.say(&format!(
                    "  notification for run {} not delivered yet: {e}",
                    row.run_id
                )),
                Err(e @ NotifyError::Misconfigured(_)) => {
                    self.say(&format!(
                        "  notifications not delivered: {e}; {} stay queued until it is fixed",
                        total - i
                    ));
                    break;
                }
            }
        }
        Ok(n)
    }

    /// Record a failed delivery on its outbox row (`Store::outbox_failed`), so another
    /// process (`vouch doctor`) can name a route that keeps failing and what to do (§11.4.2).
    /// Advisory: a row whose failure could not be written stays queued and is tried again all
    /// the same.
    fn record_failure(&self, row: &OutboxRow, e: &NotifyError) {
        let (error, misconfigured) = match e {
            NotifyError::Retry(m) => (m.as_str(), false),
            NotifyError::Misconfigured(m) => (m.as_str(), true),
        };
        let mut end = error.len().min(crate::host::FAILURE_TEXT_BYTES_MAX);
        while !error.is_char_boundary(end) {
            end -= 1;
        }
        let _ = self
            .store
            .outbox_failed(row.id, &error[..end], misconfigured, self.clock.now_ms());
    }
}

/// What the reconciler needs besides the run's view: who the run is, how it ended, and who is
/// around. Everything here is already read; the function below does no I/O.
pub(crate) struct TerminalFacts<'a> {
    pub run_id: &'a str,
    pub trigger: &'a str,
    /// The run's scope; for a missed slot it ends in `@<slot ms>`.
    pub scope: &'a str,
    pub ended_by: EndedBy,
    /// An outcome imposed from outside (a missed slot, a cancel) instead of the folded one.
    pub forced: Option<vouch_core::Outcome>,
    pub presence: Presence,
    pub quiet: bool,
}

/// The terminal record the reconciler writes (§9.2).
// The host writes only outcome, receipt, body and outbox; the rest is what they were decided
// from, kept so tests can check the decision itself rather than its rendering.
#[derive(Debug, Clone)]
#[allow(dead_code)]
pub(crate) struct TerminalRecord {
    pub statuses: Vec<(String, DeliveryStatus)>,
    pub outcome: vouch_core::Outcome,
    pub needs_you: Vec<String>,
    pub significance: vouch_core::Significance,
    pub route: vouch_core::Route,
    pub receipt: String,
    pub body: vouch_store::EventBody,
    pub outbox: Option<NewOutbox>,
}

/// The reconciler's core, pure: from the settled view of a run to its terminal record
/// (statuses, outcome, needs_you, significance, route, receipt). Kept free of the store so it
/// can be tested on hand-built views and so there is exactly one place that decides these.
pub(crate) fn terminal_record(view: &RunView, f: &TerminalFacts<'_>) -> TerminalRecord {
    let (statuses, outcome, needs_you, sig) = decide(view, f);
    let route = vouch_core::route(sig, f.presence, f.quiet);
    let view = with_missed_note(view, f);
    let receipt = crate::receipt::render(
        f.run_id,
        f.trigger,
        &view,
        &statuses,
        Some(outcome),
        Some(f.ended_by.as_str()),
        &needs_you,
    );
    let body = Event::from(j::Terminal {
        outcome,
        ended_by: f.ended_by,
        statuses: statuses.iter().cloned().collect(),
        needs_you: needs_you.clone(),
        significance: sig,
        route,
        presence: f.presence,
        quiet: f.quiet,
        loop_end: view.loop_end.as_ref().map(|l| j::LoopEnded {
            cause: l.cause.clone(),
            reason: l.reason.clone(),
        }),
        reasons: statuses
            .iter()
            .filter(|(_, s)| *s != DeliveryStatus::Verified)
            .map(|(k, s)| (k.clone(), crate::receipt::reason_for(&view, k, *s)))
            .collect(),
        corrupt: view.corrupt.clone(),
        receipt_sha256: Some(vouch_core::sha256_hex(receipt.as_bytes())),
    })
    .encode();
    let outbox = (route == vouch_core::Route::Notify).then(|| NewOutbox {
        dedup_key: format!("{}:terminal", f.run_id),
        run_id: f.run_id.to_string(),
        route: route.as_str().to_string(),
        body: json!({"title": format!("vouch: {} — {}", outcome, view.title), "outcome": outcome, "significance": sig}),
    });
    TerminalRecord {
        statuses,
        outcome,
        needs_you,
        significance: sig,
        route,
        receipt,
        body,
        outbox,
    }
}

/// The run's final statuses (`awaiting` at the end is `not_attempted`), its outcome, the
/// items that need the person, and its significance (§9.2, §9.3).
#[allow(clippy::type_complexity)]
fn decide(
    view: &RunView,
    f: &TerminalFacts<'_>,
) -> (
    Vec<(String, DeliveryStatus)>,
    vouch_core::Outcome,
    Vec<String>,
    vouch_core::Significance,
) {
    let ids: Vec<String> = view
        .manifest
        .as_ref()
        .map(|m| m.deliveries.iter().map(|d| d.id.clone()).collect())
        .unwrap_or_default();
    let statuses: Vec<(String, DeliveryStatus)> = ids
        .iter()
        .map(|id| {
            let s = match view.final_status(id) {
                DeliveryStatus::Awaiting => DeliveryStatus::NotAttempted,
                s => s,
            };
            (id.clone(), s)
        })
        .collect();
    let required = |id: &str| {
        view.manifest
            .as_ref()
            .and_then(|m| m.delivery(id))
            .map(|d| d.required)
            .unwrap_or(true)
    };
    let items: Vec<(bool, DeliveryStatus)> =
        statuses.iter().map(|(id, s)| (required(id), *s)).collect();
    // §3.4: a run that ends with no manifest (and no implied one) declared nothing and
    // delivered nothing — an autonomous run that never declared, or a model that failed
    // before it declared or answered. That is a failure of the run, never `withdrawn`, so it
    // reaches the person (I7). Only a person's cancel withdraws it (§9.4).
    let outcome = f.forced.unwrap_or_else(|| {
        if view.manifest.is_none() && f.ended_by != EndedBy::Cancel {
            vouch_core::Outcome::Failed
        } else {
            vouch_core::outcome(&items)
        }
    });
    let needs_you: Vec<String> = statuses
        .iter()
        .filter(|(id, s)| {
            s.needs_person(
                view.items
                    .get(id)
                    .map(|i| i.connect_step.is_some())
                    .unwrap_or(false),
            )
        })
        .map(|(id, _)| id.clone())
        .collect();
    let irreversible_verified = statuses.iter().any(|(id, s)| {
        *s == DeliveryStatus::Verified
            && view.items.get(id).map(|i| i.irreversible).unwrap_or(false)
    });
    let sig = vouch_core::significance(
        Some(outcome),
        false,
        !needs_you.is_empty(),
        irreversible_verified,
        false,
    );
    (statuses, outcome, needs_you, sig)
}

/// The view the receipt renders: a slot missed while nothing ran says which slot passed
/// (a slot skipped for an overlap says why itself, in its loop end).
fn with_missed_note(view: &RunView, f: &TerminalFacts<'_>) -> RunView {
    let mut view = view.clone();
    let skipped = view
        .loop_end
        .as_ref()
        .is_some_and(|l| l.cause == "overlap_skip");
    if f.forced == Some(vouch_core::Outcome::Missed) && !skipped {
        let slot = f
            .scope
            .rsplit_once('@')
            .and_then(|(_, ms)| ms.parse::<i64>().ok())
            .and_then(chrono::DateTime::from_timestamp_millis)
            .map(|t| t.format("%Y-%m-%d %H:%M UTC").to_string())
            .unwrap_or_else(|| f.scope.to_string());
        view.rejections.clear();
        view.missed_note = Some(format!("The slot of {slot} passed its grace with nothing running (the machine was off, or `vouch serve` was not running)."));
    }
    view
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::ItemView;
    use vouch_core::{Confidence, Delivery, Destination, DestinationKind, Outcome, Verb};

    fn delivery(id: &str, verb: Verb, kind: DestinationKind, required: bool) -> Delivery {
        Delivery {
            id: id.into(),
            verb,
            destination: Destination::new(kind, "x"),
            object: None,
            confidence: Confidence::High,
            required,
            attendees: vec![],
        }
    }

    fn view_with(items: &[(Delivery, ItemView)]) -> RunView {
        RunView {
            manifest: Some(Manifest {
                deliveries: items.iter().map(|(d, _)| d.clone()).collect(),
                forbid: vec![],
                order: vec![],
            }),
            items: items
                .iter()
                .map(|(d, i)| (d.id.clone(), i.clone()))
                .collect(),
            title: "test run".into(),
            ..RunView::default()
        }
    }

    fn settled(status: DeliveryStatus) -> ItemView {
        ItemView {
            status: Some(status),
            ..ItemView::default()
        }
    }

    fn facts(forced: Option<Outcome>, presence: Presence) -> TerminalFacts<'static> {
        TerminalFacts {
            run_id: "r1",
            trigger: "manual",
            scope: "brief@1764720000000",
            ended_by: EndedBy::Loop,
            forced,
            presence,
            quiet: false,
        }
    }

    #[test]
    fn all_required_verified_succeeds_and_needs_nobody() {
        let v = view_with(&[
            (
                delivery("a", Verb::Save, DestinationKind::Folder, true),
                settled(DeliveryStatus::Verified),
            ),
            (
                delivery("b", Verb::Show, DestinationKind::Surface, true),
                settled(DeliveryStatus::Verified),
            ),
        ]);
        let rec = terminal_record(&v, &facts(None, Presence::Watching));
        assert_eq!(rec.outcome, Outcome::Succeeded);
        assert!(rec.needs_you.is_empty());
        let ids: Vec<&str> = rec.statuses.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(ids, ["a", "b"], "statuses follow the manifest's order");
        assert_eq!(rec.body.to_value()["statuses"]["a"], json!("verified"));
    }

    #[test]
    fn an_unknown_item_needs_the_person_and_is_not_success() {
        let v = view_with(&[(
            delivery("m", Verb::Send, DestinationKind::Email, true),
            settled(DeliveryStatus::Unknown),
        )]);
        let rec = terminal_record(&v, &facts(None, Presence::Away));
        assert_eq!(rec.needs_you, ["m"]);
        assert_ne!(rec.outcome, Outcome::Succeeded);
        assert_eq!(rec.body.to_value()["significance"], json!(rec.significance));
        assert_eq!(rec.body.to_value()["needs_you"], json!(["m"]));
    }

    #[test]
    fn an_item_still_awaiting_at_the_end_is_not_attempted() {
        let v = view_with(&[(
            delivery("m", Verb::Send, DestinationKind::Email, true),
            ItemView {
                awaiting: true,
                ..ItemView::default()
            },
        )]);
        let rec = terminal_record(&v, &facts(None, Presence::Nearby));
        assert_eq!(
            rec.statuses,
            [("m".to_string(), DeliveryStatus::NotAttempted)]
        );
    }

    #[test]
    fn a_forced_missed_outcome_wins_and_names_the_slot_without_touching_the_view() {
        let mut v = view_with(&[]);
        v.rejections
            .push("a rejection the missed receipt must not show".into());
        let rec = terminal_record(&v, &facts(Some(Outcome::Missed), Presence::Away));
        assert_eq!(rec.outcome, Outcome::Missed);
        assert!(
            rec.receipt.contains("2025-12-03 00:00 UTC"),
            "{}",
            rec.receipt
        );
        assert!(!rec.receipt.contains("a rejection the missed receipt"));
        assert_eq!(v.rejections.len(), 1, "the caller's view is not changed");
    }

    #[test]
    fn the_outbox_row_exists_exactly_when_the_route_notifies() {
        for presence in [Presence::Watching, Presence::Nearby, Presence::Away] {
            for status in [DeliveryStatus::Verified, DeliveryStatus::Unknown] {
                let v = view_with(&[(
                    delivery("m", Verb::Send, DestinationKind::Email, true),
                    settled(status),
                )]);
                let rec = terminal_record(&v, &facts(None, presence));
                assert_eq!(
                    rec.outbox.is_some(),
                    rec.route == vouch_core::Route::Notify,
                    "{presence:?} {status:?}"
                );
                if let Some(o) = rec.outbox {
                    assert_eq!(o.dedup_key, "r1:terminal");
                }
            }
        }
    }

    /// The receipt's words for each kind of ending, as a person reads them (insta snapshots:
    /// a change of wording shows in review). Each view is what the journal would fold to.
    mod receipts {
        use super::*;
        use crate::view::LoopEnd;

        fn with(status: DeliveryStatus, evidence: &str, reason: &str) -> ItemView {
            ItemView {
                status: Some(status),
                evidence: evidence.into(),
                reason: reason.into(),
                ..ItemView::default()
            }
        }

        #[test]
        fn verified_save_and_sent_email() {
            let v = view_with(&[
                (
                    delivery("report", Verb::Save, DestinationKind::Folder, true),
                    with(
                        DeliveryStatus::Verified,
                        "read back out/report.md (412 bytes, sha256 3f2a…)",
                        "",
                    ),
                ),
                (
                    delivery("mail", Verb::Send, DestinationKind::Email, true),
                    with(
                        DeliveryStatus::Verified,
                        "accepted by smtp 127.0.0.1:2525 as <a1@vouch>",
                        "",
                    ),
                ),
            ]);
            insta::assert_snapshot!(terminal_record(&v, &facts(None, Presence::Watching)).receipt);
        }

        #[test]
        fn a_lost_reply_is_unknown_and_needs_the_person() {
            let v = view_with(&[(
                delivery("pay", Verb::Send, DestinationKind::Email, true),
                with(
                    DeliveryStatus::Unknown,
                    "",
                    "the server's answer was lost after the request went out; it may have been sent",
                ),
            )]);
            insta::assert_snapshot!(terminal_record(&v, &facts(None, Presence::Away)).receipt);
        }

        #[test]
        fn a_destination_not_set_up_is_drafted_with_its_connect_step() {
            let v = view_with(&[(
                delivery("mail", Verb::Send, DestinationKind::Email, true),
                ItemView {
                    connect_step: Some("add [email] to vouch.toml".into()),
                    ..with(DeliveryStatus::Drafted, "draft drafts/r1/mail.json", "")
                },
            )]);
            insta::assert_snapshot!(terminal_record(&v, &facts(None, Presence::Nearby)).receipt);
        }

        #[test]
        fn the_loop_stopped_before_the_work() {
            let mut v = view_with(&[(
                delivery("report", Verb::Save, DestinationKind::Folder, true),
                ItemView::default(),
            )]);
            v.loop_end = Some(LoopEnd {
                cause: "model_error".into(),
                reason: "the model could not be reached after 4 attempts: connection refused"
                    .into(),
            });
            insta::assert_snapshot!(terminal_record(&v, &facts(None, Presence::Away)).receipt);
        }

        #[test]
        fn a_missed_slot_says_which_slot() {
            let v = view_with(&[(
                delivery("brief", Verb::Send, DestinationKind::Email, true),
                ItemView::default(),
            )]);
            insta::assert_snapshot!(
                terminal_record(&v, &facts(Some(Outcome::Missed), Presence::Away)).receipt
            );
        }

        #[test]
        fn a_journal_entry_that_does_not_parse_is_said_and_unknown() {
            let mut v = view_with(&[(
                delivery("mail", Verb::Send, DestinationKind::Email, true),
                ItemView::default(),
            )]);
            v.corrupt = vec![7];
            let rec = terminal_record(&v, &facts(None, Presence::Away));
            assert_eq!(
                rec.statuses,
                [("mail".to_string(), DeliveryStatus::Unknown)]
            );
            insta::assert_snapshot!(rec.receipt);
        }
    }
}
