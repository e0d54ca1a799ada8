#!/usr/bin/env bash
# Management-surface latency of a big library (READ ELEMENT STATUS, MOVE MEDIUM, API
# listings, /metrics CPU), then the console while 256 drives stream. One command; prints a
# markdown table. See BENCHMARKING.md.
#   bench/library/run.sh                  10,000 slots
#   bench/library/run.sh --slots 60000    60,000 slots
#   NO_STREAM=1 bench/library/run.sh ...  without the streaming phase
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release -q -p reel --bin reel --example library_bench
echo "machine: $(nproc) cores, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1), load $(cut -d' ' -f1-3 /proc/loadavg)"
cargo build --release -q -p reel-bench
bench=target/release/reel-bench
[ "${NO_STREAM:-}" = 1 ] && bench=
target/release/examples/library_bench "$@" target/release/reel $bench
