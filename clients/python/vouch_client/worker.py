"""A small worker loop: claim → handler → submit (or fail), heartbeating while it works.

The handler is `handler(task, attempt, client) -> result` where `task` is the task record the
claim answered (its `kind`, `spec.brief`, `spec.input`, …). It returns the result to submit,
or raises `Fail(reason, retryable)` to report a failure; any other exception is reported as a
retryable failure of class `worker_crash`. When the host opened a run for the attempt (the
claim's answer names it), the result is submitted through that run (its `submit` tool, then
`finish`), so the run's receipt says what the board says.

The handler drives the attempt's run on the host with `client.call(attempt, tool, args)`
(`declare`, a verb such as `save` or `send`, `clarify`, `finish`): the host gives each
delivery its posture, so an irreversible act waits for the person. When a call answers that
the run waits (`SUSPENDED.of(answer)`), the handler returns `SUSPENDED`: the worker reports
nothing and is free; once the person decides, the task is claimable again as a resumption
(`attempt.resumption`), the host has carried out what was approved, and the handler goes on
(typically to its submit).
"""

import threading

from .errors import Conflict, InvalidResult, Refused, VouchError

DEFAULT_HEARTBEAT_MS = 10_000
REASON_CHARS_MAX = 4096


class Fail(Exception):
    """Raised by a handler: report the attempt failed (retried only when `retryable`)."""

    def __init__(self, reason, retryable=True, failure_class=None):
        super().__init__(reason)
        self.reason = reason
        self.retryable = retryable
        self.failure_class = failure_class


class _Suspended:
    """What a handler returns when its run waits for the person (the attempt is suspended)."""

    @staticmethod
    def of(answer):
        """Whether a `call` answer says the run now waits for the person."""
        end = (answer or {}).get("end") or {}
        return end.get("state") == "suspended"

    def __repr__(self):
        return "SUSPENDED"


SUSPENDED = _Suspended()


class _Heartbeat:
    """Heartbeats on a thread until stopped; notes a cancel or a lost attempt."""

    def __init__(self, client, attempt, every_s):
        self.client, self.attempt, self.every_s = client, attempt, every_s
        self.stop = threading.Event()
        self.cancelled = False
        self.lost = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self.stop.wait(self.every_s):
            try:
                if self.client.heartbeat(self.attempt).get("cancelled"):
                    self.cancelled = True
                    return
            except Refused as e:
                self.lost = e
                return
            except VouchError:
                continue  # a passing refusal; the next beat tries again

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


class Worker:
    """Drains tasks for one identity with one handler."""

    def __init__(self, client, handler, types=(), tags=(), profile="default"):
        self.client = client
        self.handler = handler
        self.types, self.tags, self.profile = list(types), list(tags), profile
        self.done = []

    def run_once(self, wait_s=0):
        """Claim one task and see it through: its final answer (`{"task", "attempt"}`), or
        None when nothing was claimable."""
        attempt = self.client.claim(self.types, self.tags, self.profile, wait_s=wait_s)
        if attempt is None:
            return None
        spec = (attempt.task_record or {}).get("spec") or {}
        every_ms = spec.get("heartbeat_ms") or DEFAULT_HEARTBEAT_MS
        # The first heartbeat says the work started (dispatched → running).
        self.client.heartbeat(attempt)
        with _Heartbeat(self.client, attempt, max(every_ms, 50) / 1000) as beat:
            outcome = self._handle(attempt)
        if beat.cancelled or beat.lost is not None:
            return None
        return self._report(attempt, outcome)

    def _handle(self, attempt):
        try:
            return ("result", self.handler(attempt.task_record, attempt, self.client))
        except Fail as f:
            return ("fail", f)
        except Exception as e:  # the handler's own crash: retryable, said as such
            return ("fail", Fail(f"the handler raised {type(e).__name__}: {e}", True, "worker_crash"))

    def _report(self, attempt, outcome):
        kind, value = outcome
        if kind == "result" and value is SUSPENDED:
            # The run waits for the person; the host holds the attempt. Nothing to report.
            answer = {"suspended": True, "task": attempt.task, "run": attempt.run}
            self.done.append(answer)
            return answer
        try:
            if kind == "result" and attempt.run is not None:
                answer = self._submit_through_run(attempt, value)
            elif kind == "result":
                try:
                    answer = self.client.submit(attempt, value)
                except InvalidResult as e:
                    answer = self.client.fail(attempt, _bounded(f"malformed result: {e.detail}"),
                                              True, "malformed_output")
            else:
                answer = self.client.fail(attempt, _bounded(value.reason), value.retryable,
                                          value.failure_class)
        except Conflict:
            return None  # the attempt ended meanwhile (cancelled, timed out): nothing to do
        self.done.append(answer)
        return answer

    def _submit_through_run(self, attempt, value):
        """The result goes through the attempt's run (its `submit` tool, then `finish`), so
        the run's receipt and the board say the same: the host reports the attempt from the
        run's end. A result the run refuses fails the attempt as malformed."""
        reply = self.client.call(attempt, "submit", {"result": value})
        if not (reply or {}).get("ok", False):
            text = (reply or {}).get("text") or "the run refused the result"
            return self.client.fail(attempt, _bounded(f"malformed result: {text}"), True,
                                    "malformed_output")
        end = self.client.call(attempt, "finish", {"text": ""})
        detail = self.client.task(attempt.task)
        mine = [a for a in detail.get("attempts", []) if a.get("n") == attempt.n]
        return {"task": detail["task"], "attempt": mine[0] if mine else None,
                "run": (end or {}).get("end")}

    def drain(self, max_tasks=None):
        """Work until nothing is claimable (or `max_tasks` are done); the answers."""
        answers = []
        while max_tasks is None or len(answers) < max_tasks:
            a = self.run_once()
            if a is None:
                break
            answers.append(a)
        return answers


def _bounded(text):
    text = str(text) or "failed"
    return text[:REASON_CHARS_MAX]
