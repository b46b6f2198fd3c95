"""A worker's side of a vouch host over HTTP (contract §13, §17).

Every worker statement — claim, heartbeat, artifact upload, submit, fail, abort, call — is
signed with the worker's Ed25519 key over its RFC 8785 canonical JSON, and carries the
worker's clock (`at_ms`, within 60 s of the host's) and a fresh `nonce`: the host refuses a
nonce it has seen before from that identity (`Replayed`).
"""

import hashlib
import json
import secrets
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Optional

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from .canonical import canonical_bytes
from .errors import Unavailable, VouchError, from_problem

PUBLIC_KEY_PREFIX = "ed25519:"


def generate_key():
    """A new Ed25519 key, made where the worker runs (its secret never leaves)."""
    return Ed25519PrivateKey.generate()


def key_from_hex(secret_hex):
    return Ed25519PrivateKey.from_private_bytes(bytes.fromhex(secret_hex))


def load_key_file(path):
    """A vouch key file (`vouch identity new NAME` writes `identities/NAME.key`)."""
    with open(path, encoding="utf-8") as f:
        return key_from_hex(json.load(f)["secret_key"])


def public_key_string(key):
    """`ed25519:` and the 64 hex digits of the public key: what the host enrols."""
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return PUBLIC_KEY_PREFIX + raw.hex()


def content_id(value):
    """The content id of a JSON value: sha256 of its canonical form."""
    return "sha256:" + hashlib.sha256(canonical_bytes(value)).hexdigest()


def bytes_id(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def new_nonce():
    return secrets.token_hex(16)


def now_ms():
    return int(time.time() * 1000)


@dataclass
class Attempt:
    """A live attempt as its claimant holds it (from the claim's answer)."""

    task: str
    n: int
    epoch: int
    run: Optional[str] = None
    task_record: Optional[dict] = None
    resumption: bool = False

    def ref(self):
        return {"task": self.task, "attempt": self.n, "epoch": self.epoch}


class Client:
    """One worker identity's calls to one host.

    `url` is the host's base URL (`http://127.0.0.1:8080`), `token` a worker token bound to
    `identity` (`vouch token new NAME --scope worker --identity IDENTITY`), `key` the
    identity's Ed25519 private key.
    """

    def __init__(self, url, token, identity=None, key=None, timeout=30.0, clock=now_ms):
        self.url = url.rstrip("/")
        self.token = token
        self.identity = identity
        self.key = key
        self.timeout = timeout
        self.clock = clock

    # ------------------------------------------------------------------ transport

    def request(self, method, path, body=None, query=None, data=None, content_type=None, headers=None):
        """One call; the decoded JSON answer, or a `VouchError` subclass from the problem."""
        url = self.url + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        h = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            content_type = "application/json"
        if content_type:
            h["Content-Type"] = content_type
        h.update(headers or {})
        req = urllib.request.Request(url, data=data, method=method, headers=h)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                raw = r.read()
                ctype = r.headers.get("Content-Type", "")
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                problem = json.loads(raw)
            except ValueError:
                problem = {"detail": raw.decode("utf-8", "replace")[:500]}
            raise from_problem(e.code, problem) from None
        except (urllib.error.URLError, OSError) as e:
            # The host is down or unreachable: the same typed error as its own 503.
            reason = getattr(e, "reason", e)
            raise Unavailable(0, "unavailable", f"cannot reach the vouch host at {self.url}: {reason}") from None
        if not raw:
            return None
        if "json" in ctype:
            return json.loads(raw)
        return raw

    # ------------------------------------------------------------------ signing

    def _signer(self):
        if self.key is None or not self.identity:
            raise ValueError("this client holds no worker identity and key: give identity= and key=")
        return self.identity

    def sign(self, statement):
        """The hex Ed25519 signature over the canonical JSON of `statement`."""
        return self.key.sign(canonical_bytes(statement)).hex()

    def _stamp(self):
        return self.clock(), new_nonce()

    def _attempt_statement(self, kind, attempt, **fields):
        """`{kind: {..fields, task, attempt, claimant, epoch, at_ms, nonce}}` signed, and the
        wire fields (`claimant`, `epoch`, `at_ms`, `nonce`, `signature`)."""
        me = self._signer()
        at_ms, nonce = self._stamp()
        statement = {kind: {**fields, "task": attempt.task, "attempt": attempt.n, "claimant": me,
                            "epoch": attempt.epoch, "at_ms": at_ms, "nonce": nonce}}
        return {"claimant": me, "epoch": attempt.epoch, "at_ms": at_ms, "nonce": nonce,
                "signature": self.sign(statement)}

    # ------------------------------------------------------------------ the worker's calls

    def claim(self, types=(), tags=(), profile="default", model=None, wait_s=0):
        """Claim the oldest claimable task matching the filters: an `Attempt`, or None."""
        me = self._signer()
        at_ms, nonce = self._stamp()
        policy = {"profile": profile, "context": "autonomous"}
        statement = {"claim": {"claimant": me, "task": None, "profile": profile,
                               "policy_fingerprint": content_id(policy), "at_ms": at_ms,
                               "nonce": nonce}}
        body = {"claimant": me, "profile": profile, "types": list(types), "tags": list(tags),
                "policy": policy, "at_ms": at_ms, "nonce": nonce, "signature": self.sign(statement)}
        if model is not None:
            body["model"] = model
        query = {"wait_s": int(wait_s)} if wait_s else None
        answer = self.request("POST", "/api/tasks/claim-next", body, query=query)
        if not answer.get("claimed"):
            return None
        a = answer["attempt"]
        # The attempt's run on the host, when the host opens one with the claim.
        run = answer.get("run") or a.get("run") or a.get("run_id")
        return Attempt(task=answer["task"]["id"], n=a["n"], epoch=a["epoch"], run=run,
                       task_record=answer["task"], resumption=bool(answer.get("resumption")))

    def heartbeat(self, attempt):
        """Keep the lease; `{"cancelled": bool, "lease_until_ms": ...}`."""
        body = self._attempt_statement("heartbeat", attempt)
        return self.request("POST", f"/api/tasks/{_seg(attempt.task)}/attempts/{attempt.n}/heartbeat", body)

    def put_artifact(self, attempt, data):
        """Store an output artifact of the live attempt; its content id."""
        if isinstance(data, str):
            data = data.encode("utf-8")
        cid = bytes_id(data)
        signed = self._attempt_statement("artifact", attempt, cid=cid)
        query = {"task": attempt.task, "attempt": attempt.n, **signed}
        answer = self.request("PUT", f"/api/artifacts/{cid}", query=query, data=data,
                              content_type="application/octet-stream")
        return answer["cid"]

    def get_artifact(self, cid):
        return self.request("GET", f"/api/artifacts/{cid}")

    def _report(self, attempt, route, outcome, output, run, extra):
        run = run if run is not None else attempt.run
        signed = self._attempt_statement("report", attempt, outcome=outcome, output=output, run=run)
        body = {**extra, **signed}
        if run is not None:
            body["run"] = run
        return self.request("POST", f"/api/tasks/{_seg(attempt.task)}/attempts/{attempt.n}/{route}", body)

    def submit(self, attempt, result, self_assessment=None, run=None, usage=None):
        """Submit the result (the attempt's `run` is passed through when it has one)."""
        extra = {"result": result}
        if self_assessment is not None:
            extra["self_assessment"] = self_assessment
        if usage is not None:
            extra["usage"] = usage
        return self._report(attempt, "submit", "accepted", content_id(result), run, extra)

    def result(self, task_id):
        """A task's accepted output (`GET /api/tasks/{id}/result`): `{"output", "result"
        (its content id), "run", "attempt", …}`, or `Conflict` (`no_result`) while it has none."""
        return self.request("GET", f"/api/tasks/{_seg(task_id)}/result")

    def fail(self, attempt, reason, retryable=True, failure_class=None, run=None, usage=None):
        extra = {"reason": reason, "retryable": bool(retryable)}
        if failure_class is not None:
            extra["class"] = failure_class
        if usage is not None:
            extra["usage"] = usage
        return self._report(attempt, "fail", "failed", None, run, extra)

    def abort(self, attempt, reason):
        signed = self._attempt_statement("report", attempt, outcome="aborted", output=None, run=None)
        body = {"reason": reason, **signed}
        return self.request("POST", f"/api/tasks/{_seg(attempt.task)}/attempts/{attempt.n}/abort", body)

    def call(self, attempt, tool, args, usage=None):
        """Call a host tool (`declare`, `save`, `send`, `clarify`, `finish`, …) in the
        attempt's run: `POST /api/tasks/{id}/attempts/{n}/call`, signed like every statement.
        `usage`: `{"prompt_tokens", "completion_tokens"}` your model spent on the turn that
        made this call (give it with the turn's first call): the run's cost counts it."""
        fields = {"tool": tool, "args": args}
        if usage is not None:
            fields["usage"] = {"prompt_tokens": int(usage["prompt_tokens"]),
                               "completion_tokens": int(usage["completion_tokens"])}
        signed = self._attempt_statement("call", attempt, **fields)
        body = {**fields, **signed}
        return self.request("POST", f"/api/tasks/{_seg(attempt.task)}/attempts/{attempt.n}/call", body)

    # ------------------------------------------------------------------ other scopes

    def offer(self, task_type, brief, idempotency_key=None, **fields):
        """Offer a task (a person token)."""
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        return self.request("POST", "/api/tasks", {"type": task_type, "brief": brief, **fields}, headers=headers)

    def task(self, task_id):
        return self.request("GET", f"/api/tasks/{_seg(task_id)}")

    def enrol(self, name, public_key):
        """Register a worker's public key (an admin token)."""
        return self.request("POST", "/api/identities", {"name": name, "public_key": public_key})


def _seg(s):
    return urllib.parse.quote(str(s), safe="")


__all__ = ["Attempt", "Client", "VouchError", "generate_key", "key_from_hex", "load_key_file",
           "public_key_string", "content_id", "bytes_id", "new_nonce"]
