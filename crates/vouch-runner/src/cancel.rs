//! The owner's cancel reaching a running attempt (contract §9.4.1, `cancel_at_turn`): the
//! board's cancel lands while the model answers a given turn, and the run asks the board at
//! each turn boundary and before each tool call whether its task was cancelled.

use serde_json::Value;
use std::sync::Arc;
use vouch_runtime::host::{ModelFactory, ModelSpec};
use vouch_runtime::model::{ChatMessage, Model, ModelError, ModelTurn, ToolSpec};
use vouch_store::board::BoardStore;
use vouch_store_sqlite::SqliteStore;

/// Models that cancel the task while they answer turn `turn` (0-based, counted over the run).
pub(crate) struct CancelWhileAnswering {
    pub inner: Arc<dyn ModelFactory>,
    pub turn: usize,
    pub board: Arc<SqliteStore>,
    pub task_id: String,
    pub now_ms: i64,
}

impl ModelFactory for CancelWhileAnswering {
    fn model(&self, spec: &Value, start_turn: usize) -> Result<Box<dyn Model>, ModelError> {
        Ok(Box::new(Cancelling {
            inner: self.inner.model(spec, start_turn)?,
            next: start_turn,
            turn: self.turn,
            board: self.board.clone(),
            task_id: self.task_id.clone(),
            now_ms: self.now_ms,
        }))
    }
    fn record(&self, model: &ModelSpec) -> ModelSpec {
        self.inner.record(model)
    }
}

struct Cancelling {
    inner: Box<dyn Model>,
    next: usize,
    turn: usize,
    board: Arc<SqliteStore>,
    task_id: String,
    now_ms: i64,
}

impl Model for Cancelling {
    fn next_turn(
        &mut self,
        messages: &[ChatMessage],
        tools: &[ToolSpec],
    ) -> Result<ModelTurn, ModelError> {
        let answer = self.inner.next_turn(messages, tools);
        if self.next == self.turn {
            // The owner's cancel becomes durable while this answer is under way.
            let _ = self.board.cancel(&self.task_id, self.now_ms);
        }
        self.next += 1;
        answer
    }
}
