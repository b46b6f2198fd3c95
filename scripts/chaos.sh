#!/usr/bin/env bash
# The three-host chaos test (issue 24 #6) for MINUTES of killing (default 5): three
# `vouch serve --http` and three workers on one PostgreSQL schema, one host killed with
# SIGKILL and restarted every few seconds, then the world counted at the receiver and in the
# store. The test suite runs the same test for 40 s. Figures: docs/reliability.md.
set -euo pipefail
cd "$(dirname "$0")/.."
MINUTES="${1:-5}"
case "$MINUTES" in ''|*[!0-9]*) echo "usage: scripts/chaos.sh [MINUTES]" >&2; exit 2;; esac
export PATH="$PWD/target/venv/bin:$PATH"
VOUCH_CHAOS_S=$((MINUTES * 60)) cargo test -p vouch-cli --test chaos -- --nocapture
