//! The OpenAPI document, generated from the handlers' annotations and the DTOs' types. The
//! committed copy (`crates/vouch-server/openapi.json`) is checked against it by a test, so a
//! change to the API shows in review.

use crate::{api, console, dto, metrics, problem, sse, tasks, work};
use axum::Json;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some("a token from `vouch token new NAME`"))
                    .build(),
            ),
        );
    }
}

#[derive(OpenApi)]
#[openapi(
    info(title = "vouch", description = "The vouch host over HTTP (contract §17). Every route needs `Authorization: Bearer <token>`; every error is a problem object (RFC 9457) with a stable `code`."),
    paths(
        api::list_runs, api::get_run, api::get_journal, api::get_receipt, sse::run_events,
        api::approve, api::deny, api::edit, api::answer, api::cancel, api::resume,
        api::approvals, api::inbox, sse::inbox_events,
        api::list_schedules, api::add_schedule, api::get_schedule, api::remove_schedule,
        api::doctor, tasks::list_tasks, tasks::get_task, tasks::cancel_task,
        tasks::offer_task, tasks::claim_next, tasks::heartbeat, tasks::submit, tasks::fail,
        tasks::abort, tasks::put_artifact, tasks::get_artifact,
        console::measures::api,
        document, metrics::render,
    ),
    components(schemas(
        problem::Problem, dto::Run, dto::RunPage, dto::DeliveryRow, dto::RunDetailBody, dto::Event,
        dto::ReceiptBody, dto::CardBody, dto::ApproveBody, dto::EditBody, dto::AnswerBody,
        dto::RunResult, dto::EditResult, dto::InboxRun, dto::InboxBody, dto::ScheduleBody,
        dto::NewSchedule, dto::DestinationBody, dto::DoctorBody, dto::StuckRouteBody, tasks::TaskList,
        tasks::TaskDetail, tasks::Offered, tasks::OfferBody, work::ClaimBody, work::ClaimResult,
        work::HeartbeatBody, work::HeartbeatResult, work::SubmitBody, work::FailBody,
        work::AbortBody, work::ReportResult, work::ArtifactPut,
        tasks::TaskDetail, console::measures::MeasuresBody,
    )),
    modifiers(&BearerAuth),
    security(("bearer" = [])),
)]
pub struct ApiDoc;

/// The document as served and as committed.
pub fn json() -> String {
    ApiDoc::openapi()
        .to_pretty_json()
        .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

/// This document.
#[utoipa::path(get, path = "/api/openapi.json", tag = "host",
    responses(
        (status = 200, description = "OpenAPI 3.1 document", content_type = "application/json"),
        (status = 401, body = crate::Problem, content_type = "application/problem+json"),
    ))]
pub async fn document() -> Json<serde_json::Value> {
    Json(serde_json::to_value(ApiDoc::openapi()).unwrap_or_default())
}
