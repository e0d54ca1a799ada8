#!/bin/bash
# Per-run guest logic of the reel test VM.  /sbin/reel-vm-init (baked into
# the image) execs this from the 9p share, so it runs as PID 1.
#
# It prepares the machine and nothing more: mounts, network to the portal,
# kernel modules (iscsi_tcp, sd, sg, st, ch), iscsid.  It does NOT discover
# or log in: the test script decides every login.  Then it runs /vm/script.sh
# (the run.sh --script), logs out whatever the script left, saves logs into
# /vm/out and powers off after printing REEL-VM-EXIT=<status> on the result
# port (/dev/ttyS1), which is how run.sh learns the outcome.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root LANG=C.UTF-8 TERM=dumb
umask 022

OUT=/vm/out
mkdir -p "$OUT"
RESULT_PORT=/dev/ttyS1

# PID 1 is this script's exec'ing init, or systemd (run.sh --systemd), which has mounted the
# file systems and runs iscsid itself.
UNDER_SYSTEMD=0
[ "$(cat /proc/1/comm 2>/dev/null)" = systemd ] && UNDER_SYSTEMD=1
if [ "$UNDER_SYSTEMD" = 0 ]; then
	mount -t tmpfs -o mode=1777 tmpfs /tmp
	mount -t tmpfs -o mode=0755 tmpfs /run
	mkdir -p /run/lock/iscsi /dev/pts /dev/shm /var/lib/iscsi
	mount -t devpts devpts /dev/pts
	mount -t tmpfs tmpfs /dev/shm
	[ -e /dev/fd ] || ln -s /proc/self/fd /dev/fd
	hostname reel-vm
fi
mkdir -p /run/lock/iscsi /var/lib/iscsi
stty -F "$RESULT_PORT" raw -echo -onlcr 2>/dev/null

# shellcheck disable=SC1091
. /vm/run.env

uptime_s() { cut -d' ' -f1 /proc/uptime; }
exec 7>>"$OUT/boot.log"
log() {
	echo "[$(uptime_s)] $*" >&7
	echo "reel-vm: $*" >/dev/console
}
result_line() {
	printf '%s\n' "$*" >"$RESULT_PORT"
	printf '%s\n' "$*" >>"$OUT/results.log"
}

power_off() {
	local rc=$1
	log "shutting down, status $rc"
	# Whatever the script left logged in: log out so the target sees a
	# clean logout rather than a dropped connection.
	if iscsiadm -m session >/dev/null 2>&1; then
		timeout 30 iscsiadm -m node --logoutall=all >&7 2>&1 || log "logout of leftover sessions failed"
	fi
	if [ -n "${ISCSID_PID:-}" ]; then
		kill "$ISCSID_PID" 2>/dev/null
		wait "$ISCSID_PID" 2>/dev/null
	fi
	dmesg >"$OUT/dmesg.log" 2>&1
	ls -la "$OUT" >&7 2>&1
	result_line "REEL-VM-EXIT=$rc"
	sync
	echo o >/proc/sysrq-trigger
	sleep 30
	exit "$rc"
}

log "boot.sh started at $(uptime_s) s uptime, kernel $(uname -r)"

# --- network: one virtio NIC, a /24 with the portal's guest-side address ----
modprobe virtio_net
nic=""
for _ in $(seq 1 100); do
	for d in /sys/class/net/*; do
		[ "${d##*/}" = lo ] || { nic=${d##*/}; break; }
	done
	[ -n "$nic" ] && break
	sleep 0.05
done
ip link set lo up
if [ -z "$nic" ]; then
	result_line "not ok 1 - vm: network interface present"
	power_off 3
fi
ip link set "$nic" up
ip addr add "$REEL_VM_GUEST_IP/24" dev "$nic"
# Acknowledge at once instead of delaying ACKs by up to 40 ms: qemu's
# user-mode network waits for ACKs before sending more (big win there,
# harmless on the tap transport).
ip route replace "${REEL_VM_GUEST_IP%.*}.0/24" dev "$nic" src "$REEL_VM_GUEST_IP" quickack 1
log "network: $nic $REEL_VM_GUEST_IP/24, portal $REEL_VM_PORTAL (transport $REEL_VM_NET)"

# --- kernel side of the initiator --------------------------------------------
# No udev in this guest: nothing autoloads drivers, so load them up front.
# devtmpfs creates /dev/sdX, /dev/sgN, /dev/nstN, /dev/schN by itself.
for m in iscsi_tcp sd_mod sg st ch crc32c_generic crc32c_intel; do
	modprobe "$m" 2>>"$OUT/boot.log" || log "modprobe $m failed"
done

# --- iscsid -------------------------------------------------------------------
echo "InitiatorName=$REEL_VM_INITIATOR" >/etc/iscsi/initiatorname.iscsi
if [ "$UNDER_SYSTEMD" = 1 ]; then
	systemctl start iscsid.service >>"$OUT/iscsid.log" 2>&1 || log "systemctl start iscsid failed"
	ISCSID_PID=""
else
	iscsid -f >>"$OUT/iscsid.log" 2>&1 &
	ISCSID_PID=$!
fi
for _ in $(seq 1 100); do
	iscsiadm -m session >/dev/null 2>&1
	[ $? -eq 21 ] && break # "no active sessions": iscsid is answering
	sleep 0.05
done
log "iscsid pid $ISCSID_PID, initiator $REEL_VM_INITIATOR"
result_line "# vm: kernel $(uname -r), open-iscsi $(iscsiadm --version 2>/dev/null | awk '{print $NF}'), ready at $(uptime_s) s guest uptime"

# --- the script -----------------------------------------------------------------
export REEL_VM_OUT=$OUT REEL_VM_LIB=/vm/guest/lib.sh REEL_VM_CTL=/vm/ctl
export REEL_VM_PORTAL REEL_VM_HOST_PORTAL REEL_VM_INITIATOR REEL_VM_NET REEL_VM_GUEST_IP
if [ -f /vm/user.env ]; then
	set -a
	# shellcheck disable=SC1091
	. /vm/user.env
	set +a
fi
cd /tmp || power_off 3
log "running the script"
# The script's own TAP helpers (lib.sh) write to the result port directly;
# plain "ok/not ok/#" lines on its stdout are forwarded too, the rest of
# its output only goes to script.log.
bash /vm/script.sh </dev/null 2>&1 | while IFS= read -r line; do
	printf '%s\n' "$line" >>"$OUT/script.log"
	case "$line" in
	"ok "* | "not ok "* | "#"*) result_line "$line" ;;
	esac
done
rc=${PIPESTATUS[0]}
log "script exited with $rc"
power_off "$rc"
