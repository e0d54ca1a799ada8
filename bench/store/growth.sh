#!/usr/bin/env bash
# How the catalog grows over a long write: `reel bench growth` on two workloads, written to
# bench/store/GROWTH.md (and growth-dedup.json, growth-unique.json next to it).
#
# Usage: bench/store/growth.sh [--total SIZE] [--every SIZE] [--dir DIR] [--out FILE] [--note TEXT]
#   --total SIZE  bytes written per workload (default 100G)
#   --every SIZE  a measured synchronising point every SIZE (default 10G)
#   --dir DIR     where the temporary stores go (default /var/tmp; the unique workload needs
#                 about 0.4 bytes per byte written there)
#   --out FILE    where the report goes (default bench/store/GROWTH.md)
#   --note TEXT   a remark for the report
# Workloads: tapewrite data (randomness 0.25, R = 8) and unique compressible data (randomness
# 0.25, R = 1), 256K records, one stream. A long benchmark, not part of CI. See BENCHMARKING.md.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
total=100G every=10G dir=/var/tmp out=$here/GROWTH.md note=
while (($#)); do
  case $1 in
    --total) total=$2; shift 2 ;;
    --every) every=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --note) note=$2; shift 2 ;;
    -h | --help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done
outdir=$(cd "$(dirname "$out")" && pwd)

# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$root/bench/lib.sh"
build_reel "growth bench"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
report_head "reel catalog growth benchmark results" bench/store/growth.sh how-the-catalog-grows-reel-bench-growth >"$tmp/head.md"

commands=()
for workload in dedup unique; do
  case $workload in
    dedup) args=(--redundancy 8) title="Tapewrite data (randomness 0.25, R = 8)" ;;
    unique) args=(--redundancy 1) title="Unique data (randomness 0.25, R = 1)" ;;
  esac
  cmd=(reel bench growth --total "$total" --every "$every" "${args[@]}" --dir "$dir"
    --json "$(realpath --relative-to="$root" "$outdir")/growth-$workload.json")
  commands+=("${cmd[*]}")
  echo "growth bench: ${cmd[*]}" >&2
  {
    echo "### $title"
    echo
    "$reel" bench growth --total "$total" --every "$every" "${args[@]}" --dir "$dir" \
      --json "$outdir/growth-$workload.json"
    echo
  } >>"$tmp/section.md"
done
assemble_report "$out" "$tmp/head.md" "$tmp/section.md" "$note" "${commands[0]}" "; " "${commands[1]}"
echo "growth bench: wrote $out" >&2
