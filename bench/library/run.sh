#!/usr/bin/env bash
# Management-surface latency of a big library (READ ELEMENT STATUS, MOVE MEDIUM, API
# listings, /metrics CPU), then the console while 256 drives stream: `reel bench library`.
# Prints Markdown tables; the figures go to bench/library/results.json and the chart to
# bench/library/latency.svg. See BENCHMARKING.md.
#   bench/library/run.sh                  10,000 slots
#   bench/library/run.sh --slots 60000    60,000 slots
#   NO_STREAM=1 bench/library/run.sh ...  without the streaming phase
# Anything else is passed to `reel bench library` (`reel bench library --help`).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$root/bench/lib.sh"
build_reel "library bench"
echo "machine: $(nproc) cores, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1), load $(cut -d' ' -f1-3 /proc/loadavg), source $(source_rev)"
stream=()
[ "${NO_STREAM:-}" = 1 ] && stream=(--no-stream)
"$reel" bench library --reel-bin "$reel" --json "$here/results.json" --charts "$here" "${stream[@]}" "$@"
