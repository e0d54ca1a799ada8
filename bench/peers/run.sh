#!/usr/bin/env bash
# Feed one reel-datagen stream to peer dedup tools (restic, borg, kopia), each
# into a fresh repository, and report speed, CPU and reduction.
#
# Usage: bench/peers/run.sh [--json FILE] [--tools restic,borg,kopia] [reel-datagen flags...]
#   e.g. bench/peers/run.sh --json peers.jsonl --total 2G --redundancy 8 --randomness 0.25 --block-size 262144
# Env: REEL_DATAGEN (generator binary; default: cargo build --release -p reel-datagen),
#      PEERS_TMPDIR (where repositories go; default $TMPDIR or /tmp),
#      KOPIA_INSTALL_TIMEOUT (seconds for `go install` of kopia; default 1200),
#      BORG_CHUNKER_PARAMS (e.g. buzhash,16,20,18,4095; default: borg's 512 KiB..8 MiB chunks).
# Note: restic and borg cut chunks of >= 512 KiB by default, so repeats of smaller
# blocks scattered through the stream are invisible to their dedup.
# MB/s uses decimal MB (1e6 bytes); reduction = input bytes / repository bytes (du -sb).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
json="" tools="restic borg kopia" gen_args=()
while (($#)); do
  case $1 in
    --json) json=$2; shift 2 ;;
    --tools) tools=${2//,/ }; shift 2 ;;
    -h | --help) sed -n '2,13p' "$0"; exit 0 ;;
    *) gen_args+=("$1"); shift ;;
  esac
done

log() { echo "peers: $*" >&2; }
jstr() { local s=${1//\\/\/}; printf '"%s"' "${s//\"/\'}"; }

tmp=$(mktemp -d "${PEERS_TMPDIR:-${TMPDIR:-/tmp}}/reel-peers.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# --- tools ------------------------------------------------------------------
declare -A unavailable=()
missing=()
command -v restic >/dev/null || missing+=(restic)
command -v borg >/dev/null || missing+=(borgbackup)
[[ -x /usr/bin/time ]] || missing+=(time)
if ((${#missing[@]})); then
  log "installing ${missing[*]}"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"; } >&2 ||
    log "apt-get install ${missing[*]} failed"
fi
[[ -x /usr/bin/time ]] || { log "/usr/bin/time is required"; exit 1; }
command -v restic >/dev/null || unavailable[restic]="apt-get install restic failed"
command -v borg >/dev/null || unavailable[borg]="apt-get install borgbackup failed"

kopia=$(command -v kopia || true)
if [[ -z $kopia && $tools == *kopia* ]]; then
  gobin=$(go env GOPATH 2>/dev/null || echo "$HOME/go")/bin/kopia
  if [[ -x $gobin ]]; then
    kopia=$gobin
  elif ! command -v go >/dev/null; then
    unavailable[kopia]="not in Debian and no Go toolchain"
  else
    log "building kopia: go install github.com/kopia/kopia@latest (timeout ${KOPIA_INSTALL_TIMEOUT:-1200}s)"
    if timeout "${KOPIA_INSTALL_TIMEOUT:-1200}" go install github.com/kopia/kopia@latest >"$tmp/kopia-install.log" 2>&1; then
      kopia=$gobin
    else
      rc=$?
      why=$( ((rc == 124)) && echo "timed out" ||
        { grep -m 1 '^go: ' "$tmp/kopia-install.log" || tail -n 1 "$tmp/kopia-install.log"; } | sed -E 's#https?://[^ ]*#<url>#g' | tr -s '\t ' ' ')
      unavailable[kopia]="go install failed: $why"
    fi
  fi
fi

# --- generator --------------------------------------------------------------
gen=${REEL_DATAGEN:-}
if [[ -z $gen ]]; then
  log "building reel-datagen"
  (cd "$root" && cargo build --release -q -p reel-datagen)
  gen=${CARGO_TARGET_DIR:-$root/target}/release/reel-datagen
fi
input=$("$gen" "${gen_args[@]}" --stats 2>"$tmp/stats" | wc -c)
ideal=$(grep -o 'dedup_ratio: [0-9.e+-]*' "$tmp/stats" | cut -d' ' -f2)
workload="${gen_args[*]}"
log "workload: $workload -> $input bytes, ideal dedup ${ideal}x"

# --- per-tool setup and ingest ----------------------------------------------
# ingest NAME CMD...: stream into CMD under /usr/bin/time; leaves $tmp/NAME.{time,log}
ingest() {
  local name=$1; shift
  "$gen" "${gen_args[@]}" | /usr/bin/time -f '%e %U %S' -o "$tmp/$name.time" "$@" >"$tmp/$name.log" 2>&1
}

run_restic() {
  echo reel-bench >"$tmp/restic.pw"
  local r=(--repo "$1" --password-file "$tmp/restic.pw" --cache-dir "$tmp/restic-cache" -q)
  restic init "${r[@]}" --repository-version 2 >/dev/null
  ingest restic restic backup "${r[@]}" --compression auto --stdin --stdin-filename stream
}
run_borg() {
  export BORG_BASE_DIR=$tmp/borg-base BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK=yes
  borg init --encryption=none "$1" >/dev/null
  # shellcheck disable=SC2086 # BORG_CHUNKER_PARAMS is a flag list
  ingest borg borg create -C zstd,1 ${BORG_CHUNKER_PARAMS:+--chunker-params $BORG_CHUNKER_PARAMS} "$1::a" -
}
run_kopia() {
  export KOPIA_PASSWORD=reel-bench KOPIA_CONFIG_PATH=$tmp/kopia.config \
    KOPIA_CACHE_DIRECTORY=$tmp/kopia-cache KOPIA_LOG_DIR=$tmp/kopia-logs KOPIA_CHECK_FOR_UPDATES=false
  "$kopia" repository create filesystem --path "$1" >/dev/null 2>&1
  "$kopia" policy set --global --compression=zstd-fastest >/dev/null
  ingest kopia "$kopia" snapshot create --stdin-file stream -
}
version() {
  case $1 in
    restic) restic version | awk '{print $2}' ;;
    borg) borg --version | awk '{print $2}' ;;
    kopia) "$kopia" --version 2>/dev/null | awk '{print $1}' ;;
  esac
}

rows=() lines=()
for t in $tools; do
  ver="" wall="" user="" sys="" size="" status=ok
  if [[ -n ${unavailable[$t]:-} ]]; then
    status="unavailable: ${unavailable[$t]}"
  else
    ver=$(version "$t")
    log "running $t $ver"
    if "run_$t" "$tmp/$t-repo" 2>"$tmp/$t.setup"; then
      read -r wall user sys < <(tail -n 1 "$tmp/$t.time")
      size=$(du -sb "$tmp/$t-repo" | cut -f1)
    else
      status="failed: $(cat "$tmp/$t.setup" "$tmp/$t.log" 2>/dev/null | grep -v '^$' | tail -n 1)"
    fi
    rm -rf "$tmp/$t-repo"
  fi
  if [[ $status == ok ]]; then
    read -r cpu mbps ratio < <(awk -v i="$input" -v w="$wall" -v u="$user" -v s="$sys" -v z="$size" \
      'BEGIN { printf "%.2f %.1f %.2f\n", u + s, i / 1e6 / (w > 0 ? w : 0.01), i / z }')
    rows+=("| $t | $ver | $wall | $cpu | $mbps | $size | ${ratio}x | |")
    lines+=("{\"tool\":\"$t\",\"version\":$(jstr "$ver"),\"status\":\"ok\",\"workload\":$(jstr "$workload"),\"input_bytes\":$input,\"ideal_dedup\":${ideal:-null},\"wall_s\":$wall,\"user_s\":$user,\"sys_s\":$sys,\"cpu_s\":$cpu,\"mb_per_s\":$mbps,\"repo_bytes\":$size,\"reduction\":$ratio}")
  else
    log "$t: $status"
    rows+=("| $t | $ver | | | | | | $status |")
    lines+=("{\"tool\":\"$t\",\"version\":$(jstr "$ver"),\"status\":$(jstr "$status"),\"workload\":$(jstr "$workload"),\"input_bytes\":$input,\"ideal_dedup\":${ideal:-null}}")
  fi
done

echo "Workload: \`reel-datagen $workload\` — $input bytes in, ideal dedup ${ideal}x"
echo
echo "| tool | version | wall s | CPU s | MB/s | repo bytes | reduction | note |"
echo "|---|---|---:|---:|---:|---:|---:|---|"
printf '%s\n' "${rows[@]}"
if [[ -n $json ]]; then printf '%s\n' "${lines[@]}" >>"$json"; fi
