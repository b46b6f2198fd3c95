#!/usr/bin/env bash
# Runs every test of the workspace: unit, property, store conformance, crash tests that
# kill real `vouch` processes, the oracle fixtures and the scenario corpus.
set -euo pipefail
cd "$(dirname "$0")/.."
# E-mail tests talk to a real SMTP server on loopback (aiosmtpd, from PyPI).
if ! python3 -c "import aiosmtpd" 2>/dev/null; then
  echo "installing aiosmtpd for the SMTP tests"
  python3 -m pip install --quiet --disable-pip-version-check aiosmtpd
fi
# Crash tests run the real binary; build it first so every test finds it.
cargo build --workspace --bins
cargo test --workspace --no-fail-fast "$@"
