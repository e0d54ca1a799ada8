#!/usr/bin/env bash
# Boot the reel test VM (Debian, real Linux kernel initiator: open-iscsi,
# sd/sg/st/ch) against an iSCSI portal on this machine's loopback and run a
# guest script in it.
#
#   tests/vm/run.sh --portal 127.0.0.1:PORT --script GUEST_SCRIPT
#                   [--env K=V]... [--timeout S] [--out DIR] [--hook CMD]
#                   [--net auto|tap|user] [--initiator IQN] [--mem MiB]
#                   [--smp N] [--accel tcg|kvm] [--systemd] [--boot-timeout S]
#
#   --portal     loopback address of the target (127.0.0.0/8 or localhost).
#                The guest reaches it as $REEL_VM_PORTAL (10.0.2.100:PORT).
#   --script     bash script run inside the guest (see guest/lib.sh for its
#                helpers); delivered over 9p with guest/boot.sh and guest/lib.sh,
#                so no image rebuild is needed when they change.
#   --forward N  also forward the guest's 10.0.2.100:N to 127.0.0.1:N (the
#                portal's host) — a second node's portal (repeatable).
#   --env K=V    exported to the script (repeatable).
#   --file PATH  copied into the share: the guest finds it as /vm/bin/NAME
#                (repeatable; e.g. a host program built for the same Debian).
#   --timeout S  limit for the whole run, boot included (default 900); exit 124.
#   --boot-timeout S  limit for the guest to reach boot.sh (default 300; a normal boot takes
#                15-65 s under TCG).  A guest that misses it is killed, its console's last
#                lines printed, and booted once more (the target is not contacted before
#                boot.sh); a second miss fails the run (exit 125).
#   --out DIR    logs (default: a new /tmp/reel-vm-run.XXXXXX).
#   --hook CMD   host command for guest requests: when the guest calls
#                `host_do NAME`, run.sh runs `CMD NAME [ARGS...]` (a shell
#                command line; output to DIR/hooks.log) and answers with its
#                exit status.  Without --hook every request answers 127.
#   --net        tap: a network namespace of this run with a tap device and
#                two socat relays to the portal (needs root, /dev/net/tun);
#                user: qemu user-mode network with a guestfwd running socat per
#                connection (slower); auto (default): tap when possible.
#   --initiator  the guest's InitiatorName (default
#                iqn.2026-11.org.reel.test:vm-initiator).
#   --mem 1536, --smp 2, --accel tcg (kvm only where real KVM works).
#   --systemd    boot with systemd as PID 1 (init=/lib/systemd/systemd reel.systemd): the
#                guest logic then runs as the image's reel-vm.service.
#
# Prints the guest's "ok N - ...", "not ok N - ...", "# ..." lines as they
# come, then "N passed, M failed[, K skipped]".  Exit status: 0 only if
# nothing failed and the script exited 0; 1 when a check failed (or the
# script's non-zero status); 124 on timeout; 125 when the guest died without
# reporting or reached boot.sh in none of its boots; 2 on usage or setup errors.
set -uo pipefail

VM_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

PORTAL="" SCRIPT="" TIMEOUT=900 BOOT_TIMEOUT=300 BOOT_ATTEMPTS=2 OUT="" HOOK="" NET=auto
INITIATOR=iqn.2026-11.org.reel.test:vm-initiator
MEM=1536 SMP=2 ACCEL=${REEL_VM_ACCEL:-tcg} INIT=/sbin/reel-vm-init
ENVS=() FILES=() FORWARDS=()
die() { echo "run.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
	case "$1" in
	--portal) PORTAL=${2:-}; shift 2 ;;
	--forward)
		case "${2:-}" in '' | *[!0-9]*) die "--forward wants a port number" ;; esac
		FORWARDS+=("$2"); shift 2 ;;
	--script) SCRIPT=${2:-}; shift 2 ;;
	--env) ENVS+=("${2:-}"); shift 2 ;;
	--file) FILES+=("${2:-}"); shift 2 ;;
	--timeout) TIMEOUT=${2:-}; shift 2 ;;
	--boot-timeout) BOOT_TIMEOUT=${2:-}; shift 2 ;;
	--out) OUT=${2:-}; shift 2 ;;
	--hook) HOOK=${2:-}; shift 2 ;;
	--net) NET=${2:-}; shift 2 ;;
	--initiator) INITIATOR=${2:-}; shift 2 ;;
	--mem) MEM=${2:-}; shift 2 ;;
	--smp) SMP=${2:-}; shift 2 ;;
	--accel) ACCEL=${2:-}; shift 2 ;;
	--systemd) INIT="/lib/systemd/systemd reel.systemd systemd.show_status=0"; shift ;;
	-h | --help) sed -n '2,44p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown option '$1' (see --help)" ;;
	esac
done
[ -n "$PORTAL" ] || die "--portal is required"
[ -n "$SCRIPT" ] || die "--script is required"
[ -f "$SCRIPT" ] || die "no such script: $SCRIPT"
case "$TIMEOUT" in '' | *[!0-9]*) die "--timeout wants seconds" ;; esac
case "$BOOT_TIMEOUT" in '' | *[!0-9]*) die "--boot-timeout wants seconds" ;; esac

HOST=${PORTAL%:*} PORT=${PORTAL##*:}
[ "$HOST" = "$PORTAL" ] && PORT=3260
[ "$HOST" = localhost ] && HOST=127.0.0.1
case "$HOST" in 127.*) ;; *) die "the portal must be on the loopback (127.0.0.0/8), not '$HOST'" ;; esac
case "$PORT" in '' | *[!0-9]*) die "bad port in --portal '$PORTAL'" ;; esac
PORTAL_IP=10.0.2.100 GUEST_IP=10.0.2.15

command -v socat >/dev/null || die "socat is missing (apt-get install socat)"
command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 is missing (apt-get install qemu-system-x86)"

T_START=$(date +%s.%N)
IMG=$("$VM_DIR/build-image.sh" --print-dir --quiet) || die "build-image.sh failed"

if [ -z "$OUT" ]; then
	OUT=$(mktemp -d /tmp/reel-vm-run.XXXXXX)
else
	mkdir -p "$OUT" || die "cannot create $OUT"
fi
OUT=$(cd "$OUT" && pwd)
SHARE=$OUT/share
rm -rf "$SHARE" "$OUT/.guest-done" "$OUT/.timed-out"
mkdir -p "$SHARE/guest" "$SHARE/ctl" "$SHARE/out"
cp "$VM_DIR/guest/boot.sh" "$VM_DIR/guest/lib.sh" "$SHARE/guest/"
cp "$SCRIPT" "$SHARE/script.sh"
for f in "${FILES[@]+"${FILES[@]}"}"; do
	[ -f "$f" ] || die "--file $f: no such file"
	mkdir -p "$SHARE/bin"
	cp "$f" "$SHARE/bin/"
done
qv() { printf '%q' "$1"; }
{
	echo "REEL_VM_PORTAL=$(qv "$PORTAL_IP:$PORT")"
	echo "REEL_VM_HOST_PORTAL=$(qv "$HOST:$PORT")"
	echo "REEL_VM_GUEST_IP=$GUEST_IP"
	echo "REEL_VM_INITIATOR=$(qv "$INITIATOR")"
} >"$SHARE/run.env"
: >"$SHARE/user.env"
for kv in "${ENVS[@]+"${ENVS[@]}"}"; do
	case "$kv" in
	[A-Za-z_]*=*)
		k=${kv%%=*}
		case "$k" in *[!A-Za-z0-9_]*) die "bad --env name in '$kv'" ;; esac
		echo "$k=$(qv "${kv#*=}")" >>"$SHARE/user.env"
		;;
	*) die "--env wants NAME=VALUE, got '$kv'" ;;
	esac
done

# --- cleanup: only what this run started ---------------------------------------
QPID="" SUPPID="" NETNS="" RELAYS=()
stop_pid_tree() { # PID: its direct children first (socat forks per connection), then it
	local p=$1 c
	[ -n "$p" ] || return 0
	for c in $(ps -o pid= --ppid "$p" 2>/dev/null); do kill "$c" 2>/dev/null; done
	kill "$p" 2>/dev/null
	return 0
}
cleanup() {
	[ -n "$SUPPID" ] && kill "$SUPPID" 2>/dev/null
	if [ -n "$QPID" ] && kill -0 "$QPID" 2>/dev/null; then
		kill "$QPID" 2>/dev/null
		for _ in $(seq 1 50); do kill -0 "$QPID" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$QPID" 2>/dev/null
	fi
	local r
	for r in "${RELAYS[@]+"${RELAYS[@]}"}"; do stop_pid_tree "$r"; done
	RELAYS=()
	if [ -n "$NETNS" ]; then
		ip netns del "$NETNS" 2>/dev/null
		NETNS=""
	fi
	rm -f "$OUT/portal.sock"
}
trap cleanup EXIT
trap 'echo "# run.sh: interrupted" >&2; exit 130' INT TERM HUP

# --- network -----------------------------------------------------------------------
if [ "$NET" = auto ]; then
	NET=user
	[ "$(id -u)" = 0 ] && [ -c /dev/net/tun ] && ip netns list >/dev/null 2>&1 && NET=tap
fi
echo "REEL_VM_NET=$NET" >>"$SHARE/run.env"
QEMU_WRAP=()
case "$NET" in
tap)
	# guest 10.0.2.15 --virtio/tap--> 10.0.2.100:PORT, socat in the run's own
	# netns --unix socket--> socat in the root netns --> 127.0.0.1:PORT.
	# The unix socket is the only thing that crosses the namespace boundary.
	NETNS=reelvm-$$
	ip netns add "$NETNS" || die "ip netns add failed (try --net user)"
	ip -n "$NETNS" link set lo up &&
		ip -n "$NETNS" tuntap add dev rvm0 mode tap &&
		ip -n "$NETNS" addr add "$PORTAL_IP/24" dev rvm0 &&
		ip -n "$NETNS" link set rvm0 up || die "tap setup in $NETNS failed (try --net user)"
	SOCK=$OUT/portal.sock
	socat -b 262144 "UNIX-LISTEN:$SOCK,fork,unlink-early,mode=600" "TCP:$HOST:$PORT,nodelay" \
		</dev/null >"$OUT/socat-host.log" 2>&1 &
	RELAYS+=($!)
	for _ in $(seq 1 50); do [ -S "$SOCK" ] && break; sleep 0.1; done
	[ -S "$SOCK" ] || die "host relay did not come up (see $OUT/socat-host.log)"
	ip netns exec "$NETNS" socat -b 262144 "TCP-LISTEN:$PORT,bind=$PORTAL_IP,reuseaddr,fork,nodelay" \
		"UNIX-CONNECT:$SOCK" </dev/null >"$OUT/socat-netns.log" 2>&1 &
	RELAYS+=($!)
	for fp in "${FORWARDS[@]+"${FORWARDS[@]}"}"; do
		fsock=$OUT/portal-$fp.sock
		socat -b 262144 "UNIX-LISTEN:$fsock,fork,unlink-early,mode=600" "TCP:$HOST:$fp,nodelay" \
			</dev/null >"$OUT/socat-host-$fp.log" 2>&1 &
		RELAYS+=($!)
		for _ in $(seq 1 50); do [ -S "$fsock" ] && break; sleep 0.1; done
		ip netns exec "$NETNS" socat -b 262144 "TCP-LISTEN:$fp,bind=$PORTAL_IP,reuseaddr,fork,nodelay" \
			"UNIX-CONNECT:$fsock" </dev/null >"$OUT/socat-netns-$fp.log" 2>&1 &
		RELAYS+=($!)
	done
	NETDEV="tap,id=n0,ifname=rvm0,script=no,downscript=no"
	QEMU_WRAP=(ip netns exec "$NETNS")
	;;
user)
	# restrict=on: no route anywhere; the one guestfwd starts a socat per TCP
	# connection (",," is a literal comma for qemu's option parser).
	NETDEV="user,id=n0,net=10.0.2.0/24,restrict=on,guestfwd=tcp:$PORTAL_IP:$PORT-cmd:socat STDIO TCP:$HOST:$PORT,,nodelay"
	for fp in "${FORWARDS[@]+"${FORWARDS[@]}"}"; do
		NETDEV="$NETDEV,guestfwd=tcp:$PORTAL_IP:$fp-cmd:socat STDIO TCP:$HOST:$fp,,nodelay"
	done
	;;
*) die "--net must be auto, tap or user" ;;
esac

case "$ACCEL" in
tcg) ACCEL_ARGS=(-accel "tcg,thread=multi" -cpu max) ;;
kvm) ACCEL_ARGS=(-accel kvm -cpu host) ;;
*) die "--accel must be tcg or kvm" ;;
esac

# --- boot, supervise, read results: one attempt --------------------------------------------
# The run's deadline counts from its start, across attempts.
DEADLINE=$(($(date +%s) + TIMEOUT))
boot_vm() {
	: >"$OUT/console.log"
	: >"$OUT/results.serial"
	rm -rf "$SHARE/out" "$OUT/.boot-stalled"
	mkdir -p "$SHARE/out"
	"${QEMU_WRAP[@]+"${QEMU_WRAP[@]}"}" qemu-system-x86_64 \
		-nodefaults -no-user-config -display none -no-reboot \
		-machine q35 "${ACCEL_ARGS[@]}" -smp "$SMP" -m "$MEM" \
		-kernel "$IMG/vmlinuz" -initrd "$IMG/initrd.img" \
		-append "console=ttyS0 root=/dev/vda rw init=$INIT panic=-1 net.ifnames=0 8250.nr_uarts=2" \
		-drive "file=$IMG/rootfs.ext4,format=raw,if=virtio,snapshot=on" \
		-netdev "$NETDEV" -device virtio-net-pci,netdev=n0 \
		-fsdev "local,id=vmfs,path=$SHARE,security_model=none" \
		-device virtio-9p-pci,fsdev=vmfs,mount_tag=reelvm \
		-chardev "file,id=ser0,path=$OUT/console.log" -serial chardev:ser0 \
		-chardev "file,id=ser1,path=$OUT/results.serial" -serial chardev:ser1 \
		</dev/null >"$OUT/qemu.log" 2>&1 &
	QPID=$!
	echo "# run.sh: qemu pid $QPID, accel=$ACCEL smp=$SMP mem=${MEM}M net=$NET, portal $HOST:$PORT (guest: $PORTAL_IP:$PORT)"
	echo "# run.sh: image $IMG; logs in $OUT"
}

# The supervisor: host hooks, the run's deadline, the boot deadline, power-off grace.
# boot.sh's first act is to write out/boot.log; a guest that has not done so within
# --boot-timeout has hung in the kernel or early init (seen once under TCG on a loaded CI
# host: no console output was kept then). The guest has not yet configured its network at
# that point, so the target has not been contacted and the run may boot again.
supervise() {
	local req name st t0 args done_at="" boot_deadline
	boot_deadline=$(($(date +%s) + BOOT_TIMEOUT))
	while kill -0 "$QPID" 2>/dev/null; do
		for req in "$SHARE"/ctl/request-*; do
			[ -f "$req" ] || continue
			name=${req##*/request-}
			mv "$req" "$SHARE/ctl/running-$name" 2>/dev/null || continue
			mapfile -t args <"$SHARE/ctl/running-$name"
			[ "${#args[@]}" = 1 ] && [ -z "${args[0]}" ] && args=()
			t0=$(date +%s.%N)
			if [ -n "$HOOK" ]; then
				echo "=== $(date -u +%T) hook: $HOOK $name ${args[*]+${args[*]}}" >>"$OUT/hooks.log"
				REEL_VM_OUT=$OUT bash -c "$HOOK"' "$@"' reel-vm-hook "$name" "${args[@]+"${args[@]}"}" \
					</dev/null >>"$OUT/hooks.log" 2>&1
				st=$?
			else
				st=127
			fi
			echo "# run.sh: host hook '$name' exited $st after $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s"
			echo "$st" >"$SHARE/ctl/.done-$name"
			mv "$SHARE/ctl/.done-$name" "$SHARE/ctl/done-$name"
			rm -f "$SHARE/ctl/running-$name"
		done
		if [ "$(date +%s)" -ge "$DEADLINE" ]; then
			touch "$OUT/.timed-out"
			kill "$QPID" 2>/dev/null
			break
		fi
		if [ -n "$boot_deadline" ]; then
			if [ -s "$SHARE/out/boot.log" ]; then
				boot_deadline=""
			elif [ "$(date +%s)" -ge "$boot_deadline" ]; then
				touch "$OUT/.boot-stalled"
				kill "$QPID" 2>/dev/null
				break
			fi
		fi
		if [ -f "$OUT/.guest-done" ]; then
			# the guest said goodbye; give it 30 s to power off
			[ -n "$done_at" ] || done_at=$(date +%s)
			[ $(($(date +%s) - done_at)) -ge 30 ] && kill "$QPID" 2>/dev/null
		fi
		sleep 0.2
	done
}

console_tail() { # N: the last N lines of the guest's console and of qemu's own log
	tail -n "$1" "$OUT/console.log" | sed 's/^/#   console: /'
	tail -n 3 "$OUT/qemu.log" | sed 's/^/#   qemu: /'
}

: >"$OUT/hooks.log"
PASS=0 FAIL=0 SKIP=0 GUEST_RC="" ATTEMPT=1 BOOT_STALLS=0
while :; do
	boot_vm
	supervise &
	SUPPID=$!
	# results, live
	while IFS= read -r line; do
		line=${line%$'\r'}
		case "$line" in
		REEL-VM-EXIT=*)
			GUEST_RC=${line#REEL-VM-EXIT=}
			touch "$OUT/.guest-done"
			continue
			;;
		"ok "[0-9]*"# SKIP"* | "ok "[0-9]*"# skip"*) SKIP=$((SKIP + 1)) ;;
		"ok "[0-9]*) PASS=$((PASS + 1)) ;;
		"not ok "[0-9]*) FAIL=$((FAIL + 1)) ;;
		esac
		printf '%s\n' "$line"
	done < <(tail -n +1 -F --pid="$QPID" "$OUT/results.serial" 2>/dev/null)
	wait "$QPID" 2>/dev/null
	QRC=$?
	kill "$SUPPID" 2>/dev/null
	wait "$SUPPID" 2>/dev/null
	SUPPID=""
	[ -f "$OUT/.boot-stalled" ] || break
	BOOT_STALLS=$((BOOT_STALLS + 1))
	echo "# run.sh: boot $ATTEMPT: the guest did not reach boot.sh within $BOOT_TIMEOUT s (qemu killed; the target was not contacted); its console's last lines:"
	console_tail 15
	cp "$OUT/console.log" "$OUT/console-boot$ATTEMPT.log"
	[ "$ATTEMPT" -lt "$BOOT_ATTEMPTS" ] && [ "$(date +%s)" -lt "$DEADLINE" ] || break
	ATTEMPT=$((ATTEMPT + 1))
	echo "# run.sh: booting again (boot $ATTEMPT of at most $BOOT_ATTEMPTS)"
done
T_END=$(date +%s.%N)

RC=0
if [ -f "$OUT/.timed-out" ]; then
	FAIL=$((FAIL + 1))
	echo "not ok $((PASS + FAIL + SKIP)) - vm: run finished within --timeout $TIMEOUT s (qemu killed)"
	console_tail 10
	RC=124
elif [ -f "$OUT/.boot-stalled" ]; then
	FAIL=$((FAIL + 1))
	echo "not ok $((PASS + FAIL + SKIP)) - vm: the guest reached boot.sh within $BOOT_TIMEOUT s (in none of $ATTEMPT boots)"
	RC=125
elif [ -z "$GUEST_RC" ]; then
	FAIL=$((FAIL + 1))
	echo "not ok $((PASS + FAIL + SKIP)) - vm: guest reported its exit status (qemu exit $QRC; see $OUT/console.log)"
	console_tail 5
	RC=125
elif [ "$FAIL" -gt 0 ]; then
	RC=1
elif [ "$GUEST_RC" != 0 ]; then
	echo "# run.sh: the guest script exited $GUEST_RC"
	RC=$GUEST_RC
	[ "$RC" -ge 1 ] 2>/dev/null || RC=1
fi
boot=$(sed -n 's/.*boot.sh started at \([0-9.]*\) s uptime.*/\1/p' "$SHARE/out/boot.log" 2>/dev/null | head -n 1)
echo "# run.sh: wall $(awk -v a="$T_START" -v b="$T_END" 'BEGIN{printf "%.1f", b-a}') s; guest booted to boot.sh in ${boot:-?} s; guest status ${GUEST_RC:-none}; qemu exit $QRC; boots $ATTEMPT; logs in $OUT"
SUMMARY="$PASS passed, $FAIL failed"
[ "$SKIP" -gt 0 ] && SUMMARY="$SUMMARY, $SKIP skipped"
echo "$SUMMARY" >"$OUT/summary"
echo "$SUMMARY"
exit "$RC"
