//! The task board's person-side routes (§13): list and read tasks with their attempts, and
//! cancel one. Workers' routes (claim, heartbeat, report) need signed reports and come later.

use crate::extract::{ApiPath, QueryMap};
use crate::problem::{ApiError, ApiResult, Problem};
use crate::{blocking, AppState};
use axum::extract::State;
use axum::Json;
use serde::Serialize;
use serde_json::Value;
use std::sync::Arc;
use utoipa::ToSchema;
use vouch_core::board::TaskState;
use vouch_store::board::{BoardStore, TaskFilter};

/// Tasks one page lists at most.
pub const PAGE_TASKS_MAX: usize = 500;

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TaskList {
    /// Oldest first; each as `vouch task show --json` gives it.
    #[schema(value_type = Vec<Object>)]
    pub tasks: Vec<Value>,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TaskDetail {
    #[schema(value_type = Object)]
    pub task: Value,
    #[schema(value_type = Vec<Object>)]
    pub attempts: Vec<Value>,
}

fn board(s: &AppState) -> ApiResult<Arc<dyn BoardStore>> {
    s.board
        .clone()
        .ok_or_else(|| ApiError::not_found("this server has no task board"))
}

fn json<T: Serialize>(v: &T) -> ApiResult<Value> {
    serde_json::to_value(v).map_err(|e| ApiError::internal(format!("encode a task: {e}")))
}

/// Tasks, oldest first, filtered by state and tag.
#[utoipa::path(get, path = "/api/tasks", tag = "tasks",
    params(
        ("state" = Option<String>, Query, description = "waiting, queued, dispatched, running, completed, failed, cancelled, expired"),
        ("tag" = Option<String>, Query, description = "only tasks with this tag"),
        ("limit" = Option<usize>, Query, description = "1–500 (default 100)"),
    ),
    responses(
        (status = 200, body = TaskList),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 422, body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn list_tasks(State(s): State<AppState>, q: QueryMap) -> ApiResult<Json<TaskList>> {
    let limit = q.number("limit", 100, 1, PAGE_TASKS_MAX)?;
    let state = match q.0.get("state") {
        None => None,
        Some(v) => Some(
            serde_json::from_value::<TaskState>(Value::String(v.clone())).map_err(|_| {
                ApiError::field(
                    "state",
                    format!("`{v}` is not a task state; see GET /api/openapi.json"),
                )
            })?,
        ),
    };
    let filter = TaskFilter {
        state,
        tag: q.0.get("tag").cloned(),
        limit,
    };
    let board = board(&s)?;
    blocking(move || {
        let tasks = board.tasks(&filter)?;
        Ok(Json(TaskList {
            tasks: tasks.iter().map(json).collect::<ApiResult<_>>()?,
        }))
    })
    .await
}

/// One task with its attempts.
#[utoipa::path(get, path = "/api/tasks/{id}", tag = "tasks",
    params(("id" = String, Path, description = "task id")),
    responses(
        (status = 200, body = TaskDetail),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn get_task(
    State(s): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<TaskDetail>> {
    let board = board(&s)?;
    blocking(move || detail(board.as_ref(), &id).map(Json)).await
}

fn detail(board: &dyn BoardStore, id: &str) -> ApiResult<TaskDetail> {
    let task = board.task(id)?.ok_or_else(|| {
        ApiError::not_found(format!("no task `{id}`; list tasks with GET /api/tasks"))
    })?;
    Ok(TaskDetail {
        task: json(&task)?,
        attempts: board
            .attempts(id)?
            .iter()
            .map(json)
            .collect::<ApiResult<_>>()?,
    })
}

/// Cancel a task; a worker holding an attempt learns at its next heartbeat (§13.3).
#[utoipa::path(post, path = "/api/tasks/{id}/cancel", tag = "tasks",
    params(("id" = String, Path, description = "task id")),
    responses(
        (status = 200, body = TaskDetail),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn cancel_task(
    State(s): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<TaskDetail>> {
    let board = board(&s)?;
    let now = s.host.clock.now_ms();
    blocking(move || {
        if board.task(&id)?.is_none() {
            return Err(ApiError::not_found(format!(
                "no task `{id}`; list tasks with GET /api/tasks"
            )));
        }
        board.cancel(&id, now)?;
        detail(board.as_ref(), &id).map(Json)
    })
    .await
}
