#!/usr/bin/env bash
# The soak (issue 26 #3) for MINUTES (default 30): `vouch serve --http` with concurrent runs,
# board workers and a schedule against loopback providers (SMTP and a webhook receiver), killed
# with SIGKILL and restarted at random; memory (RSS) and open files of the server sampled over
# time and drawn into docs/soak.png; at the end, counts at the providers and in the store.
# Exit 1 on a lost receipt or a duplicate effect. Uses target/release/vouch when built, else
# target/debug/vouch (VOUCH_BIN overrides). Figures: docs/reliability.md.
set -euo pipefail
cd "$(dirname "$0")/.."
MINUTES="${1:-30}"
case "$MINUTES" in ''|*[!0-9]*) echo "usage: scripts/soak.sh [MINUTES]" >&2; exit 2;; esac
# The tests' Python environment (scripts/test.sh makes it), with matplotlib for the plot.
VENV="${VOUCH_SOAK_VENV:-target/venv}"
[ -x "$VENV/bin/python3" ] || python3 -m venv "$VENV"
PY="$VENV/bin/python3"
"$PY" -c 'import aiosmtpd, matplotlib' 2>/dev/null ||
  "$PY" -m pip install --quiet --disable-pip-version-check aiosmtpd matplotlib
BIN="${VOUCH_BIN:-}"
if [ -z "$BIN" ]; then
  if [ -x target/release/vouch ]; then BIN=target/release/vouch; else BIN=target/debug/vouch; fi
fi
[ -x "$BIN" ] || { echo "no vouch binary at $BIN: cargo build --release -p vouch-cli --bin vouch" >&2; exit 2; }
# A copy, so a rebuild during the soak does not swap the binary under the server.
COPY="$(mktemp -d)/vouch"
cp "$BIN" "$COPY"
shift || true
exec "$PY" scripts/soak.py "$MINUTES" --vouch "$COPY" --plot "${VOUCH_SOAK_PLOT:-docs/soak.png}" "$@"
