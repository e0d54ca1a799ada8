#!/usr/bin/env bash
# reel's Debian package under a real systemd: the project's VM booted with systemd as PID 1
# (tests/vm/run.sh --systemd) installs the package, checks that reel.service becomes active
# through sd_notify readiness, runs as user reel with its hardening, serves a tape written and
# read back through the kernel initiator inside the guest, stops cleanly, survives an upgrade
# and is purged (tests/vm/package-checks.sh). packaging/deb/test.sh covers the rest in a
# chroot (systemd-analyze verify, conffile handling, reel doctor).
#
#   tests/vm/package-test.sh [--binary PATH] [--out DIR]
#
# Prints TAP; exit status as run.sh's.
set -uo pipefail
VM_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$VM_DIR/../.." && pwd)
BIN=$REPO/target/release/reel OUT=""
while [ $# -gt 0 ]; do
	case "$1" in
	--binary) BIN=${2:?}; shift 2 ;;
	--out) OUT=${2:?}; shift 2 ;;
	-h | --help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "package-test.sh: unknown option $1" >&2; exit 2 ;;
	esac
done
W=$(mktemp -d /tmp/reel-pkg-vm.XXXXXX)
trap 'rm -rf "$W"' EXIT
DEB1=$("$REPO/packaging/deb/build.sh" --binary "$BIN" --version 0.1.0-1 --out "$W") || exit 2
DEB2=$("$REPO/packaging/deb/build.sh" --binary "$BIN" --version 0.1.0-2 --out "$W") || exit 2
OUT=${OUT:-$(mktemp -d /tmp/reel-pkg-vm-out.XXXXXX)}
# No target on the host: the guest serves itself (the portal argument is only run.sh's plumbing).
"$VM_DIR/run.sh" --systemd --portal 127.0.0.1:9 --script "$VM_DIR/package-checks.sh" \
	--file "$DEB1" --file "$DEB2" --env "DEB1=${DEB1##*/}" --env "DEB2=${DEB2##*/}" \
	--env DEB2_VERSION=0.1.0-2 --timeout 1200 --out "$OUT"
