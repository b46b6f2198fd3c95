"""An MCP client nobody on vouch wrote: the official MCP Python SDK drives vouch's MCP server.

    python mcp_client.py stdio VOUCH_BIN HOME WORKER
    python mcp_client.py http URL PERSON_TOKEN WORKER_TOKEN WORKER SECRET_HEX

Over stdio it starts `vouch mcp --name WORKER`, which signs the worker's claims and reports
with the key in the home. Over HTTP the server holds no worker key, so this client signs the
canonical statements itself with WORKER's Ed25519 secret (contract §13.6.2). Over HTTP the
MCP session holds a worker token bound to WORKER; the person's side (the offer, the approval)
goes through the JSON API with the person's token, and the worker token is refused there and
for the person's tools (§17.1.1).

It lists the tools, drives one task end to end (offer, claim, heartbeat, artifact, a malformed
submission sent back, the result accepted) and one declared delivery end to end (declare,
deliver, finish, receipt, signed receipt), then prints one JSON line of what it saw. Any
surprise raises, so the process exits non-zero.
"""

import asyncio
import hashlib
import json
import secrets
import sys
import time

import httpx2
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

WANTED = {
    "task_list", "task_offer", "task_claim", "task_heartbeat", "task_submit", "task_fail",
    "task_abort", "task_continue", "task_result", "task_cancel", "artifact_put", "artifact_get",
    "declare", "clarify", "finish", "run_status", "receipt",
    "write", "show", "save", "send", "reply", "draft", "schedule", "delete",
}


def canonical(value):
    """RFC 8785 for the values signed here (ASCII strings, integers, null)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def cid_of(value):
    return "sha256:" + hashlib.sha256(canonical(value).encode()).hexdigest()


class Signer:
    """Signs claims and reports over HTTP; over stdio the server signs."""

    def __init__(self, name, secret_hex):
        self.name = name
        self.key = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(secret_hex)) if secret_hex else None

    def sign(self, statement):
        return self.key.sign(canonical(statement).encode()).hex()

    @staticmethod
    def stamp():
        """Every signed statement carries the worker's clock and a fresh nonce (§13.6.3)."""
        return int(time.time() * 1000), secrets.token_hex(16)

    def claim(self, args):
        if not self.key:
            return args
        at_ms, nonce = self.stamp()
        policy = {"profile": "default", "context": "autonomous"}
        statement = {"claim": {"claimant": self.name, "task": None, "profile": "default",
                               "policy_fingerprint": cid_of(policy), "at_ms": at_ms, "nonce": nonce}}
        return {**args, "claimant": self.name, "at_ms": at_ms, "nonce": nonce,
                "signature": self.sign(statement)}

    def attempt_statement(self, kind, args, **extra):
        if not self.key:
            return args
        at_ms, nonce = self.stamp()
        statement = {kind: {**extra, "task": args["task"], "attempt": args["attempt"],
                            "claimant": self.name, "epoch": args["epoch"],
                            "at_ms": at_ms, "nonce": nonce}}
        return {**args, "claimant": self.name, "at_ms": at_ms, "nonce": nonce,
                "signature": self.sign(statement)}

    def report(self, args, outcome, output):
        return self.attempt_statement("report", args, outcome=outcome, output=output, run=args.get("run"))

    def heartbeat(self, args):
        return self.attempt_statement("heartbeat", args)

    def artifact(self, args, data):
        cid = "sha256:" + hashlib.sha256(data).hexdigest()
        return self.attempt_statement("artifact", args, cid=cid)


async def call(session, name, args, ok=True):
    result = await session.call_tool(name, args)
    value = result.structured_content
    if value is None:
        value = json.loads(result.content[0].text)
    if ok and result.is_error:
        raise AssertionError(f"{name} failed: {value}")
    if not ok and not result.is_error:
        raise AssertionError(f"{name} should have been refused: {value}")
    return value


async def drive(session, signer, mode, api=None, worker_api=None, agent=None):
    await session.initialize()
    if agent is not None:
        await agent.initialize()
    else:
        agent = session
    tools = {t.name for t in (await session.list_tools()).tools}
    missing = WANTED - tools
    assert not missing, f"tools missing: {missing}"

    # One task end to end.
    offer = {"type": "freeform", "brief": "Summarise the notes", "tags": ["mcp"]}
    if api is None:
        offered = await call(session, "task_offer", offer)
    else:
        # A worker token offers nothing; the person offers over the JSON API.
        refused = await call(session, "task_offer", offer, ok=False)
        assert refused["code"] == "forbidden", refused
        r = await api.post("/api/tasks", json=offer)
        assert r.status_code == 201, r.text
        offered = r.json()
    task = offered["task"]["id"]
    claim = await call(session, "task_claim", signer.claim({"tags": ["mcp"]}))
    assert claim["claimed"] and claim["task"]["id"] == task, claim
    # The claim opened the attempt's run on the host: a submit names it.
    assert claim["run"] and claim["attempt"]["run_id"] == claim["run"], claim
    attempt = {"task": task, "attempt": claim["attempt"]["n"], "epoch": claim["attempt"]["epoch"]}
    if signer.key:
        attempt["claimant"] = signer.name
    signed_beat = signer.heartbeat(attempt)
    beat = await call(session, "task_heartbeat", signed_beat)
    assert beat["cancelled"] is False, beat
    if signer.key:
        # The same signed heartbeat again is a replay (§13.6.3).
        replayed = await call(session, "task_heartbeat", signed_beat, ok=False)
        assert replayed["code"] == "replayed", replayed
    put = await call(session, "artifact_put", signer.artifact({**attempt, "text": "the full summary"}, b"the full summary"))
    got = await call(session, "artifact_get", {"cid": put["cid"]})
    assert got["text"] == "the full summary", got
    none = await call(session, "task_result", {"task": task}, ok=False)
    assert none["code"] == "no_result", none
    result = {"summary": "Three notes, one decision.", "artifacts": [put["cid"]]}
    runless = await call(session, "task_submit", signer.report({**attempt, "result": result}, "accepted", cid_of(result)), ok=False)
    assert runless["code"] == "wrong_run", runless
    attempt["run"] = claim["run"]
    bad = {"summary": ""}
    refused = await call(session, "task_submit", signer.report({**attempt, "result": bad}, "accepted", cid_of(bad)), ok=False)
    assert refused["code"] == "invalid_result" and "at /summary" in refused["detail"], refused
    done = await call(session, "task_submit", signer.report({**attempt, "result": result}, "accepted", cid_of(result)))
    assert done["task"]["state"] == "completed", done
    late = await call(session, "task_fail", signer.report({**attempt, "retryable": True, "reason": "late"}, "failed", None), ok=False)
    assert late["code"] == "refused", late
    got = await call(session, "task_result", {"task": task})
    assert got["output"] == result and got["run"] == claim["run"], got
    if api is None:
        more = await call(session, "task_continue", {"task": task, "instructions": "more"})
        assert more["task"]["spec"]["references"] == [task], more
    else:
        refused = await call(session, "task_continue", {"task": task, "instructions": "more"}, ok=False)
        assert refused["code"] == "forbidden", refused
        # A worker token drives only the runs of its own live attempts.
        refused = await call(session, "declare", {"title": "x", "deliveries": []}, ok=False)
        assert refused["code"] == "forbidden", refused

    # One declared delivery end to end, under the terminal contract.
    declared = await call(agent, "declare", {
        "title": "Save today's note",
        "deliveries": [{"id": "d1", "verb": "save", "destination": {"kind": "folder", "address": f"Notes/mcp-{mode}.md"}}],
    })
    run = declared["run"]
    assert declared["ok"], declared
    undeclared = await call(agent, "save", {"run": run, "delivery": "d9", "payload": {"text": "x"}})
    assert undeclared["ok"] is False, undeclared
    delivered = await call(agent, "save", {"run": run, "delivery": "d1", "payload": {"text": "from an MCP agent\n"}})
    assert delivered["ok"], delivered
    status = await call(agent, "run_status", {"run": run})
    assert [d["status"] for d in status["deliveries"]] == ["verified"], status
    finished = await call(agent, "finish", {"run": run, "text": "Saved the note."})
    assert finished["ended"] == "succeeded", finished
    receipt = await call(agent, "receipt", {"run": run})
    assert receipt["outcome"] == "succeeded" and receipt["receipt"], receipt
    signed = await call(agent, "receipt", {"run": run, "signed": True})
    assert signed["format"] == "vouch-signed-receipt/1" and signed["signature"], signed
    again = await call(agent, "save", {"run": run, "delivery": "d1", "payload": {"text": "again"}}, ok=False)
    assert again["code"] == "refused", again

    approved = None
    if api is not None:
        # Overwriting the note cannot be undone: the host makes the agent's delivery wait for
        # the person (§7); the person approves exactly its hash over the HTTP API.
        second = await call(agent, "declare", {
            "title": "Rewrite today's note",
            "deliveries": [{"id": "d1", "verb": "save", "destination": {"kind": "folder", "address": f"Notes/mcp-{mode}.md"}}],
        })
        run2 = second["run"]
        waiting = await call(agent, "save", {"run": run2, "delivery": "d1", "payload": {"text": "rewritten\n"}})
        assert "waiting" in waiting, waiting
        status = await call(agent, "run_status", {"run": run2})
        card = status["open_cards"][0]
        early = await call(agent, "finish", {"run": run2, "text": "done?"}, ok=False)
        assert early["code"] == "refused", early
        # The worker's own token cannot approve its delivery: that is the person's.
        r = await worker_api.post(f"/api/runs/{run2}/deliveries/d1/approve", json={"hash": card["payload_hash"]})
        assert r.status_code == 403 and r.json()["code"] == "forbidden", r.text
        r = await api.post(f"/api/runs/{run2}/deliveries/d1/approve", json={"hash": card["payload_hash"]})
        assert r.status_code == 200, r.text
        status = await call(agent, "run_status", {"run": run2})
        assert [d["status"] for d in status["deliveries"]] == ["verified"], status
        finished = await call(agent, "finish", {"run": run2, "text": "Rewrote the note."})
        assert finished["ended"] == "succeeded", finished
        approved = run2

    print(json.dumps({"tools": sorted(tools), "task": task, "run": run, "approved_run": approved, "receipt": receipt["receipt"]}))


async def main():
    mode = sys.argv[1]
    if mode == "stdio":
        vouch, home, worker = sys.argv[2:5]
        params = StdioServerParameters(command=vouch, args=["--home", home, "mcp", "--name", worker])
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await drive(session, Signer(worker, None), mode)
    elif mode == "http":
        url, person_token, worker_token, worker, secret = sys.argv[2:7]
        person = {"Authorization": f"Bearer {person_token}"}
        headers = {"Authorization": f"Bearer {worker_token}"}
        client = httpx2.AsyncClient(headers=headers, timeout=60)
        base = url.rsplit("/mcp", 1)[0]
        async with client, httpx2.AsyncClient(base_url=base, headers=person, timeout=60) as api, \
                httpx2.AsyncClient(base_url=base, headers=headers, timeout=60) as worker_api:
            person_client = httpx2.AsyncClient(headers=person, timeout=60)
            async with person_client, streamable_http_client(url, http_client=client) as (read, write), \
                    streamable_http_client(url, http_client=person_client) as (pread, pwrite):
                async with ClientSession(read, write) as session, ClientSession(pread, pwrite) as agent:
                    await drive(session, Signer(worker, secret), mode, api, worker_api, agent)
    else:
        raise SystemExit(f"unknown mode {mode}; use stdio or http")


asyncio.run(main())
