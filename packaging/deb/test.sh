#!/usr/bin/env bash
# The Debian package, end to end, in a clean Debian root (a chroot made with mmdebstrap; no
# container, no VM needed):
#
#   packaging/deb/test.sh [--binary PATH]
#
# 1. build the package twice (0.1.0-1, then -2 for the upgrade) and check its contents;
# 2. `systemd-analyze verify` the unit as installed;
# 3. install it into a fresh bookworm root: the reel user, /var/lib/reel 0700, the conffile;
# 3b. `reel doctor` as user reel: nothing to fix; then a readable data directory is found;
# 4. run the unit's ExecStart as the unit would (user reel, NOTIFY_SOCKET): reel says READY=1
#    once it listens; the library answers INQUIRY over iSCSI (libiscsi's iscsi-inq) and the
#    console its API; a cartridge is written and read back through iSCSI (`reel bench tape`);
#    SIGTERM: STOPPING=1, exit 0, "everything is synced";
# 5. upgrade to -2: the changed conffile and the data stay; reel serves them again;
# 6. purge: the user goes, the data stays; a second install + purge with REEL_PURGE_DATA=yes
#    removes the data.
# Needs root; installs mmdebstrap, systemd, libiscsi-bin and python3 when missing.
# No `set -e`: every check says what it found; setup steps that must work exit explicitly.
set -uo pipefail

DEB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$DEB_DIR/../.." && pwd)
BIN=$REPO/target/release/reel
[ "${1:-}" = --binary ] && BIN=${2:?}
CACHE=${REEL_VM_CACHE:-/var/cache/reel-vm}
[ "$(id -u)" = 0 ] || { echo "test.sh: needs root (chroot, dpkg)" >&2; exit 1; }

n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
not_ok() {
	n=$((n + 1)) failed=$((failed + 1))
	echo "not ok $n - $1"
	shift
	local d
	for d in "$@"; do printf '%s\n' "$d" | sed -n '1,15p' | sed 's/^/#   /'; done
}
check() { local d=$1 st=$2; shift 2; if [ "$st" = 0 ]; then ok "$d"; else not_ok "$d" "$@"; fi; }

need=()
command -v mmdebstrap >/dev/null || need+=(mmdebstrap)
command -v systemd-analyze >/dev/null || need+=(systemd)
command -v iscsi-inq >/dev/null || need+=(libiscsi-bin)
command -v python3 >/dev/null || need+=(python3)
command -v objdump >/dev/null || need+=(binutils)
if [ "${#need[@]}" -gt 0 ]; then
	apt-get -o DPkg::Lock::Timeout=1200 update -qq
	DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=1200 install -y -qq \
		--no-install-recommends "${need[@]}" >/dev/null
fi

W=$(mktemp -d /tmp/reel-deb-test.XXXXXX)
ROOT=$W/root
SERVE_PID=""
cleanup() {
	[ -n "$SERVE_PID" ] && kill "$SERVE_PID" 2>/dev/null
	umount "$ROOT/proc" 2>/dev/null || true
	umount "$ROOT/dev" 2>/dev/null || true
	rm -rf "$W"
}
trap cleanup EXIT

# --- 1. build ---------------------------------------------------------------------------------
DEB1=$("$DEB_DIR/build.sh" --binary "$BIN" --version 0.1.0-1 --out "$W/debs") || exit 1
DEB2=$("$DEB_DIR/build.sh" --binary "$BIN" --version 0.1.0-2 --out "$W/debs") || exit 1
contents=$(dpkg-deb -c "$DEB1")
missing=""
for f in ./usr/bin/reel ./lib/systemd/system/reel.service ./etc/reel/reel.toml \
	./usr/share/man/man1/reel.1.gz ./usr/share/man/man1/reel-serve.1.gz \
	./usr/share/bash-completion/completions/reel ./usr/share/zsh/vendor-completions/_reel \
	./usr/share/fish/vendor_completions.d/reel.fish ./usr/share/doc/reel/guide/bacula.md; do
	grep -q " $f\$" <<<"$contents" || missing="$missing $f"
done
conffiles=$(dpkg-deb -I "$DEB1" conffiles)
if [ -z "$missing" ] && [ "$conffiles" = /etc/reel/reel.toml ] && grep -q 'root/root.*usr/bin/reel$' <<<"$contents"; then
	ok "the package holds the binary, the unit, the conffile, man pages, completions and the guide ($(du -h "$DEB1" | cut -f1))"
else
	not_ok "the package's contents" "missing:${missing:- none}; conffiles: $conffiles" "$contents"
fi

# --- 3. a clean Debian root -------------------------------------------------------------------
# minbase + adduser (the package's dependency), systemd and man-db (for `systemd-analyze verify
# --root`: the targets the unit names, its man page), cached as a tarball keyed by this script
# The host's own apt sources decide the mirror (this machine may only reach a configured one).
sources=()
for f in /etc/apt/sources.list.d/*.sources; do
	[ -f "$f" ] && grep -qiE '^Suites:.*\bbookworm\b' "$f" && sources+=("$f")
done
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
	[ -f "$f" ] && grep -qE '^deb .* bookworm( |-)' "$f" && sources+=("$f")
done
base=$CACHE/deb-test-root-$({ cat "$0" "${sources[@]}"; } | sha256sum | cut -c1-12).tar
if [ ! -s "$base" ]; then
	mkdir -p "$CACHE"
	# (mmdebstrap picks the output format by the name: .tar)
	mmdebstrap --variant=minbase --include=adduser,systemd,man-db bookworm "$base.part.tar" "${sources[@]}" \
		>"$W/mmdebstrap.log" 2>&1 || { tail -n 20 "$W/mmdebstrap.log" >&2; echo "test.sh: mmdebstrap failed" >&2; exit 1; }
	mv "$base.part.tar" "$base"
	# Roots of earlier versions of this script are not used again.
	find "$CACHE" -maxdepth 1 -name 'deb-test-root-*.tar' ! -name "${base##*/}" -delete
fi
mkdir -p "$ROOT"
tar -xf "$base" -C "$ROOT" || exit 1
mount -t proc proc "$ROOT/proc" || exit 1
mount --bind /dev "$ROOT/dev" || exit 1
cp "$DEB1" "$DEB2" "$ROOT/tmp/"
in_root() { chroot "$ROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin "$@"; }
out=$(in_root dpkg -i "/tmp/${DEB1##*/}" 2>&1)
st=$?
owner=$(in_root stat -c '%U:%G %a' /var/lib/reel 2>/dev/null)
if [ "$st" = 0 ] && in_root getent passwd reel >/dev/null && [ "$owner" = "reel:reel 700" ]; then
	ok "dpkg -i in a fresh bookworm root: user reel, /var/lib/reel owned by it, mode 0700"
else
	not_ok "dpkg -i makes the reel user and /var/lib/reel (0700)" "rc $st, /var/lib/reel: '$owner'" "$out"
fi

# --- 2. the unit --------------------------------------------------------------------------------
# --man=no: systemd-analyze looks Documentation=man:reel(1) up with the host's man, not the
# root's; the page's presence in the package is checked above.
out=$(systemd-analyze verify --man=no --root="$ROOT" /lib/systemd/system/reel.service 2>&1)
st=$?
if [ "$st" = 0 ] && ! grep -qiE 'unknown|invalid|not found|warning' <<<"$out"; then
	ok "systemd-analyze verify reel.service: no complaints"
else
	not_ok "systemd-analyze verify reel.service" "rc $st" "$out"
fi
exec_start=$(sed -n 's/^ExecStart=//p' "$ROOT/lib/systemd/system/reel.service")

# --- reel doctor on the fresh installation, and on a mistake ------------------------------------
out=$(chroot --userspec=reel:reel "$ROOT" /usr/bin/env -i PATH=/usr/bin:/bin /usr/bin/reel doctor --config /etc/reel/reel.toml 2>&1)
st=$?
if [ "$st" = 0 ] && grep -q 'data directory .*mode 700' <<<"$out"; then
	ok "reel doctor as user reel on the fresh installation: nothing to fix ($(tail -n 1 <<<"$out"))"
else
	not_ok "reel doctor passes on the fresh installation" "rc $st" "$out"
fi
chmod 0755 "$ROOT/var/lib/reel"
out=$(chroot --userspec=reel:reel "$ROOT" /usr/bin/env -i PATH=/usr/bin:/bin /usr/bin/reel doctor --config /etc/reel/reel.toml 2>&1)
st=$?
chmod 0700 "$ROOT/var/lib/reel"
if [ "$st" != 0 ] && grep -q 'FAIL  data directory' <<<"$out" && grep -q 'chmod 700 /var/lib/reel' <<<"$out"; then
	ok "reel doctor on a data directory others can read: FAIL, with the fix (chmod 700)"
else
	not_ok "reel doctor finds a readable data directory" "rc $st" "$out"
fi

# --- 4. run it as the unit does ----------------------------------------------------------------
read -r ISCSI_PORT HTTP_PORT < <(python3 "$REPO/scripts/free-ports.py" 2)
# The administrator's change to the conffile (ports free on this machine): kept on upgrade.
sed -i -e "s/127.0.0.1:3260/127.0.0.1:$ISCSI_PORT/" -e "s/127.0.0.1:8080/127.0.0.1:$HTTP_PORT/" \
	"$ROOT/etc/reel/reel.toml"
# serve_as_unit LOG: ExecStart as user reel with NOTIFY_SOCKET; NOTIFY_LOG gets what it sends
serve_as_unit() {
	rm -f "$ROOT/run/reel-notify" "$W/notify.log"
	python3 - "$ROOT/run/reel-notify" "$W/notify.log" <<'EOF' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
import os; os.chmod(sys.argv[1], 0o777)
s.settimeout(600)
with open(sys.argv[2], "a", buffering=1) as log:
    while True:
        msg = s.recv(4096).decode()
        log.write(msg.replace("\n", " ") + "\n")
        if "STOPPING=1" in msg:
            break
EOF
	NOTIFY_PID=$!
	for _ in $(seq 1 50); do [ -S "$ROOT/run/reel-notify" ] && break; sleep 0.1; done
	# shellcheck disable=SC2086
	chroot --userspec=reel:reel "$ROOT" /usr/bin/env -i PATH=/usr/bin:/bin NOTIFY_SOCKET=/run/reel-notify \
		$exec_start >"$1" 2>&1 &
	SERVE_PID=$!
	for _ in $(seq 1 600); do
		grep -q 'READY=1' "$W/notify.log" 2>/dev/null && return 0
		kill -0 "$SERVE_PID" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}
stop_unit() {
	kill -TERM "$SERVE_PID"
	wait "$SERVE_PID"
	STOP_RC=$?
	SERVE_PID=""
	wait "$NOTIFY_PID" 2>/dev/null || true
}
IQN=iqn.2026-11.org.reel:library
if serve_as_unit "$W/serve1.log"; then
	ok "ExecStart as user reel: READY=1 once it serves ($(grep -m1 READY=1 "$W/notify.log" | sed 's/.*STATUS=//'))"
	out=$(iscsi-inq "iscsi://127.0.0.1:$ISCSI_PORT/$IQN/0" 2>&1)
	if grep -q '03584L32' <<<"$out" && grep -q 'iqn.2026-11.org.reel:library' "$ROOT/etc/reel/reel.toml"; then
		ok "the library answers INQUIRY over iSCSI on the configured port (changer 03584L32 at LUN 0)"
	else
		not_ok "the library answers INQUIRY over iSCSI" "$out"
	fi
	code=$(python3 -c "import urllib.request,sys
try:
    r = urllib.request.urlopen('http://127.0.0.1:$HTTP_PORT/api/v1/openapi.json', timeout=10); print(r.status)
except Exception as e: print(e)")
	check "the console and API answer on the configured port (OpenAPI document: HTTP $code)" "$([ "$code" = 200 ] && echo 0 || echo 1)"
	# A cartridge written and read back through iSCSI by reel's own benchmark client.
	out=$("$BIN" bench tape --targets reel --reel-addr "127.0.0.1:$ISCSI_PORT" --reel-iqn "$IQN" \
		--drives 1 --record-size 256K --queue-depth 4 --size 64M --work-dir "$W/bench" 2>&1)
	st=$?
	check "a cartridge written and read back over iSCSI (reel bench tape, 64 MiB)" "$st" "$(tail -n 15 <<<"$out")"
	stop_unit
	if [ "$STOP_RC" = 0 ] && grep -q STOPPING=1 "$W/notify.log" && grep -q 'everything is synced' "$W/serve1.log"; then
		ok "SIGTERM: STOPPING=1, exit 0, everything synced"
	else
		not_ok "SIGTERM stops it cleanly" "exit $STOP_RC" "$(tail -n 5 "$W/serve1.log")" "$(cat "$W/notify.log")"
	fi
else
	not_ok "ExecStart as user reel sends READY=1" "$(tail -n 15 "$W/serve1.log")" "$(cat "$W/notify.log" 2>/dev/null)"
fi
as_reel() { chroot --userspec=reel:reel "$ROOT" /usr/bin/env -i PATH=/usr/bin:/bin "$@"; }
written=$(as_reel /usr/bin/reel stats --data /var/lib/reel 2>&1 | grep -i written | head -n 1)

# --- 5. upgrade ---------------------------------------------------------------------------------
out=$(in_root dpkg -i --force-confold "/tmp/${DEB2##*/}" 2>&1)
st=$?
ver=$(in_root dpkg-query -W -f='${Version}' reel)
if [ "$st" = 0 ] && [ "$ver" = 0.1.0-2 ] && grep -q "127.0.0.1:$ISCSI_PORT" "$ROOT/etc/reel/reel.toml"; then
	ok "upgrade to 0.1.0-2 keeps the changed conffile"
else
	not_ok "upgrade to 0.1.0-2 keeps the changed conffile" "rc $st, version '$ver'" "$out"
fi
after=$(as_reel /usr/bin/reel stats --data /var/lib/reel 2>&1 | grep -i written | head -n 1)
if [ -n "$written" ] && [ "$after" = "$written" ] && serve_as_unit "$W/serve2.log"; then
	ok "after the upgrade the data is there ($written) and reel serves it again"
	stop_unit
else
	not_ok "the data survives the upgrade and reel serves it" "before '$written', after '$after'" "$(tail -n 5 "$W/serve2.log" 2>/dev/null)"
fi

# --- 6. purge -----------------------------------------------------------------------------------
out=$(in_root dpkg --purge reel 2>&1)
st=$?
if [ "$st" = 0 ] && ! in_root getent passwd reel >/dev/null && [ -d "$ROOT/var/lib/reel" ] &&
	[ ! -e "$ROOT/etc/reel/reel.toml" ]; then
	ok "purge removes the user and the conffile, keeps the data (and says so)"
else
	not_ok "purge removes the user, keeps the data" "rc $st" "$out"
fi
in_root dpkg -i "/tmp/${DEB2##*/}" >/dev/null 2>&1
out=$(chroot "$ROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin REEL_PURGE_DATA=yes dpkg --purge reel 2>&1)
st=$?
if [ "$st" = 0 ] && [ ! -e "$ROOT/var/lib/reel" ]; then
	ok "purge with REEL_PURGE_DATA=yes removes the data too"
else
	not_ok "purge with REEL_PURGE_DATA=yes removes the data" "rc $st" "$out"
fi

echo "# package test: $((n - failed)) passed, $failed failed"
[ "$failed" = 0 ]
