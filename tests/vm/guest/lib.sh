# shellcheck shell=bash
# Helpers for guest scripts run by tests/vm/run.sh.  Source it first:
#     . "$REEL_VM_LIB"
#
# TAP-like output (streamed live to the host through the result port):
#   ok DESC                 -> "ok N - DESC"
#   not_ok DESC [DIAG...]   -> "not ok N - DESC" + one "#   DIAG" line each
#   skip DESC REASON        -> "ok N - DESC # SKIP REASON"
#   diag TEXT               -> "# TEXT"
#   diag_block TITLE TEXT   -> TEXT's lines as "#   ..." (at most 15)
#   tap_summary             -> "# script: P passed, F failed, S skipped";
#                              returns 1 if anything failed
# Running commands:
#   run CMD...              runs CMD under `timeout $CMD_TIMEOUT` (default 120 s),
#                           logs it with its output to $REEL_VM_OUT/commands.log,
#                           leaves the output in $RUN_OUT and the status in $RUN_RC
#                           (also its return value)
# Asking the host to do something mid-run (run.sh --hook CMD):
#   host_do NAME [TIMEOUT] [ARGS...]
#                           writes /vm/ctl/request-NAME, waits (default 120 s)
#                           for /vm/ctl/done-NAME, returns the hook's exit
#                           status (124 on timeout, 127 when run.sh has no hook).
#                           The hook's output lands in run.sh's hooks.log.
# Misc: now (seconds of guest uptime, with decimals), elapsed T0 (now - T0).

REEL_VM_OUT=${REEL_VM_OUT:-/vm/out}
REEL_VM_CTL=${REEL_VM_CTL:-/vm/ctl}
_TAP_STATE=/tmp/.reel-vm-tap
[ -f "$_TAP_STATE" ] || echo "0 0 0 0" >"$_TAP_STATE"

_tap_line() {
	printf '%s\n' "$*" >/dev/ttyS1
	printf '%s\n' "$*" >>"$REEL_VM_OUT/results.log"
}
# state file: next-number passed failed skipped (a file, so counts survive
# subshells)
_tap_count() {
	local n p f s
	read -r n p f s <"$_TAP_STATE"
	n=$((n + 1))
	case "$1" in
	pass) p=$((p + 1)) ;;
	fail) f=$((f + 1)) ;;
	skip) s=$((s + 1)) ;;
	esac
	echo "$n $p $f $s" >"$_TAP_STATE"
	TAP_N=$n
}

ok() {
	_tap_count pass
	_tap_line "ok $TAP_N - $*"
}
not_ok() {
	local desc=$1
	shift
	_tap_count fail
	_tap_line "not ok $TAP_N - $desc"
	local d
	for d in "$@"; do
		[ -n "$d" ] && diag_block "" "$d"
	done
	return 0
}
skip() {
	_tap_count skip
	_tap_line "ok $TAP_N - $1 # SKIP ${2:-}"
}
diag() { _tap_line "# $*"; }
diag_block() {
	local title=$1 text=$2
	[ -n "$title" ] && _tap_line "# $title"
	printf '%s\n' "$text" | sed -n '1,15p' | while IFS= read -r l; do _tap_line "#   $l"; done
}
# check DESC CONDITION-STATUS [DIAG...]: ok when the status is 0
check() {
	local desc=$1 st=$2
	shift 2
	if [ "$st" = 0 ]; then ok "$desc"; else not_ok "$desc" "$@"; fi
}
tap_summary() {
	local n p f s
	read -r n p f s <"$_TAP_STATE"
	diag "script: $p passed, $f failed, $s skipped"
	[ "$f" = 0 ]
}

now() { cut -d' ' -f1 /proc/uptime; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

RUN_OUT=""
RUN_RC=0
run() {
	local t0
	t0=$(now)
	RUN_OUT=$(timeout "${CMD_TIMEOUT:-120}" "$@" 2>&1)
	RUN_RC=$?
	{
		echo "[$t0] \$ $*"
		[ -n "$RUN_OUT" ] && printf '%s\n' "$RUN_OUT"
		echo "[$(now)] exit $RUN_RC"
	} >>"$REEL_VM_OUT/commands.log"
	return "$RUN_RC"
}

host_do() {
	local name=$1 tmo=${2:-120}
	shift
	[ $# -gt 0 ] && shift
	case "$name" in
	'' | *[!A-Za-z0-9._-]*) echo "host_do: bad request name '$name'" >&2; return 2 ;;
	esac
	mkdir -p "$REEL_VM_CTL"
	rm -f "$REEL_VM_CTL/done-$name"
	printf '%s\n' "$@" >"$REEL_VM_CTL/.request-$name.tmp"
	mv "$REEL_VM_CTL/.request-$name.tmp" "$REEL_VM_CTL/request-$name"
	local deadline=$(($(cut -d. -f1 /proc/uptime) + tmo))
	while [ ! -f "$REEL_VM_CTL/done-$name" ]; do
		if [ "$(cut -d. -f1 /proc/uptime)" -ge "$deadline" ]; then
			echo "host_do: no answer to '$name' within $tmo s" >&2
			return 124
		fi
		sleep 0.2
	done
	local st
	st=$(cat "$REEL_VM_CTL/done-$name" 2>/dev/null)
	rm -f "$REEL_VM_CTL/done-$name"
	case "$st" in '' | *[!0-9]*) st=125 ;; esac
	return "$st"
}
