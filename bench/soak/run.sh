#!/usr/bin/env bash
# The soak test: one `reel serve` with four libraries under 64 iSCSI sessions (queue depth 8)
# and a REST API client, SIGKILLed and restarted every few minutes, every cartridge read back
# and checked against the reference model after every restart. See bench/soak/README.md.
#
# Usage: bench/soak/run.sh [--minutes N] [--out FILE] [-- SOAK ARGS...]
#   --minutes N   minutes of load (default 30; the last restart and read-back add 1-3 minutes)
#   --out FILE    the report (default bench/soak/RESULTS.md, or RESULTS-short.md for runs
#                 shorter than 30 minutes); the JSON goes next to it (results*.json)
#   -- ARGS       passed to `reel bench soak` as they are (`reel bench soak --help`)
# Builds reel (release) first. Needs about 20 GB free in /var/tmp for a
# 30-minute run (most data dedups); the data directory is removed after a passing run (kept
# after a failing one, its path is printed). Exits non-zero when the soak failed.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
minutes=30 out='' extra=()
while (($#)); do
  case $1 in
    --minutes) minutes=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h | --help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done
short=$(awk -v m="$minutes" 'BEGIN { print (m < 30) ? "-short" : "" }')
out=${out:-$here/RESULTS$short.md}
outdir=$(cd "$(dirname "$out")" && pwd)
json=$outdir/results$short.json

# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$root/bench/lib.sh"
commit=$(source_rev)
build_reel soak

exec "$reel" bench soak --minutes "$minutes" --reel-bin "$reel" \
  --markdown "$out" --json "$json" --commit "$commit" "${extra[@]}"
