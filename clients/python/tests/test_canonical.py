"""RFC 8785 canonical JSON against the vectors the Rust host checks too, and signing."""

import json
import os
import unittest

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from vouch_client import canonical, content_id, errors, generate_key, public_key_string

VECTORS = os.path.join(os.path.dirname(__file__), "canonical_vectors.json")


class CanonicalJson(unittest.TestCase):
    def test_every_shared_vector(self):
        with open(VECTORS, encoding="utf-8") as f:
            vectors = json.load(f)["vectors"]
        self.assertGreaterEqual(len(vectors), 40)
        for v in vectors:
            with self.subTest(v["name"]):
                self.assertEqual(canonical(json.loads(v["input"])), v["canonical"])

    def test_what_cannot_be_signed_is_refused(self):
        for bad in [float("nan"), float("inf"), 10 ** 400, "\ud800", {1: "x"}, object()]:
            with self.subTest(repr(bad)[:20]):
                with self.assertRaises((ValueError, TypeError)):
                    canonical(bad)

    def test_a_content_id_is_the_hash_of_the_canonical_form(self):
        self.assertEqual(content_id({"b": 1, "a": [1.0, "x"]}), content_id({"a": [1, "x"], "b": 1.0}))
        self.assertTrue(content_id({}).startswith("sha256:"))


class Signing(unittest.TestCase):
    def test_a_signature_verifies_over_the_canonical_bytes(self):
        key = generate_key()
        text = public_key_string(key)
        self.assertTrue(text.startswith("ed25519:") and len(text) == 8 + 64)
        statement = {"heartbeat": {"task": "t1", "attempt": 1, "claimant": "py", "epoch": 2,
                                   "at_ms": 5, "nonce": "0123456789abcdef"}}
        sig = key.sign(canonical(statement).encode())
        Ed25519PublicKey.from_public_bytes(bytes.fromhex(text[8:])).verify(sig, canonical(statement).encode())


class Problems(unittest.TestCase):
    def test_codes_pick_the_exception(self):
        cases = [
            (409, "replayed", errors.Replayed), (409, "refused", errors.Refused),
            (409, "conflict", errors.Conflict), (403, "bad_signature", errors.BadSignature),
            (403, "forbidden", errors.Forbidden), (422, "invalid_result", errors.InvalidResult),
            (422, "invalid_field", errors.InvalidField), (401, "unauthorized", errors.Unauthorized),
            (404, "not_found", errors.NotFound), (418, "teapot", errors.VouchError),
            (409, "something_new", errors.Conflict),
        ]
        for status, code, cls in cases:
            with self.subTest(code):
                e = errors.from_problem(status, {"code": code, "detail": "d", "field": "f"})
                self.assertIs(type(e), cls)
                self.assertEqual((e.status, e.detail, e.field), (status, "d", "f"))
        self.assertTrue(issubclass(errors.Replayed, errors.Conflict))
        self.assertTrue(issubclass(errors.BadSignature, errors.Forbidden))
        self.assertIsInstance(errors.from_problem(500, "not an object"), errors.VouchError)


if __name__ == "__main__":
    unittest.main()
