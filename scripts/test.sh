#!/usr/bin/env bash
# Runs every test of the workspace: unit, property, store conformance, crash tests that
# kill real `vouch` processes, the oracle fixtures and the scenario corpus.
set -euo pipefail
cd "$(dirname "$0")/.."
# E-mail tests talk to a real SMTP server on loopback (aiosmtpd); notification tests own
# org.freedesktop.Notifications on a private D-Bus session bus (dbus-next). Both from PyPI.
if ! python3 -c "import aiosmtpd, dbus_next" 2>/dev/null; then
  echo "installing aiosmtpd and dbus-next for the SMTP and D-Bus tests"
  python3 -m pip install --quiet --disable-pip-version-check aiosmtpd dbus-next
fi
# The model client's third-party server test runs LiteLLM's proxy (mock responses) from a
# repo-local virtual environment, created only when it is missing.
if [ ! -x target/venv/bin/litellm ]; then
  echo "creating target/venv with LiteLLM's proxy for the model client tests"
  python3 -m venv target/venv
  target/venv/bin/pip install --quiet --disable-pip-version-check "litellm[proxy]"
fi
# The PostgreSQL store's tests use the local server (127.0.0.1:5432, database `test`).
if command -v pg_isready >/dev/null && ! pg_isready -q -h 127.0.0.1 -p 5432; then
  echo "starting PostgreSQL for the store tests"
  (service postgresql start || pg_ctlcluster 15 main start) >/dev/null 2>&1 || true
  for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
fi
# Crash tests run the real binary; build it first so every test finds it.
cargo build --workspace --bins
cargo test --workspace --no-fail-fast "$@"
