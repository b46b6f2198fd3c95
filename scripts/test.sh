#!/usr/bin/env bash
# Runs every test of the workspace: unit, property, store conformance, crash tests that
# kill real `vouch` processes, the oracle fixtures and the scenario corpus.
set -euo pipefail
cd "$(dirname "$0")/.."
# Python packages for the tests live in one virtual environment inside the repo's ignored
# target/ folder, never in the machine's Python: aiosmtpd (a real SMTP server on loopback),
# dbus-next (a real desktop-notification listener on a private session bus), LiteLLM's
# proxy (a third-party OpenAI-compatible server with mock responses) and the official MCP
# Python SDK with `cryptography` (the MCP client tests; the client signs as a worker),
# schemathesis (the HTTP API against its OpenAPI document) and moto in server mode (a real
# S3-compatible server on loopback for the object-storage tests). Created when missing.
VENV=target/venv
if [ ! -x "$VENV/bin/litellm" ] || ! "$VENV/bin/python" -c "import aiosmtpd, dbus_next, mcp, cryptography, schemathesis, moto.server" 2>/dev/null; then
  echo "creating $VENV for the SMTP, D-Bus, model-server, MCP and S3 tests (aiosmtpd, dbus-next, litellm[proxy], mcp, cryptography, schemathesis, moto[server])"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check aiosmtpd dbus-next "litellm[proxy]" "mcp>=2.3,<3" cryptography "schemathesis>=4.3,<5" "moto[server]>=5,<6"
fi
# The tests start `python3`: the venv's comes first.
export PATH="$PWD/$VENV/bin:$PATH"
# The PostgreSQL store's tests use the local server (127.0.0.1:5432, database `test`).
if command -v pg_isready >/dev/null && ! pg_isready -q -h 127.0.0.1 -p 5432; then
  echo "starting PostgreSQL for the store tests"
  (service postgresql start || pg_ctlcluster 15 main start) >/dev/null 2>&1 || true
  for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
fi
# The web console is tested in a real headless Chromium driven over WebDriver: Debian's
# `chromium` and `chromium-driver`, installed when missing (CI runs as root; elsewhere sudo).
if ! command -v chromedriver >/dev/null || ! command -v chromium >/dev/null; then
  echo "installing chromium and chromium-driver for the console's browser tests"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-driver >/dev/null
fi
# The PostgreSQL TLS tests make their certificates with the `openssl` command (the binary
# links no OpenSSL), and the two-host tests start workers in PID namespaces with `unshare`.
if ! command -v openssl >/dev/null || ! command -v unshare >/dev/null; then
  echo "installing openssl and util-linux for the TLS and PID-namespace tests"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq openssl util-linux >/dev/null
fi
# Every command of a patch attempt runs in a bubblewrap sandbox (`bwrap`; `prlimit` is
# util-linux's): without it the attempt refuses to run commands, so the tests need it. The
# egress tests' checks reach a loopback server with `curl` through the sandbox's proxy.
if ! command -v bwrap >/dev/null || ! command -v curl >/dev/null; then
  echo "installing bubblewrap and curl for the patch sandbox and its egress tests"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq bubblewrap curl >/dev/null
fi
# Crash tests run the real binary; build it first so every test finds it.
cargo build --workspace --bins
cargo test --workspace --no-fail-fast "$@"
# The Python worker client's own tests, against a real `vouch serve --http` they start
# (skipped when the arguments pick some tests only).
if [ $# -eq 0 ]; then
  ROOT="$PWD"
  (cd clients/python && VOUCH_BIN="$ROOT/target/debug/vouch" "$ROOT/$VENV/bin/python" -m unittest)
fi
# The HTTP API against its own OpenAPI document, on a real `vouch serve --http` (bounded;
# skipped when the arguments pick some tests only).
if [ $# -eq 0 ]; then ./scripts/schemathesis.sh; fi
