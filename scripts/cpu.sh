#!/usr/bin/env bash
# Instructions per one-save run, counted by callgrind: reproducible on any machine under any
# load, unlike seconds (docs/performance.md records the figure).
#
#   scripts/cpu.sh            # 10 and 20 runs
#   RUNS=50 scripts/cpu.sh    # 50 and 100 runs
#   PROFILE=1 scripts/cpu.sh  # also print the profile of the 2N-run process (callgrind_annotate)
#
# It builds the release binary, then runs `vouch bench cpu --runs N` and `--runs 2N` under
# `valgrind --tool=callgrind` (every thread counted: the host's and the store's writer) and
# prints (I(2N) - I(N)) / N, so the process's start-up and the home's creation cancel out.
set -euo pipefail
cd "$(dirname "$0")/.."
N="${RUNS:-10}"
command -v valgrind >/dev/null || { echo "cpu.sh: valgrind is not installed (apt-get install valgrind)" >&2; exit 2; }
cargo build --release -q -p vouch-cli
BIN=target/release/vouch
OUT="$(mktemp -d "${TMPDIR:-/tmp}/vouch-cpu.XXXXXX")"
trap 'rm -rf "$OUT"' EXIT

# Total instructions (Ir) of one process running `bench cpu --runs $1`.
count() {
  valgrind --tool=callgrind --callgrind-out-file="$OUT/cg.$1" "$BIN" bench cpu --runs "$1" \
    >"$OUT/out.$1" 2>"$OUT/err.$1" || { cat "$OUT/err.$1" >&2; exit 1; }
  grep -q "$1 of $1 runs succeeded" "$OUT/out.$1" || { cat "$OUT/out.$1" >&2; exit 1; }
  callgrind_annotate "$OUT/cg.$1" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}'
}

ONE="$(count "$N")"
TWO="$(count "$((2 * N))")"
PER=$(( (TWO - ONE) / N ))
echo "instructions: ${ONE} for ${N} runs, ${TWO} for $((2 * N)) runs"
awk -v p="$PER" 'BEGIN { printf "instructions per one-save run: %d (%.2f M)\n", p, p / 1e6 }'
if [ -n "${PROFILE:-}" ]; then
  callgrind_annotate --inclusive=no "$OUT/cg.$((2 * N))" 2>/dev/null | sed -n 1,60p
fi
