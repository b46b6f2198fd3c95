#!/usr/bin/env bash
# Coverage-guided fuzzing (libFuzzer through cargo-fuzz) of the parsers a person or a model
# feeds: the manifest, the script format, scenario files (+ the oracle), vouch.toml and the
# journal decoder, and HTTP query and path parsing (vouch_core::input). Builds on the stable toolchain (RUSTC_BOOTSTRAP lets cargo-fuzz pass its
# sanitizer-coverage flags). Usage: scripts/fuzz.sh [SECONDS_PER_TARGET] (default 20).
# Exit 1 when a target finds a crash; the input is kept under fuzz/artifacts/TARGET/.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-20}
if ! command -v cargo-fuzz >/dev/null; then
  echo "installing cargo-fuzz from crates.io"
  cargo install --locked cargo-fuzz >/dev/null
fi
export RUSTC_BOOTSTRAP=1
# Separate target dir: instrumented builds must not evict the test build's artifacts.
export CARGO_TARGET_DIR="$PWD/target/fuzz-build"
(cd fuzz && cargo fuzz build -s none -O)
seeds=target/fuzz-seeds
rm -rf "$seeds"; mkdir -p "$seeds"/{manifest,script,scenario,config,journal,http}
# Seeds from what the project already holds: every corpus scenario, its scripts and their
# declare payloads, the examples, the README's vouch.toml.
i=0
for f in $(find corpus examples -name '*.json' | sort); do
  i=$((i+1)); cp "$f" "$seeds/scenario/$i.json"
  python3 - "$f" "$seeds" "$i" <<'PY'
import json, sys
path, seeds, i = sys.argv[1], sys.argv[2], sys.argv[3]
try:
    doc = json.load(open(path))
except Exception:
    sys.exit(0)
script = doc.get("script") if isinstance(doc, dict) else doc
if isinstance(script, list):
    json.dump(script, open(f"{seeds}/script/{i}.json", "w"))
    for j, t in enumerate(script):
        if isinstance(t, dict) and "declare" in t:
            json.dump(t["declare"], open(f"{seeds}/manifest/{i}-{j}.json", "w"))
PY
done
awk '/^```toml/{f=1;next} /^```/{f=0} f' README.md > "$seeds/config/readme.toml"
printf '[folder]\nroot = "files"\n' > "$seeds/config/min.toml"
echo '[{"k":0,"b":{"trigger":"interactive"}},{"k":3,"b":{"deliveries":[{"id":"d1","verb":"save","destination":{"kind":"folder","address":"a.md"}}]}},{"k":17,"d":"d1","b":{"ok":true}},{"k":18,"d":"d1","b":{"status":"verified"}}]' > "$seeds/journal/one.json"
# Query strings and path segments the API takes (docs/contract.md §17, the OpenAPI document).
printf 'limit=50&offset=0' > "$seeds/http/runs"
printf 'by=type&since=24h&friction_turns=8&friction_failed_tools=3' > "$seeds/http/measures"
printf 'since=%%E2%%82%%AC&next=/console/%%0D%%0Ax' > "$seeds/http/multibyte"
printf 'task=01J9&attempt=1&claimant=w%%00&epoch=3' > "$seeds/http/artifact"
printf 'sha256:%064d' 0 > "$seeds/http/cid"
status=0
for t in manifest script scenario config journal http; do
  mkdir -p "fuzz/artifacts/$t"
  echo "== fuzz $t for ${SECS}s"
  if ! "$CARGO_TARGET_DIR/x86_64-unknown-linux-gnu/release/$t" "$seeds/$t" \
      -max_total_time="$SECS" -max_len=65536 -rss_limit_mb=1024 -timeout=5 \
      -artifact_prefix="fuzz/artifacts/$t/" -print_final_stats=1 2>"target/fuzz-$t.log"; then
    echo "fuzz $t: FAILED (see target/fuzz-$t.log and fuzz/artifacts/$t/)"; tail -30 "target/fuzz-$t.log"; status=1
  fi
  grep -E 'stat::number_of_executed_units|stat::peak_rss_mb' "target/fuzz-$t.log" | tr '\n' ' '; echo
done
exit $status
