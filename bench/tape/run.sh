#!/usr/bin/env bash
# Run the tape throughput benchmark (`reel bench tape`: reel's library next to tgt's SSC
# emulation) and write
# bench/tape/RESULTS.md, bench/tape/results.json and the charts bench/tape/*.svg.
#
# Usage: bench/tape/run.sh [--size SIZE] [--flat SIZE] [--out FILE] [--note TEXT] [-- BENCH ARGS...]
#   --size SIZE   bytes per drive per cell (default 2G)
#   --flat SIZE   the flat-throughput run's size, one drive per target (default 20G; 0 skips it)
#   --out FILE    where the report goes (default bench/tape/RESULTS.md); results.json and the
#                 charts go next to it
#   --note TEXT   a remark for the report
#   -- ARGS       passed to `reel bench tape` as they are (e.g. -- --record-size 256K --drives 1)
# Builds reel (release), then runs the matrix: 1 and 4 drives at once x 64K,
# 256K and 1M records, write then read back and verify, on a fresh reel library and a fresh
# tgt (drives + changer) per cell, plus the flat run; about 7-10 minutes on 2 cores. Needs
# tgtd, tgtadm and tgtimg (Debian package tgt), root for tgtd, and free space in
# /var/tmp/reel-bench-work for tgt's tape images (the largest cell: 4 x SIZE, or the flat size).
# Anything in the old report below the line "<!-- notes below are kept by run.sh -->"
# (profiles, analysis) is carried over to the new one. See BENCHMARKING.md ("Tape throughput").
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
size=2G flat=20G out=$here/RESULTS.md note='' extra=()
while (($#)); do
  case $1 in
    --size) size=$2; shift 2 ;;
    --flat) flat=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --note) note=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h | --help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done
outdir=$(cd "$(dirname "$out")" && pwd)
json=$outdir/results.json
flat_args=()
if [[ $flat != 0 ]]; then flat_args=(--flat "$flat"); fi

# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$root/bench/lib.sh"
build_reel "tape bench"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
report_head "reel tape throughput benchmark results" bench/tape/run.sh tape-throughput-reel-bench-tape >"$tmp/head.md"

cmd=(reel bench tape --size "$size" "${flat_args[@]}" --json "$(realpath --relative-to="$PWD" "$json")"
  --charts "$(realpath --relative-to="$PWD" "$outdir")" "${extra[@]}")
echo "tape bench: ${cmd[*]}" >&2
# The Markdown is written next to the charts so that its links are relative to them.
section=$outdir/.reel-bench-section.md
"$reel" bench tape --reel-bin "$reel" --size "$size" "${flat_args[@]}" --json "$json" \
  --charts "$outdir" --markdown "$section" "${extra[@]}"
assemble_report "$out" "$tmp/head.md" "$section" "$note" "${cmd[@]}"
rm -f "$section"
echo "tape bench: wrote $out, $json and the charts in $outdir" >&2
