#!/usr/bin/env bash
# The simulator's sweep (issue 26 #2): `vouch sim` with every fault over seeds FIRST..LAST,
# RUNS simulated runs each (default 1..20 × 5,000 = 100,000 runs), two seeds at a time at a
# low priority. Each seed's JSON report goes to OUT (default target/sim-sweep/SEED.json); a
# seed that breaks an invariant prints its replay command. Then a table of every seed and the
# totals. Exit 1 when any seed failed. Figures: docs/reliability.md.
set -euo pipefail
cd "$(dirname "$0")/.."
FIRST="${1:-1}" LAST="${2:-20}" RUNS="${3:-5000}"
for n in "$FIRST" "$LAST" "$RUNS"; do
  case "$n" in ''|*[!0-9]*) echo "usage: scripts/sim-sweep.sh [FIRST LAST RUNS]" >&2; exit 2;; esac
done
BIN="${VOUCH_BIN:-}"
if [ -z "$BIN" ]; then
  if [ -x target/release/vouch ]; then BIN=target/release/vouch; else BIN=target/debug/vouch; fi
fi
OUT="${VOUCH_SWEEP_OUT:-target/sim-sweep}"
mkdir -p "$OUT"
export BIN OUT RUNS
seq "$FIRST" "$LAST" | xargs -P 2 -I{} sh -c \
  'nice -n 10 "$BIN" --json sim --seed {} --runs "$RUNS" --faults all > "$OUT/{}.json" 2> "$OUT/{}.err" || true'
python3 - "$OUT" "$FIRST" "$LAST" <<'PY'
import json, os, sys
out, first, last = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
tot = {"runs": 0, "steps": 0, "crashes": 0, "provider_attempts": 0, "effects": 0, "tasks": 0, "seconds": 0.0}
failed = []
print("| seed | runs | steps | crashes | provider attempts | effects | tasks | s | runs/s | result |")
print("|---|---|---|---|---|---|---|---|---|---|")
for s in range(first, last + 1):
    try:
        r = json.load(open(os.path.join(out, "%d.json" % s)))
    except (OSError, ValueError):
        failed.append(s)
        print("| %d | — | — | — | — | — | — | — | — | no report: see %s/%d.err |" % (s, out, s))
        continue
    for k in tot:
        tot[k] += r[k]
    f = r.get("failure")
    if f:
        failed.append(s)
    res = "step %s: %s (%s)" % (f["step"], f["invariant"], f["replay"]) if f else "every invariant held"
    print("| %d | %d | %d | %d | %d | %d | %d | %.0f | %.1f | %s |" % (
        s, r["runs"], r["steps"], r["crashes"], r["provider_attempts"], r["effects"], r["tasks"],
        r["seconds"], r["runs_per_s"], res))
print("| all | %d | %d | %d | %d | %d | %d | %.0f | | %d seeds failed |" % (
    tot["runs"], tot["steps"], tot["crashes"], tot["provider_attempts"], tot["effects"], tot["tasks"],
    tot["seconds"], len(failed)))
sys.exit(1 if failed else 0)
PY
