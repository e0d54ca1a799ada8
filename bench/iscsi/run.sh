#!/usr/bin/env bash
# Run the iSCSI data-path benchmark (`reel bench iscsi`: reel next to tgt) and write
# bench/iscsi/RESULTS.md, bench/iscsi/results.json and the charts bench/iscsi/*.svg.
#
# Usage: bench/iscsi/run.sh [--seconds N] [--repeat K] [--out FILE] [--note TEXT] [-- BENCH ARGS...]
#   --seconds N   seconds measured per cell and target (default 5, after 1 s of warm-up)
#   --repeat K    measurements per cell and target, targets alternating; medians reported (default 3)
#   --out FILE    where the report goes (default bench/iscsi/RESULTS.md); results.json and the
#                 charts go next to it
#   --note TEXT   a remark for the report
#   -- ARGS       passed to `reel bench iscsi` as they are (e.g. -- --sizes 256K --qd 8)
# Builds reel (release), then runs the full matrix: 64K/256K/1M transfers,
# queue depth 1 and 8, 1 and 4 sessions, WRITE(10) and READ(10), on reel's null-disk target and
# on tgt's null backing store (needs tgtd and tgtadm, Debian package tgt, and root for tgtd).
# Anything in the old report below the line "<!-- notes below are kept by run.sh -->" (profiles,
# analysis) is carried over to the new one. See BENCHMARKING.md for the columns.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
seconds=5 repeat=3 out=$here/RESULTS.md note='' extra=()
while (($#)); do
  case $1 in
    --seconds) seconds=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --note) note=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h | --help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done
outdir=$(cd "$(dirname "$out")" && pwd)
json=$outdir/results.json

# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$root/bench/lib.sh"
build_reel "iscsi bench"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
report_head "reel iSCSI data-path benchmark results" bench/iscsi/run.sh iscsi-data-path-reel-bench-iscsi >"$tmp/head.md"

cmd=(reel bench iscsi --seconds "$seconds" --repeat "$repeat" --json "$(realpath --relative-to="$PWD" "$json")"
  --charts "$(realpath --relative-to="$PWD" "$outdir")" "${extra[@]}")
echo "iscsi bench: ${cmd[*]}" >&2
# The Markdown is written next to the charts so that its links are relative to them.
section=$outdir/.reel-bench-section.md
"$reel" bench iscsi --reel-bin "$reel" --seconds "$seconds" --repeat "$repeat" \
  --json "$json" --charts "$outdir" --markdown "$section" "${extra[@]}"
assemble_report "$out" "$tmp/head.md" "$section" "$note" "${cmd[@]}"
rm -f "$section"
echo "iscsi bench: wrote $out, $json and the charts in $outdir" >&2
