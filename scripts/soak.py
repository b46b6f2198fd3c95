"""The soak (issue 26 #3): `vouch serve --http` for MINUTES under concurrent runs, board
workers and a schedule, against loopback providers (a real SMTP server and a webhook receiver
that does not deduplicate), killed with SIGKILL and restarted at random. The server's memory
(RSS) and open files are sampled over time. At the end the work is drained and counted at the
providers and in the store: every run ended with one terminal record and one receipt, no
effect twice (by ledger key at the webhook, by Message-ID at the SMTP server), every task
accepted at most once, every schedule slot run once. Exit 1 when any count is wrong.

Run through scripts/soak.sh, which supplies the binary and the Python environment.
"""

import argparse
import email
import http.server
import json
import os
import random
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
SMTP_SINK = os.path.join(HERE, "..", "crates", "vouch-cli", "tests", "support", "smtp_sink.py")
FINAL_TASK_STATES = ("completed", "failed", "cancelled", "expired")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Hooks:
    """A webhook receiver on loopback that applies every request (no deduplication)."""

    def __init__(self):
        self.keys = []
        self.lock = threading.Lock()
        hooks = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(n)
                with hooks.lock:
                    hooks.keys.append(self.headers.get("Idempotency-Key") or "")
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *a):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d/hook" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


class Soak:
    def __init__(self, args):
        self.args = args
        self.vouch = args.vouch
        self.tmp = tempfile.mkdtemp(prefix="vouch-soak-")
        self.home = os.path.join(self.tmp, "home")
        self.mail = os.path.join(self.tmp, "mail")
        self.rng = random.Random(args.seed)
        self.stop = threading.Event()
        self.server = None
        self.workers = {}
        self.lock = threading.Lock()
        self.http_port = free_port()
        self.samples = []  # (t_s, rss_kib, fds, threads)
        self.kills = []  # t_s of each SIGKILL of the server
        self.worker_kills = 0
        self.made = {"runs": 0, "tasks": 0, "approvals": 0, "reads": 0, "read_errors": 0}
        self.t0 = time.time()

    def log(self, msg):
        print("[soak %6.0fs] %s" % (time.time() - self.t0, msg), flush=True)

    def cmd(self, *a, check=True):
        out = subprocess.run([self.vouch, "--home", self.home, *a], capture_output=True, text=True,
                             env=self.env())
        if check and out.returncode != 0:
            raise SystemExit("vouch %s: exit %d: %s" % (" ".join(a), out.returncode, out.stderr))
        return out

    def env(self):
        e = dict(os.environ)
        for k in ("VOUCH_CRASH_AFTER", "VOUCH_MODEL_URL", "VOUCH_DATABASE_URL", "DBUS_SESSION_BUS_ADDRESS"):
            e.pop(k, None)
        e["VOUCH_HOST_ID"] = "soak"
        return e

    def spawn(self, *a):
        return subprocess.Popen([self.vouch, "--home", self.home, *a], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, env=self.env())

    # --- setting up -------------------------------------------------------------------------

    def setup(self):
        self.smtp_port = free_port()
        self.smtp = subprocess.Popen([sys.executable, SMTP_SINK, str(self.smtp_port), self.mail],
                                     stdout=subprocess.PIPE, text=True)
        if self.smtp.stdout.readline().strip() != "READY":
            raise SystemExit("the SMTP sink did not start")
        self.hooks = Hooks()
        self.cmd("init")
        with open(os.path.join(self.home, "vouch.toml"), "w") as f:
            f.write('[email]\nhost = "127.0.0.1"\nport = %d\nfrom = "soak@example.com"\n'
                    'tls = "none"\ntimeout_ms = 5000\n' % self.smtp_port)
        self.token = self.cmd("token", "new", "soak").stdout.strip().splitlines()[-1].strip()
        self.worker_script = self.write("worker.json", [
            {"declare": {"deliveries": [{"id": "d1", "verb": "send",
                                         "destination": {"kind": "webhook", "address": self.hooks.url}}]}},
            {"deliver": "d1", "payload": {"text": "hello"}},
            {"submit": {"summary": "sent"}},
            {"final": "done"},
        ])
        routine = self.write("routine.json", {"prompt": "tick", "script": [{"final": "tick"}]})
        self.cmd("schedule", "add", "tick", "--cron", "* * * * *", "--grace", "1h", "--routine", routine)

    def write(self, name, value):
        p = os.path.join(self.tmp, name)
        with open(p, "w") as f:
            json.dump(value, f)
        return p

    # --- the processes ----------------------------------------------------------------------

    def start_server(self):
        self.server = self.spawn("serve", "--http", "127.0.0.1:%d" % self.http_port)

    def start_worker(self, n):
        self.workers[n] = self.spawn("worker", "--name", "w%d" % n, "--script", self.worker_script)

    def kill(self, p):
        if p and p.poll() is None:
            p.send_signal(signal.SIGKILL)
        if p:
            p.wait()

    def api(self, method, path, body=None):
        req = urllib.request.Request("http://127.0.0.1:%d%s" % (self.http_port, path), method=method,
                                     headers={"Authorization": "Bearer " + self.token,
                                              "Content-Type": "application/json"},
                                     data=None if body is None else json.dumps(body).encode())
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read() or b"null")

    # --- the load -----------------------------------------------------------------------------

    def producer(self):
        """A new run or task about every second: an e-mail run waiting for approval, or a task
        whose run sends a webhook after approval."""
        while not self.stop.is_set():
            with self.lock:
                n = self.made["runs"] + self.made["tasks"]
            if self.rng.random() < 0.5:
                s = self.write("mail-%d.json" % n, [
                    {"declare": {"deliveries": [{"id": "d1", "verb": "send",
                                                 "destination": {"kind": "email", "address": "board@example.com"}}]}},
                    {"deliver": "d1", "payload": {"to": "board@example.com", "subject": "soak %d" % n, "body": "numbers"}},
                    {"final": ""},
                ])
                self.cmd("run", "soak %d" % n, "--script", s, check=False)
                with self.lock:
                    self.made["runs"] += 1
            else:
                self.cmd("task", "offer", "--type", "freeform", "--brief", "send %d" % n, "--max-attempts", "10",
                         "--lease-ms", "4000", "--heartbeat-ms", "1000", "--dispatch-timeout-ms", "4000")
                with self.lock:
                    self.made["tasks"] += 1
            self.stop.wait(0.5 + self.rng.random())

    def approve_all(self):
        """Approve every open card over HTTP (a card decided meanwhile is refused: not a failure)."""
        try:
            cards = self.api("GET", "/api/approvals")
        except (urllib.error.URLError, OSError, ValueError):
            return
        for c in cards or []:
            if not c.get("delivery"):
                continue
            try:
                self.api("POST", "/api/runs/%s/deliveries/%s/approve" % (c["run"], c["delivery"]),
                         {"hash": c["payload_hash"]})
                with self.lock:
                    self.made["approvals"] += 1
            except (urllib.error.URLError, OSError, ValueError):
                pass

    def approver(self):
        while not self.stop.is_set():
            self.approve_all()
            self.stop.wait(1.0 + self.rng.random())

    def reader(self):
        """Readers of the API, as a console would be."""
        paths = ["/api/inbox", "/api/runs?limit=50", "/api/tasks", "/api/schedules", "/metrics"]
        while not self.stop.is_set():
            try:
                req = urllib.request.Request("http://127.0.0.1:%d%s" % (self.http_port, self.rng.choice(paths)),
                                             headers={"Authorization": "Bearer " + self.token})
                with urllib.request.urlopen(req, timeout=30) as r:
                    r.read()
                with self.lock:
                    self.made["reads"] += 1
            except (urllib.error.URLError, OSError):
                with self.lock:
                    self.made["read_errors"] += 1
            self.stop.wait(0.2)

    def sampler(self):
        while not self.stop.is_set():
            p = self.server
            if p and p.poll() is None:
                try:
                    with open("/proc/%d/status" % p.pid) as f:
                        st = dict(line.split(":", 1) for line in f if ":" in line)
                    rss = int(st["VmRSS"].split()[0])
                    fds = len(os.listdir("/proc/%d/fd" % p.pid))
                    self.samples.append((time.time() - self.t0, rss, fds, int(st["Threads"])))
                except (OSError, KeyError, ValueError):
                    pass
            self.stop.wait(self.args.sample_s)

    def killer(self):
        """The server is killed every `--kill-s` seconds (SIGKILL; default 15–90) and started
        again 0.5–3 s later; now and then a worker with it."""
        lo, hi = self.args.kill_s
        while not self.stop.wait(lo + (hi - lo) * self.rng.random()):
            self.kill(self.server)
            self.kills.append(time.time() - self.t0)
            w = None
            if self.rng.random() < 0.3:
                w = self.rng.choice(sorted(self.workers))
                self.kill(self.workers[w])
                self.worker_kills += 1
            time.sleep(0.5 + 2.5 * self.rng.random())
            self.start_server()
            if w is not None:
                self.start_worker(w)
            self.log("server killed and restarted (%d so far); made %s" % (len(self.kills), self.made))

    # --- the end ------------------------------------------------------------------------------

    def drain(self):
        """Approve until every run has ended and every task is final (bounded)."""
        db = os.path.join(self.home, "vouch.db")
        for _ in range(self.args.drain_s // 2):
            self.approve_all()
            with sqlite3.connect("file:%s?mode=ro" % db, uri=True, timeout=30) as c:
                open_runs = c.execute("SELECT count(*) FROM runs WHERE state != 'ended'").fetchone()[0]
                open_tasks = c.execute("SELECT count(*) FROM tasks WHERE state NOT IN (%s)" %
                                       ",".join("'%s'" % s for s in FINAL_TASK_STATES)).fetchone()[0]
            if open_runs == 0 and open_tasks == 0:
                return
            time.sleep(2)
        self.log("drain ended with %d runs and %d tasks open" % (open_runs, open_tasks))

    def count(self):
        db = os.path.join(self.home, "vouch.db")
        c = sqlite3.connect("file:%s?mode=ro" % db, uri=True, timeout=30)
        q = lambda sql: c.execute(sql).fetchall()
        f = {}
        f["runs"] = q("SELECT count(*) FROM runs")[0][0]
        f["runs_not_ended"] = q("SELECT count(*) FROM runs WHERE state != 'ended'")[0][0]
        f["runs_without_one_terminal"] = q(
            "SELECT count(*) FROM runs r WHERE (SELECT count(*) FROM journal j WHERE j.run_id = r.id "
            "AND j.kind = 'terminal') != 1")[0][0]
        f["lost_receipts"] = q("SELECT count(*) FROM runs r WHERE NOT EXISTS "
                               "(SELECT 1 FROM receipts x WHERE x.run_id = r.id)")[0][0]
        f["slot_runs"] = q("SELECT count(*) FROM runs WHERE scope LIKE 'tick@%'")[0][0]
        f["slots_run_twice"] = q("SELECT count(*) FROM (SELECT scope FROM runs WHERE scope LIKE 'tick@%' "
                                 "GROUP BY scope HAVING count(*) > 1)")[0][0]
        f["tasks"] = q("SELECT count(*) FROM tasks")[0][0]
        f["tasks_by_state"] = dict(q("SELECT state, count(*) FROM tasks GROUP BY state"))
        f["attempts_by_state"] = dict(q("SELECT state, count(*) FROM task_attempts GROUP BY state"))
        f["tasks_accepted_twice"] = q("SELECT count(*) FROM (SELECT task_id FROM task_attempts "
                                      "WHERE state = 'completed' GROUP BY task_id HAVING count(*) > 1)")[0][0]
        f["ledger_by_state"] = dict(q("SELECT state, count(*) FROM ledger GROUP BY state"))
        # At the providers.
        keys = list(self.hooks.keys)
        f["webhook_requests"] = len(keys)
        f["webhook_keys_twice"] = len(keys) - len(set(keys))
        ids = []
        for name in os.listdir(self.mail):
            if name.endswith(".eml"):
                with open(os.path.join(self.mail, name), "rb") as fh:
                    ids.append(email.message_from_bytes(fh.read()).get("Message-ID", ""))
        f["emails"] = len(ids)
        f["emails_twice"] = len(ids) - len(set(ids))
        # An act the ledger holds done has its effect at a provider (one request or message each).
        f["done_keys"] = q("SELECT count(*) FROM ledger WHERE state = 'done'")[0][0]
        f["done_without_effect"] = max(0, f["done_keys"] - len(set(keys)) - len(set(ids)))
        c.close()
        return f

    def plot(self, path):
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        if not self.samples:
            return
        t = [s[0] / 60 for s in self.samples]
        fig, (a, b) = plt.subplots(2, 1, figsize=(9, 5.5), sharex=True)
        a.plot(t, [s[1] / 1024 for s in self.samples], lw=1, color="tab:blue")
        a.set_ylabel("server RSS (MiB)")
        a.set_ylim(bottom=0)
        b.plot(t, [s[2] for s in self.samples], lw=1, color="tab:green", label="open files")
        b.plot(t, [s[3] for s in self.samples], lw=1, color="tab:gray", label="threads")
        b.set_ylabel("count")
        b.set_ylim(bottom=0)
        b.legend(loc="upper left", fontsize=8)
        b.set_xlabel("minutes")
        for ax in (a, b):
            for k in self.kills:
                ax.axvline(k / 60, color="tab:red", lw=0.5, alpha=0.5)
            ax.grid(alpha=0.3)
        a.set_title("vouch serve --http soak: %d min, %d SIGKILLs (red lines), %d runs and %d tasks made"
                    % (self.args.minutes, len(self.kills), self.made["runs"], self.made["tasks"]), fontsize=9)
        fig.tight_layout()
        fig.savefig(path, dpi=110)

    def run(self):
        self.setup()
        self.start_server()
        for n in range(self.args.workers):
            self.start_worker(n)
        threads = [threading.Thread(target=f, daemon=True)
                   for f in (self.producer, self.approver, self.reader, self.sampler, self.killer)]
        for th in threads:
            th.start()
        self.stop.wait(self.args.minutes * 60)
        self.stop.set()
        for th in threads:
            th.join()
        self.log("load stopped; draining")
        self.stop.clear()
        sampler = threading.Thread(target=self.sampler, daemon=True)
        sampler.start()
        self.drain()
        self.stop.set()
        sampler.join()
        for p in [self.server, *self.workers.values()]:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    self.kill(p)
        f = self.count()
        self.kill(self.smtp)
        rss = [s[1] for s in self.samples]
        fds = [s[2] for s in self.samples]
        f.update({"minutes": self.args.minutes, "server_kills": len(self.kills), "worker_kills": self.worker_kills,
                  "made": self.made, "samples": len(self.samples),
                  "rss_kib_min_max": [min(rss, default=0), max(rss, default=0)],
                  "open_files_min_max": [min(fds, default=0), max(fds, default=0)]})
        self.plot(self.args.plot)
        with open(os.path.join(self.tmp, "samples.json"), "w") as fh:
            json.dump({"samples": self.samples, "kills": self.kills}, fh)
        print(json.dumps(f, indent=1, sort_keys=True))
        bad = [k for k in ("runs_not_ended", "runs_without_one_terminal", "lost_receipts", "slots_run_twice",
                           "tasks_accepted_twice", "webhook_keys_twice", "emails_twice", "done_without_effect") if f[k]]
        if bad:
            print("soak FAILED: %s (home kept in %s)" % (", ".join(bad), self.tmp), file=sys.stderr)
            return 1
        print("soak passed: 0 lost receipts, 0 duplicate effects")
        shutil.rmtree(self.tmp, ignore_errors=True)
        return 0


def kill_range(text):
    lo, _, hi = text.partition("-")
    lo, hi = float(lo), float(hi or lo)
    if not 1 <= lo <= hi:
        raise argparse.ArgumentTypeError("give LOW-HIGH seconds, 1 <= LOW <= HIGH")
    return lo, hi


def main():
    p = argparse.ArgumentParser()
    p.add_argument("minutes", type=int)
    p.add_argument("--vouch", required=True)
    p.add_argument("--plot", required=True)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--seed", type=int, default=int(time.time()))
    p.add_argument("--sample-s", type=float, default=2.0)
    p.add_argument("--drain-s", type=int, default=240)
    p.add_argument("--kill-s", type=kill_range, default=(15.0, 90.0),
                   help="seconds between kills of the server, LOW-HIGH (default 15-90)")
    sys.exit(Soak(p.parse_args()).run())


if __name__ == "__main__":
    main()
