"""A Python client for a vouch host's workers: RFC 8785 canonical JSON, Ed25519-signed and
fresh statements (`at_ms`, `nonce`), typed errors from the problem codes, a worker loop."""

from .canonical import canonical, canonical_bytes
from .client import (Attempt, Client, bytes_id, content_id, generate_key, key_from_hex,
                     load_key_file, new_nonce, public_key_string)
from .errors import (BadSignature, Conflict, Forbidden, InvalidField, InvalidResult, NotFound,
                     Refused, Replayed, TooLarge, Unauthorized, Unavailable, VouchError)
from .worker import SUSPENDED, Fail, Worker

__all__ = [
    "canonical", "canonical_bytes", "Attempt", "Client", "bytes_id", "content_id",
    "generate_key", "key_from_hex", "load_key_file", "new_nonce", "public_key_string",
    "BadSignature", "Conflict", "Forbidden", "InvalidField", "InvalidResult", "NotFound",
    "Refused", "Replayed", "TooLarge", "Unauthorized", "Unavailable", "VouchError",
    "Fail", "SUSPENDED", "Worker",
]
