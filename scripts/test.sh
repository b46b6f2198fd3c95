#!/usr/bin/env bash
# Runs every test of the workspace: unit, property, store conformance, crash tests that
# kill real `vouch` processes, the oracle fixtures and the scenario corpus.
set -euo pipefail
cd "$(dirname "$0")/.."
# Crash tests run the real binary; build it first so every test finds it.
cargo build --workspace --bins
cargo test --workspace --no-fail-fast "$@"
