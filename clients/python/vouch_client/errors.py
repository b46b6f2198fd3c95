"""Typed errors from the host's problem objects (RFC 9457, each with a stable `code`)."""


class VouchError(Exception):
    """A refusal from the host: its HTTP status, problem `code`, `detail` and `field`."""

    def __init__(self, status, code, detail, field=None, problem=None):
        super().__init__(f"{status} {code}: {detail}" + (f" (field {field})" if field else ""))
        self.status = status
        self.code = code
        self.detail = detail
        self.field = field
        self.problem = problem or {}


class Unauthorized(VouchError):
    """401: no token, or one this host does not know (removed?)."""


class Forbidden(VouchError):
    """403: the token's scope may not do this, or acts as another identity."""


class BadSignature(Forbidden):
    """403 `bad_signature`: the statement is not signed by the claimant's key."""


class NotFound(VouchError):
    """404: no such task, attempt, run or artifact."""


class Conflict(VouchError):
    """409: the request's premise no longer holds; nothing changed."""


class Refused(Conflict):
    """409 `refused`: not (or no longer) the live claimant; stop working on the attempt."""


class Replayed(Conflict):
    """409 `replayed`: this nonce was used before; sign every statement with a fresh one."""


class InvalidField(VouchError):
    """422 `invalid_field`: a named field is wrong (`field`)."""


class InvalidResult(VouchError):
    """422 `invalid_result`: the result does not match the task type's output schema; it cost
    one repair and the attempt is still live."""


class TooLarge(VouchError):
    """413 `too_large`."""


class Unavailable(VouchError):
    """503: the host cannot do this now (or has no such store)."""


BY_CODE = {
    "unauthorized": Unauthorized,
    "forbidden": Forbidden,
    "bad_signature": BadSignature,
    "not_found": NotFound,
    "conflict": Conflict,
    "refused": Refused,
    "replayed": Replayed,
    "invalid_field": InvalidField,
    "invalid_result": InvalidResult,
    "too_large": TooLarge,
    "unavailable": Unavailable,
}

BY_STATUS = {401: Unauthorized, 403: Forbidden, 404: NotFound, 409: Conflict, 413: TooLarge,
             422: InvalidField, 503: Unavailable}


def from_problem(status, problem):
    """The exception for a problem object (the code decides, else the status)."""
    if not isinstance(problem, dict):
        problem = {}
    code = str(problem.get("code") or "")
    cls = BY_CODE.get(code) or BY_STATUS.get(status, VouchError)
    detail = str(problem.get("detail") or problem.get("title") or f"HTTP {status}")
    return cls(status, code or f"http_{status}", detail, problem.get("field"), problem)
