#!/usr/bin/env bash
# Emulation against the model (issue 17): `reel serve` with a library whose drive emulates a
# physical LTO-5 full-height drive ([iscsi.target.emulation] drive = "lto5-fh"), `reel bench
# tape` writing 256 KiB incompressible, unique records through iSCSI (one drive, queue depth 1),
# once as fast as it can and once from a source limited below LTO-5's lowest speed step; next to
# each, what `reel model simulate` predicts for the same workload, and the back-hitches the
# emulated drive reports in /metrics. Writes bench/emulation/RESULTS.md.
#
# Usage: bench/emulation/run.sh [--size SIZE] [--limited-size SIZE] [--rate BYTES_PER_S]
#   defaults: 4G unlimited, 2G at 30000000 B/s (30 MB/s; LTO-5's lowest step is 47 MB/s).
# About 5 minutes (the emulated drive runs at LTO-5 speed, reads back included).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
size=4G limited_size=2G rate=30000000
while (($#)); do
  case $1 in
    --size) size=$2; shift 2 ;;
    --limited-size) limited_size=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    -h | --help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
cd "$root"
cargo build --release -p reel >&2
reel=$root/target/release/reel
work=$(mktemp -d /var/tmp/reel-emulation.XXXXXX)
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port=$(free_port) http=$(free_port)
lib=iqn.2026-11.org.reel:emulated
cat >"$work/reel.toml" <<TOML
[iscsi]
listen = ["127.0.0.1:$port"]
[http]
listen = "127.0.0.1:$http"
[[iscsi.target]]
name = "$lib"
kind = "library"
drives = 1
slots = 8
[iscsi.target.emulation]
drive = "lto5-fh"
TOML
"$reel" serve --data "$work/data" --config "$work/reel.toml" >"$work/serve.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$http/metrics" >/dev/null && break; sleep 0.2; done
metric() { curl -sf "http://127.0.0.1:$http/metrics" | awk -v n="$1" '$1 ~ "^"n"\\{" {print $2}'; }

# run NAME SIZE [SOURCE-RATE]: one bench run; prints "measured-MB/s back-hitches"
run() {
  local name=$1 sz=$2 r=${3:-} before after extra=()
  [ -n "$r" ] && extra=(--source-rate "$r")
  before=$(metric reel_drive_back_hitches_total)
  "$reel" bench tape --targets reel --reel-addr "127.0.0.1:$port" --reel-iqn "$lib" --drives 1 \
    --record-size 256K --size "$sz" --queue-depth 1 --randomness 1 --redundancy 1 \
    --compressible-share 0 --filemark-every none --json "$work/$name.json" "${extra[@]}" >"$work/$name.txt" 2>&1 ||
    { cat "$work/$name.txt" >&2; exit 1; }
  after=$(metric reel_drive_back_hitches_total)
  python3 - "$work/$name.json" "$before" "$after" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
run = [r for c in report["cells"] for r in c["runs"]][0]
print(f'{run["write"]["mb_per_s"]:.1f} {float(sys.argv[3]) - float(sys.argv[2]):.0f}')
PY
}
# model SIZE [RATE]: the model's throughput and back-hitches for the same workload
model() {
  local out
  out=$("$reel" model simulate --drive lto5-fh --record-size 256K --compressible 0 --total "$1" \
    --source-rate "${2:-unlimited}" --queue-depth 1)
  echo "$(awk '/^throughput/ {print $2}' <<<"$out") $(awk '/^back-hitches/ {print $2}' <<<"$out")"
}
read -r fast_mb fast_bh < <(run unlimited "$size")
read -r fast_model fast_model_bh < <(model "$size")
read -r slow_mb slow_bh < <(run limited "$limited_size" "$rate")
read -r slow_model slow_model_bh < <(model "$limited_size" "$rate")
err() { python3 -c "print(f'{($1/$2-1)*100:+.1f} %')"; }
# The model's curves for the emulated drive type, next to the report.
"$reel" model sweep --drive lto5-fh --vary record-size --svg "$here/lto5-fh-record-size.svg" >/dev/null
"$reel" model sweep --drive lto5-fh --vary compressible --svg "$here/lto5-fh-compressible.svg" >/dev/null
commit=$(git rev-parse --short HEAD)
# The tree apart from this benchmark's own results (rewritten by every run).
dirty=$(git status --porcelain --untracked-files=no -- . ':!bench/emulation' | grep -q . && echo " (dirty tree)" || true)
{
  echo "# Emulated LTO-5 against the model"
  echo
  echo "\`bench/emulation/run.sh\` on $(date -u +%Y-%m-%d), commit $commit$dirty; $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); load average at the end $(cut -d' ' -f1-3 /proc/loadavg)."
  echo
  echo "reel serve with \`[iscsi.target.emulation] drive = \"lto5-fh\"\`; \`reel bench tape\`, one drive, 256 KiB records, queue depth 1, incompressible unique data (randomness 1, R=1), written then read back; the write phase's MB/s (10^6 B/s). Model: \`reel model simulate --drive lto5-fh --record-size 256K --compressible 0\` for the same bytes and source rate. Back-hitches: the emulated drive's \`reel_drive_back_hitches_total\` during the whole run, and the model's for the write."
  echo
  echo "| run | bytes | source | measured MB/s | model MB/s | error | back-hitches (drive) | back-hitches (model, write) |"
  echo "|---|---:|---|---:|---:|---:|---:|---:|"
  echo "| unlimited | $size | as fast as reel takes it | $fast_mb | $fast_model | $(err "$fast_mb" "$fast_model") | $fast_bh | $fast_model_bh |"
  echo "| rate-limited | $limited_size | $rate B/s | $slow_mb | $slow_model | $(err "$slow_mb" "$slow_model") | $slow_bh | $slow_model_bh |"
  echo
  cat <<'NOTE'
The model's curves for this drive (reel model sweep): throughput against record size
([lto5-fh-record-size.svg](lto5-fh-record-size.svg); back-hitches in
`lto5-fh-record-size-backhitches.svg`) and against the compressible share
([lto5-fh-compressible.svg](lto5-fh-compressible.svg)).

The drive's back-hitch count covers the whole bench run (the write, the final filemark, the
rewind and the read-back, which reads as fast as it can: the source rate limits the writer
only); the model's covers the write and its final flush. Acceptance (issue 17): throughput
within 10 % of the model in both runs, back-hitches reported by the rate-limited drive. The
MOVE MEDIUM time and the back-hitches of a starved drive are also checked in CI
(`crates/reel/tests/emulation.rs`, lower bounds only).
NOTE
} >"$here/RESULTS.md"
cat "$here/RESULTS.md"
