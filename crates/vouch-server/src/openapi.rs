//! The OpenAPI document, generated from the handlers' annotations and the DTOs' types. The
//! committed copy (`crates/vouch-server/openapi.json`) is checked against it by a test, so a
//! change to the API shows in review.

use crate::{api, attempt, console, dto, identities, metrics, problem, sse, tasks, work};
use axum::Json;
use serde_json::Value;
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
    info(title = "vouch", description = "The vouch host over HTTP (contract §17). Every route needs `Authorization: Bearer <token>` of a scope the route admits (person, worker, reader, admin; 403 `forbidden` otherwise); every error is a problem object (RFC 9457) with a stable `code`."),
    paths(
        api::list_runs, api::start_run, api::get_run, api::get_journal, api::get_receipt, sse::run_events,
        api::approve, api::deny, api::edit, api::answer, api::cancel, api::resume,
        api::approvals, api::inbox, sse::inbox_events,
        api::list_schedules, api::add_schedule, api::get_schedule, api::remove_schedule,
        api::run_schedule_now,
        api::doctor, api::host_key, tasks::list_tasks, tasks::get_task, tasks::cancel_task,
        tasks::offer_task, tasks::claim_next, tasks::heartbeat, tasks::submit, tasks::fail,
        tasks::abort, tasks::call, tasks::task_result, tasks::continue_task, tasks::put_artifact,
        tasks::get_artifact,
        console::measures::api,
        identities::enrol, identities::list,
        document, metrics::render,
    ),
    components(schemas(
        problem::Problem, dto::Run, dto::RunPage, dto::DeliveryRow, dto::RunDetailBody, dto::Event,
        dto::ReceiptBody, dto::SignedReceiptBody, dto::ReceiptAnswer, dto::CardBody, dto::ApproveBody, dto::EditBody, dto::AnswerBody,
        dto::RunResult, dto::NewRun, dto::RunStarted, dto::EditResult, dto::InboxRun, dto::InboxBody, dto::ScheduleBody,
        dto::NewSchedule, dto::DestinationBody, dto::DoctorBody, dto::HostKeyBody, dto::StuckRouteBody, tasks::TaskList,
        tasks::TaskDetail, tasks::Offered, tasks::OfferBody, work::ClaimBody, work::ClaimResult,
        work::HeartbeatBody, work::HeartbeatResult, work::SubmitBody, work::FailBody,
        work::AbortBody, work::ReportResult, work::ArtifactPut, attempt::CallBody,
        attempt::CallAnswer, attempt::TaskResult, attempt::ContinueBody,
        tasks::TaskDetail, console::measures::MeasuresBody,
        identities::NewIdentity, identities::IdentityBody,
    )),
    modifiers(&BearerAuth),
    security(("bearer" = [])),
)]
pub struct ApiDoc;

/// The document as served and as committed.
pub fn json() -> String {
    serde_json::to_string_pretty(&value()).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

/// The generated document with what every route shares (`shared`).
fn value() -> Value {
    let mut doc = serde_json::to_value(ApiDoc::openapi()).unwrap_or_default();
    shared(&mut doc);
    doc
}

/// The pattern every path parameter matches: printable text (`vouch_core::input::check_id`).
const ID_PATTERN: &str = "^[^\\x00-\\x1f\\x7f-\\x9f]+$";

/// What the extractors (`extract.rs`) and the body limit do for every route, written into
/// each operation rather than repeated in each annotation: a path parameter is an id
/// (1–1024 bytes of printable text, else 400 `bad_path`); any request may be refused as a
/// bad path or query (400); a body as bad JSON (400), too large (413) or not JSON (415), and
/// a body or a query field as invalid (422).
fn shared(doc: &mut Value) {
    let Some(paths) = doc.get_mut("paths").and_then(Value::as_object_mut) else {
        return;
    };
    for op in paths
        .values_mut()
        .filter_map(Value::as_object_mut)
        .flat_map(|item| item.values_mut())
        .filter_map(Value::as_object_mut)
    {
        let mut has_query = false;
        for p in op
            .get_mut("parameters")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            has_query |= p["in"] == "query";
            let is_path_text = p["in"] == "path" && p["schema"]["type"] == "string";
            if let Some(schema) = p.get_mut("schema").and_then(Value::as_object_mut) {
                if is_path_text && !schema.contains_key("pattern") {
                    schema.insert("pattern".into(), ID_PATTERN.into());
                    schema.insert("minLength".into(), 1.into());
                    schema.insert("maxLength".into(), vouch_core::input::ID_BYTES_MAX.into());
                }
            }
        }
        let has_body = op.contains_key("requestBody");
        let Some(responses) = op.get_mut("responses").and_then(Value::as_object_mut) else {
            continue;
        };
        let mut refusals = vec![
            ("400", "bad_path, bad_query or bad_json"),
            (
                "403",
                "forbidden: the token's scope does not allow this route (§17.1.1)",
            ),
        ];
        if has_body {
            refusals.push(("413", "too_large: the body is over the request limit"));
            refusals.push((
                "415",
                "unsupported_media_type: the body is not of the documented type",
            ));
        }
        if has_body || has_query {
            refusals.push(("422", "invalid_field: the field named in `field`"));
        }
        for (status, description) in refusals {
            responses.entry(status).or_insert_with(|| {
                serde_json::json!({
                    "description": description,
                    "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
                })
            });
        }
    }
}

/// This document.
#[utoipa::path(get, path = "/api/openapi.json", tag = "host",
    responses(
        (status = 200, description = "OpenAPI 3.1 document", content_type = "application/json"),
        (status = 401, body = crate::Problem, content_type = "application/problem+json"),
    ))]
pub async fn document() -> Json<Value> {
    Json(value())
}
