#!/usr/bin/env bash
# iSCSI acceptance: start a target on 127.0.0.1, boot the test VM against it
# with iscsi-checks.sh, stop the target (by the PID this script started).
#
#   tests/vm/iscsi-test.sh --target tgt  [options]
#   tests/vm/iscsi-test.sh --target reel --reel-bin PATH [options]
#
#   --port N        listen port (default: a free one chosen at random by scripts/free-ports.py)
#   --out DIR       where everything goes (default: a new /tmp/reel-iscsi-test.XXXXXX):
#                   DIR/vm/ (run.sh's logs), DIR/target/ (config, target.log, data)
#   --keep          keep the target's data directory even when all passed
#   --setup-only    start and configure the target, print how to stop it, exit
#   --timeout S     whole VM run (default 600)
#   other options go to run.sh: --net, --env K=V, --mem, --smp, --accel
#
# Both targets offer the same four iSCSI targets (IQN base
# iqn.2026-11.org.reel.test): open (no CHAP, null disk), chap (one-way CHAP
# reel-user / reel-secret-12), mutual (plus target reel-target /
# target-secret-1), acl (only initiator ...:someone-else).  The guest's
# `host_do restart-target` stops the target (reel: SIGTERM, wait for its
# exit) and starts it again with the same data directory and configuration.
#
# tgt: Debian's tgtd with its own control port, null backing store LUNs.
# reel: `reel serve --data DIR --config FILE` with the TOML written here.
set -uo pipefail

VM_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SELF=$VM_DIR/iscsi-test.sh
BASE=iqn.2026-11.org.reel.test
CHAP_USER=reel-user CHAP_SECRET=reel-secret-12
TGT_USER=reel-target TGT_SECRET=target-secret-1
OTHER_INITIATOR=$BASE:someone-else

say() { echo "# iscsi-test: $*"; }
die() { echo "iscsi-test.sh: $*" >&2; exit 2; }

# --- process helpers (only PIDs this script recorded) ---------------------------------
alive() { # PID: some thread of it still runs
	local t st
	[ -n "${1:-}" ] || return 1
	# A zombie leader may still have threads finishing a system call (an fsync) and holding
	# its files, the catalog lock among them: the process is gone when every thread is.
	for t in /proc/"$1"/task/*/stat; do
		st=$(sed 's/^[^)]*) //' "$t" 2>/dev/null | cut -d' ' -f1)
		[ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ] && return 0
	done
	return 1
}
is_ours() { # PID NAME: the process still runs the program we started
	alive "$1" && tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -q -- "$2"
}
wait_gone() { # PID SECONDS
	for _ in $(seq 1 $(($2 * 10))); do
		alive "$1" || return 0
		sleep 0.1
	done
	return 1
}
listening() { ss -Hltn "sport = :$1" 2>/dev/null | grep -q .; }
wait_listening() { # PORT PID SECONDS
	for _ in $(seq 1 $(($3 * 10))); do
		listening "$1" && return 0
		alive "$2" || return 1
		sleep 0.1
	done
	return 1
}

# --- state: everything the hook process needs to restart the target ---------------------
load_state() {
	STATE=$1
	# shellcheck disable=SC1091
	. "$STATE/target.env"
}

# --- tgt ---------------------------------------------------------------------------------------
tgt_adm() { tgtadm -C "$CN" --lld iscsi "$@"; }
tgt_configure() {
	local tid=0 t
	for t in open chap mutual acl; do
		tid=$((tid + 1))
		tgt_adm --op new --mode target --tid "$tid" -T "$BASE:$t" || return 1
		# tgt's defaults (8 KiB data segments, InitialR2T=Yes) cost a round
		# trip per write; offer what a tuned target would.  Its digest
		# default is None only: allow CRC32C as well.
		local kv
		for kv in MaxRecvDataSegmentLength=262144 MaxXmitDataSegmentLength=262144 FirstBurstLength=262144 \
			MaxBurstLength=1048576 InitialR2T=No ImmediateData=Yes HeaderDigest=CRC32C,None DataDigest=CRC32C,None; do
			tgt_adm --op update --mode target --tid "$tid" --name "${kv%%=*}" --value "${kv#*=}" || return 1
		done
		# the null backing store discards writes and reads back zeros
		tgt_adm --op new --mode logicalunit --tid "$tid" --lun 1 --bstype null --backing-store "null-$t" || return 1
		tgt_adm --op update --mode logicalunit --tid "$tid" --lun 1 \
			--params "vendor_id=REELTEST,product_id=NULL-DISK-$t,scsi_sn=REELTGT000$tid" || return 1
		# tgt 1.0.85 ignores an initiator-name ACL as soon as any address is
		# bound (even ALL): the acl target gets the name only.
		[ "$t" = acl ] && continue
		tgt_adm --op bind --mode target --tid "$tid" --initiator-address ALL || return 1
	done
	tgt_adm --op new --mode account --user "$CHAP_USER" --password "$CHAP_SECRET" || return 1
	tgt_adm --op new --mode account --user "$TGT_USER" --password "$TGT_SECRET" || return 1
	tgt_adm --op bind --mode account --tid 2 --user "$CHAP_USER" || return 1
	tgt_adm --op bind --mode account --tid 3 --user "$CHAP_USER" || return 1
	tgt_adm --op bind --mode account --tid 3 --user "$TGT_USER" --outgoing || return 1
	tgt_adm --op bind --mode target --tid 4 --initiator-name "$OTHER_INITIATOR" || return 1
	tgt_adm --op show --mode target >"$STATE/tgt-show.txt" 2>&1
}
tgt_start() {
	tgtd -f -C "$CN" --iscsi "portal=127.0.0.1:$PORT" </dev/null >>"$STATE/target.log" 2>&1 &
	local pid=$!
	echo "$pid" >"$STATE/target.pid"
	for _ in $(seq 1 100); do
		tgtadm -C "$CN" --op show --mode system >/dev/null 2>&1 && break
		alive "$pid" || { echo "tgtd exited at start: $(tail -n 3 "$STATE/target.log")" >&2; return 1; }
		sleep 0.1
	done
	tgt_configure || { echo "configuring tgtd failed" >&2; return 1; }
	wait_listening "$PORT" "$pid" 10 || { echo "tgtd does not listen on $PORT" >&2; return 1; }
}
tgt_stop() {
	local pid
	pid=$(cat "$STATE/target.pid" 2>/dev/null)
	is_ours "$pid" tgtd || return 0
	# tgtd may ignore SIGTERM while it has targets: drop them, then ask it to exit
	local tid
	for tid in 1 2 3 4; do tgt_adm --op delete --mode target --tid "$tid" --force >/dev/null 2>&1; done
	tgtadm -C "$CN" --op delete --mode system >/dev/null 2>&1
	wait_gone "$pid" 10 && return 0
	kill "$pid" 2>/dev/null
	wait_gone "$pid" 5 && return 0
	kill -9 "$pid" 2>/dev/null
	wait_gone "$pid" 5
}

# --- reel ----------------------------------------------------------------------------------------
reel_config() {
	cat <<EOF
# written by tests/vm/iscsi-test.sh
[iscsi]
listen = ["127.0.0.1:$PORT"]

[[iscsi.target]]
name = "$BASE:open"
alias = "open"
kind = "null-disk"

[[iscsi.target]]
name = "$BASE:chap"
alias = "chap"
kind = "null-disk"
chap = { user = "$CHAP_USER", secret = "$CHAP_SECRET" }

[[iscsi.target]]
name = "$BASE:mutual"
alias = "mutual"
kind = "null-disk"
chap = { user = "$CHAP_USER", secret = "$CHAP_SECRET" }
mutual_chap = { user = "$TGT_USER", secret = "$TGT_SECRET" }

[[iscsi.target]]
name = "$BASE:acl"
alias = "acl"
kind = "null-disk"
allow_initiators = ["$OTHER_INITIATOR"]
EOF
}
reel_start() {
	echo "=== $(date -u +%T) start: $REEL_BIN serve --data $STATE/data --config $STATE/reel.toml" >>"$STATE/target.log"
	NO_COLOR=1 RUST_BACKTRACE=1 "$REEL_BIN" serve --data "$STATE/data" --config "$STATE/reel.toml" --http 127.0.0.1:0 </dev/null >>"$STATE/target.log" 2>&1 &
	local pid=$!
	echo "$pid" >"$STATE/target.pid"
	wait_listening "$PORT" "$pid" 60 || {
		echo "reel does not listen on 127.0.0.1:$PORT (alive: $(alive "$pid" && echo yes || echo no)); log:" >&2
		tail -n 10 "$STATE/target.log" >&2
		return 1
	}
}
reel_stop() {
	local pid
	pid=$(cat "$STATE/target.pid" 2>/dev/null)
	is_ours "$pid" "$(basename "$REEL_BIN")" || return 0
	local t0=$SECONDS
	kill -TERM "$pid" 2>/dev/null
	if wait_gone "$pid" 60; then
		echo "=== $(date -u +%T) stopped by SIGTERM in $((SECONDS - t0)) s" >>"$STATE/target.log"
		return 0
	fi
	echo "=== $(date -u +%T) did not exit within 60 s of SIGTERM: SIGKILL" >>"$STATE/target.log"
	kill -9 "$pid" 2>/dev/null
	wait_gone "$pid" 5
	return 1
}

target_start() { "${KIND}_start"; }
target_stop() { "${KIND}_stop"; }

# --- hook mode: run.sh --hook "iscsi-test.sh __hook STATE" -------------------------------------------
if [ "${1:-}" = __hook ]; then
	load_state "$2"
	case "${3:-}" in
	restart-target)
		t0=$(date +%s.%N)
		old=$(cat "$STATE/target.pid" 2>/dev/null)
		target_stop
		stop_rc=$?
		target_start
		start_rc=$?
		echo "restart-target: stop rc $stop_rc (pid $old), start rc $start_rc (pid $(cat "$STATE/target.pid")), $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s"
		[ "$start_rc" = 0 ] && [ "$stop_rc" = 0 ]
		exit $?
		;;
	*) echo "unknown request '${3:-}'"; exit 64 ;;
	esac
fi

# --- main ---------------------------------------------------------------------------------------------
KIND="" REEL_BIN="" PORT="" OUT="" KEEP=0 SETUP_ONLY=0 TIMEOUT=600
RUN_ARGS=()
while [ $# -gt 0 ]; do
	case "$1" in
	--target) KIND=${2:-}; shift 2 ;;
	--reel-bin) REEL_BIN=${2:-}; shift 2 ;;
	--port) PORT=${2:-}; shift 2 ;;
	--keep) KEEP=1; shift ;;
	--setup-only) SETUP_ONLY=1; KEEP=1; shift ;;
	--timeout) TIMEOUT=${2:-}; shift 2 ;;
	-h | --help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	--out) OUT=${2:-}; shift 2 ;;
	--net | --env | --mem | --smp | --accel | --initiator) RUN_ARGS+=("$1" "${2:-}"); shift 2 ;;
	*) die "unknown option '$1' (see --help)" ;;
	esac
done
[ "$(id -u)" = 0 ] || die "needs root (tgtd, network namespace, image build)"
case "$KIND" in
tgt)
	if ! command -v tgtd >/dev/null; then
		say "installing tgt"
		apt-get -o DPkg::Lock::Timeout=1200 update -qq
		DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=1200 install -y -qq --no-install-recommends tgt >/dev/null ||
			die "cannot install tgt"
	fi
	;;
reel)
	[ -n "$REEL_BIN" ] || die "--target reel needs --reel-bin PATH"
	[ -x "$REEL_BIN" ] || die "not executable: $REEL_BIN"
	REEL_BIN=$(cd "$(dirname "$REEL_BIN")" && pwd)/$(basename "$REEL_BIN")
	"$REEL_BIN" serve --help 2>&1 | grep -q -- '--config' || die "$REEL_BIN serve has no --config option yet"
	;;
*) die "--target must be tgt or reel" ;;
esac
# At random outside the ephemeral range: another VM suite may be starting beside this one.
[ -n "$PORT" ] || PORT=$(python3 "$VM_DIR/../../scripts/free-ports.py" 1) || die "no free port"
listening "$PORT" && die "port $PORT is already in use"
CN=$PORT # tgtd's management channel number: one per port, no clash with a system tgtd

if [ -z "$OUT" ]; then
	OUT=$(mktemp -d /tmp/reel-iscsi-test.XXXXXX)
else
	mkdir -p "$OUT" || die "cannot create $OUT"
fi
OUT=$(cd "$OUT" && pwd)
STATE=$OUT/target
rm -rf "${STATE:?}"
mkdir -p "$STATE"
if [ "$KIND" = reel ]; then
	reel_config >"$STATE/reel.toml"
	mkdir -p "$STATE/bin"
	# reel refuses a data directory other users can read
	mkdir -m 700 "$STATE/data"
	# run a private copy: a rebuild during the run must not change the
	# binary that the restart starts
	cp "$REEL_BIN" "$STATE/bin/reel" || die "cannot copy $REEL_BIN"
	echo "# tested binary: $REEL_BIN ($(sha256sum "$REEL_BIN" | cut -c1-16))" >>"$STATE/target.log"
	REEL_BIN=$STATE/bin/reel
fi
{
	echo "KIND=$KIND"
	echo "PORT=$PORT"
	echo "CN=$CN"
	printf 'REEL_BIN=%q\n' "$REEL_BIN"
} >"$STATE/target.env"

finish() {
	target_stop || say "the target did not stop cleanly (see $STATE/target.log)"
	if [ "$KEEP" = 1 ]; then
		say "logs and target data in $OUT"
	else
		rm -rf "${STATE:?}/data" "${STATE:?}/bin"
		say "logs in $OUT"
	fi
	# end with run.sh's summary line, as the last line of the output
	[ -s "$OUT/vm/summary" ] && cat "$OUT/vm/summary"
	return 0
}

T0=$(date +%s.%N)
if ! target_start; then
	say "could not start the $KIND target; log: $STATE/target.log"
	tail -n 20 "$STATE/target.log" | sed 's/^/#   /'
	KEEP=1
	finish
	exit 2
fi
say "$KIND target pid $(cat "$STATE/target.pid") on 127.0.0.1:$PORT, started in $(awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s; state $STATE"
if [ "$SETUP_ONLY" = 1 ]; then
	say "left running. Run the checks:  $VM_DIR/run.sh --portal 127.0.0.1:$PORT --script $VM_DIR/iscsi-checks.sh --hook '$SELF __hook $STATE'"
	if [ "$KIND" = tgt ]; then
		say "stop it: for t in 1 2 3 4; do tgtadm -C $CN --lld iscsi --op delete --mode target --tid \$t --force; done; tgtadm -C $CN --op delete --mode system   (pid $(cat "$STATE/target.pid"))"
	else
		say "stop it: kill $(cat "$STATE/target.pid")"
	fi
	exit 0
fi
RUN_PID=""
trap finish EXIT
# run.sh runs in the background so that a signal here is handled at once:
# pass it on, let run.sh clean up its VM and network, then stop the target.
trap '[ -n "$RUN_PID" ] && kill -TERM "$RUN_PID" 2>/dev/null && wait "$RUN_PID"; exit 130' INT TERM HUP

"$VM_DIR/run.sh" --portal "127.0.0.1:$PORT" --script "$VM_DIR/iscsi-checks.sh" \
	--hook "$(printf '%q __hook %q' "$SELF" "$STATE")" --timeout "$TIMEOUT" --out "$OUT/vm" \
	"${RUN_ARGS[@]+"${RUN_ARGS[@]}"}" &
RUN_PID=$!
wait "$RUN_PID"
RC=$?
RUN_PID=""
if [ "$KIND" = reel ] && grep -qiE 'panic|thread .* panicked' "$STATE/target.log" 2>/dev/null; then
	say "reel's log mentions a panic:"
	grep -iE -A3 'panic' "$STATE/target.log" | head -n 12 | sed 's/^/#   /'
	KEEP=1
fi
[ "$RC" = 0 ] || KEEP=1
exit "$RC"
