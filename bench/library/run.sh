#!/usr/bin/env bash
# Management-surface latency of a 10,000-slot library (READ ELEMENT STATUS, API listings,
# /metrics CPU). One command; prints a markdown table. See BENCHMARKING.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release -q -p reel --bin reel --example library_bench
echo "machine: $(nproc) cores, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1), load $(cut -d' ' -f1-3 /proc/loadavg)"
cargo build --release -q -p reel-bench
target/release/examples/library_bench target/release/reel target/release/reel-bench
