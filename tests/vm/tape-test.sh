#!/usr/bin/env bash
# Tape library acceptance against reel: prepare a data directory and a
# configuration, start `reel serve`, boot the test VM with tape-checks.sh,
# answer its restart/kill requests, stop reel (by the PID started here).
#
#   tests/vm/tape-test.sh [--reel-bin PATH] [options]
#
#   --reel-bin PATH  the reel binary (default: $CARGO_TARGET_DIR/release/reel,
#                    else target/release/reel); a private copy is run
#   --changers       only the changer personalities (one library per changer
#                    model): quick, no tape I/O
#   --bucket         disaster recovery on the S3 back end: a versitygw started
#                    here (loopback, random keys), reel with durability "bucket",
#                    the guest's `bucket` section; the recover-target hook
#                    deletes reel's data directory and rebuilds it with `reel
#                    recover`. Fails (exit 2) when versitygw is missing
#                    ($REEL_TOOLS_DIR/bin, default ~/.cache/reel-tools/bin;
#                    scripts/s3-servers.sh install)
#   --cluster        two nodes on one bucket: as --bucket, node A serving the
#                    library and holding its lease, node B a standby on a second
#                    port (the guest's portal); the guest's `cluster` section
#                    checks that B redirects the login to A and, after the
#                    failover-target hook (SIGKILL A, wait for B to take the
#                    lease), that B serves what A wrote
#   --sections "..." only these sections of tape-checks.sh (see its header; login and
#                    the drive mapping always run)
#   --port N         listen port (default: a free one chosen at random by
#                    scripts/free-ports.py, so two runs at once do not pick the same)
#   --out DIR        everything goes there (default: a new /tmp/reel-tape-test.XXXXXX):
#                    DIR/vm/ (run.sh's logs, DIR/vm/share/out/tape/ the tools' logs),
#                    DIR/target/ (reel.toml, target.log, data/)
#   --keep           keep reel's data directory even when all passed
#   --setup-only     prepare and start reel, print how to run the checks, exit
#   --timeout S      whole VM run (default 1800; 600 with --changers)
#   --fill-mb N      capacity of the two btape fill cartridges (default 360)
#   other options go to run.sh: --net, --env K=V, --mem, --smp, --accel
#
# The configuration (all library targets; the main one is what `reel serve`
# offers without a configuration):
#   iqn.2026-11.org.reel:library           IBM 3584, 4 x IBM LTO-9, 40 slots, 4 I/E;
#                                          REL001L9..REL020L9 in slots 1-20, and the
#                                          write-protected WPT001L9 in slot 21
#   iqn.2026-11.org.reel.test:fill         IBM 3584, 1 drive, 4 slots: SML001L9 and
#                                          SML002L9 (--fill-mb MiB), SML003L9 (16 MiB)
#   iqn.2026-11.org.reel.test:chg-*        one library per changer model (CHANGERS below)
#   --bucket: only the main library (as above, the 20 blank cartridges made by serve),
#                                          its store in the bucket
# Hooks for the guest: restart-target (SIGTERM, wait for the exit, start
# again), kill-target (SIGKILL, start again), store-usage (du of the data directory into the
# guest's out directory), recover-target (--bucket only:
# SIGKILL, continue versitygw, delete the data directory, `reel recover` from
# the bucket into a new one, `reel serve` on it without --config), s3-pause
# (--bucket only: SIGSTOP versitygw).  After the run reel is stopped
# with SIGTERM and `reel verify` checks the store (then versitygw is stopped).
set -uo pipefail

VM_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SELF=$VM_DIR/tape-test.sh
BASE=iqn.2026-11.org.reel.test
LIB_IQN=iqn.2026-11.org.reel:library
FILL_IQN=$BASE:fill

# SUFFIX|CHANGER|DRIVE|DRIVES|SLOTS|IE|PREFIX|CARTRIDGES|MEDIA  (target $BASE:SUFFIX)
# hp-1x8-g2 is an autoloader: its layout (1 drive, 2 magazines of 4, no I/E)
# comes from the model, the configuration does not set it.
CHANGERS=(
	"chg-ibm3584|ibm-3584|ibm-td9|1|12|2|IB|3|lto9"
	"chg-l700|stk-l700|hpe-ultrium8|2|24|2|L7|3|lto8"
	"chg-sl150|stk-sl150|ibm-td8-hh|1|30|4|SL|2|lto8"
	"chg-msl|hp-msl-g3|hpe-ultrium9-hh|2|23|1|MS|3|lto9"
	"chg-i6000|quantum-scalar-i6000|quantum-lto9|1|16|3|QS|2|lto9"
	"chg-1x8|hp-1x8-g2|hpe-ultrium7|1|8|0|AL|4|lto7"
	# Configuration presets (suffix pre-NAME writes `preset = "NAME"`; the other fields are
	# what the preset must give). vtl-node (256 drives) is checked by crates/reel/tests/presets.rs
	# over reel's own initiator: 257 LUNs are too slow to scan in a TCG guest.
	"pre-autoloader|hp-1x8-g2|hpe-ultrium9-hh|1|8|0|PA|4|lto9"
	"pre-midrange|stk-sl150|hpe-ultrium9-hh|4|48|4|PM|3|lto9"
	"pre-large|ibm-3584|ibm-td9|24|2000|10|PL|3|lto9"
)

say() { echo "# tape-test: $*"; }
die() { echo "tape-test.sh: $*" >&2; exit 2; }

# --- processes: only the PID this script recorded ----------------------------------------------
alive() {
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
ours() { alive "$1" && tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -q -- "$REEL_BIN serve"; }
gone_within() { # PID SECONDS
	for _ in $(seq 1 $(($2 * 10))); do
		alive "$1" || return 0
		sleep 0.1
	done
	return 1
}
listening() { ss -Hltn "sport = :$1" 2>/dev/null | grep -q .; }
ts() { date -u +%T.%3N; }
# reel's current data directory: recover-target replaces it with a new one
data_dir() { cat "$STATE/data.path" 2>/dev/null || echo "$STATE/data"; }

# --- versitygw (--bucket): only the PID recorded in $STATE/s3.pid ---------------------------------
s3_ours() { alive "$1" && tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -q -- "posix $STATE/s3"; }
s3_health() { [ "$(curl -s -o /dev/null -m 2 -w '%{http_code}' "$S3_ENDPOINT/health" 2>/dev/null)" = 200 ]; }
s3_start() {
	mkdir -m 700 "$STATE/s3" || return 1
	ROOT_ACCESS_KEY=$AWS_ACCESS_KEY_ID ROOT_SECRET_KEY=$AWS_SECRET_ACCESS_KEY \
		"$VERSITYGW" --port "127.0.0.1:$S3_PORT" --region us-east-1 --health /health posix "$STATE/s3" \
		</dev/null >>"$STATE/versitygw.log" 2>&1 &
	local pid=$!
	disown "$pid" 2>/dev/null
	echo "$pid" >"$STATE/s3.pid"
	for _ in $(seq 1 300); do
		s3_health && break
		alive "$pid" || { echo "versitygw exited at start (see $STATE/versitygw.log)" >&2; return 1; }
		sleep 0.1
	done
	s3_health || { echo "versitygw does not answer $S3_ENDPOINT/health within 30 s" >&2; return 1; }
	# the empty-payload hash: curl signs, the server wants the header
	curl -sf --aws-sigv4 "aws:amz:us-east-1:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
		-H "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" \
		-X PUT "$S3_ENDPOINT/$S3_BUCKET" >>"$STATE/versitygw.log" 2>&1 ||
		{ echo "creating bucket $S3_BUCKET failed (see $STATE/versitygw.log)" >&2; return 1; }
}
s3_stop() {
	local pid
	pid=$(cat "$STATE/s3.pid" 2>/dev/null)
	s3_ours "$pid" || return 0
	# s3-pause may have left it stopped: a stopped process acts on SIGTERM only once continued
	kill -CONT "$pid" 2>/dev/null
	kill -TERM "$pid" 2>/dev/null
	gone_within "$pid" 10 && return 0
	kill -KILL "$pid" 2>/dev/null
	gone_within "$pid" 5
}
# what the bucket holds under the prefix: "N objects, B bytes" (from the posix directory)
s3_usage() {
	local d=$STATE/s3/$S3_BUCKET/$S3_PREFIX
	echo "$(find "$d" -type f 2>/dev/null | wc -l) objects, $(du -sb "$d" 2>/dev/null | cut -f1) bytes"
}

# --- reel ---------------------------------------------------------------------------------------------
reel_start() {
	local args=(serve --data "$(data_dir)" --config "$STATE/reel.toml" --http 127.0.0.1:0)
	# a recovered directory knows its bucket (bucket.toml): no --config, the portal on the command line
	[ -f "$STATE/recovered" ] && args=(serve --data "$(data_dir)" --listen "127.0.0.1:$PORT" --http 127.0.0.1:0)
	echo "=== $(ts) start: $REEL_BIN ${args[*]}" >>"$STATE/target.log"
	NO_COLOR=1 RUST_BACKTRACE=1 "$REEL_BIN" "${args[@]}" \
		</dev/null >>"$STATE/target.log" 2>&1 &
	local pid=$!
	disown "$pid" 2>/dev/null # a restart hook may end it: no job notice here
	echo "$pid" >"$STATE/target.pid"
	for _ in $(seq 1 900); do
		listening "$PORT" && { echo "=== $(ts) listening (pid $pid)" >>"$STATE/target.log"; return 0; }
		alive "$pid" || break
		sleep 0.1
	done
	echo "reel does not listen on 127.0.0.1:$PORT (alive: $(alive "$pid" && echo yes || echo no))" >&2
	tail -n 10 "$STATE/target.log" >&2
	return 1
}
# reel_stop SIGNAL: TERM waits up to 120 s (then KILL and fail), KILL waits 10 s
reel_stop() {
	local sig=${1:-TERM} pid t0=$SECONDS
	pid=$(cat "$STATE/target.pid" 2>/dev/null)
	ours "$pid" || return 0
	echo "=== $(ts) SIG$sig to $pid" >>"$STATE/target.log"
	kill "-$sig" "$pid" 2>/dev/null
	if [ "$sig" = KILL ]; then
		gone_within "$pid" 10
		return
	fi
	if gone_within "$pid" 120; then
		echo "=== $(ts) exited $((SECONDS - t0)) s after SIGTERM" >>"$STATE/target.log"
		return 0
	fi
	echo "=== $(ts) still running 120 s after SIGTERM: SIGKILL" >>"$STATE/target.log"
	kill -KILL "$pid" 2>/dev/null
	gone_within "$pid" 10
	return 1
}

# --cluster: node B, a standby on PORT_B (its portal redirects to node A until it takes over)
reel_b_start() {
	local args=(serve --data "$STATE/data-b" --config "$STATE/reel-b.toml" --http 127.0.0.1:0)
	echo "=== $(ts) start node B: $REEL_BIN ${args[*]}" >>"$STATE/target-b.log"
	NO_COLOR=1 RUST_BACKTRACE=1 "$REEL_BIN" "${args[@]}" </dev/null >>"$STATE/target-b.log" 2>&1 &
	local pid=$!
	disown "$pid" 2>/dev/null
	echo "$pid" >"$STATE/target-b.pid"
	for _ in $(seq 1 900); do
		listening "$PORT_B" && grep -q "^standby:" "$STATE/target-b.log" && return 0
		alive "$pid" || break
		sleep 0.1
	done
	echo "node B is not a listening standby on 127.0.0.1:$PORT_B" >&2
	return 1
}
# failover: node A killed; node B takes the store over once A's lease expires
failover() {
	local b t0=$SECONDS
	reel_stop KILL || return 1
	b=$(cat "$STATE/target-b.pid" 2>/dev/null)
	for _ in $(seq 1 1200); do
		grep -q "^Ctrl-C" "$STATE/target-b.log" && break
		ours "$b" || { echo "node B exited (see target-b.log)"; return 1; }
		sleep 0.1
	done
	grep -q "^Ctrl-C" "$STATE/target-b.log" || { echo "node B did not take over within 120 s"; return 1; }
	echo "=== $(ts) node B (pid $b) took over $((SECONDS - t0)) s after node A was killed" >>"$STATE/target.log"
	# from now on the serving node is B: finish stops and verifies it
	echo "$b" >"$STATE/target.pid"
	echo "$STATE/data-b" >"$STATE/data.path"
	echo "failover-target: node B took over $((SECONDS - t0)) s after node A was killed"
}

# recover_node: the node is lost with its disk; a new one is built from the bucket alone
recover_node() {
	local old new t0=$SECONDS rc
	old=$(data_dir)
	new=$STATE/data-recovered-$(date +%s)
	local pid
	pid=$(cat "$STATE/s3.pid" 2>/dev/null)
	if s3_ours "$pid"; then
		kill -CONT "$pid" && echo "=== $(ts) SIGCONT to versitygw $pid" >>"$STATE/target.log"
	fi
	for _ in $(seq 1 100); do s3_health && break; sleep 0.1; done
	echo "=== $(ts) recover: the bucket holds $(s3_usage); deleting $old" >>"$STATE/target.log"
	rm -rf "${old:?}"
	[ -e "$old" ] && { echo "could not delete $old"; return 1; }
	# reel refuses a data directory other users can enter: make the empty one private
	mkdir -m 700 "$new" || return 1
	echo "=== $(ts) $REEL_BIN recover --from s3://$S3_BUCKET/$S3_PREFIX --endpoint $S3_ENDPOINT --durability bucket --cache-size 1G --data $new" >>"$STATE/target.log"
	NO_COLOR=1 "$REEL_BIN" recover --from "s3://$S3_BUCKET/$S3_PREFIX" --endpoint "$S3_ENDPOINT" \
		--durability bucket --cache-size 1G --data "$new" </dev/null >"$STATE/recover.log" 2>&1
	rc=$?
	tr '\r' '\n' <"$STATE/recover.log" | grep -v '^$' | tail -n 30 >>"$STATE/target.log"
	echo "=== $(ts) recover: rc $rc in $((SECONDS - t0)) s" >>"$STATE/target.log"
	echo "reel recover: rc $rc in $((SECONDS - t0)) s: $(tr '\r' '\n' <"$STATE/recover.log" | grep -E '^(catalog journal|recovered|error|Error)' | tail -n 3 | tr '\n' ' ')"
	[ "$rc" = 0 ] || return 1
	echo "$new" >"$STATE/data.path"
	touch "$STATE/recovered"
}

# --- hooks: run.sh --hook "tape-test.sh __hook STATE" --------------------------------------------------
if [ "${1:-}" = __hook ]; then
	STATE=$2
	# shellcheck disable=SC1091
	. "$STATE/target.env"
	t0=$(date +%s.%N)
	old=$(cat "$STATE/target.pid" 2>/dev/null)
	# s3-pause (--bucket): SIGSTOP versitygw, the bucket stops answering; reel keeps running.
	# recover-target continues it after reel is killed, so nothing reel sent later can land.
	if [ "${3:-}" = s3-pause ]; then
		pid=$(cat "$STATE/s3.pid" 2>/dev/null)
		s3_ours "$pid" || { echo "s3-pause: no versitygw of ours (pid '$pid')"; exit 1; }
		kill -STOP "$pid" && echo "=== $(ts) SIGSTOP to versitygw $pid" >>"$STATE/target.log"
		exit $?
	fi
	# store-usage: what the data directory takes on disk, everything reel keeps (packs, catalog,
	# journal), written where the guest reads it, $REEL_VM_OUT/store-usage.txt: the bytes
	# allocated (what `du` shows), then the apparent size (`du -b`), then the catalog file's
	# allocated and apparent bytes. redb grows its file by doubling and leaves the new part
	# sparse until it uses it, so the apparent size jumps where the disk usage does not.
	if [ "${3:-}" = store-usage ]; then
		local d
		d=$(data_dir)
		echo "$(du -s -B1 "$d" | cut -f1) $(du -sb "$d" | cut -f1)" \
			"$(du -s -B1 "$d/catalog" | cut -f1) $(du -sb "$d/catalog" | cut -f1)" \
			>"$REEL_VM_OUT/share/out/store-usage.txt"
		exit $?
	fi
	if [ "${3:-}" = failover-target ]; then
		[ "$MODE" = cluster ] || { echo "failover-target needs --cluster"; exit 64; }
		failover
		exit $?
	fi
	case "${3:-}" in
	restart-target) reel_stop TERM ;;
	kill-target) reel_stop KILL ;;
	recover-target) [ -n "${S3_BUCKET:-}" ] || { echo "recover-target needs --bucket"; exit 64; }; reel_stop KILL ;;
	*) echo "unknown request '${3:-}'"; exit 64 ;;
	esac
	stop_rc=$?
	if [ "$3" = recover-target ] && [ "$stop_rc" = 0 ]; then
		recover_node || stop_rc=1
	fi
	reel_start
	start_rc=$?
	echo "${3}: stop rc $stop_rc (pid $old), start rc $start_rc (pid $(cat "$STATE/target.pid")), $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s"
	[ "$stop_rc" = 0 ] && [ "$start_rc" = 0 ]
	exit $?
fi

# --- main -----------------------------------------------------------------------------------------------
REEL_BIN="" PORT="" OUT="" KEEP=0 SETUP_ONLY=0 TIMEOUT="" MODE=full SECTIONS="" FILL_MB=360
RUN_ARGS=()
while [ $# -gt 0 ]; do
	case "$1" in
	--reel-bin) REEL_BIN=${2:-}; shift 2 ;;
	--changers) MODE=changers; shift ;;
	--bucket) MODE=bucket; shift ;;
	--cluster) MODE=cluster; shift ;;
	--sections) SECTIONS=${2:-}; shift 2 ;;
	--port) PORT=${2:-}; shift 2 ;;
	--out) OUT=${2:-}; shift 2 ;;
	--keep) KEEP=1; shift ;;
	--setup-only) SETUP_ONLY=1; KEEP=1; shift ;;
	--timeout) TIMEOUT=${2:-}; shift 2 ;;
	--fill-mb) FILL_MB=${2:-}; shift 2 ;;
	-h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	--net | --env | --mem | --smp | --accel | --initiator) RUN_ARGS+=("$1" "${2:-}"); shift 2 ;;
	*) die "unknown option '$1' (see --help)" ;;
	esac
done
[ "$(id -u)" = 0 ] || die "needs root (network namespace, image build)"
if [ -z "$REEL_BIN" ]; then
	for c in "${CARGO_TARGET_DIR:-}/release/reel" "$VM_DIR/../../target/release/reel"; do
		[ -x "$c" ] && { REEL_BIN=$c; break; }
	done
fi
[ -n "$REEL_BIN" ] && [ -x "$REEL_BIN" ] || die "no reel binary (build it, or give --reel-bin PATH)"
REEL_BIN=$(cd "$(dirname "$REEL_BIN")" && pwd)/$(basename "$REEL_BIN")
ORIG_REEL_BIN=$REEL_BIN
"$REEL_BIN" cartridges create --help 2>&1 | grep -q -- '--capacity' || die "$REEL_BIN cannot create small cartridges (cartridges create --capacity)"
case "$FILL_MB" in '' | *[!0-9]*) die "--fill-mb wants MiB" ;; esac
on_bucket() { [ "$MODE" = bucket ] || [ "$MODE" = cluster ]; }
if on_bucket; then
	# never a silent skip: without a real S3 server this mode cannot prove anything
	VERSITYGW=${REEL_TOOLS_DIR:-$HOME/.cache/reel-tools}/bin/versitygw
	[ -x "$VERSITYGW" ] || die "--bucket needs versitygw at $VERSITYGW: run scripts/s3-servers.sh install (or set REEL_TOOLS_DIR)"
	command -v curl >/dev/null || die "--bucket needs curl (it creates the bucket with --aws-sigv4)"
	[ -n "$SECTIONS" ] && die "--$MODE runs its own section ($MODE); no --sections with it"
	"$REEL_BIN" recover --help >/dev/null 2>&1 || die "$REEL_BIN has no 'recover' command"
fi
case "$MODE" in full) DEF_TIMEOUT=1800 ;; changers) DEF_TIMEOUT=600 ;; *) DEF_TIMEOUT=900 ;; esac
[ -n "$TIMEOUT" ] || TIMEOUT=$DEF_TIMEOUT
# Ports at random outside the ephemeral range (free-ports.py): two runs at once (scripts/
# test-all.sh runs VM suites two at a time) must not both take the first free one, nor one
# take a port the other's reel gave up for a moment in a restart.
# Node B's portal (--cluster) and the S3 server (--bucket) take the first two that are not PORT.
read -r -a FREE < <(python3 "$VM_DIR/../../scripts/free-ports.py" 3) || die "no free ports"
[ -n "$PORT" ] || PORT=${FREE[0]}
listening "$PORT" && die "port $PORT is already in use"
OTHERS=()
for free_port in "${FREE[@]}"; do [ "$free_port" = "$PORT" ] || OTHERS+=("$free_port"); done
PORT_B=${OTHERS[0]} S3_PORT=${OTHERS[1]}

if [ -z "$OUT" ]; then
	OUT=$(mktemp -d /tmp/reel-tape-test.XXXXXX)
else
	mkdir -p "$OUT" || die "cannot create $OUT"
fi
OUT=$(cd "$OUT" && pwd)
STATE=$OUT/target
rm -rf "${STATE:?}"
mkdir -p "$STATE/bin"
# reel refuses a data directory other users can read (docs/design/api.md, start-up checks)
mkdir -m 700 "$STATE/data"
# a private copy: a rebuild during the run must not change what a restart starts
cp "$REEL_BIN" "$STATE/bin/reel" || die "cannot copy $REEL_BIN"
echo "# tested binary: $REEL_BIN (sha256 $(sha256sum "$REEL_BIN" | cut -c1-16))" >"$STATE/target.log"
REEL_BIN=$STATE/bin/reel
{
	printf 'REEL_BIN=%q\n' "$REEL_BIN"
	echo "PORT=$PORT PORT_B=$PORT_B MODE=$MODE"
} >"$STATE/target.env"
if on_bucket; then
	# random keys (never the same twice: a leftover server must not accept us), a free port
	AWS_ACCESS_KEY_ID=reel$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')
	AWS_SECRET_ACCESS_KEY=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
	export AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY
	S3_ENDPOINT=http://127.0.0.1:$S3_PORT S3_BUCKET=reel-vm S3_PREFIX=node-a
	# the hooks read the keys from here: private, removed with the state unless --keep
	chmod 600 "$STATE/target.env"
	{
		printf 'VERSITYGW=%q\n' "$VERSITYGW"
		echo "S3_PORT=$S3_PORT S3_ENDPOINT=$S3_ENDPOINT S3_BUCKET=$S3_BUCKET S3_PREFIX=$S3_PREFIX"
		echo "export AWS_ACCESS_KEY_ID=$AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY=$AWS_SECRET_ACCESS_KEY"
	} >>"$STATE/target.env"
	# until finish takes over (below): a setup error must not leave the server running
	trap 's3_stop' EXIT
	s3_start || die "versitygw did not come up (see $STATE/versitygw.log)"
	say "versitygw pid $(cat "$STATE/s3.pid") on $S3_ENDPOINT, bucket $S3_BUCKET, data $STATE/s3"
fi

# --- data directory and configuration ------------------------------------------------------------------
create() { "$REEL_BIN" cartridges create --data "$STATE/data" "$@" >>"$STATE/prepare.log" 2>&1 || die "cartridges create $* failed (see $STATE/prepare.log)"; }
SPECS=""
{
	echo "# written by tests/vm/tape-test.sh ($MODE)"
	echo "[iscsi]"
	echo "listen = [\"127.0.0.1:$PORT\"]"
	# Prefixed libraries first: a library with an empty barcode_prefix takes
	# every cartridge not claimed before it.
	for spec in "${CHANGERS[@]}"; do
		on_bucket && break
		IFS='|' read -r suffix changer drive nd ns nie pfx ncart media <<<"$spec"
		echo
		echo "[[iscsi.target]]"
		echo "name = \"$BASE:$suffix\""
		echo "kind = \"library\""
		if [ "${suffix#pre-}" != "$suffix" ]; then
			echo "preset = \"${suffix#pre-}\""
		else
			echo "changer = \"$changer\""
			echo "drive = \"$drive\""
		fi
		if [ "$changer" != hp-1x8-g2 ] && [ "${suffix#pre-}" = "$suffix" ]; then
			echo "drives = $nd"
			echo "slots = $ns"
			echo "import_export = $nie"
		fi
		echo "barcode_prefix = \"$pfx\""
		create --prefix "$pfx" --count "$ncart" --media "$media"
		SPECS="$SPECS $spec"
	done
	if on_bucket; then
		# the main library as reel offers it without a configuration (serve makes its 20
		# cartridges): the recovered node, started without --config, offers the same one
		cat <<EOF

[[iscsi.target]]
name = "$LIB_IQN"
kind = "library"
changer = "ibm-3584"
drive = "ibm-td9"
drives = 4
slots = 40
import_export = 4

[store]
backend = "s3"
durability = "bucket"

[store.s3]
endpoint = "$S3_ENDPOINT"
bucket = "$S3_BUCKET"
prefix = "$S3_PREFIX"
region = "us-east-1"

[store.cache]
size = "1G"
EOF
	fi
	if [ "$MODE" = cluster ]; then
		# portals as the guest reaches them (run.sh forwards 10.0.2.100:PORT to 127.0.0.1:PORT)
		cat <<EOF

[cluster]
node = "node-a"
portal = "10.0.2.100:$PORT"
lease_seconds = 8
EOF
	fi
	if [ "$MODE" = full ]; then
		cat <<EOF

[[iscsi.target]]
name = "$FILL_IQN"
kind = "library"
changer = "ibm-3584"
drive = "ibm-td9"
drives = 1
slots = 4
import_export = 1
barcode_prefix = "SML"

[[iscsi.target]]
name = "$LIB_IQN"
kind = "library"
changer = "ibm-3584"
drive = "ibm-td9"
drives = 4
slots = 40
import_export = 4
EOF
		create --prefix REL --count 20
		create --prefix WPT --count 1 --write-protected
		create --prefix SML --count 2 --capacity "${FILL_MB}M"
		create --prefix SML --first 3 --count 1 --capacity 16M
	fi
} >"$STATE/reel.toml"
if [ "$MODE" = cluster ]; then
	mkdir -m 700 "$STATE/data-b"
	sed -e "s/^listen = .*/listen = [\"127.0.0.1:$PORT_B\"]/" -e 's/^node = "node-a"/node = "node-b"/' \
		-e "s/^portal = .*/portal = \"10.0.2.100:$PORT_B\"\nstandby = true/" \
		"$STATE/reel.toml" >"$STATE/reel-b.toml"
fi
on_bucket || "$REEL_BIN" cartridges list --data "$STATE/data" >"$STATE/cartridges-before.txt" 2>&1

finish() {
	local vrc data
	[ "${RC:-1}" = 0 ] || KEEP=1
	reel_stop TERM || say "reel did not stop within 120 s of SIGTERM (see $STATE/target.log)"
	data=$(data_dir)
	if [ -d "$data" ] && [ "$SETUP_ONLY" = 0 ]; then
		"$REEL_BIN" cartridges list --data "$data" >"$STATE/cartridges-after.txt" 2>&1
		"$REEL_BIN" verify --data "$data" >"$STATE/verify.txt" 2>&1
		vrc=$?
		say "reel verify after the run: rc $vrc, $(tr '\r' '\n' <"$STATE/verify.txt" | grep -v '^verifying' | grep -v '^$' | tr '\n' ' ' | cut -c1-160)"
		[ "$vrc" = 0 ] || { KEEP=1; RC=${RC:-0}; [ "$RC" = 0 ] && RC=1; }
	fi
	# after verify: it reads the packs from the bucket
	if [ "$MODE" = cluster ]; then
		# node B, when it is still the standby (after a failover target.pid is B's)
		local b
		b=$(cat "$STATE/target-b.pid" 2>/dev/null)
		if ours "$b"; then kill -TERM "$b"; gone_within "$b" 30 || kill -KILL "$b"; fi
	fi
	if on_bucket; then
		say "bucket: $(s3_usage)"
		s3_stop || say "versitygw (pid $(cat "$STATE/s3.pid" 2>/dev/null)) did not stop"
	fi
	if [ "$KEEP" = 1 ]; then
		say "logs and reel's data in $OUT"
	else
		rm -rf "${STATE:?}/data" "${STATE:?}/data-b" "${STATE:?}"/data-recovered-* "${STATE:?}/s3" "${STATE:?}/bin" "${STATE:?}/target.env"
		say "logs in $OUT"
	fi
	[ -s "$OUT/vm/summary" ] && cat "$OUT/vm/summary"
	return 0
}

T0=$(date +%s.%N)
if ! reel_start; then
	say "could not start reel; log: $STATE/target.log"
	tail -n 20 "$STATE/target.log" | sed 's/^/#   /'
	KEEP=1
	SETUP_ONLY=1
	finish
	exit 2
fi
if [ "$MODE" = cluster ] && ! reel_b_start; then
	say "could not start node B; log: $STATE/target-b.log"
	tail -n 20 "$STATE/target-b.log" | sed 's/^/#   /'
	KEEP=1
	SETUP_ONLY=1
	finish
	exit 2
fi
say "reel pid $(cat "$STATE/target.pid") on 127.0.0.1:$PORT ($MODE), started in $(awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s; state $STATE"
ENVS=(--env "TAPE_MODE=$MODE" --env "CHANGER_SPECS=${SPECS# }" --env "IQN_BASE=$BASE" --env "LIB_IQN=$LIB_IQN"
	--env "FILL_IQN=$FILL_IQN" --env "FILL_CAP_MB=$FILL_MB" --env "TINY_CAP_MB=16")
[ -n "$SECTIONS" ] && ENVS+=(--env "TAPE_SECTIONS=$SECTIONS")
VM_PORT=$PORT
if [ "$MODE" = cluster ]; then
	# the guest logs in at node B's portal; node A's is forwarded too, for the redirect
	VM_PORT=$PORT_B
	ENVS+=(--env "CLUSTER_OWNER_PORTAL=10.0.2.100:$PORT" --forward "$PORT")
fi
# The reel binary in the guest too: its `bench` section runs `reel bench tape`'s file mode on
# /dev/nst* (the same workload through the kernel's initiator and st).
[ -x "$ORIG_REEL_BIN" ] && ENVS+=(--file "$ORIG_REEL_BIN")
# The user guide's Bacula and Amanda configuration files: the guest renders and runs exactly these.
for f in "$VM_DIR"/../../docs/guide/examples/*.conf; do
	ENVS+=(--file "$f")
done
# LTFS for the `ltfs` section, built from ../shared/third-party (tests/vm/build-ltfs.sh); the
# guest fails that section, saying why, when it is missing.
if [ "$MODE" = full ] && { [ -z "$SECTIONS" ] || [[ " $SECTIONS " == *" ltfs "* ]]; }; then
	if LTFS_TGZ=$("$VM_DIR/build-ltfs.sh"); then
		ENVS+=(--file "$LTFS_TGZ")
	else
		say "LTFS could not be built (above): the ltfs section will fail"
	fi
fi
HOOK=$(printf '%q __hook %q' "$SELF" "$STATE")
if [ "$SETUP_ONLY" = 1 ]; then
	say "left running. The checks:  $VM_DIR/run.sh --portal 127.0.0.1:$VM_PORT --script $VM_DIR/tape-checks.sh --hook '$HOOK' --timeout $TIMEOUT $(printf '%q ' "${ENVS[@]}")"
	say "stop it: kill $(cat "$STATE/target.pid")"
	[ "$MODE" = bucket ] && say "and versitygw: kill $(cat "$STATE/s3.pid") (keys in $STATE/target.env)"
	trap - EXIT
	exit 0
fi

RUN_PID="" RC=""
trap 'finish; exit ${RC:-1}' EXIT
trap '[ -n "$RUN_PID" ] && kill -TERM "$RUN_PID" 2>/dev/null && wait "$RUN_PID"; RC=130; exit 130' INT TERM HUP
"$VM_DIR/run.sh" --portal "127.0.0.1:$VM_PORT" --script "$VM_DIR/tape-checks.sh" --hook "$HOOK" \
	--timeout "$TIMEOUT" --out "$OUT/vm" "${ENVS[@]}" "${RUN_ARGS[@]+"${RUN_ARGS[@]}"}" &
RUN_PID=$!
wait "$RUN_PID"
RC=$?
RUN_PID=""
say "wall $(awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s from reel's start to the VM's end"
if grep -qE 'panicked|panic' "$STATE/target.log" 2>/dev/null; then
	say "reel's log mentions a panic:"
	grep -E -A3 'panic' "$STATE/target.log" | head -n 12 | sed 's/^/#   /'
	KEEP=1
	[ "$RC" = 0 ] && RC=1
fi
[ "$RC" = 0 ] || KEEP=1
exit "$RC"
