#!/usr/bin/env bash
# Prints the path of Prometheus's `promtool`: the one on PATH, or the one in Debian's prometheus
# package, unpacked (not installed: no service starts) under target/tools/ on first use.
set -euo pipefail
cd "$(dirname "$0")/.."
if command -v promtool >/dev/null; then
  command -v promtool
  exit 0
fi
dir=target/tools/prometheus
if [ ! -x "$dir/usr/bin/promtool" ]; then
  rm -rf "$dir" && mkdir -p "$dir"
  (cd "$dir" && apt-get download prometheus >&2 && dpkg-deb -x prometheus_*.deb . && rm -f prometheus_*.deb)
fi
echo "$PWD/$dir/usr/bin/promtool"
