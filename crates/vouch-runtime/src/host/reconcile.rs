//! The reconciler (§9.2): the one terminal path, missed schedule slots, and dispatch of
//! the outbox.

use super::*;

impl Host {
    /// The one terminal path (§9.2). Idempotent.
    pub fn reconcile(&self, run_id: &str, ended_by: EndedBy) -> HostResult<vouch_core::Outcome> {
        self.reconcile_with(run_id, ended_by, None)
    }

    /// §12.3: a slot past its grace with no run. The slot is consumed by a run created
    /// directly as ended, outcome `missed`, through the same terminal path. With catch-up
    /// `latest` one late run starts for it (same ledger scope: the slot).
    pub fn missed_slot(
        &self,
        schedule: &str,
        slot_ms: i64,
        spec: &RunSpec,
        catch_up_latest: bool,
    ) -> HostResult<(String, Option<String>)> {
        let id = new_id(self.clock.as_ref());
        self.create(&id, spec, None, Some((schedule, slot_ms)))?;
        self.reconcile_with(&id, EndedBy::Schedule, Some(vouch_core::Outcome::Missed))?;
        if !catch_up_latest {
            return Ok((id, None));
        }
        let late = new_id(self.clock.as_ref());
        let late_spec = RunSpec {
            title: format!("{} (late run for a missed slot)", spec.title),
            ..spec.clone()
        };
        self.create(&late, &late_spec, None, None)?;
        self.drive(&late)?;
        Ok((id, Some(late)))
    }

    pub(super) fn reconcile_with(
        &self,
        run_id: &str,
        ended_by: EndedBy,
        forced: Option<vouch_core::Outcome>,
    ) -> HostResult<vouch_core::Outcome> {
        let run = self.record(run_id)?;
        if run.state == RunState::Ended {
            return Ok(run.outcome.unwrap_or(vouch_core::Outcome::Failed));
        }
        let view = self.view(run_id)?;
        let open: Vec<String> = view
            .items
            .iter()
            .filter(|(_, i)| i.open_attempt.is_some())
            .map(|(k, _)| k.clone())
            .collect();
        for id in open {
            self.settle_open_attempt(&run, &view, &id)?;
        }
        // Items the run never pre-flighted (it died right after the manifest) get their
        // posture now, so the receipt can say what would have happened.
        let view = self.view(run_id)?;
        if let Some(m) = view.manifest.clone() {
            for d in &m.deliveries {
                let unflighted = view
                    .items
                    .get(&d.id)
                    .map(|i| i.posture.is_none() && i.status.is_none())
                    .unwrap_or(true);
                if unflighted {
                    self.preflight(&run, &m, d)?;
                }
            }
        }
        let view = self.view(run_id)?;
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
        let outcome = forced.unwrap_or_else(|| vouch_core::outcome(&items));
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
        let (spec_presence, quiet) = presence_of(&run);
        let presence = self
            .presence
            .as_ref()
            .and_then(|p| p.presence(&run, self.now()))
            .unwrap_or(spec_presence);
        let route = vouch_core::route(sig, presence, quiet);
        let mut view = view;
        if forced == Some(vouch_core::Outcome::Missed) {
            let slot = run
                .scope
                .rsplit_once('@')
                .and_then(|(_, ms)| ms.parse::<i64>().ok())
                .and_then(chrono::DateTime::from_timestamp_millis)
                .map(|t| t.format("%Y-%m-%d %H:%M UTC").to_string())
                .unwrap_or_else(|| run.scope.clone());
            view.rejections.clear();
            view.missed_note = Some(format!("The slot of {slot} passed its grace with nothing running (the machine was off, or `vouch serve` was not running)."));
        }
        let receipt = crate::receipt::render(
            run_id,
            run.trigger.as_str(),
            &view,
            &statuses,
            Some(outcome),
            Some(ended_by.as_str()),
            &needs_you,
        );
        let body = json!({
            "outcome": outcome, "ended_by": ended_by,
            "statuses": statuses.iter().map(|(k, v)| (k.clone(), json!(v))).collect::<serde_json::Map<_, _>>(),
            "needs_you": needs_you, "significance": sig, "route": route, "presence": presence, "quiet": quiet,
        });
        let outbox = (route == vouch_core::Route::Notify).then(|| NewOutbox {
            dedup_key: format!("{run_id}:terminal"),
            run_id: run_id.to_string(),
            route: route.as_str().to_string(),
            body: json!({"title": format!("vouch: {} — {}", outcome, view.title), "outcome": outcome, "significance": sig}),
        });
        let terminal = Terminal {
            outcome,
            ended_by,
            receipt,
            body,
            at_ms: self.now(),
            outbox,
        };
        if let EndResult::Ended(_) = self.store.end_run(run_id, &terminal)? {
            self.crash_point("terminal", None)?;
            self.say(&format!(
                "■ run {run_id} ended: {outcome} ({})",
                ended_by.as_str()
            ));
        }
        let _ = self.store.release_run(run_id, &self.owner);
        self.dispatch()?;
        Ok(outcome)
    }

    /// The outbox dispatcher: deliver every pending row once, then mark it (§11.4).
    pub fn dispatch(&self) -> HostResult<usize> {
        let mut n = 0;
        for row in self.store.outbox_pending()? {
            match self.notifier.notify(&row) {
                Ok(()) => {
                    self.store.outbox_mark_sent(row.id, self.now())?;
                    n += 1;
                }
                Err(e) => self.say(&format!(
                    "  notification for run {} not delivered yet: {e}",
                    row.run_id
                )),
            }
        }
        Ok(n)
    }
}
