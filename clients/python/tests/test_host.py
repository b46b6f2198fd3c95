"""The client against a real `vouch serve --http` (the binary from VOUCH_BIN, else the
repository's target/debug/vouch): enrolment of a key made here, signed and fresh worker
statements, replays refused, typed errors, and the worker loop draining tasks."""

import json
import os
import shutil
import subprocess
import tempfile
import threading
import unittest
from http.server import BaseHTTPRequestHandler, HTTPServer

from vouch_client import (SUSPENDED, Attempt, BadSignature, Client, Conflict, Fail, Forbidden,
                          InvalidField, Refused, Replayed, Unavailable, Worker, generate_key, public_key_string)

HERE = os.path.dirname(os.path.abspath(__file__))


def vouch_bin():
    path = os.environ.get("VOUCH_BIN") or os.path.join(HERE, "..", "..", "..", "target", "debug", "vouch")
    if not os.path.isfile(path):
        raise AssertionError(f"no vouch binary at {path}: build it (cargo build -p vouch-cli --bin vouch) or set VOUCH_BIN")
    return path


class Host:
    """A fresh home and `vouch serve --http` on a loopback port, stopped at the end."""

    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="vouch-client-")
        self.home = os.path.join(self.tmp, "home")
        self.env = {k: v for k, v in os.environ.items()
                    if k not in ("VOUCH_DATABASE_URL", "DBUS_SESSION_BUS_ADDRESS", "VOUCH_FOLDER_ROOT")}
        self.vouch("init")
        self.person = self.vouch_json("token", "new", "person")["token"]
        self.admin = self.vouch_json("token", "new", "admin", "--scope", "admin")["token"]
        self.proc = subprocess.Popen([vouch_bin(), "--home", self.home, "--json", "serve", "--http", "127.0.0.1:0"],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=self.env, text=True)
        line = self.proc.stdout.readline()
        self.url = "http://" + json.loads(line)["listening"]

    def vouch(self, *args):
        out = subprocess.run([vouch_bin(), "--home", self.home, *args], capture_output=True, text=True, env=self.env)
        if out.returncode != 0:
            raise AssertionError(f"vouch {' '.join(args)}: {out.stderr}")
        return out.stdout

    def vouch_json(self, *args):
        return json.loads(self.vouch("--json", *args))

    def worker(self, name):
        """A key made here, enrolled by its public key, and a worker token for it."""
        key = generate_key()
        Client(self.url, self.admin).enrol(name, public_key_string(key))
        token = self.vouch_json("token", "new", f"{name}-token", "--scope", "worker", "--identity", name)["token"]
        return Client(self.url, token, identity=name, key=key)

    def close(self):
        self.proc.kill()
        self.proc.wait()
        self.proc.stdout.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


class AgainstARealHost(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.host = Host()
        cls.person = Client(cls.host.url, cls.host.person)
        cls.w = cls.host.worker("py1")

    @classmethod
    def tearDownClass(cls):
        cls.host.close()

    def offer(self, brief, **fields):
        return self.person.offer("freeform", brief, tags=[self.id().rsplit(".", 1)[-1][:60]], **fields)["task"]["id"]

    def claim(self):
        a = self.w.claim(tags=[self.id().rsplit(".", 1)[-1][:60]])
        self.assertIsNotNone(a)
        return a

    def test_enrolment_refuses_a_taken_name_and_a_bad_key(self):
        admin = Client(self.host.url, self.host.admin)
        with self.assertRaises(Conflict) as e:
            admin.enrol("py1", public_key_string(generate_key()))
        self.assertEqual(e.exception.field, "name")
        with self.assertRaises(InvalidField) as e:
            admin.enrol("py-bad", "ed25519:1234")
        self.assertEqual(e.exception.field, "public_key")
        with self.assertRaises(Forbidden):
            self.person.enrol("py-person", public_key_string(generate_key()))
        names = [i["name"] for i in admin.request("GET", "/api/identities")]
        self.assertIn("py1", names)

    def test_a_task_is_claimed_heartbeaten_given_an_artifact_and_submitted(self):
        task = self.offer("Summarise the notes")
        a = self.claim()
        self.assertEqual(a.task, task)
        self.assertFalse(self.w.heartbeat(a)["cancelled"])
        self.assertEqual(self.person.task(task)["task"]["state"], "running")
        cid = self.w.put_artifact(a, b"the full summary")
        self.assertEqual(self.person.get_artifact(cid), b"the full summary")
        done = self.w.submit(a, {"summary": "Three notes, one decision.", "artifacts": [cid]})
        self.assertEqual(done["task"]["state"], "completed")
        # After the end, the claimant is refused (a fresh, valid statement: not a replay).
        with self.assertRaises(Refused):
            self.w.heartbeat(a)

    def test_every_replayed_statement_is_refused(self):
        self.offer("Replays")
        # The same signed claim twice: the second is a replay, and claims nothing.
        at_ms, nonce = self.w.clock(), "replayed-claim-0001"
        self.w._stamp = lambda: (at_ms, nonce)
        try:
            a = self.claim()
            with self.assertRaises(Replayed) as e:
                self.w.claim(tags=["anything"])
            self.assertEqual(e.exception.field, "nonce")
            with self.assertRaises(Replayed):
                self.w.heartbeat(a)  # the nonce is the identity's, whatever the statement
        finally:
            del self.w._stamp
        beat = self.w._attempt_statement("heartbeat", a)
        path = f"/api/tasks/{a.task}/attempts/{a.n}/heartbeat"
        self.w.request("POST", path, beat)
        with self.assertRaises(Replayed):
            self.w.request("POST", path, beat)
        # Unsigned: refused, naming what is missing; signed by another key: bad signature.
        with self.assertRaises(InvalidField):
            self.w.request("POST", path, {"claimant": "py1", "epoch": a.epoch})
        forged = dict(beat, nonce="forged-nonce-000001")
        with self.assertRaises(BadSignature):
            self.w.request("POST", path, forged)
        result = {"summary": "once"}
        signed = self.w._attempt_statement("report", a, outcome="accepted",
                                           output=__import__("vouch_client").content_id(result), run=a.run)
        submit = f"/api/tasks/{a.task}/attempts/{a.n}/submit"
        body = {"result": result, "run": a.run, **signed}
        self.assertEqual(self.w.request("POST", submit, body)["task"]["state"], "completed")
        with self.assertRaises(Replayed):
            self.w.request("POST", submit, body)

    def test_a_python_workers_irreversible_send_waits_for_the_person_and_its_receipt_is_on_the_host(self):
        received = []

        class Hook(BaseHTTPRequestHandler):
            def do_POST(self):
                received.append(self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode())
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args):
                pass

        hook = HTTPServer(("127.0.0.1", 0), Hook)
        threading.Thread(target=hook.serve_forever, daemon=True).start()
        self.addCleanup(hook.server_close)
        self.addCleanup(hook.shutdown)
        address = f"http://127.0.0.1:{hook.server_port}/hook"
        tag = self.id().rsplit(".", 1)[-1][:60]
        task = self.offer("Tell the hook")
        seen = []

        def handler(task_record, attempt, client):
            seen.append(attempt.resumption)
            if not attempt.resumption:
                client.call(attempt, "declare", {"deliveries": [
                    {"id": "d1", "verb": "send", "destination": {"kind": "webhook", "address": address}}]},
                    usage={"prompt_tokens": 40, "completion_tokens": 2})
                answer = client.call(attempt, "send", {"delivery": "d1", "payload": {"json": json.dumps({"text": "hello from python"})}})
                self.assertTrue(SUSPENDED.of(answer), answer)
                return SUSPENDED
            return {"summary": "told the hook"}

        worker = Worker(self.w, handler, tags=[tag])
        first = worker.drain()
        self.assertEqual(len(first), 1, first)
        self.assertEqual((first[0].get("suspended"), first[0].get("task")), (True, task), first)
        run = first[0]["run"]
        self.assertEqual(received, [], "nothing goes out before the person approves")
        detail = self.person.task(task)
        self.assertEqual(detail["attempts"][0]["state"], "suspended", detail)
        # The card is on the host; the worker's own token cannot decide it, the person can.
        card = next(c for c in self.person.request("GET", "/api/approvals") if c["run"] == run)
        approve = f"/api/runs/{run}/deliveries/d1/approve"
        with self.assertRaises(Forbidden):
            self.w.request("POST", approve, {"hash": card["payload_hash"]})
        self.person.request("POST", approve, {"hash": card["payload_hash"]})
        self.assertEqual(received, [], "approving only decides")
        # The resumption: the host sends once, the worker submits, the run ends on the host.
        second = worker.drain()
        self.assertEqual(seen, [False, True])
        self.assertEqual(second[0]["task"]["state"], "completed", second)
        # The tokens the handler reported with its call are the attempt's cost on the host.
        self.assertEqual(self.person.task(task)["attempts"][0]["usage"]["tokens"], 42)
        self.assertEqual(len(received), 1, received)
        self.assertIn("hello from python", received[0])
        ended = self.person.request("GET", f"/api/runs/{run}")
        self.assertEqual(ended["run"]["state"], "ended", ended)
        receipt = self.person.request("GET", f"/api/runs/{run}/receipt")
        self.assertIn("d1", json.dumps(receipt))

    def test_a_replayed_artifact_upload_is_refused(self):
        self.offer("Artifact replay")
        a = self.claim()
        data = b"bytes once"
        cid = __import__("vouch_client").bytes_id(data)
        signed = self.w._attempt_statement("artifact", a, cid=cid)
        query = {"task": a.task, "attempt": a.n, **signed}
        put = lambda: self.w.request("PUT", f"/api/artifacts/{cid}", query=query, data=data,
                                     content_type="application/octet-stream")
        self.assertEqual(put()["cid"], cid)
        with self.assertRaises(Replayed):
            put()
        self.w.abort(a, "done testing")

    def test_the_worker_loop_drains_tasks_and_reports_failures(self):
        tag = self.id().rsplit(".", 1)[-1][:60]
        ids = [self.offer(f"Task {i}") for i in range(3)]
        failing = self.person.offer("freeform", "Cannot be done", tags=[tag], max_attempts=1)["task"]["id"]

        def handler(task, attempt, client):
            self.assertIsInstance(attempt, Attempt)
            if task["spec"]["brief"] == "Cannot be done":
                raise Fail("the notes are unreadable", retryable=False, failure_class="tool_error")
            client.heartbeat(attempt)
            return {"summary": "done: " + task["spec"]["brief"]}

        answers = Worker(self.w, handler, tags=[tag]).drain()
        self.assertEqual(len(answers), 4)
        for t in ids:
            detail = self.person.task(t)
            self.assertEqual(detail["task"]["state"], "completed", detail)
            self.assertEqual(detail["attempts"][0]["claimant"], "py1")
        self.assertEqual(self.person.task(failing)["task"]["state"], "failed")
        self.assertIsNone(self.w.claim(tags=[tag]))

    def test_the_readmes_worker_gives_a_run_whose_receipt_says_accepted(self):
        tag = self.id().rsplit(".", 1)[-1][:60]
        task = self.person.offer("freeform", "Summarise the notes", tags=[tag])["task"]["id"]
        # As the README writes it.
        answers = Worker(self.w, lambda task, attempt, client: {"summary": "done"}, tags=[tag]).drain()
        self.assertEqual(len(answers), 1, answers)
        detail = self.person.task(task)
        self.assertEqual(detail["task"]["state"], "completed", detail)
        run = detail["attempts"][0]["run_id"]
        receipt = json.dumps(self.person.request("GET", f"/api/runs/{run}/receipt"))
        self.assertNotIn("handoff missing", receipt)
        self.assertIn("accepted", receipt)
        ended = self.person.request("GET", f"/api/runs/{run}")
        self.assertEqual(ended["run"]["state"], "ended", ended)
        back = self.w.result(task)
        self.assertEqual((back["output"], back["run"]), ({"summary": "done"}, run), back)

    def test_a_host_that_is_down_is_unavailable_not_a_url_error(self):
        down = Client("http://127.0.0.1:9", "t")
        with self.assertRaises(Unavailable):
            down.request("GET", "/api/tasks")

    def test_a_worker_token_acts_only_as_its_identity(self):
        other = Client(self.host.url, self.w.token, identity="py2", key=generate_key())
        with self.assertRaises(Forbidden):
            other.claim()


if __name__ == "__main__":
    unittest.main()
