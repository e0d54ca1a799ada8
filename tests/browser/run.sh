#!/usr/bin/env bash
# The console's browser test: headless Debian chromium (through Playwright) against a real
# `reel serve` on free loopback ports with a temporary data directory.
#
#   tests/browser/run.sh [pytest args…]
#
# Environment: REEL_ARTIFACTS (screenshots; default target/browser-artifacts),
# REEL_BIN (a reel binary to use instead of building one), REEL_BROWSER_VENV (the venv;
# default /var/cache/reel-browser-venv), CARGO_TARGET_DIR (as cargo), REEL_KEEP_DATA=1
# (keep the data directory). See docs/testing/browser.md.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
ARTIFACTS="${REEL_ARTIFACTS:-$ROOT/target/browser-artifacts}"
VENV="${REEL_BROWSER_VENV:-/var/cache/reel-browser-venv}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

log() { printf 'browser-test: %s\n' "$*" >&2; }

# ---------------------------------------------------------------- what it needs
CHROMIUM="${REEL_CHROMIUM:-}"
if [ -z "$CHROMIUM" ]; then
  CHROMIUM="$(command -v chromium || true)"
fi
if [ -z "$CHROMIUM" ]; then
  log "installing Debian's chromium"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
  CHROMIUM="$(command -v chromium)"
fi

if ! mkdir -p "$(dirname "$VENV")" 2>/dev/null || ! [ -w "$(dirname "$VENV")" ]; then
  VENV="$ROOT/target/browser-venv"
fi
if ! "$VENV/bin/python" -c 'import playwright, pytest' 2>/dev/null; then
  log "creating the Python venv $VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check -r "$HERE/requirements.txt"
fi

if [ -n "${REEL_BIN:-}" ]; then
  REEL="$REEL_BIN"
else
  log "building reel (release)"
  (cd "$ROOT" && cargo build --release -p reel --quiet)
  REEL="${CARGO_TARGET_DIR:-$ROOT/target}/release/reel"
fi
[ -x "$REEL" ] || { log "no reel binary at $REEL"; exit 1; }

# ---------------------------------------------------------------- the server
mkdir -p "$ARTIFACTS"
rm -f "$ARTIFACTS"/*.png "$ARTIFACTS"/writer.json
DATA="$(mktemp -d "${TMPDIR:-/tmp}/reel-browser.XXXXXX")"
read -r ISCSI_PORT HTTP_PORT < <(python3 "$ROOT/scripts/free-ports.py" 2)
SERVER_PID=""
cleanup() {
  if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 1 150); do
      kill -0 "$SERVER_PID" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$SERVER_PID" 2>/dev/null; then
      log "reel did not stop on SIGTERM; killing it"
      kill -KILL "$SERVER_PID" 2>/dev/null || true
    fi
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  if [ "${REEL_KEEP_DATA:-0}" = 1 ]; then
    log "data directory kept: $DATA"
  else
    rm -rf "$DATA"
  fi
  rm -rf "${ARCHIVE_DIR:-/nonexistent}"
}
trap cleanup EXIT

log "starting reel serve (iSCSI 127.0.0.1:$ISCSI_PORT, HTTP 127.0.0.1:$HTTP_PORT, data $DATA)"
# An archive location, so the console's Archive and Restore actions can run.
ARCHIVE_DIR="$(mktemp -d "${TMPDIR:-/tmp}/reel-browser-archive.XXXXXX")"
printf '[archive]\ndirectory = "%s"\n' "$ARCHIVE_DIR/cold" >"$ARCHIVE_DIR/reel.toml"
REEL_LOG="${REEL_LOG:-info}" "$REEL" serve --data "$DATA" --config "$ARCHIVE_DIR/reel.toml" \
  --listen "127.0.0.1:$ISCSI_PORT" --http "127.0.0.1:$HTTP_PORT" \
  >"$ARTIFACTS/reel-serve.log" 2>&1 &
SERVER_PID=$!

URL="http://127.0.0.1:$HTTP_PORT/"
ready=0
for _ in $(seq 1 600); do
  if ! kill -0 "$SERVER_PID" 2>/dev/null; then
    log "reel serve exited early:"; tail -n 30 "$ARTIFACTS/reel-serve.log" >&2; exit 1
  fi
  if [ -s "$DATA/initial-admin-password" ] &&
     "$VENV/bin/python" -c "import urllib.request,sys; urllib.request.urlopen(sys.argv[1], timeout=2)" "$URL" 2>/dev/null; then
    ready=1; break
  fi
  sleep 0.1
done
[ "$ready" = 1 ] || { log "reel serve did not answer on $URL within 60 s"; tail -n 30 "$ARTIFACTS/reel-serve.log" >&2; exit 1; }

# ---------------------------------------------------------------- the test
set +e
PYTHONDONTWRITEBYTECODE=1 REEL_URL="$URL" REEL_DATA="$DATA" REEL_ISCSI_PORTAL="127.0.0.1:$ISCSI_PORT" \
REEL_ARTIFACTS="$ARTIFACTS" REEL_CHROMIUM="$CHROMIUM" \
  "$VENV/bin/python" -m pytest -p no:cacheprovider -q "$HERE/test_console.py" "$@"
rc=$?
set -e
log "screenshots and the server log are in $ARTIFACTS"
exit "$rc"
