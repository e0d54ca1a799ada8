#!/bin/bash
# Tape library checks, run INSIDE the test VM by run.sh; tests/vm/tape-test.sh
# prepares the target and drives it.  The Linux tape stack is used the way
# backup software uses it: open-iscsi, st (/dev/nst*), sg, mt-st, mtx, GNU tar,
# dd, sg3-utils, Bacula's btape, Amanda's amtapetype and stenc (tape encryption).
#
# What the target must offer (tape-test.sh configures reel so):
#   LIB_IQN   the tape library: changer at LUN 0, LIB_DRIVES drives at LUNs
#             1..n, LIB_SLOTS slots, LIB_IE import/export elements; blank
#             cartridges in slots 1..LIB_BLANK and one write-protected
#             cartridge whose barcode starts with WP_PREFIX
#   FILL_IQN  a one-drive library with two cartridges of FILL_CAP_MB in
#             slots 1 and 2 (btape fill) and a tiny one in slot 3
#   CHANGER_SPECS  one library per changer model, "SUFFIX|CHANGER|DRIVE|
#             DRIVES|SLOTS|IE|PREFIX|CARTRIDGES|MEDIA" separated by spaces
#             (target IQN_BASE:SUFFIX, cartridges PREFIX0001.. in slots 1..)
# and it answers `host_do restart-target` (clean stop, start) and
# `host_do kill-target` (SIGKILL, start).  TAPE_MODE=bucket (tape-test.sh
# --bucket): the library alone (no FILL_IQN), its store in an S3 bucket; login,
# map and the `bucket` section only, which needs `host_do recover-target` (the
# node's data directory deleted, rebuilt by `reel recover` from the bucket).
#
# Tunables (run.sh --env): TAPE_MODE (full | changers | bucket), TAPE_SECTIONS (all,
# or a list of: inventory map basics tar eod ili dd cartridge bench wp encryption bacula ltfs amanda shared multi
# restart kill partition btape amtapetype fill changers), BENCH_MB (8), DD_MB (24), DD_BLOCK_SIZES
# ("64k 256k 1M"), CONC_MB (16), REPLACEMENT_TIMEOUT (120), CMD_TIMEOUT (180),
# BTAPE_TIMEOUT (900), FILL_TIMEOUT (600), FILL_BLOCK (Bacula's Maximum Block
# Size for btape fill, 262144; btape test uses Bacula's default, 64512),
# BACULA_MB (64: the files a Bacula job backs up), BACULA_TIMEOUT (900 per job).
# shellcheck disable=SC1090
. "$REEL_VM_LIB"
export LC_ALL=C

MODE=${TAPE_MODE:-full}
SECTIONS=${TAPE_SECTIONS:-all}
[ "$MODE" = changers ] && SECTIONS=changers
IQN_BASE=${IQN_BASE:-iqn.2026-11.org.reel.test}
LIB_IQN=${LIB_IQN:-iqn.2026-11.org.reel:library}
FILL_IQN=${FILL_IQN:-$IQN_BASE:fill}
# bucket: the full mode's login and map on the main library, then the bucket section alone
# (it needs the recover-target hook, which only tape-test.sh --bucket answers)
BUCKET_MODE=0
[ "$MODE" = bucket ] && BUCKET_MODE=1 MODE=full SECTIONS=bucket FILL_IQN=""
# cluster (tape-test.sh --cluster): two nodes on one bucket; the portal is node B's (a standby),
# which redirects the login to node A (CLUSTER_OWNER_PORTAL); the `cluster` section alone
CLUSTER_MODE=0
[ "$MODE" = cluster ] && CLUSTER_MODE=1 MODE=full SECTIONS=cluster FILL_IQN=""
CHANGER_SPECS=${CHANGER_SPECS:-}
LIB_DRIVES=${LIB_DRIVES:-4}
LIB_SLOTS=${LIB_SLOTS:-40}
LIB_IE=${LIB_IE:-4}
LIB_BLANK=${LIB_BLANK:-20}
LIB_PREFIX=${LIB_PREFIX:-REL}
WP_PREFIX=${WP_PREFIX:-WPT}
FILL_CAP_MB=${FILL_CAP_MB:-400}
TINY_CAP_MB=${TINY_CAP_MB:-16}
DD_MB=${DD_MB:-24}
DD_BLOCK_SIZES=${DD_BLOCK_SIZES:-64k 256k 1M}
CONC_MB=${CONC_MB:-16}
REPLACEMENT_TIMEOUT=${REPLACEMENT_TIMEOUT:-120}
export CMD_TIMEOUT=${CMD_TIMEOUT:-180}
BTAPE_TIMEOUT=${BTAPE_TIMEOUT:-900}
FILL_TIMEOUT=${FILL_TIMEOUT:-600}
FILL_BLOCK=${FILL_BLOCK:-262144}
P=$REEL_VM_PORTAL
W=/tmp/tape
ART=$REEL_VM_OUT/tape
ISCSID_LOG=$REEL_VM_OUT/iscsid.log
rm -rf "$W"
mkdir -p "$W" "$ART"
T_SCRIPT=$(now)

# =============================================================================
# helpers
# =============================================================================
want() {
	[ "$SECTIONS" = all ] && return 0
	case " $SECTIONS " in *" $1 "*) return 0 ;; esac
	return 1
}
SECTION_NAME="" SECTION_T0="" TIMES=""
section() {
	section_end
	SECTION_NAME=$1
	SECTION_T0=$(now)
	diag "--- $1: $2"
}
section_end() {
	[ -n "$SECTION_NAME" ] && TIMES="$TIMES $SECTION_NAME=$(elapsed "$SECTION_T0")s"
	SECTION_NAME=""
}
uptime_s() { cut -d. -f1 /proc/uptime; }
log_mark() { wc -c <"$ISCSID_LOG" 2>/dev/null || echo 0; }
log_since() { tail -c +"$(($1 + 1))" "$ISCSID_LOG" 2>/dev/null | grep -v '^$' | tail -n "${2:-8}"; }
dmesg_mark() { dmesg | wc -l; }
dmesg_since() { dmesg | tail -n +"$(($1 + 1))" | tail -n "${2:-8}"; }
first_line() { printf '%s\n' "$1" | grep -v '^$' | head -n 1; }
last_line() { printf '%s\n' "$1" | grep -v '^$' | tail -n 1; }
sha() { sha256sum "$1" | cut -c1-64; }
mbps() { awk -v n="$1" -v s="$2" 'BEGIN { if (s > 0) printf "%.1f", n / s / 1e6; else print "-" }'; }
fsize() { stat -c %s "$1" 2>/dev/null || echo 0; }

# --- iSCSI nodes and sessions ----------------------------------------------------
node_new() { # IQN: a node record with the guest-side portal and our timeouts
	run iscsiadm -m node -o delete -T "$1" -p "$P"
	run iscsiadm -m node -o new -T "$1" -p "$P" || return 1
	local kv
	for kv in "node.session.timeo.replacement_timeout=$REPLACEMENT_TIMEOUT" \
		node.session.initial_login_retry_max=2 "node.conn[0].timeo.login_timeout=15"; do
		run iscsiadm -m node -T "$1" -p "$P" -o update -n "${kv%%=*}" -v "${kv#*=}" || return 1
	done
}
login() { run iscsiadm -m node -T "$1" -p "$P" --login; }
logout() { run iscsiadm -m node -T "$1" -p "$P" --logout; }
sid_of() {
	local s
	for s in /sys/class/iscsi_session/session*; do
		[ "$(cat "$s/targetname" 2>/dev/null)" = "$1" ] && { echo "${s##*/session}"; return 0; }
	done
	return 1
}
sess_state() { cat "/sys/class/iscsi_session/session$1/state" 2>/dev/null; }

# lun_table SID: one line per LUN, "LUN TYPE SG NST VENDOR|PRODUCT" (- when absent)
lun_table() {
	local d lun ty sg nst v m
	for d in /sys/class/iscsi_session/session"$1"/device/target*/*:*:*:*; do
		[ -f "$d/type" ] || continue
		lun=${d##*:}
		ty=$(cat "$d/type")
		sg=$(ls "$d/scsi_generic" 2>/dev/null | head -n 1)
		nst=$(ls "$d/scsi_tape" 2>/dev/null | grep -E '^nst[0-9]+$' | head -n 1)
		v=$(sed 's/ *$//' "$d/vendor" 2>/dev/null)
		m=$(sed 's/ *$//' "$d/model" 2>/dev/null)
		echo "$lun $ty ${sg:--} ${nst:--} $v|$m"
	done | sort -n
}
# attach SID NTAPES [SECS]: wait for the changer LUN and NTAPES tape LUNs with
# their device nodes; sets ATT_TABLE, ATT_CH (/dev/sgN), ATT_TAPES and
# ATT_TAPE_SGS (same order, by LUN)
ATT_TABLE="" ATT_CH="" ATT_TAPES="" ATT_TAPE_SGS=""
attach() {
	local sid=$1 want=$2 deadline=$(($(uptime_s) + ${3:-30})) n d okn
	while :; do
		ATT_TABLE=$(lun_table "$sid")
		ATT_CH=$(awk '$2 == 8 && $3 != "-" { print "/dev/" $3; exit }' <<<"$ATT_TABLE")
		ATT_TAPES=$(awk '$2 == 1 && $3 != "-" && $4 != "-" { printf "/dev/%s ", $4 }' <<<"$ATT_TABLE")
		ATT_TAPE_SGS=$(awk '$2 == 1 && $3 != "-" && $4 != "-" { printf "/dev/%s ", $3 }' <<<"$ATT_TABLE")
		n=$(wc -w <<<"$ATT_TAPES")
		okn=1
		for d in $ATT_CH $ATT_TAPES $ATT_TAPE_SGS; do [ -c "$d" ] || okn=0; done
		[ -n "$ATT_CH" ] && [ "$n" -ge "$want" ] && [ "$okn" = 1 ] && return 0
		[ "$(uptime_s)" -ge "$deadline" ] && return 1
		sleep 0.3
	done
}
# wait_recovered SID DMESG_MARK LOG_MARK: the connection dropped and the
# session is LOGGED_IN again (iscsid: "operational"); sets REC_WHY
REC_WHY=""
wait_recovered() {
	local sid=$1 dm=$2 lm=$3 deadline=$(($(uptime_s) + REPLACEMENT_TIMEOUT + 10)) dropped=""
	while [ "$(uptime_s)" -lt "$deadline" ]; do
		[ -z "$dropped" ] && dmesg_since "$dm" 200 | grep -q 'conn error' && dropped=1
		if [ -n "$dropped" ] && log_since "$lm" 200 | grep -q 'is operational' && [ "$(sess_state "$sid")" = LOGGED_IN ]; then
			REC_WHY=$(log_since "$lm" 200 | grep 'is operational' | tail -n 1)
			return 0
		fi
		sleep 0.5
	done
	REC_WHY="dropped=${dropped:-no} state=$(sess_state "$sid")"
	return 1
}

# --- changer (mtx) ---------------------------------------------------------------------
mtx_status() { timeout "$CMD_TIMEOUT" mtx -f "$1" status 2>&1; }
# the following read an `mtx status` text on stdin
st_tag() { sed -n "s/^ *Storage Element $1\( IMPORT\/EXPORT\)\{0,1\}:Full *:VolumeTag=\([^ ]*\).*/\2/p"; }
st_full() { grep -Eq "^ *Storage Element $1( IMPORT/EXPORT)?:Full"; }
st_slot_of() { sed -n "s/^ *Storage Element \([0-9]*\)\( IMPORT\/EXPORT\)\{0,1\}:Full *:VolumeTag=$1 *$/\1/p" | head -n 1; }
st_drive() { grep -E "^Data Transfer Element $1:"; }
st_drive_tag() { sed -n "s/^Data Transfer Element $1:Full.*:VolumeTag *= *\([^ ]*\).*/\1/p"; }
st_drive_src() { sed -n "s/^Data Transfer Element $1:Full (Storage Element \([0-9]*\) Loaded).*/\1/p"; }
st_first_empty() { sed -n 's/^ *Storage Element \([0-9]*\):Empty.*/\1/p' | head -n 1; }

# --- tape (mt, dd, tar) -------------------------------------------------------------
mt_status() { timeout 60 mt -f "$1" status 2>&1; }
mt_pos() { mt_status "$1" | sed -n 's/^File number=\([-0-9]*\), block number=\([-0-9]*\).*/\1:\2/p'; }
mt_part() { mt_status "$1" | sed -n 's/.*partition=\([-0-9]*\).*/\1/p'; }
mt_tell() { timeout 60 mt -f "$1" tell 2>/dev/null | sed -n 's/^At block \([0-9]*\)\..*/\1/p'; }
is_online() { mt_status "$1" | grep -qw ONLINE; }
wait_online() { # DEV SECS
	local deadline=$(($(uptime_s) + ${2:-60}))
	while :; do
		is_online "$1" && return 0
		[ "$(uptime_s)" -ge "$deadline" ] && return 1
		sleep 0.5
	done
}
# tape_read DEV OUT DD-ARGS...: RD_RC, RD_BYTES, RD_ERR (dd's error line)
RD_RC=0 RD_BYTES=0 RD_ERR=""
tape_read() {
	local dev=$1 out=$2
	shift 2
	rm -f "$out"
	timeout "$CMD_TIMEOUT" dd if="$dev" of="$out" "$@" 2>"$W/dd.err"
	RD_RC=$?
	RD_BYTES=$(fsize "$out")
	RD_ERR=$(grep -E "error|No space|cannot" "$W/dd.err" | head -n 1 | cut -c1-100)
	{
		echo "[$(now)] \$ dd if=$dev of=$out $* -> rc $RD_RC, $RD_BYTES bytes"
		cat "$W/dd.err"
	} >>"$REEL_VM_OUT/commands.log"
}
# tape_write DEV IN DD-ARGS...: WR_RC, WR_SECS, WR_ERR
WR_RC=0 WR_SECS=0 WR_ERR=""
tape_write() {
	local dev=$1 in=$2 t0
	shift 2
	t0=$(now)
	timeout "$CMD_TIMEOUT" dd if="$in" of="$dev" "$@" 2>"$W/ddw.err"
	WR_RC=$?
	WR_SECS=$(elapsed "$t0")
	WR_ERR=$(grep -E "error|No space|cannot|Read-only|denied" "$W/ddw.err" | head -n 1 | cut -c1-100)
	{
		echo "[$t0] \$ dd if=$in of=$dev $* -> rc $WR_RC in $WR_SECS s"
		cat "$W/ddw.err"
	} >>"$REEL_VM_OUT/commands.log"
}
# make_tree DIR NFILES MAXKIB: random files of random sizes, a text file, an
# empty file and a symlink
make_tree() {
	local d=$1 n=$2 max=$3 i
	mkdir -p "$d/sub"
	for i in $(seq 1 "$n"); do
		head -c $(((RANDOM * 32768 + RANDOM) % (max * 1024) + 1)) /dev/urandom >"$d/data$i"
	done
	date >"$d/sub/when.txt"
	: >"$d/sub/empty"
	ln -s data1 "$d/link"
}
manifest() { (cd "$1" && find . -print0 | sort -z | xargs -0 -n 64 sh -c 'for f; do if [ -L "$f" ]; then echo "L $f $(readlink "$f")"; elif [ -f "$f" ]; then echo "F $f $(sha256sum <"$f" | cut -c1-64)"; else echo "D $f"; fi; done' _); }
tar_bytes() { tar -b 512 -cf - -C "$1" . | wc -c; }
tar_write() { run tar -b 512 -cf "$1" -C "$2" .; }
# tar_check DEV MANIFEST: extract the archive at the current position, compare
TC_WHY=""
tar_check() {
	local x=$W/x.$$
	rm -rf "$x"
	mkdir -p "$x"
	if ! run tar -b 512 -xf "$1" -C "$x"; then
		TC_WHY="tar -x rc $RUN_RC: $(last_line "$RUN_OUT")"
		return 1
	fi
	if manifest "$x" | cmp -s - "$2"; then
		rm -rf "$x"
		return 0
	fi
	TC_WHY="extracted tree differs: $(manifest "$x" | diff - "$2" | grep -c '^[<>]') lines"
	return 1
}

# --- the library under test ----------------------------------------------------------
CH="" LIB_SID="" PARTED=0
declare -a DRV_NST DRV_SG
lib_st() { mtx_status "$CH"; }
sg_of_nst() { # /dev/nstN -> /dev/sgM of the same LUN
	local n=${1#/dev/}
	awk -v n="$n" '$4 == n { print "/dev/" $3 }' <<<"$(lun_table "$LIB_SID")"
}
# unload_drive DRIVE: eject (mt offline) and move the cartridge back to its slot
unload_drive() {
	local d=$1 st src
	st=$(lib_st)
	st_drive "$d" <<<"$st" | grep -q ':Full' || return 0
	src=$(st_drive_src "$d" <<<"$st")
	[ -n "$src" ] || src=$(st_first_empty <<<"$st")
	[ -n "${DRV_NST[$d]:-}" ] && run mt -f "${DRV_NST[$d]}" offline
	run mtx -f "$CH" unload "$src" "$d"
}
# ensure_loaded DRIVE SLOT: the cartridge of SLOT in DRIVE, device ONLINE
ensure_loaded() {
	local d=$1 s=$2 src
	src=$(lib_st | st_drive_src "$d")
	if [ "$src" != "$s" ]; then
		unload_drive "$d"
		run mtx -f "$CH" load "$s" "$d" || return 1
	fi
	[ -z "${DRV_NST[$d]:-}" ] || wait_online "${DRV_NST[$d]}" 60
}
# online_one CANDIDATES...: wait up to 60 s for one of them to turn ONLINE
online_one() {
	local deadline=$(($(uptime_s) + 60)) t
	while :; do
		for t in "$@"; do
			is_online "$t" && { echo "$t"; return 0; }
		done
		[ "$(uptime_s)" -ge "$deadline" ] && return 1
		sleep 0.5
	done
}

diag "tape-checks: mode $MODE, sections '$SECTIONS', portal $P, library $LIB_IQN"

# =============================================================================
# discovery and login
# =============================================================================
section login "discovery, login, devices"
run iscsiadm -m discovery -t sendtargets -p "$P" -o nonpersistent
disc=$RUN_OUT disc_rc=$RUN_RC
printf '%s\n' "$disc" >"$ART/discovery.txt"
expected_targets=""
[ "$MODE" = full ] && expected_targets="$LIB_IQN $FILL_IQN"
for spec in $CHANGER_SPECS; do expected_targets="$expected_targets $IQN_BASE:${spec%%|*}"; done
missing=""
for t in $expected_targets; do
	awk '{ print $2 }' <<<"$disc" | grep -qxF "$t" || missing="$missing $t"
done
if [ "$disc_rc" = 0 ] && [ -z "$missing" ]; then
	ok "discovery: SendTargets lists all $(wc -w <<<"$expected_targets") configured library targets"
else
	not_ok "discovery: SendTargets lists all configured library targets" "iscsiadm rc $disc_rc; missing:${missing:- none}" "$disc"
fi

if [ "$MODE" = full ]; then
	node_new "$LIB_IQN"
	t0=$(now)
	m=$(log_mark)
	if login "$LIB_IQN" && LIB_SID=$(sid_of "$LIB_IQN") && attach "$LIB_SID" "$LIB_DRIVES" 30; then
		CH=$ATT_CH
		LIB_TAPES=$ATT_TAPES
		ntape=$(wc -w <<<"$LIB_TAPES")
		lun0=$(awk '$1 == 0 { print $2 }' <<<"$ATT_TABLE")
		tluns=$(awk '$2 == 1 { printf "%s ", $1 }' <<<"$ATT_TABLE")
		want_luns=$(seq -s ' ' 1 "$LIB_DRIVES")
		if [ "$lun0" = 8 ] && [ "$ntape" = "$LIB_DRIVES" ] && [ "$tluns" = "$want_luns " ]; then
			ok "login: $LIB_IQN in $(elapsed "$t0") s: changer at LUN 0 ($CH), $ntape tape drives at LUNs $want_luns($LIB_TAPES)"
		else
			not_ok "login: changer at LUN 0 and $LIB_DRIVES tape drives at LUNs 1..$LIB_DRIVES" \
				"LUN 0 type '$lun0', tape LUNs '$tluns'" "$ATT_TABLE"
		fi
		diag_block "LUNs (lun type sg nst vendor|product):" "$ATT_TABLE"
	else
		not_ok "login: $LIB_IQN with a changer and $LIB_DRIVES tape LUNs" "iscsiadm rc $RUN_RC: $(last_line "$RUN_OUT")" \
			"$(log_since "$m")" "$(lun_table "${LIB_SID:-0}")"
		diag "no library: the checks that need it are skipped"
		MODE=nolib
	fi
fi

# =============================================================================
# inventory: lsscsi, INQUIRY, mtx inquiry/status/inventory
# =============================================================================
if [ "$MODE" = full ] && want inventory; then
	section inventory "lsscsi, sg_inq, mtx inquiry/status/inventory"
	set -- $LIB_TAPES
	TAPE_SG0=$(sg_of_nst "$1")
	run lsscsi -g
	printf '%s\n' "$RUN_OUT" >"$ART/lsscsi.txt"
	nt=$(awk '$2 == "tape" && /\/dev\/st/ && /\/dev\/sg/' <<<"$RUN_OUT" | wc -l)
	nc=$(awk '$2 == "mediumx" && /\/dev\/sg/' <<<"$RUN_OUT" | wc -l)
	if [ "$nt" -ge "$LIB_DRIVES" ] && [ "$nc" -ge 1 ]; then
		ok "lsscsi -g: $nt tape devices (/dev/st + /dev/sg) and $nc mediumx device(s)"
	else
		not_ok "lsscsi -g shows $LIB_DRIVES tape and a mediumx device" "tape $nt, mediumx $nc" "$RUN_OUT"
	fi
	run sg_inq "$TAPE_SG0"
	pdt=$(sed -n 's/.*PDT=\([0-9]*\).*/\1/p' <<<"$RUN_OUT" | head -n 1)
	vp="$(sed -n 's/^ *Vendor identification: *//p' <<<"$RUN_OUT") $(sed -n 's/^ *Product identification: *//p' <<<"$RUN_OUT")"
	if [ "$RUN_RC" = 0 ] && [ "$pdt" = 1 ] && grep -q "ULT3580-TD9" <<<"$vp"; then
		ok "sg_inq $TAPE_SG0: PDT 1 (sequential access), '$vp'"
	else
		not_ok "sg_inq on a drive: PDT 1, IBM ULT3580-TD9" "rc $RUN_RC, PDT '$pdt', '$vp'" "$RUN_OUT"
	fi
	run sg_inq -p 0x80 "$TAPE_SG0"
	sn=$(sed -n 's/^ *Unit serial number: *//p' <<<"$RUN_OUT" | head -n 1)
	if [ "$RUN_RC" = 0 ] && [ -n "$sn" ]; then
		ok "sg_inq -p 0x80 $TAPE_SG0: unit serial number '$sn'"
	else
		not_ok "sg_inq -p 0x80: unit serial number of a drive" "rc $RUN_RC" "$RUN_OUT"
	fi
	run sg_inq "$CH"
	pdt=$(sed -n 's/.*PDT=\([0-9]*\).*/\1/p' <<<"$RUN_OUT" | head -n 1)
	vp="$(sed -n 's/^ *Vendor identification: *//p' <<<"$RUN_OUT") $(sed -n 's/^ *Product identification: *//p' <<<"$RUN_OUT")"
	if [ "$RUN_RC" = 0 ] && [ "$pdt" = 8 ]; then
		ok "sg_inq $CH: PDT 8 (medium changer), '$vp'"
	else
		not_ok "sg_inq on the changer: PDT 8" "rc $RUN_RC, PDT '$pdt'" "$RUN_OUT"
	fi
	run mtx -f "$CH" inquiry
	if [ "$RUN_RC" = 0 ] && grep -q "Product Type: Medium Changer" <<<"$RUN_OUT"; then
		ok "mtx inquiry: Medium Changer, $(grep -E 'Vendor ID|Product ID' <<<"$RUN_OUT" | tr -d "'" | tr -s ' \n' ' ')"
	else
		not_ok "mtx inquiry reports a Medium Changer" "rc $RUN_RC" "$RUN_OUT"
	fi
	run mtx -f "$CH" status
	S=$RUN_OUT
	printf '%s\n' "$S" >"$ART/mtx-status-initial.txt"
	hdr=$(grep -m1 'Storage Changer' <<<"$S")
	nd=$(grep -c '^Data Transfer Element' <<<"$S")
	ns=$(grep -Ec '^ *Storage Element [0-9]+:' <<<"$S")
	ni=$(grep -Ec '^ *Storage Element [0-9]+ IMPORT/EXPORT:' <<<"$S")
	nfull=$(grep -Ec '^ *Storage Element [0-9]+( IMPORT/EXPORT)?:Full' <<<"$S")
	ndfull=$(grep -Ec '^Data Transfer Element [0-9]+:Full' <<<"$S")
	if [ "$RUN_RC" = 0 ] && [ "$nd" = "$LIB_DRIVES" ] && [ "$ns" = "$LIB_SLOTS" ] && [ "$ni" = "$LIB_IE" ] && [ "$ndfull" = 0 ]; then
		ok "mtx status: $nd drives (empty), $ns slots, $ni import/export, $nfull cartridges [$(sed 's/^ *//' <<<"$hdr")]"
	else
		not_ok "mtx status: $LIB_DRIVES empty drives, $LIB_SLOTS slots, $LIB_IE import/export" \
			"rc $RUN_RC: drives $nd ($ndfull full), slots $ns, import/export $ni" "$S"
	fi
	ntag=$(grep -Ec '^ *Storage Element [0-9]+( IMPORT/EXPORT)?:Full *:VolumeTag=[^ ]+' <<<"$S")
	bad=""
	for i in $(seq 1 "$LIB_BLANK"); do
		want_tag=$(printf '%s%03dL9' "$LIB_PREFIX" "$i")
		[ "$(st_tag "$i" <<<"$S")" = "$want_tag" ] || bad="$bad slot$i=$(st_tag "$i" <<<"$S")"
	done
	WP_SLOT=$(sed -n "s/^ *Storage Element \([0-9]*\):Full *:VolumeTag=$WP_PREFIX.*/\1/p" <<<"$S" | head -n 1)
	if [ "$nfull" -ge 1 ] && [ "$ntag" = "$nfull" ] && [ -z "$bad" ] && [ -n "$WP_SLOT" ]; then
		ok "mtx status: barcodes on all $nfull cartridges, ${LIB_PREFIX}001L9..$(printf '%s%03dL9' "$LIB_PREFIX" "$LIB_BLANK") in slots 1-$LIB_BLANK, $(st_tag "$WP_SLOT" <<<"$S") in slot $WP_SLOT"
	else
		not_ok "mtx status: every cartridge has its barcode, ${LIB_PREFIX}001L9.. in slots 1-$LIB_BLANK, a $WP_PREFIX cartridge" \
			"$ntag of $nfull with VolumeTag; wrong:${bad:- none}; write-protected cartridge slot '${WP_SLOT}'"
	fi
	run mtx -f "$CH" inventory
	if [ "$RUN_RC" = 0 ] && [ "$(lib_st | grep -Ec ':Full *:VolumeTag=')" = "$ntag" ]; then
		ok "mtx inventory (INITIALIZE ELEMENT STATUS); the inventory is unchanged"
	else
		not_ok "mtx inventory (INITIALIZE ELEMENT STATUS)" "rc $RUN_RC" "$RUN_OUT"
	fi
fi
[ -z "${WP_SLOT:-}" ] && [ -n "$CH" ] && WP_SLOT=$(lib_st | sed -n "s/^ *Storage Element \([0-9]*\):Full *:VolumeTag=$WP_PREFIX.*/\1/p" | head -n 1)

# =============================================================================
# drive element -> /dev/nst mapping (always needed by what follows)
# =============================================================================
if [ "$MODE" = full ]; then
	section map "mtx load, drive element to /dev/nst mapping"
	for d in $(seq 0 $((LIB_DRIVES - 1))); do unload_drive "$d"; done
	S=$(lib_st)
	TAG1=$(st_tag 1 <<<"$S")
	t0=$(now)
	if run mtx -f "$CH" load 1 0; then
		ok "mtx load 1 0 ($(elapsed "$t0") s)"
	else
		not_ok "mtx load 1 0" "rc $RUN_RC" "$RUN_OUT"
	fi
	S=$(lib_st)
	if [ "$(st_drive_tag 0 <<<"$S")" = "$TAG1" ] && [ "$(st_drive_src 0 <<<"$S")" = 1 ] && ! st_full 1 <<<"$S"; then
		ok "mtx status after load: drive 0 holds $TAG1 (from slot 1), slot 1 empty"
	else
		not_ok "mtx status after load: drive 0 holds $TAG1 from slot 1, slot 1 empty" "$(st_drive 0 <<<"$S")" "$(grep -E '^ *Storage Element 1:' <<<"$S")"
	fi
	# shellcheck disable=SC2086
	if found=$(online_one $LIB_TAPES); then
		DRV_NST[0]=$found
		DRV_SG[0]=$(sg_of_nst "$found")
		others=""
		for t in $LIB_TAPES; do [ "$t" != "$found" ] && is_online "$t" && others="$others $t"; done
		if [ -z "$others" ]; then
			ok "drive element 0 is ${DRV_NST[0]} (${DRV_SG[0]}): the only tape device ONLINE after the load"
		else
			not_ok "drive element 0 maps to exactly one tape device" "ONLINE: $found$others"
		fi
	else
		not_ok "a tape device turns ONLINE after mtx load 1 0" "checked: $LIB_TAPES" "$(mt_status "${LIB_TAPES%% *}")"
	fi
	# the other drives: load a cartridge, see which device turns ONLINE, unload
	mapping="" mapbad=""
	for d in $(seq 1 $((LIB_DRIVES - 1))); do
		rest=""
		for t in $LIB_TAPES; do
			used=0
			for u in "${DRV_NST[@]}"; do [ "$u" = "$t" ] && used=1; done
			[ "$used" = 0 ] && rest="$rest $t"
		done
		s=$((d + 1))
		# shellcheck disable=SC2086
		if run mtx -f "$CH" load "$s" "$d" && found=$(online_one $rest); then
			DRV_NST[d]=$found
			DRV_SG[d]=$(sg_of_nst "$found")
			mapping="$mapping $d=$found"
			unload_drive "$d"
			is_online "$found" && mapbad="$mapbad $found-still-ONLINE-after-unload"
		else
			mapbad="$mapbad drive$d:load-rc-$RUN_RC-or-nothing-ONLINE"
		fi
	done
	if [ -z "$mapbad" ]; then
		ok "drive elements 1-$((LIB_DRIVES - 1)) map to the other tape devices:$mapping"
	else
		not_ok "drive elements 1-$((LIB_DRIVES - 1)) map to the other tape devices" "mapped:$mapping; problems:$mapbad"
	fi
	diag "drive map: $(for d in "${!DRV_NST[@]}"; do printf '%s=%s(%s) ' "$d" "${DRV_NST[$d]}" "${DRV_SG[$d]}"; done)"
	if [ -z "${DRV_NST[0]:-}" ]; then
		diag "drive 0 has no device: the tape checks cannot run"
		MODE=nolib
	fi
fi
T0DEV=${DRV_NST[0]:-/dev/nst0}

# =============================================================================
# mt basics
# =============================================================================
if [ "$MODE" = full ] && want basics; then
	section basics "mt status, rewind, setblk, write protect bit"
	ensure_loaded 0 1
	run mt -f "$T0DEV" status
	if [ "$RUN_RC" = 0 ] && grep -qw ONLINE <<<"$RUN_OUT"; then
		ok "mt status: ONLINE [$(last_line "$RUN_OUT" | sed 's/^ *//')]"
	else
		not_ok "mt status reports ONLINE" "rc $RUN_RC" "$RUN_OUT"
	fi
	diag_block "mt status:" "$RUN_OUT"
	if run mt -f "$T0DEV" rewind && mt_status "$T0DEV" | grep -qw BOT && [ "$(mt_pos "$T0DEV")" = 0:0 ]; then
		ok "mt rewind: BOT, file 0 block 0"
	else
		not_ok "mt rewind: BOT, file 0 block 0" "rc $RUN_RC" "$(mt_status "$T0DEV")"
	fi
	if run mt -f "$T0DEV" setblk 0 && mt_status "$T0DEV" | grep -q "Tape block size 0 bytes"; then
		ok "mt setblk 0: variable block mode"
	else
		not_ok "mt setblk 0: variable block mode" "rc $RUN_RC: $RUN_OUT" "$(mt_status "$T0DEV")"
	fi
	if mt_status "$T0DEV" | grep -qw WR_PROT; then
		not_ok "a writable cartridge is not reported write-protected" "$(mt_status "$T0DEV")"
	else
		ok "a writable cartridge is not reported write-protected (no WR_PROT)"
	fi
fi

# =============================================================================
# tar archives, filemarks, positioning
# =============================================================================
TB1=0 TB2=0 TB3=0
if [ "$MODE" = full ] && want tar; then
	section tar "tar archives separated by filemarks, fsf/bsf/bsfm, eod + append, tell/seek"
	ensure_loaded 0 1
	run mt -f "$T0DEV" setblk 0
	make_tree "$W/a1" 16 768
	make_tree "$W/a2" 8 512
	make_tree "$W/a3" 4 256
	for i in 1 2 3; do manifest "$W/a$i" >"$W/m$i"; done
	REC=262144 # tar -b 512: one 256 KiB record = one tape block
	TB1=$(($(tar_bytes "$W/a1") / REC))
	TB2=$(($(tar_bytes "$W/a2") / REC))
	TB3=$(($(tar_bytes "$W/a3") / REC))
	diag "archives: $TB1, $TB2 and $TB3 blocks of 256 KiB"
	run mt -f "$T0DEV" rewind
	if tar_write "$T0DEV" "$W/a1" && tar_write "$T0DEV" "$W/a2"; then
		ok "tar -b 512 -cf: two archives written (st closes each with a filemark)"
	else
		not_ok "tar -b 512 -cf: two archives written" "rc $RUN_RC" "$RUN_OUT" "$(dmesg | tail -n 5)"
	fi
	pos=$(mt_pos "$T0DEV")
	if [ "$pos" = 2:0 ]; then
		ok "mt status after two archives: file 2, block 0"
	else
		not_ok "mt status after two archives: file 2, block 0" "got '$pos'" "$(mt_status "$T0DEV")"
	fi
	run mt -f "$T0DEV" rewind
	if run mt -f "$T0DEV" fsf 1 && [ "$(mt_pos "$T0DEV")" = 1:0 ] && tar_check "$T0DEV" "$W/m2"; then
		ok "rewind, fsf 1: the second archive extracts identical (sha256 of every file)"
	else
		not_ok "rewind, fsf 1: the second archive extracts identical" "position $(mt_pos "$T0DEV"); $TC_WHY"
	fi
	if run mt -f "$T0DEV" rewind && tar_check "$T0DEV" "$W/m1"; then
		ok "rewind: the first archive extracts identical"
	else
		not_ok "rewind: the first archive extracts identical" "$TC_WHY"
	fi
	run mt -f "$T0DEV" rewind
	p1="" p2=""
	run mt -f "$T0DEV" fsf 2 && p1=$(mt_pos "$T0DEV")
	run mt -f "$T0DEV" bsf 2 && run mt -f "$T0DEV" fsf 1 && p2=$(mt_pos "$T0DEV")
	if [ "$p1" = 2:0 ] && [ "$p2" = 1:0 ] && tar_check "$T0DEV" "$W/m2"; then
		ok "fsf 2 (file 2), bsf 2, fsf 1: at file 1 block 0, the second archive reads back"
	else
		not_ok "fsf 2, bsf 2, fsf 1 round trip to the start of file 1" "after fsf 2: '$p1', after bsf 2 + fsf 1: '$p2'; $TC_WHY"
	fi
	run mt -f "$T0DEV" rewind
	p1=""
	run mt -f "$T0DEV" fsf 1 && run mt -f "$T0DEV" bsfm 1 && p1=$(mt_pos "$T0DEV")
	if [ "$p1" = 1:0 ] && tar_check "$T0DEV" "$W/m2"; then
		ok "fsf 1, bsfm 1: back at the start of file 1, the second archive reads back"
	else
		not_ok "fsf 1, bsfm 1 stays at the start of file 1" "position '$p1'; $TC_WHY"
	fi
	# MTEOM: st spaces to end of data and knows the file number from the
	# residue; Linux 6.1 st then sets the block number to -1 by design
	# (st_int_ioctl, MTEOM path), so only the file number and the logical
	# position (READ POSITION: blocks + filemarks) are compared.
	run mt -f "$T0DEV" rewind
	pos="" tell=""
	run mt -f "$T0DEV" eod && pos=$(mt_pos "$T0DEV") && tell=$(mt_tell "$T0DEV")
	if [ "${pos%%:*}" = 2 ] && [ "$tell" = $((TB1 + TB2 + 2)) ]; then
		ok "mt eod: file 2 (st block '${pos#*:}'), READ POSITION $tell = $TB1 + $TB2 blocks + 2 filemarks"
	else
		not_ok "mt eod: st file 2, READ POSITION at $((TB1 + TB2 + 2))" "mt status '$pos', mt tell '$tell'" "$(mt_status "$T0DEV")"
	fi
	if [ "${pos%%:*}" = 2 ] && tar_write "$T0DEV" "$W/a3"; then
		ok "append a third archive after mt eod"
	else
		not_ok "append a third archive after mt eod" "position '$pos', tar rc $RUN_RC" "$RUN_OUT"
	fi
	if run mt -f "$T0DEV" rewind && run mt -f "$T0DEV" fsf 2 && tar_check "$T0DEV" "$W/m3"; then
		ok "the appended archive reads back at file 2"
	else
		not_ok "the appended archive reads back at file 2" "$TC_WHY"
	fi
	if run mt -f "$T0DEV" rewind && tar_check "$T0DEV" "$W/m1" && run mt -f "$T0DEV" fsf 1 && tar_check "$T0DEV" "$W/m2"; then
		ok "the first two archives are intact after the append"
	else
		not_ok "the first two archives are intact after the append" "$TC_WHY"
	fi
	# READ POSITION counts blocks and filemarks
	run mt -f "$T0DEV" rewind
	q0=$(mt_tell "$T0DEV")
	run mt -f "$T0DEV" fsf 1
	q1=$(mt_tell "$T0DEV")
	run mt -f "$T0DEV" fsf 1
	q2=$(mt_tell "$T0DEV")
	if [ "$q0" = 0 ] && [ "$q1" = $((TB1 + 1)) ] && [ "$q2" = $((TB1 + TB2 + 2)) ]; then
		ok "mt tell (READ POSITION): 0 at BOT, $q1 at file 1, $q2 at file 2"
	else
		not_ok "mt tell (READ POSITION): 0 / $((TB1 + 1)) / $((TB1 + TB2 + 2))" "got '$q0' / '$q1' / '$q2'" "$(timeout 30 mt -f "$T0DEV" tell 2>&1)"
	fi
	run mt -f "$T0DEV" rewind
	if run mt -f "$T0DEV" seek $((TB1 + 1)) && [ "$(mt_tell "$T0DEV")" = $((TB1 + 1)) ] && tar_check "$T0DEV" "$W/m2"; then
		ok "mt seek $((TB1 + 1)) (LOCATE) to the start of file 1: the second archive reads back"
	else
		not_ok "mt seek $((TB1 + 1)) (LOCATE) to the start of file 1" "rc $RUN_RC: $RUN_OUT; tell '$(mt_tell "$T0DEV")'; $TC_WHY"
	fi
	q1="" q2=""
	run mt -f "$T0DEV" seek 3 && q1=$(mt_tell "$T0DEV")
	run mt -f "$T0DEV" seek 0 && q2=$(mt_tell "$T0DEV")
	# the fourth block of the first archive, read raw, must be its bytes 768K..1M
	run mt -f "$T0DEV" seek 3
	tape_read "$T0DEV" "$W/blk3" bs=256k count=1
	tar -b 512 -cf - -C "$W/a1" . | tail -c +$((3 * REC + 1)) | head -c $REC >"$W/blk3.want"
	if [ "$q1" = 3 ] && [ "$q2" = 0 ] && cmp -s "$W/blk3" "$W/blk3.want"; then
		ok "mt seek 3 / seek 0: tell follows, block 3 read after seek 3 is the archive's fourth record"
	else
		not_ok "mt seek into a file and back to 0" "tell after seek 3 '$q1', after seek 0 '$q2'; block 3: $RD_BYTES bytes, $(cmp "$W/blk3" "$W/blk3.want" 2>&1 | head -n 1)"
	fi
fi

# =============================================================================
# reads at filemarks and at end of data
# =============================================================================
if [ "$MODE" = full ] && want eod && [ "$TB3" -gt 0 ]; then
	section eod "dd stops at filemarks, reads at end of data"
	run mt -f "$T0DEV" rewind
	run mt -f "$T0DEV" fsf 2
	want_bytes=$(tar_bytes "$W/a3")
	tape_read "$T0DEV" "$W/f3" bs=1M
	if [ "$RD_RC" = 0 ] && [ "$RD_BYTES" = "$want_bytes" ]; then
		ok "dd bs=1M of the last file stops at its filemark: exactly $RD_BYTES bytes, exit 0"
	else
		not_ok "dd of the last file stops at its filemark with exactly $want_bytes bytes" "rc $RD_RC, $RD_BYTES bytes" "$(cat "$W/dd.err")"
	fi
	t0=$(now)
	tape_read "$T0DEV" "$W/e1" bs=256k count=1
	e1_rc=$RD_RC e1_n=$RD_BYTES e1_err=$RD_ERR
	if [ "$e1_rc" != 124 ] && [ "$e1_n" = 0 ]; then
		ok "read after the last filemark (end of data) returns no data (rc $e1_rc${e1_err:+, $e1_err}, $(elapsed "$t0") s)"
	else
		not_ok "read after the last filemark (end of data) returns no data, promptly" "rc $e1_rc, $e1_n bytes"
	fi
	t0=$(now)
	tape_read "$T0DEV" "$W/e2" bs=256k count=1
	if [ "$RD_RC" != 124 ] && [ "$RD_RC" != 0 ] && [ "$RD_BYTES" = 0 ]; then
		ok "a second read at end of data fails (${RD_ERR:-rc $RD_RC}, $(elapsed "$t0") s)"
	else
		not_ok "a second read at end of data fails with an error" "rc $RD_RC, $RD_BYTES bytes" "$(dmesg | tail -n 4)"
	fi
	run mt -f "$T0DEV" rewind
	run mt -f "$T0DEV" eod
	t0=$(now)
	run mt -f "$T0DEV" fsf 1
	if [ "$RUN_RC" != 0 ] && [ "$RUN_RC" != 124 ]; then
		ok "mt fsf 1 at end of data fails ($(first_line "$RUN_OUT"), $(elapsed "$t0") s)"
	else
		not_ok "mt fsf 1 at end of data fails promptly" "rc $RUN_RC" "$RUN_OUT"
	fi
fi

# =============================================================================
# block size semantics in variable mode (ILI)
# =============================================================================
if [ "$MODE" = full ] && want ili; then
	section ili "short and oversized block reads"
	ensure_loaded 0 1
	run mt -f "$T0DEV" setblk 0
	run mt -f "$T0DEV" rewind
	head -c 10000 /dev/urandom >"$W/b10000"
	head -c 65536 /dev/urandom >"$W/b65536"
	tape_write "$T0DEV" "$W/b10000" bs=10000 count=1
	w1=$WR_RC
	tape_write "$T0DEV" "$W/b65536" bs=64k count=1
	if [ "$w1" = 0 ] && [ "$WR_RC" = 0 ]; then
		run mt -f "$T0DEV" rewind
		tape_read "$T0DEV" "$W/r10000" bs=64k count=1
		if [ "$RD_RC" = 0 ] && cmp -s "$W/b10000" "$W/r10000"; then
			ok "short block: a 10000-byte block read with a 64 KiB buffer gives exactly those 10000 bytes"
		else
			not_ok "short block: a 10000-byte block read with a 64 KiB buffer gives exactly 10000 bytes" \
				"rc $RD_RC, $RD_BYTES bytes, $(cmp "$W/b10000" "$W/r10000" 2>&1 | head -n 1)" "$(cat "$W/dd.err")"
		fi
		run mt -f "$T0DEV" rewind
		run mt -f "$T0DEV" fsf 1
		tape_read "$T0DEV" "$W/r32k" bs=32k count=1
		if [ "$RD_RC" != 0 ] && [ "$RD_BYTES" = 0 ] && grep -q "Cannot allocate memory" "$W/dd.err"; then
			ok "oversized block: a 64 KiB block read with a 32 KiB buffer fails with ENOMEM, no silent truncation"
		else
			not_ok "oversized block: a 64 KiB block read with a 32 KiB buffer fails with ENOMEM" "rc $RD_RC, $RD_BYTES bytes" "$(cat "$W/dd.err")"
		fi
	else
		not_ok "write a 10000-byte and a 64 KiB block" "dd rc $w1 / $WR_RC: $WR_ERR"
		skip "short block read" "the write failed"
		skip "oversized block read" "the write failed"
	fi
fi

# =============================================================================
# dd integrity and throughput
# =============================================================================
LAST_BS="" SUM_DD=""
if [ "$MODE" = full ] && want dd; then
	section dd "dd at ${DD_BLOCK_SIZES// /, } with sha256 ($DD_MB MiB each)"
	ensure_loaded 0 1
	run mt -f "$T0DEV" setblk 0
	head -c $((DD_MB * 1048576)) /dev/urandom >"$W/ddsrc"
	SUM_DD=$(sha "$W/ddsrc")
	printf 'block\tMiB\twrite MB/s\tread MB/s\tsha256\n' >"$ART/throughput.tsv"
	for bs in $DD_BLOCK_SIZES; do
		run mt -f "$T0DEV" rewind
		tape_write "$T0DEV" "$W/ddsrc" bs="$bs" iflag=fullblock # timed with close (filemark)
		wsecs=$WR_SECS wrc=$WR_RC
		run mt -f "$T0DEV" rewind
		t0=$(now)
		tape_read "$T0DEV" "$W/ddback" bs="$bs"
		rsecs=$(elapsed "$t0")
		s=$(sha "$W/ddback")
		rm -f "$W/ddback"
		wr=$(mbps $((DD_MB * 1048576)) "$wsecs")
		rr=$(mbps $((DD_MB * 1048576)) "$rsecs")
		if [ "$wrc" = 0 ] && [ "$RD_RC" = 0 ] && [ "$s" = "$SUM_DD" ]; then
			ok "dd bs=$bs: $DD_MB MiB written, read back, sha256 equal (write $wr MB/s, read $rr MB/s)"
			printf '%s\t%s\t%s\t%s\tok\n' "$bs" "$DD_MB" "$wr" "$rr" >>"$ART/throughput.tsv"
			LAST_BS=$bs
		else
			not_ok "dd bs=$bs: $DD_MB MiB written, read back, sha256 equal" "write rc $wrc ($WR_ERR), read rc $RD_RC, $RD_BYTES bytes ($RD_ERR)"
			printf '%s\t%s\t%s\t%s\tFAIL\n' "$bs" "$DD_MB" "$wr" "$rr" >>"$ART/throughput.tsv"
		fi
	done
fi

# =============================================================================
# cartridge handling: eject, unload, a blank cartridge, reload, transfer
# =============================================================================
if [ "$MODE" = full ] && want cartridge; then
	section cartridge "offline, unload, blank cartridge, reload, transfer"
	ensure_loaded 0 1
	S=$(lib_st)
	TAG1=$(st_drive_tag 0 <<<"$S")
	if run mt -f "$T0DEV" offline; then
		ok "mt offline (unload in the drive)"
	else
		not_ok "mt offline (unload in the drive)" "rc $RUN_RC" "$RUN_OUT"
	fi
	run mtx -f "$CH" unload 1 0
	S=$(lib_st)
	if [ "$RUN_RC" = 0 ] && [ "$(st_tag 1 <<<"$S")" = "$TAG1" ] && st_drive 0 <<<"$S" | grep -q ':Empty'; then
		ok "mtx unload 1 0: $TAG1 back in slot 1, drive 0 empty"
	else
		not_ok "mtx unload 1 0: $TAG1 back in slot 1, drive 0 empty" "rc $RUN_RC: $RUN_OUT" "$(st_drive 0 <<<"$S")" "$(grep -E '^ *Storage Element 1:' <<<"$S")"
	fi
	if is_online "$T0DEV"; then
		not_ok "$T0DEV is not ONLINE after the unload" "$(mt_status "$T0DEV")"
	else
		ok "$T0DEV is not ONLINE after the unload [$(last_line "$(mt_status "$T0DEV")" | sed 's/^ *//')]"
	fi
	TAG2=$(st_tag 2 <<<"$S")
	if run mtx -f "$CH" load 2 0 && wait_online "$T0DEV" 60 && [ "$(lib_st | st_drive_tag 0)" = "$TAG2" ]; then
		run mt -f "$T0DEV" setblk 0
		run mt -f "$T0DEV" rewind
		tape_read "$T0DEV" "$W/blank" bs=256k count=1
		if [ "$RD_BYTES" = 0 ] && [ "$RD_RC" != 124 ]; then
			ok "mtx load 2 0: $TAG2 is blank, a read at BOT returns no data (${RD_ERR:-rc $RD_RC})"
		else
			not_ok "mtx load 2 0: $TAG2 is blank, a read at BOT returns no data" "rc $RD_RC, $RD_BYTES bytes"
		fi
	else
		not_ok "mtx load 2 0: $TAG2 in drive 0, $T0DEV ONLINE" "rc $RUN_RC: $RUN_OUT" "$(lib_st | st_drive 0)"
	fi
	if [ -n "$LAST_BS" ] && ensure_loaded 0 1; then
		run mt -f "$T0DEV" setblk 0
		run mt -f "$T0DEV" rewind
		tape_read "$T0DEV" "$W/reload" bs="$LAST_BS"
		if [ "$RD_RC" = 0 ] && [ "$(sha "$W/reload")" = "$SUM_DD" ]; then
			ok "unload, load another, reload $TAG1: the data written before is intact (sha256)"
		else
			not_ok "reload $TAG1: the data written before is intact" "rc $RD_RC, $RD_BYTES bytes, ${RD_ERR}"
		fi
		rm -f "$W/reload"
	else
		skip "reload: data written before the unload is intact" "no dd data (dd section not run or failed)"
	fi
	S=$(lib_st)
	E=$(st_first_empty <<<"$S")
	TAG2=$(st_tag 2 <<<"$S")
	if [ -n "$E" ] && [ -n "$TAG2" ]; then
		a="" b=""
		run mtx -f "$CH" transfer 2 "$E" && S=$(lib_st) && a="$(st_tag "$E" <<<"$S"),$(st_full 2 <<<"$S" && echo full || echo empty)"
		run mtx -f "$CH" transfer "$E" 2 && b=$(lib_st | st_tag 2)
		if [ "$a" = "$TAG2,empty" ] && [ "$b" = "$TAG2" ]; then
			ok "mtx transfer 2 $E and back: the barcode $TAG2 moves with the cartridge"
		else
			not_ok "mtx transfer 2 $E and back, the barcode follows" "after the first move slot $E/slot 2: '$a'; after the second slot 2: '$b'" "$RUN_OUT"
		fi
	else
		skip "mtx transfer slot to slot" "no empty slot or no cartridge in slot 2"
	fi
fi

# =============================================================================
# `reel bench tape`'s file mode on /dev/nst*: its workload through the kernel's st
# =============================================================================
if [ "$MODE" = full ] && want bench; then
	# After the cartridge section: it rereads the dd section's data from slot 1's cartridge.
	section bench "reel bench tape --targets file on $T0DEV (the workload through st)"
	if [ -x /vm/bin/reel ]; then
		ensure_loaded 0 1
		run /vm/bin/reel bench tape --targets file --device "$T0DEV" --drives 1 \
			--record-size 64K,256K --size "${BENCH_MB:-8}M" --block-size 64K --window-blocks 32 \
			--work-dir "$W/bench" --json "$ART/bench.json"
		printf '%s\n' "$RUN_OUT" >"$ART/bench.log"
		want_bytes=$((${BENCH_MB:-8} * 1048576))
		if [ "$RUN_RC" = 0 ] && [ "$(grep -c "\"bytes\": $want_bytes," "$ART/bench.json")" -ge 4 ] &&
			grep -q '"media": "device"' "$ART/bench.json"; then
			ok "reel-bench file mode on $T0DEV: ${BENCH_MB:-8} MiB at 64K and 256K records written, read back and verified"
		else
			not_ok "reel-bench file mode on $T0DEV" "rc $RUN_RC" "$RUN_OUT"
		fi
		# The tape holds exactly what it wrote: two records of the last run, then the filemark.
		run mt -f "$T0DEV" rewind
		tape_read "$T0DEV" "$W/bench.rec" bs=256k count=1
		if [ "$RD_RC" = 0 ] && [ "$RD_BYTES" = 262144 ]; then
			ok "after reel-bench: the first record on tape is 256 KiB, as written by write(2)"
		else
			not_ok "after reel-bench: the first record on tape is 256 KiB" "rc $RD_RC, $RD_BYTES bytes" "$RD_ERR"
		fi
		rm -f "$W/bench.rec"
	else
		skip "reel bench tape file mode" "no /vm/bin/reel (tape-test.sh passes it)"
	fi
fi

# =============================================================================
# write protection
# =============================================================================
if [ "$MODE" = full ] && want wp; then
	section wp "a write-protected cartridge"
	if [ -n "${WP_SLOT:-}" ] && ensure_loaded 0 "$WP_SLOT"; then
		WTAG=$(lib_st | st_drive_tag 0)
		st_now=$(mt_status "$T0DEV")
		if grep -qw WR_PROT <<<"$st_now"; then
			ok "write-protected $WTAG (slot $WP_SLOT): mt status shows WR_PROT"
		else
			not_ok "write-protected $WTAG (slot $WP_SLOT): mt status shows WR_PROT" "$st_now"
		fi
		echo "this must not reach the tape" >"$W/wp.txt"
		tape_write "$T0DEV" "$W/wp.txt" bs=512 conv=sync
		if [ "$WR_RC" != 0 ] && [ "$WR_RC" != 124 ]; then
			ok "write-protected: dd to $T0DEV is refused (${WR_ERR:-rc $WR_RC})"
		else
			not_ok "write-protected: a write through st is refused" "dd rc $WR_RC" "$(cat "$W/ddw.err")"
		fi
		# the drive itself must refuse: WRITE(6), variable, 512 bytes via sg
		head -c 512 /dev/zero >"$W/z512"
		run sg_raw -s 512 -i "$W/z512" "${DRV_SG[0]}" 0a 00 00 02 00 00
		if [ "$RUN_RC" != 0 ] && grep -qi "data protect" <<<"$RUN_OUT" && grep -qi "write protected" <<<"$RUN_OUT"; then
			ok "write-protected: WRITE(6) sent through ${DRV_SG[0]} gets DATA PROTECT, WRITE PROTECTED"
		else
			not_ok "write-protected: WRITE(6) through sg gets DATA PROTECT / WRITE PROTECTED" "sg_raw rc $RUN_RC" "$RUN_OUT"
		fi
		unload_drive 0
	else
		not_ok "load the write-protected cartridge ($WP_PREFIX..., slot '${WP_SLOT:-none}')" "rc $RUN_RC: $RUN_OUT"
	fi
fi

# =============================================================================
# tape data encryption (SSC-4 §8.5) with stenc, as an administrator turns it on
# =============================================================================
# stenc_key FILE DESCRIPTION: a random 256-bit key file in stenc's format (hex key, then the
# key descriptor that goes to the drive as uKAD)
stenc_key() {
	printf '%s\n%s\n' "$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')" "$2" >"$1"
	chmod 600 "$1"
}
# sg_read_sense: READ(6) of one 64 KiB variable block through sg; the decoded sense in RUN_OUT
sg_read_sense() { run sg_raw -r 65536 "${DRV_SG[0]}" 08 00 01 00 00 00; }
if [ "$MODE" = full ] && want encryption; then
	section encryption "stenc: a key set, data written encrypted, read back only with that key"
	if ! command -v stenc >/dev/null; then
		not_ok "stenc is installed in the guest" "the image lacks Debian's stenc package"
	elif ensure_loaded 0 9; then
		run mt -f "$T0DEV" setblk 0
		run mt -f "$T0DEV" rewind
		stenc_key "$W/k1.key" "reel-ci-key-1"
		stenc_key "$W/k2.key" "reel-ci-key-2"
		run stenc -f "$T0DEV" -e on -k "$W/k1.key" -a 1
		check "stenc -e on -k KEY -a 1: the drive takes the key" "$RUN_RC" "$RUN_OUT"
		run stenc -f "$T0DEV" --detail
		# Case matters: "Not decrypting" must not pass for "Decrypting".
		if [ "$RUN_RC" = 0 ] && grep -q "Drive Output: *Decrypting" <<<"$RUN_OUT" &&
			grep -q "Drive Input: *Encrypting" <<<"$RUN_OUT" && grep -q "reel-ci-key-1" <<<"$RUN_OUT"; then
			ok "stenc --detail: encrypting and decrypting, the key descriptor reported"
		else
			not_ok "stenc --detail reports the drive encrypting with the key descriptor" "rc $RUN_RC" "$RUN_OUT"
		fi
		head -c $((4 << 20)) /dev/urandom >"$W/enc.bin"
		tape_write "$T0DEV" "$W/enc.bin" bs=64k
		check "dd writes 4 MiB through st with encryption on" "$WR_RC" "$(cat "$W/ddw.err")"
		run mt -f "$T0DEV" rewind
		run stenc -f "$T0DEV" --detail
		if grep -q "Encrypted and able to decrypt" <<<"$RUN_OUT"; then
			ok "stenc at the first block: encrypted, and the drive holds its key"
		else
			not_ok "stenc at the first block says encrypted and able to decrypt" "rc $RUN_RC" "$RUN_OUT"
		fi
		tape_read "$T0DEV" "$W/enc.out" bs=64k
		if [ "$RD_RC" = 0 ] && [ "$(sha "$W/enc.out")" = "$(sha "$W/enc.bin")" ]; then
			ok "read back with the key: 4 MiB, sha256 equal"
		else
			not_ok "read back with the key: sha256 equal" "dd rc $RD_RC, $RD_BYTES bytes" "$(cat "$W/dd.err")"
		fi
		# Another key: the drive refuses the block and names the key it needs.
		run stenc -f "$T0DEV" -e on -k "$W/k2.key" -a 1
		run mt -f "$T0DEV" rewind
		run stenc -f "$T0DEV" --detail
		if grep -q "unable to decrypt" <<<"$RUN_OUT" && grep -q "reel-ci-key-1" <<<"$RUN_OUT"; then
			ok "stenc with another key: unable to decrypt, the volume's key descriptor is reel-ci-key-1"
		else
			not_ok "stenc with another key: unable to decrypt, names the volume's key descriptor" "$RUN_OUT"
		fi
		sg_read_sense
		if [ "$RUN_RC" != 0 ] && grep -qi "data protect" <<<"$RUN_OUT" && grep -qi "incorrect data encryption key" <<<"$RUN_OUT"; then
			ok "READ with the wrong key: DATA PROTECT, INCORRECT DATA ENCRYPTION KEY"
		else
			not_ok "READ with the wrong key: DATA PROTECT, INCORRECT DATA ENCRYPTION KEY" "sg_raw rc $RUN_RC" "$RUN_OUT"
		fi
		tape_read "$T0DEV" "$W/enc.bad" bs=64k
		if [ "$RD_RC" != 0 ] && [ "$RD_BYTES" = 0 ]; then
			ok "dd with the wrong key reads nothing (${RD_ERR:-rc $RD_RC})"
		else
			not_ok "dd with the wrong key reads nothing" "dd rc $RD_RC, $RD_BYTES bytes"
		fi
		# No key at all.
		run stenc -f "$T0DEV" -e off -a 1
		check "stenc -e off" "$RUN_RC" "$RUN_OUT"
		run mt -f "$T0DEV" rewind
		sg_read_sense
		if [ "$RUN_RC" != 0 ] && grep -qi "unable to decrypt data" <<<"$RUN_OUT"; then
			ok "READ without a key: DATA PROTECT, UNABLE TO DECRYPT DATA"
		else
			not_ok "READ without a key: DATA PROTECT, UNABLE TO DECRYPT DATA" "sg_raw rc $RUN_RC" "$RUN_OUT"
		fi
		# The right key again (mixed): everything reads back.
		run stenc -f "$T0DEV" -e mixed -k "$W/k1.key" -a 1
		run mt -f "$T0DEV" rewind
		tape_read "$T0DEV" "$W/enc.out" bs=64k
		if [ "$RD_RC" = 0 ] && [ "$(sha "$W/enc.out")" = "$(sha "$W/enc.bin")" ]; then
			ok "the right key again (stenc -e mixed): sha256 equal"
		else
			not_ok "the right key again: sha256 equal" "dd rc $RD_RC, $RD_BYTES bytes" "$(cat "$W/dd.err")"
		fi
		run stenc -f "$T0DEV" -e off -a 1
		unload_drive 0
	else
		not_ok "load slot 9 into drive 0 for the encryption checks" "rc $RUN_RC: $RUN_OUT"
	fi
fi

# =============================================================================
# Bacula: whole jobs through the director, the storage daemon's autochanger on
# reel's changer and two drives, and the file daemon
# =============================================================================
BACULA_MB=${BACULA_MB:-64}
BACULA_TIMEOUT=${BACULA_TIMEOUT:-900}
BW=/tmp/bacula-jobs
# bconsole_do COMMANDS...: one bconsole session; its output in RUN_OUT
bconsole_do() {
	local t0
	t0=$(now)
	RUN_OUT=$(printf '%s\n' "$@" quit | timeout "$BACULA_TIMEOUT" bconsole -c "$BW/bconsole.conf" 2>&1)
	RUN_RC=$?
	{
		echo "[$t0] \$ bconsole: $*"
		printf '%s\n' "$RUN_OUT"
		echo "[$(now)] exit $RUN_RC"
	} >>"$ART/bacula-console.log"
}
# bacula_job_status JOBID: the catalog's JobStatus (T: terminated normally)
bacula_job_status() {
	sqlite3 "$BW/wd/bacula.db" "select JobStatus from Job where JobId=$1" 2>/dev/null
}
# listing DIR: every path with type, mode, owner, size, mtime (whole seconds) and link target,
# sorted: the metadata a restore must bring back
listing() {
	(cd "$1" && find . -printf '%y %m %u:%g %s %TY-%Tm-%Td_%TH:%TM:%.2TS %p -> %l\n' | sort)
}
# render_conf NAME DEST KEY=VALUE...: the guide's configuration file NAME (docs/guide/examples,
# shipped as /vm/bin/NAME) with each @KEY@ replaced, written to DEST: the VM runs exactly the
# files the user guide shows.
render_conf() {
	local name=$1 dest=$2 kv script=""
	shift 2
	for kv in "$@"; do
		script="$script;s|@${kv%%=*}@|${kv#*=}|g"
	done
	if [ -f "/vm/bin/$name" ]; then
		sed -e "${script#;}" "/vm/bin/$name" >"$dest"
	else
		echo "# the guide's $name was not shipped to the guest" >"$dest"
	fi
}
bacula_configs() { # CHANGER NST0 NST1
	mkdir -p "$BW/wd" "$BW/wd-fd" "$BW/wd-sd"
	local f
	for f in bacula-sd.conf bacula-fd.conf bconsole.conf bacula-dir.conf; do
		render_conf "$f" "$BW/$f" CHANGER="$1" DRIVE0="$2" DRIVE1="$3" WORKDIR="$BW" \
			SOURCE="$BW/src" VOLUME_MB="$BACULA_VOLUME_MB"
	done
}
# store_usage: reel's data directory on the host (packs, catalog, journal), in bytes: allocated
# (what du shows), apparent (du -b), the catalog file's allocated and apparent
store_usage() {
	rm -f "$REEL_VM_OUT/store-usage.txt"
	host_do store-usage 60 >/dev/null 2>&1 && cat "$REEL_VM_OUT/store-usage.txt" 2>/dev/null
}
# bacula_run_job NAME: run it and wait; BJOB (its id) and BJOB_STATUS
bacula_run_job() {
	bconsole_do "run job=$1 yes" "wait" "messages"
	BJOB=$(sqlite3 "$BW/wd/bacula.db" "select max(JobId) from Job where Name='$1'" 2>/dev/null)
	BJOB_STATUS=$(bacula_job_status "${BJOB:-0}")
}
# bacula_restore JOBID DIR: the whole job restored under DIR; BJOB_STATUS of the restore job
bacula_restore() {
	rm -rf "$2"
	bconsole_do "restore jobid=$1 client=reel-vm-fd restorejob=restore-files where=$2 all done yes" "wait" "messages"
	local r
	r=$(sqlite3 "$BW/wd/bacula.db" "select max(JobId) from Job where Type='R'" 2>/dev/null)
	BJOB_STATUS=$(bacula_job_status "${r:-0}")
}
# bacula_compare RESTORE-ROOT DESC: the restored tree equals the source, content and metadata
bacula_compare() {
	local got=$1$BW/src
	if [ "$BJOB_STATUS" = T ] && diff -r --no-dereference "$BW/src" "$got" >"$W/bacula.diff" 2>&1 &&
		diff <(listing "$BW/src") <(listing "$got") >"$W/bacula.diff"; then
		ok "$2: content, modes, owners, times and links equal ($(find "$got" -type f | wc -l) files)"
	else
		not_ok "$2" "restore status '${BJOB_STATUS:-none}'" "$(head -n 5 "$W/bacula.diff" 2>/dev/null)" \
			"$(grep -iE 'error|fatal' "$ART/bacula-console.log" | tail -n 5)"
	fi
}
if [ "$MODE" = full ] && want bacula; then
	section bacula "Bacula jobs: label barcodes, two fulls, a job across volumes, restores compared"
	if [ -z "${DRV_NST[1]:-}" ]; then
		not_ok "two drives for the Bacula autochanger" "drive map: ${DRV_NST[*]:-none}"
	else
		unload_drive 0
		unload_drive 1
		rm -rf "$BW"
		mkdir -p "$BW/src"
		# Real files: the guest's own programs and libraries, and a few hard cases.
		# Taken file by file up to BACULA_MB (whole directories overshot it 2.5 times: 160 MiB
		# and a minute more of the suite under TCG for the same checks); tar keeps modes,
		# owners, times, symbolic and hard links.
		find /usr/share/perl /usr/lib/x86_64-linux-gnu /usr/bin /usr/sbin /usr/share -xdev \
			\( -type f -o -type l \) -printf '%s %p\n' 2>/dev/null |
			awk -v max=$((BACULA_MB << 20)) '{ size = $1; sub(/^[0-9]+ /, ""); if (seen[$0]++) next; sum += size; if (sum > max) exit; print }' >"$W/bacula-files"
		tar -C / -cf - --verbatim-files-from -T <(sed 's|^/||' "$W/bacula-files") 2>/dev/null | tar -C "$BW/src" -xpf -
		ln -s ../missing-target "$BW/src/dangling-link"
		mkdir -p "$BW/src/modes"
		touch "$BW/src/modes/empty"
		echo secret >"$BW/src/modes/0600" && chmod 0600 "$BW/src/modes/0600"
		echo daemon >"$BW/src/modes/owned" && chown daemon:daemon "$BW/src/modes/owned"
		touch -d '2001-02-03 04:05:06' "$BW/src/modes/old"
		SRC_MB=$(du -sm "$BW/src" | cut -f1)
		# The spanning job's volumes: the job fills two and ends on a third (four in its pool).
		BACULA_VOLUME_MB=$((SRC_MB * 2 / 5 + 1))
		bacula_configs "$CH" "${DRV_NST[0]}" "${DRV_NST[1]}"
		sqlite3 "$BW/wd/bacula.db" </usr/share/dbconfig-common/data/bacula-director-sqlite3/install/sqlite3
		run bacula-sd -c "$BW/bacula-sd.conf"
		sd_rc=$RUN_RC
		run bacula-fd -c "$BW/bacula-fd.conf"
		fd_rc=$RUN_RC
		run bacula-dir -c "$BW/bacula-dir.conf"
		dir_rc=$RUN_RC
		sleep 2
		bconsole_do "status director"
		if [ "$sd_rc$fd_rc$dir_rc" = 000 ] && grep -q "reel-vm-dir" <<<"$RUN_OUT"; then
			ok "bacula-dir, -sd and -fd started ($SRC_MB MiB of files to back up)"
		else
			not_ok "bacula-dir, -sd and -fd start" "sd $sd_rc fd $fd_rc dir $dir_rc" "$RUN_OUT"
		fi
		# label barcodes asks for confirmation on its own line
		bconsole_do "label barcodes storage=reel-tape pool=week1 slots=12 drive=0" yes \
			"label barcodes storage=reel-tape pool=week2 slots=13 drive=0" yes \
			"label barcodes storage=reel-tape pool=small slots=14-17 drive=0" yes \
			"update slots storage=reel-tape drive=0" "list volumes"
		nvol=$(sqlite3 "$BW/wd/bacula.db" "select count(*) from Media where InChanger=1" 2>/dev/null)
		if [ "${nvol:-0}" = 6 ]; then
			ok "label barcodes, update slots: 6 volumes named by barcode, in the changer"
		else
			not_ok "label barcodes: 6 volumes in the catalog" "${nvol:-0} volumes" "$(tail -n 15 <<<"$RUN_OUT")"
		fi
		use0=$(store_usage)
		bacula_run_job full-week1
		J1=$BJOB s1=$BJOB_STATUS
		use1=$(store_usage)
		bacula_run_job full-week2
		J2=$BJOB s2=$BJOB_STATUS
		use2=$(store_usage)
		u0=${use0%% *} u1=${use1%% *} u2=${use2%% *}
		jb=$(sqlite3 "$BW/wd/bacula.db" "select JobBytes from Job where JobId=${J1:-0}" 2>/dev/null)
		if [ "$s1$s2" = TT ]; then
			ok "two full backups of the same files to two volumes (jobs $J1, $J2)"
			if [ -n "$u0" ] && [ -n "$u1" ] && [ -n "$u2" ]; then
				g1=$((u1 - u0)) g2=$((u2 - u1))
				diag "reel's data directory (du): $u0 bytes labelled, +$g1 after the first full ($jb bytes of files), +$g2 after the second"
				diag "  (allocated, apparent, catalog allocated, catalog apparent): labelled $use0; first $use1; second $use2"
				# The second full repeats the files; only Bacula's block and record headers differ.
				# Allocated bytes, as du shows them (the catalog's file grows by doubling and the
				# new part stays sparse until used). Two bounds: the packs (everything but the
				# catalog) show the dedup; the whole directory what a user pays, catalog included:
				# each new record's reference list is new (~36 B per chunk, issue 14), and on a
				# fresh store that was ~10 MB of catalog for a 160 MiB job (measured 2026-12-04).
				read -r _ _ c0 _ <<<"$use0"
				read -r _ _ c1 _ <<<"$use1"
				read -r _ _ c2 _ <<<"$use2"
				p1=$((g1 - (c1 - c0))) p2=$((g2 - (c2 - c1)))
				if [ "$p2" -le $((p1 / 10)) ]; then
					ok "the second full of unchanged files adds $((p2 * 100 / (p1 > 0 ? p1 : 1)))% of the first's packs (+$p2 vs +$p1 bytes)"
				else
					not_ok "the second full of unchanged files adds at most 10% of the first's packs" "+$p2 vs +$p1 bytes"
				fi
				if [ "$g2" -le $((g1 / 4)) ]; then
					ok "the second full adds $((g2 * 100 / (g1 > 0 ? g1 : 1)))% of the first's growth on disk, catalog included (+$g2 vs +$g1 bytes)"
				else
					not_ok "the second full adds at most 25% of the first's growth on disk, catalog included" "+$g2 vs +$g1 bytes"
				fi
			else
				not_ok "reel's data directory size after each job (host hook store-usage)" "'$u0' '$u1' '$u2'"
			fi
		else
			not_ok "two full backups terminate normally" "job $J1: '$s1', job $J2: '$s2'" \
				"$(grep -iE 'error|fatal' "$ART/bacula-console.log" | tail -n 5)"
		fi
		bacula_run_job full-spanning
		J3=$BJOB
		nv=$(sqlite3 "$BW/wd/bacula.db" "select count(distinct MediaId) from JobMedia where JobId=${J3:-0}" 2>/dev/null)
		if [ "$BJOB_STATUS" = T ] && [ "${nv:-0}" -ge 2 ]; then
			ok "a full job across $nv volumes of $BACULA_VOLUME_MB MB: the changer swaps cartridges mid-job"
		else
			not_ok "a job spans volumes (autochanger swap mid-job)" "job $J3: '$BJOB_STATUS', ${nv:-0} volumes" \
				"$(grep -iE 'error|fatal|Cannot' "$ART/bacula-console.log" | tail -n 5)"
		fi
		bacula_restore "$J1" "$BW/r1"
		bacula_compare "$BW/r1" "restore of the first full"
		bacula_restore "$J3" "$BW/r3"
		bacula_compare "$BW/r3" "restore of the job that spans volumes"
		cp "$BW/wd/bacula.log" "$ART/bacula.log" 2>/dev/null
		bconsole_do "unmount storage=reel-tape drive=0" "unmount storage=reel-tape drive=1"
		pkill -x bacula-dir
		pkill -x bacula-sd
		pkill -x bacula-fd
		sleep 1
		unload_drive 0
		unload_drive 1
	fi
fi

# =============================================================================
# LTFS (the reference implementation, built from ../shared/third-party by
# tests/vm/build-ltfs.sh): format, mount, write, remount, check, reload
# =============================================================================
LTFS_MNT=/mnt/ltfs
# ltfs_mount SG LOG: ltfs in the foreground (its log to LOG) until the mount appears
ltfs_mount() {
	mkdir -p "$LTFS_MNT"
	/opt/ltfs/bin/ltfs -f -o devname="$1" -o sync_type=unmount "$LTFS_MNT" >"$2" 2>&1 &
	LTFS_PID=$!
	local i
	for i in $(seq 1 600); do
		mountpoint -q "$LTFS_MNT" && return 0
		kill -0 "$LTFS_PID" 2>/dev/null || return 1
		sleep 0.2
	done
	return 1
}
# ltfs_umount: unmount (LTFS writes its index) and wait for the process to end
ltfs_umount() {
	run umount "$LTFS_MNT"
	local i
	for i in $(seq 1 900); do
		kill -0 "$LTFS_PID" 2>/dev/null || break
		sleep 0.2
	done
	wait "$LTFS_PID" 2>/dev/null
	LTFS_RC=$?
}
# ltfs_errors LOG: the LTFS error lines (they name the SCSI command and the sense)
ltfs_errors() { grep -E ' E |[0-9]E |error|Sense' "$1" | head -n 8; }
# ltfs_volume_checks LABEL SG NST CHANGER SLOT: the LTFS round on the cartridge of SLOT, loaded
# in drive 0 of CHANGER (SG and NST: that drive's devices); logs under $ART/ltfs-LABEL-*
ltfs_volume_checks() {
	local label=$1 sg=$2 nst=$3 ch=$4 slot=$5 tag
	tag=$(mtx_status "$ch" | st_drive_tag 0)
	local L=$ART/ltfs-$label
	run /opt/ltfs/bin/ltfs -o device_list
	# LTFS 2.4.8 exits 1 after listing devices (main.c inverts show_device_list's result):
	# the list is what counts.
	if grep -q "Device Name = $sg " <<<"$RUN_OUT"; then
		ok "$label: ltfs -o device_list lists $sg ($(grep "Device Name = $sg " <<<"$RUN_OUT" | grep -o 'Product ID = [^,]*' | sed 's/ *$//'))"
	else
		not_ok "$label: ltfs -o device_list lists $sg" "rc $RUN_RC" "$RUN_OUT"
	fi
	run /opt/ltfs/bin/mkltfs -d "$sg" -f -n reel-ci
	echo "$RUN_OUT" >"$L-mkltfs.log"
	if [ "$RUN_RC" = 0 ]; then
		ok "$label: mkltfs -d $sg formats $tag"
	else
		not_ok "$label: mkltfs -d $sg formats $tag" "rc $RUN_RC" "$(ltfs_errors "$L-mkltfs.log")" "$(last_line "$RUN_OUT")"
	fi
	if ltfs_mount "$sg" "$L-mount1.log"; then
		ok "$label: ltfs mounts the new volume on $LTFS_MNT"
		run cp -r "$W/ltfs-src/." "$LTFS_MNT/"
		check "$label: files written to the volume (40 small, one of 24 MiB)" "$RUN_RC" "$RUN_OUT"
		ltfs_umount
		check "$label: unmount writes the index (ltfs exit $LTFS_RC)" "$LTFS_RC" "$(ltfs_errors "$L-mount1.log")"
	else
		not_ok "$label: ltfs mounts the new volume" "$(ltfs_errors "$L-mount1.log")" "$(tail -n 5 "$L-mount1.log")"
	fi
	if ltfs_mount "$sg" "$L-mount2.log"; then
		if diff <(manifest "$LTFS_MNT") "$W/ltfs.manifest" >"$W/ltfs.diff"; then
			ok "$label: remounted, every file reads back equal (sha256)"
		else
			not_ok "$label: remounted, every file reads back equal" "$(head -n 5 "$W/ltfs.diff")"
		fi
		ltfs_umount
	else
		not_ok "$label: ltfs remounts the volume" "$(ltfs_errors "$L-mount2.log")" "$(tail -n 5 "$L-mount2.log")"
	fi
	# ltfsck's full check ends with "Volume is consistent" and exit 1 (LTFSCK_CORRECTED: it
	# rewrote the cartridge memory's coherency data) even on a clean volume.
	run /opt/ltfs/bin/ltfsck "$sg"
	echo "$RUN_OUT" >"$L-ltfsck.log"
	if [ "$RUN_RC" -le 1 ] && grep -q "LTFS16022I" <<<"$RUN_OUT"; then
		ok "$label: ltfsck $sg, the volume is consistent (exit $RUN_RC)"
	else
		not_ok "$label: ltfsck $sg finds the volume consistent" "rc $RUN_RC" "$(ltfs_errors "$L-ltfsck.log")" "$(last_line "$RUN_OUT")"
	fi
	# Out of the drive through the changer and back: the volume still mounts and reads.
	run mtx -f "$ch" unload "$slot" 0
	run mtx -f "$ch" load "$slot" 0
	wait_online "$nst" 60
	if ltfs_mount "$sg" "$L-mount3.log"; then
		if diff <(manifest "$LTFS_MNT") "$W/ltfs.manifest" >"$W/ltfs.diff"; then
			ok "$label: unloaded and reloaded through the changer, mounts, every file equal"
		else
			not_ok "$label: after unload and reload every file reads back equal" "$(head -n 5 "$W/ltfs.diff")"
		fi
		ltfs_umount
	else
		not_ok "$label: after unload and reload through the changer, ltfs mounts" "$(ltfs_errors "$L-mount3.log")"
	fi
	# What a real drive answers, reel must too. Two refusals are expected: READ ATTRIBUTE of an
	# attribute not written yet (a real drive says INVALID FIELD IN CDB; LTFS relies on it) and
	# LOG SENSE of IBM's page 37h (performance characteristics: not emulated,
	# docs/compatibility.md). Anything else is a difference from a real drive.
	# LTFS's sg backend also asks HPE drives for IBM's vendor mode page 25h (at every mount),
	# which reel's HPE personality, like its model, does not have.
	local all unexpected pages37 logsense expected='READ_ATTR returns Invalid Field in CDB|LOGSENSE returns Invalid Field in CDB'
	[ "$label" = hpe ] && expected="$expected|MODESENSE returns Invalid Field in CDB"
	all=$(cat "$L"-*.log 2>/dev/null | grep -E 'LTFS30263I' | sed 's/^[0-9a-f]* *LTFS/LTFS/' | sort | uniq -c)
	unexpected=$(grep -vE "$expected" <<<"$all")
	pages37=$(cat "$L"-*.log 2>/dev/null | grep -c "Cannot get log page 0x37")
	logsense=$(cat "$L"-*.log 2>/dev/null | grep -c "LOGSENSE returns")
	if [ -z "$unexpected" ] && [ "$logsense" -le "$pages37" ]; then
		ok "$label: LTFS got no refusal a real drive would not give"
	else
		not_ok "$label: LTFS got no refusal a real drive would not give" \
			"${unexpected:-LOG SENSE refused $logsense times, page 37h $pages37 times}" "$all"
	fi
}
if [ "$MODE" = full ] && want ltfs; then
	section ltfs "LTFS on IBM and HPE drives: mkltfs, mount, write, remount, ltfsck, unload and reload"
	if [ ! -f /vm/bin/ltfs-opt.tar.gz ]; then
		not_ok "LTFS is provided to the guest" "tests/vm/build-ltfs.sh did not build it (see tape-test's output)"
	elif ! tar xzf /vm/bin/ltfs-opt.tar.gz -C / || ! modprobe fuse; then
		not_ok "LTFS installed in the guest (/opt/ltfs) and fuse loaded" "$(modprobe fuse 2>&1)"
	else
		make_tree "$W/ltfs-src" 40 256
		head -c $((24 << 20)) /dev/urandom >"$W/ltfs-src/large.bin"
		manifest "$W/ltfs-src" >"$W/ltfs.manifest"
		# IBM: drive 0 of the main library (ULT3580-TD9).
		if ensure_loaded 0 10; then
			ltfs_volume_checks ibm "${DRV_SG[0]}" "$T0DEV" "$CH" 10
			unload_drive 0
		else
			not_ok "ibm: load slot 10 into drive 0 for LTFS" "rc $RUN_RC: $RUN_OUT"
		fi
		# HPE: the HP MSL library's first drive (an HPE Ultrium 9 half-height), its own login.
		spec=$(tr ' ' '\n' <<<"$CHANGER_SPECS" | grep '^chg-msl|')
		if [ -z "$spec" ]; then
			not_ok "hpe: the HP MSL library (chg-msl) is configured" "CHANGER_SPECS: $CHANGER_SPECS"
		else
			IFS='|' read -r suffix model drive nd _ _ _ _ _ <<<"$spec"
			iqn=$IQN_BASE:$suffix
			node_new "$iqn"
			login "$iqn"
			sid=""
			if sid=$(sid_of "$iqn") && attach "$sid" "$nd" 30; then
				hsg=/dev/$(awk '$2 == 1 { print $3; exit }' <<<"$ATT_TABLE")
				hnst=/dev/$(awk '$2 == 1 { print $4; exit }' <<<"$ATT_TABLE")
				if run mtx -f "$ATT_CH" load 1 0 && wait_online "$hnst" 60; then
					ltfs_volume_checks hpe "$hsg" "$hnst" "$ATT_CH" 1
					run mtx -f "$ATT_CH" unload 1 0
				else
					not_ok "hpe: load slot 1 of $model into its drive 0" "rc $RUN_RC: $RUN_OUT"
				fi
			else
				not_ok "hpe: login to $iqn with a changer and $nd drive(s)" "$(lun_table "${sid:-0}")"
			fi
			logout "$iqn"
			run iscsiadm -m node -o delete -T "$iqn" -p "$P"
		fi
	fi
fi

# =============================================================================
# Amanda: amlabel by barcode, amdump of a disk list to tape through chg-robot on
# reel's changer, amfetchdump back and compared with the source
# =============================================================================
AM=/var/lib/amanda/reel
# amanda_as_backup COMMAND...: Amanda's tools run as its dump user
amanda_as_backup() { run su -s /bin/sh backup -c "$*"; }
amanda_configs() { # CHANGER NST0 NST1 SOURCE
	mkdir -p /etc/amanda/reel "$AM/log" "$AM/index" "$AM/curinfo" /var/lib/amanda/gnutar-lists
	render_conf amanda.conf /etc/amanda/reel/amanda.conf CHANGER="$1" DRIVE0="$2" DRIVE1="$3" STATEDIR="$AM"
	render_conf amanda-client.conf /etc/amanda/reel/amanda-client.conf
	echo "localhost $4 reel-tar" >/etc/amanda/reel/disklist
	: >"$AM/tapelist"
	chown -R backup:backup /etc/amanda/reel /var/lib/amanda
}
if [ "$MODE" = full ] && want amanda; then
	section amanda "Amanda: amlabel by barcode, amdump through chg-robot, amfetchdump compared"
	if ! command -v amdump >/dev/null || ! command -v amfetchdump >/dev/null; then
		not_ok "Amanda's server and client are installed in the guest" "$(command -v amdump amfetchdump)"
	elif [ -z "${DRV_NST[1]:-}" ]; then
		not_ok "two drives for Amanda's changer" "drive map: ${DRV_NST[*]:-none}"
	else
		unload_drive 0
		unload_drive 1
		src=/tmp/amanda-src
		rm -rf "$src"
		make_tree "$src" 60 512
		cp -a /usr/share/perl5 "$src/perl5" 2>/dev/null || true
		chmod 0666 "${DRV_NST[0]}" "${DRV_NST[1]}" "${DRV_NST[0]/nst/st}" "${DRV_NST[1]/nst/st}" "$CH"
		amanda_configs "$CH" "${DRV_NST[0]}" "${DRV_NST[1]}" "$src"
		labels=""
		for s in 18 19 20; do
			b=$(lib_st | st_tag "$s")
			amanda_as_backup amlabel -f reel "$b" slot "$s"
			echo "$RUN_OUT" >>"$ART/amanda.log"
			[ "$RUN_RC" = 0 ] && labels="$labels $b"
		done
		if [ "$(wc -w <<<"$labels")" = 3 ]; then
			ok "amlabel through chg-robot: slots 18-20 labelled with their barcodes ($labels )"
		else
			not_ok "amlabel labels slots 18-20 with their barcodes" "labelled:${labels:- none}" "$(tail -n 5 "$ART/amanda.log")"
		fi
		amanda_as_backup amcheck -t reel
		echo "$RUN_OUT" >>"$ART/amanda.log"
		check "amcheck -t: the changer finds a labelled volume" "$RUN_RC" "$RUN_OUT"
		amanda_as_backup amdump reel
		amdump_rc=$RUN_RC
		cp "$AM"/log/amdump.* "$ART/" 2>/dev/null
		amanda_as_backup amadmin reel find localhost "$src"
		echo "$RUN_OUT" >>"$ART/amanda.log"
		if [ "$amdump_rc" = 0 ] && grep -qE "REL0(18|19|20)L9 .*OK" <<<"$RUN_OUT"; then
			ok "amdump of $(du -sm "$src" | cut -f1) MiB to tape: amadmin find lists the dump on $(grep -oE 'REL0[0-9]+L9' <<<"$RUN_OUT" | head -n 1)"
		else
			not_ok "amdump writes the dump to a labelled cartridge" "amdump rc $amdump_rc" "$RUN_OUT" \
				"$(grep -hiE 'fail|error' "$AM"/log/amdump.* 2>/dev/null | tail -n 5)"
		fi
		rm -rf /tmp/amanda-restore
		mkdir -p /tmp/amanda-restore
		amanda_as_backup "cd /tmp && amfetchdump -p -a reel localhost $src >/tmp/amanda-restore.tar"
		fetch_rc=$RUN_RC
		echo "$RUN_OUT" >>"$ART/amanda.log"
		tar -xpf /tmp/amanda-restore.tar -C /tmp/amanda-restore 2>>"$ART/amanda.log"
		if [ "$fetch_rc" = 0 ] && diff <(manifest "$src") <(manifest /tmp/amanda-restore) >"$W/amanda.diff"; then
			ok "amfetchdump back through chg-robot: every file equal (sha256, links)"
		else
			not_ok "amfetchdump restores every file" "amfetchdump rc $fetch_rc" "$(head -n 5 "$W/amanda.diff")" "$(tail -n 5 <<<"$RUN_OUT")"
		fi
		# amrecover, the operator's interactive restore (amindexd and amidxtaped through
		# auth "local"): browse the index, add everything, extract from tape via the changer.
		rm -rf /tmp/amrecover-out
		mkdir -p /tmp/amrecover-out
		t0=$(now)
		RUN_OUT=$(cd /tmp/amrecover-out && printf '%s\n' "sethost localhost" "setdisk $src" "ls" "add ." \
			"extract" Y Y Y quit | timeout 600 amrecover reel 2>&1)
		RUN_RC=$?
		printf '%s\n' "$RUN_OUT" >"$ART/amrecover.log"
		if diff <(manifest "$src") <(manifest /tmp/amrecover-out) >"$W/amrecover.diff" 2>&1; then
			ok "amrecover: sethost, setdisk, add ., extract through chg-robot: every file equal ($(elapsed "$t0") s)"
		else
			not_ok "amrecover restores every file" "rc $RUN_RC" "$(head -n 5 "$W/amrecover.diff")" "$(tail -n 8 <<<"$RUN_OUT")"
		fi
		unload_drive 0
		unload_drive 1
	fi
fi

# =============================================================================
# two backup servers on one library: a second initiator (its own iface and
# InitiatorName) logs in to the same library; PREVENT on a drive and
# reservations on the changer keep one server's moves from the other's
# =============================================================================
# sg_res_status CHANGER: READ ELEMENT STATUS (all elements, 256 bytes) through sg_raw, which
# names the SCSI status (mtx does not: a RESERVATION CONFLICT carries no sense)
sg_res_status() { run sg_raw -r 256 "$1" b8 00 00 00 ff ff 00 00 01 00 00 00; }
if [ "$MODE" = full ] && want shared; then
	section shared "two initiators share the library: PREVENT on a drive, reservations on the changer"
	B_IFACE=reel-b
	B_NAME=iqn.2026-11.org.reel.test:backup-server-b
	run iscsiadm -m iface -I "$B_IFACE" -o new
	run iscsiadm -m iface -I "$B_IFACE" -o update -n iface.initiatorname -v "$B_NAME"
	run iscsiadm -m node -o new -T "$LIB_IQN" -p "$P" -I "$B_IFACE"
	run iscsiadm -m node -T "$LIB_IQN" -p "$P" -I "$B_IFACE" --login
	b_sid=""
	for s in /sys/class/iscsi_session/session*; do
		[ "$(cat "$s/targetname" 2>/dev/null)" = "$LIB_IQN" ] || continue
		[ "$(cat "$s/initiatorname" 2>/dev/null)" = "$B_NAME" ] && b_sid=${s##*/session}
	done
	if [ -n "$b_sid" ] && attach "$b_sid" "$LIB_DRIVES" 30; then
		CH_B=$ATT_CH
		ok "second initiator $B_NAME logged in: changer $CH_B, $LIB_DRIVES drives"
		if diff <(mtx_status "$CH" | sed 's/Storage Changer [^:]*:/Storage Changer:/') \
			<(mtx_status "$CH_B" | sed 's/Storage Changer [^:]*:/Storage Changer:/') >"$W/shared.diff"; then
			ok "both servers see the same inventory (mtx status through each changer device)"
		else
			not_ok "both servers see the same inventory" "$(head -n 6 "$W/shared.diff")"
		fi
		# A loads slot 11 into drive 2 and prevents its removal, as st does while the device
		# is open: B cannot take the cartridge out until A allows it again.
		unload_drive 2
		run mtx -f "$CH" load 11 2
		# the load's unit attention first (NOT READY TO READY CHANGE), as st's open does
		run sg_turs "${DRV_SG[2]}"
		run sg_turs "${DRV_SG[2]}"
		run sg_prevent --prevent=1 "${DRV_SG[2]}"
		a_prevent=$RUN_RC
		run mtx -f "$CH_B" unload 11 2
		# mtx prints the sense as numbers: 53h/02h is MEDIUM REMOVAL PREVENTED
		if [ "$a_prevent" = 0 ] && [ "$RUN_RC" != 0 ] && grep -q "Additional Sense Code = 53" <<<"$RUN_OUT" &&
			grep -q "Additional Sense Qualifier = 02" <<<"$RUN_OUT"; then
			ok "A's PREVENT MEDIUM REMOVAL on drive 2: B's mtx unload is refused (MEDIUM REMOVAL PREVENTED)"
		else
			not_ok "A's PREVENT on drive 2 stops B's mtx unload" "sg_prevent rc $a_prevent; B unload rc $RUN_RC" "$RUN_OUT"
		fi
		run sg_prevent --allow "${DRV_SG[2]}"
		run mtx -f "$CH_B" unload 11 2
		check "A allows removal again: B's mtx unload 11 2 succeeds" "$RUN_RC" "$RUN_OUT"
		# Persistent reservations on the changer: A registers and reserves (exclusive access).
		run sg_persist --out --register --param-sark=0xA "$CH"
		r1=$RUN_RC
		run sg_persist --out --reserve --param-rk=0xA --prout-type=3 "$CH"
		r2=$RUN_RC
		run sg_persist --in --read-reservation "$CH_B"
		seen=$RUN_OUT
		if [ "$r1$r2" = 00 ] && grep -qi "0xa" <<<"$seen" && grep -qi "exclusive access" <<<"$seen"; then
			ok "A registers and reserves the changer (PERSISTENT RESERVE OUT, exclusive access); B reads the reservation"
		else
			not_ok "A reserves the changer, B sees the reservation" "register rc $r1, reserve rc $r2" "$seen"
		fi
		run mtx -f "$CH_B" load 11 2
		b_rc=$RUN_RC
		sg_res_status "$CH_B"
		b_out=$RUN_OUT
		run mtx -f "$CH" load 11 2
		a_rc=$RUN_RC
		if [ "$b_rc" != 0 ] && grep -qi "reservation conflict" <<<"$b_out" && [ "$a_rc" = 0 ]; then
			ok "while A holds the reservation B's MOVE MEDIUM gets RESERVATION CONFLICT and A's own works"
		else
			not_ok "A's reservation: B's move conflicts, A's works" "B rc $b_rc: $b_out" "A rc $a_rc"
		fi
		run mtx -f "$CH" unload 11 2
		run sg_persist --out --release --param-rk=0xA --prout-type=3 "$CH"
		run sg_persist --out --register --param-rk=0xA --param-sark=0 "$CH"
		run mtx -f "$CH_B" load 11 2
		b2=$RUN_RC
		run mtx -f "$CH_B" unload 11 2
		if [ "$b2" = 0 ] && [ "$RUN_RC" = 0 ]; then
			ok "after A releases and unregisters, B moves cartridges again"
		else
			not_ok "after A releases, B moves cartridges again" "B load rc $b2, unload rc $RUN_RC" "$RUN_OUT"
		fi
		# SPC-2 RESERVE(6)/RELEASE(6), as older backup software reserves a changer.
		run sg_raw "$CH" 16 00 00 00 00 00
		r6=$RUN_RC
		sg_res_status "$CH_B"
		b3=$RUN_RC b3_out=$RUN_OUT
		run sg_raw "$CH" 17 00 00 00 00 00
		run mtx -f "$CH_B" status
		if [ "$r6" = 0 ] && [ "$b3" != 0 ] && grep -qi "conflict" <<<"$b3_out" && [ "$RUN_RC" = 0 ]; then
			ok "RESERVE(6) by A: B's READ ELEMENT STATUS conflicts; after RELEASE(6) B reads the inventory"
		else
			not_ok "RESERVE(6)/RELEASE(6) by A fence B" "reserve rc $r6; B while reserved rc $b3 ($b3_out); B after rc $RUN_RC"
		fi
	else
		not_ok "a second initiator ($B_NAME) logs in to the library" "$(lun_table "${b_sid:-0}")"
	fi
	run iscsiadm -m node -T "$LIB_IQN" -p "$P" -I "$B_IFACE" --logout
	run iscsiadm -m node -o delete -T "$LIB_IQN" -p "$P" -I "$B_IFACE"
	run iscsiadm -m iface -I "$B_IFACE" -o delete
fi

# =============================================================================
# two drives at once
# =============================================================================
if [ "$MODE" = full ] && want multi; then
	section multi "two drives at once"
	T1DEV=${DRV_NST[1]:-}
	if [ -n "$T1DEV" ] && ensure_loaded 0 3 && ensure_loaded 1 4; then
		for t in "$T0DEV" "$T1DEV"; do
			run mt -f "$t" setblk 0
			run mt -f "$t" rewind
		done
		head -c $((CONC_MB * 1048576)) /dev/urandom >"$W/c0"
		C0=$(sha "$W/c0")
		make_tree "$W/c1" 12 $((CONC_MB * 1024 / 8))
		manifest "$W/c1" >"$W/mc1"
		t0=$(now)
		(
			s=$(now)
			timeout "$CMD_TIMEOUT" dd if="$W/c0" of="$T0DEV" bs=256k iflag=fullblock 2>"$W/c0.err"
			echo "$? $s $(now)" >"$W/c0.rc"
		) &
		(
			s=$(now)
			timeout "$CMD_TIMEOUT" tar -b 512 -cf "$T1DEV" -C "$W/c1" . 2>"$W/c1.err"
			echo "$? $s $(now)" >"$W/c1.rc"
		) &
		wait
		read -r r0 s0 e0 <"$W/c0.rc"
		read -r r1 s1 e1 <"$W/c1.rc"
		span=$(elapsed "$t0")
		times="dd on $T0DEV $(awk -v a="$s0" -v b="$e0" -v z="$t0" 'BEGIN{printf "%.1f-%.1f s", a-z, b-z}'), tar on $T1DEV $(awk -v a="$s1" -v b="$e1" -v z="$t0" 'BEGIN{printf "%.1f-%.1f s", a-z, b-z}')"
		if [ "$r0" = 0 ] && [ "$r1" = 0 ]; then
			ok "two drives at once: dd $CONC_MB MiB to $T0DEV and tar $(du -sm "$W/c1" | cut -f1) MiB to $T1DEV in parallel, both exit 0 ($times; $span s in all)"
		else
			not_ok "two drives at once: parallel dd and tar both exit 0" "dd rc $r0: $(tail -n 1 "$W/c0.err"); tar rc $r1: $(tail -n 1 "$W/c1.err")" "$(dmesg | tail -n 5)"
		fi
		run mt -f "$T0DEV" rewind
		run mt -f "$T1DEV" rewind
		rm -rf "$W/x1"
		mkdir -p "$W/x1"
		(
			timeout "$CMD_TIMEOUT" dd if="$T0DEV" of="$W/c0.back" bs=256k 2>"$W/c0r.err"
			echo $? >"$W/c0r.rc"
		) &
		(
			timeout "$CMD_TIMEOUT" tar -b 512 -xf "$T1DEV" -C "$W/x1" 2>"$W/c1r.err"
			echo $? >"$W/c1r.rc"
		) &
		wait
		if [ "$(cat "$W/c0r.rc")" = 0 ] && [ "$(sha "$W/c0.back")" = "$C0" ]; then
			ok "two drives at once: parallel read-back of $T0DEV, sha256 equal"
		else
			not_ok "two drives at once: parallel read-back of $T0DEV, sha256 equal" "rc $(cat "$W/c0r.rc"), $(fsize "$W/c0.back") bytes: $(tail -n 1 "$W/c0r.err")"
		fi
		if [ "$(cat "$W/c1r.rc")" = 0 ] && manifest "$W/x1" | cmp -s - "$W/mc1"; then
			ok "two drives at once: parallel tar -x from $T1DEV, every file identical"
		else
			not_ok "two drives at once: parallel tar -x from $T1DEV, every file identical" "rc $(cat "$W/c1r.rc"): $(tail -n 1 "$W/c1r.err")"
		fi
		rm -rf "$W/x1" "$W/c0.back" "$W/c1"
	else
		not_ok "two drives at once: cartridges of slots 3 and 4 in drives 0 and 1" "drive 1 device '${T1DEV}'; $RUN_OUT"
	fi
fi

# =============================================================================
# target restart (SIGTERM) and kill (SIGKILL)
# =============================================================================
# restart_and_recover HOOK: ask the host, wait for the session; two checks
restart_and_recover() {
	local hook=$1 what=$2 dm lm t0 hrc
	dm=$(dmesg_mark)
	lm=$(log_mark)
	t0=$(now)
	host_do "$hook" 240
	hrc=$?
	if [ "$hrc" = 0 ]; then
		ok "$what: the host's $hook returned 0 ($(elapsed "$t0") s)"
	else
		not_ok "$what: the host's $hook succeeded" "host_do $hook returned $hrc (see run.sh's hooks.log and target.log)"
	fi
	t0=$(now)
	if wait_recovered "$LIB_SID" "$dm" "$lm"; then
		ok "$what: the session recovered by itself, LOGGED_IN $(elapsed "$t0") s after the target was back"
		diag "$what: $REC_WHY"
		return 0
	fi
	not_ok "$what: the session recovered within replacement_timeout ($REPLACEMENT_TIMEOUT s)" "$REC_WHY" "$(log_since "$lm")" "$(dmesg_since "$dm")"
	return 1
}
# the immediate-filemark option of st (MT_ST_NOWAIT_EOF): WRITE FILEMARKS with
# IMMED=1 on close, which is not a synchronising point for the drive
immed_on() { run mt -f "$1" stsetoptions 0x8000; }
immed_off() { run mt -f "$1" stclearoptions 0x8000; }

if [ "$MODE" = full ] && want restart; then
	section restart "reel restarted (SIGTERM) between writing and reading"
	T1DEV=${DRV_NST[1]:-}
	ensure_loaded 0 5
	[ -n "$T1DEV" ] && ensure_loaded 1 6
	S=$(lib_st)
	RTAG0=$(st_drive_tag 0 <<<"$S")
	RTAG1=$(st_drive_tag 1 <<<"$S")
	make_tree "$W/r1" 6 512
	make_tree "$W/r2" 6 512
	manifest "$W/r1" >"$W/mr1"
	manifest "$W/r2" >"$W/mr2"
	run mt -f "$T0DEV" setblk 0
	run mt -f "$T0DEV" rewind
	w1=1 w2=1
	tar_write "$T0DEV" "$W/r1" && w1=0
	immed_on "$T0DEV"
	tar_write "$T0DEV" "$W/r2" && w2=0
	immed_off "$T0DEV"
	if [ "$w1" = 0 ] && [ "$w2" = 0 ]; then
		ok "restart: archive 1 (synchronising filemark) and archive 2 (immediate filemark) written to $RTAG0"
	else
		not_ok "restart: two archives written before the restart" "tar rc $w1 / $w2" "$RUN_OUT"
	fi
	if restart_and_recover restart-target "restart"; then
		S=$(lib_st)
		if [ "$(st_drive_tag 0 <<<"$S")" = "$RTAG0" ] && { [ -z "$T1DEV" ] || [ "$(st_drive_tag 1 <<<"$S")" = "$RTAG1" ]; }; then
			ok "restart: mtx status: $RTAG0 still in drive 0${T1DEV:+, $RTAG1 in drive 1}"
		else
			not_ok "restart: the cartridges are still in their drives" "$(st_drive 0 <<<"$S")" "$(st_drive 1 <<<"$S")"
		fi
		diag "restart: first mt status after the restart: $(mt_status "$T0DEV" | grep -E 'File number|ONLINE' | tr '\n' ' ')"
		wait_online "$T0DEV" 60
		if run mt -f "$T0DEV" rewind && tar_check "$T0DEV" "$W/mr1"; then
			ok "restart: rewind, archive 1 reads back identical"
		else
			not_ok "restart: rewind, archive 1 reads back identical" "mt rc $RUN_RC; $TC_WHY" "$(dmesg | tail -n 5)"
		fi
		if run mt -f "$T0DEV" rewind && run mt -f "$T0DEV" fsf 1 && tar_check "$T0DEV" "$W/mr2"; then
			ok "restart: archive 2 (immediate filemark) survived the clean stop: identical"
		else
			not_ok "restart: archive 2 (immediate filemark) survived the clean stop" "mt rc $RUN_RC; $TC_WHY"
		fi
	else
		skip "restart: cartridges still in their drives" "no session"
		skip "restart: archive 1 reads back" "no session"
		skip "restart: archive 2 reads back" "no session"
	fi
fi

if [ "$MODE" = full ] && want kill; then
	section kill "reel killed (SIGKILL): data up to the last synchronising point"
	ensure_loaded 0 5
	KTAG=$(lib_st | st_drive_tag 0)
	head -c $((6 * 1048576)) /dev/urandom >"$W/k1"
	head -c $((6 * 1048576)) /dev/urandom >"$W/k2"
	K1=$(sha "$W/k1")
	# K1 at file 0, closed by a synchronising filemark; K2 at file 1, closed
	# by an immediate filemark: nothing synchronises it before the kill
	run mt -f "$T0DEV" setblk 0
	run mt -f "$T0DEV" rewind
	tape_write "$T0DEV" "$W/k1" bs=256k
	w1=$WR_RC
	immed_on "$T0DEV"
	tape_write "$T0DEV" "$W/k2" bs=256k
	w2=$WR_RC
	immed_off "$T0DEV"
	kpos=$(mt_pos "$T0DEV")
	if [ "$w1" = 0 ] && [ "$w2" = 0 ] && [ "$kpos" = 2:0 ]; then
		ok "kill: file 0 (6 MiB, synchronising filemark) and file 1 (6 MiB, immediate filemark) written to $KTAG"
	else
		not_ok "kill: two files written before the kill" "dd rc $w1 / $w2, position '$kpos'"
	fi
	if restart_and_recover kill-target "kill"; then
		S=$(lib_st)
		if [ "$(st_drive_tag 0 <<<"$S")" = "$KTAG" ]; then
			ok "kill: mtx status: $KTAG still in drive 0 after the SIGKILL"
		else
			not_ok "kill: $KTAG still in drive 0 after the SIGKILL" "$(st_drive 0 <<<"$S")"
		fi
		diag "kill: first mt status after the kill: $(mt_status "$T0DEV" | grep -E 'File number|ONLINE' | tr '\n' ' ')"
		wait_online "$T0DEV" 60
		run mt -f "$T0DEV" rewind
		rw=$RUN_RC
		tape_read "$T0DEV" "$W/k1.back" bs=256k
		if [ "$rw" = 0 ] && [ "$RD_RC" = 0 ] && [ "$(sha "$W/k1.back")" = "$K1" ]; then
			ok "kill: rewind, file 0 (before the last synchronising point) reads back identical"
		else
			not_ok "kill: file 0 (before the last synchronising point) reads back identical" "rewind rc $rw; dd rc $RD_RC, $RD_BYTES bytes ($RD_ERR)" "$(dmesg | tail -n 5)"
		fi
		# file 1 may be lost; what survives must be a prefix of what was written
		# (an empty file 1, i.e. its filemark without its data, would break the order)
		run mt -f "$T0DEV" rewind
		run mt -f "$T0DEV" fsf 1
		fsf_rc=$RUN_RC
		q1=$(mt_tell "$T0DEV")
		tape_read "$T0DEV" "$W/k2.back" bs=256k
		q2=$(mt_tell "$T0DEV")
		k2what="" k2why=""
		if [ "$RD_BYTES" = 0 ] && [ -n "$q1" ] && [ "$q1" = "$q2" ]; then
			k2what="lost entirely: end of data right after file 0 (fsf rc $fsf_rc, read ${RD_ERR:-rc $RD_RC}, position $q1)"
		elif [ "$RD_BYTES" = 0 ]; then
			k2why="no data but the position moved from '$q1' to '$q2' (a filemark without the data written before it?)"
		elif cmp -s -n "$RD_BYTES" "$W/k2" "$W/k2.back"; then
			k2what="$RD_BYTES of $(fsize "$W/k2") bytes survived, equal to what was written (position $q1 -> $q2)"
		else
			k2why="$RD_BYTES bytes read, $(cmp "$W/k2" "$W/k2.back" 2>&1 | head -n 1)"
		fi
		if [ -n "$k2what" ]; then
			ok "kill: file 1 (after the last synchronising point): $k2what"
		else
			not_ok "kill: whatever survived of file 1 is a prefix of what was written" "$k2why"
		fi
		# the tape stays usable: overwrite from file 1 on, read it back
		run mt -f "$T0DEV" rewind
		run mt -f "$T0DEV" fsf 1
		make_tree "$W/k3" 4 256
		manifest "$W/k3" >"$W/mk3"
		if tar_write "$T0DEV" "$W/k3" && run mt -f "$T0DEV" rewind && run mt -f "$T0DEV" fsf 1 && tar_check "$T0DEV" "$W/mk3"; then
			ok "kill: the cartridge is writable again: a new archive at file 1 reads back identical"
		else
			not_ok "kill: a new archive written at file 1 after the kill reads back" "rc $RUN_RC: $(last_line "$RUN_OUT"); $TC_WHY"
		fi
	else
		skip "kill: cartridge still in its drive" "no session"
		skip "kill: file 0 reads back" "no session"
		skip "kill: file 1" "no session"
		skip "kill: cartridge writable again" "no session"
	fi
fi

# pair_write DEV TREE FILE: a tar archive of TREE (file 0) and FILE by dd (file 1) from the
# start of the cartridge in DEV; PAIR_WHY says what failed (empty: both written)
pair_write() {
	PAIR_WHY=""
	run mt -f "$1" setblk 0
	run mt -f "$1" rewind
	tar_write "$1" "$2" || { PAIR_WHY="tar rc $RUN_RC: $(last_line "$RUN_OUT")"; return 1; }
	tape_write "$1" "$3" bs=256k
	[ "$WR_RC" = 0 ] || { PAIR_WHY="dd rc $WR_RC: $WR_ERR"; return 1; }
}
# pair_check DEV MANIFEST FILE SHA: what pair_write wrote reads back identical; PAIR_WHY
pair_check() {
	local got
	PAIR_WHY=""
	run mt -f "$1" rewind
	tar_check "$1" "$2" || { PAIR_WHY="archive (file 0): $TC_WHY"; return 1; }
	run mt -f "$1" rewind
	run mt -f "$1" fsf 1
	tape_read "$1" "$3.back" bs=256k
	got=$(sha "$3.back")
	rm -f "$3.back"
	[ "$RD_RC" = 0 ] && [ "$got" = "$4" ] ||
		{ PAIR_WHY="dd file (file 1): rc $RD_RC, $RD_BYTES of $(fsize "$3") bytes, sha256 ${got:0:16} for ${4:0:16} ($RD_ERR)"; return 1; }
}

# =============================================================================
# disaster recovery: the node and its disk lost, rebuilt from the bucket alone
# =============================================================================
if [ "$MODE" = full ] && [ "$BUCKET_MODE" = 1 ] && want bucket; then
	section bucket "cartridges survive the loss of the node: reel recover from the bucket"
	for d in $(seq 0 $((LIB_DRIVES - 1))); do unload_drive "$d"; done
	S=$(lib_st)
	declare -a BTAG BSHA
	# slots 1 and 2 go back to their slots; slot 3 stays in drive 0 (rewound: also a
	# synchronising point), so the recovered inventory is checked for a drive too
	for s in 1 2 3; do
		BTAG[s]=$(st_tag "$s" <<<"$S")
		make_tree "$W/b$s" 8 768
		manifest "$W/b$s" >"$W/mb$s"
		head -c $(((2 + s) * 1048576)) /dev/urandom >"$W/bd$s"
		BSHA[s]=$(sha "$W/bd$s")
		t0=$(now)
		why=""
		if ! ensure_loaded 0 "$s"; then
			why="load slot $s: rc $RUN_RC $(last_line "$RUN_OUT")"
		else
			pair_write "$T0DEV" "$W/b$s" "$W/bd$s" || why=$PAIR_WHY
			pos=$(mt_pos "$T0DEV")
			[ -z "$why" ] && [ "$pos" != 2:0 ] && why="position after two files '$pos', not 2:0"
		fi
		if [ "$s" = 3 ]; then
			run mt -f "$T0DEV" rewind || why="${why:-rewind rc $RUN_RC}"
			where="left in drive 0, rewound"
		else
			unload_drive 0
			lib_st | st_full "$s" || why="${why:-not back in slot $s after mt offline + mtx unload}"
			where="unloaded to slot $s"
		fi
		if [ -z "$why" ]; then
			ok "bucket: ${BTAG[s]}: tar archive ($(tar_bytes "$W/b$s") bytes, $(grep -c '^F' "$W/mb$s") files) and dd file ($(fsize "$W/bd$s") bytes), each closed by a filemark; $where ($(elapsed "$t0") s)"
		else
			not_ok "bucket: ${BTAG[s]} (slot $s): a tar archive and a dd file written, $where" "$why" "$(dmesg | tail -n 3)"
		fi
	done
	# slot 4 in drive 1, written while the bucket does not answer (versitygw stopped by the
	# host): its closing filemark, a synchronising point, must wait for the bucket; killed
	# before it is acknowledged, the archive may be lost or survive, never differ
	T1DEV=${DRV_NST[1]:-} PTAG="" PACK="" PPID_=""
	make_tree "$W/pt" 6 512
	tar -b 512 -cf "$W/p.tar" -C "$W/pt" .
	rm -f "$W/p.rc"
	if [ -z "$T1DEV" ] || ! ensure_loaded 1 4 || ! run mt -f "$T1DEV" setblk 0 || ! run mt -f "$T1DEV" rewind; then
		not_ok "bucket: slot 4 loaded in drive 1 and rewound" "drive 1 '$T1DEV', rc $RUN_RC: $(last_line "$RUN_OUT")"
	elif ! host_do s3-pause 60; then
		not_ok "bucket: the host's s3-pause (SIGSTOP versitygw) succeeded" "see run.sh's hooks.log"
	else
		PTAG=$(lib_st | st_drive_tag 1)
		(
			timeout 600 dd if="$W/p.tar" of="$T1DEV" bs=256k 2>"$W/p.err"
			echo $? >"$W/p.rc"
		) &
		PPID_=$!
		for _ in $(seq 1 40); do [ -f "$W/p.rc" ] && break; sleep 0.5; done
		if [ -f "$W/p.rc" ]; then
			PACK=$(cat "$W/p.rc")
			not_ok "bucket: with the bucket unreachable, a synchronising filemark is not acknowledged (durability = bucket)" \
				"dd of $(fsize "$W/p.tar") bytes to $PTAG ended with rc $PACK within 20 s" "$(cat "$W/p.err")"
		else
			ok "bucket: $PTAG: versitygw stopped, dd of a $(fsize "$W/p.tar") byte tar archive to $T1DEV is still waiting after 20 s (its closing filemark waits for the bucket)"
		fi
	fi
	if restart_and_recover recover-target "bucket"; then
		S=$(lib_st)
		printf '%s\n' "$S" >"$ART/mtx-status-recovered.txt"
		if [ -n "$PPID_" ]; then
			# the dd blocked at the kill ends (with an error) once the session is back
			for _ in $(seq 1 120); do [ -f "$W/p.rc" ] && break; sleep 0.5; done
			diag "bucket: the dd to $PTAG blocked at the kill: $([ -f "$W/p.rc" ] && echo "rc $(cat "$W/p.rc")" || echo "still running after 60 s"); $(grep -E 'error|cannot' "$W/p.err" | head -n 1)"
		fi
		if [ "$(st_tag 1 <<<"$S")" = "${BTAG[1]}" ] && [ "$(st_tag 2 <<<"$S")" = "${BTAG[2]}" ] && [ "$(st_drive_tag 0 <<<"$S")" = "${BTAG[3]}" ]; then
			ok "bucket: mtx status on the recovered node: ${BTAG[1]} in slot 1, ${BTAG[2]} in slot 2, ${BTAG[3]} in drive 0"
		else
			not_ok "bucket: the recovered inventory: ${BTAG[1]} in slot 1, ${BTAG[2]} in slot 2, ${BTAG[3]} in drive 0" \
				"slot 1 '$(st_tag 1 <<<"$S")', slot 2 '$(st_tag 2 <<<"$S")', $(st_drive 0 <<<"$S")"
		fi
		for s in 1 2 3; do
			t0=$(now)
			why=""
			# where it is: in drive 0 already (slot 3), or in its slot (or wherever the inventory put it)
			if [ "$(lib_st | st_drive_tag 0)" != "${BTAG[s]}" ]; then
				unload_drive 0
				from=$(lib_st | st_slot_of "${BTAG[s]}")
				if [ -z "$from" ] || ! run mtx -f "$CH" load "$from" 0; then why="load ${BTAG[s]} (slot '$from'): rc $RUN_RC $(last_line "$RUN_OUT")"; fi
			fi
			[ -z "$why" ] && ! wait_online "$T0DEV" 60 && why="$T0DEV not ONLINE: $(mt_status "$T0DEV" | tail -n 1)"
			[ -z "$why" ] && ! pair_check "$T0DEV" "$W/mb$s" "$W/bd$s" "${BSHA[s]}" && why=$PAIR_WHY
			if [ -z "$why" ]; then
				ok "bucket: ${BTAG[s]} on the recovered node: the tar archive extracts identical, the dd file reads back identical (sha256 ${BSHA[s]:0:16}, $(elapsed "$t0") s)"
			else
				not_ok "bucket: ${BTAG[s]} reads back identical on the recovered node" "$why" "$(dmesg | tail -n 3)"
			fi
		done
		# the recovered node takes new data: an archive appended at file 2 of slot 3's cartridge
		make_tree "$W/b4" 4 256
		manifest "$W/b4" >"$W/mb4"
		if run mt -f "$T0DEV" rewind && run mt -f "$T0DEV" fsf 2 && tar_write "$T0DEV" "$W/b4" &&
			run mt -f "$T0DEV" rewind && run mt -f "$T0DEV" fsf 2 && tar_check "$T0DEV" "$W/mb4"; then
			ok "bucket: the recovered node is writable: an archive appended at file 2 of $(lib_st | st_drive_tag 0) reads back identical"
		else
			not_ok "bucket: an archive appended on the recovered node reads back" "rc $RUN_RC: $(last_line "$RUN_OUT"); $TC_WHY"
		fi
		unload_drive 0
		if [ -n "$PTAG" ] && [ -f "$W/p.rc" ]; then
			why="" what=""
			if [ "$(lib_st | st_drive_tag 1)" != "$PTAG" ]; then
				unload_drive 1
				from=$(lib_st | st_slot_of "$PTAG")
				if [ -z "$from" ] || ! run mtx -f "$CH" load "$from" 1; then why="load $PTAG (slot '$from'): rc $RUN_RC $(last_line "$RUN_OUT")"; fi
			fi
			[ -z "$why" ] && ! wait_online "$T1DEV" 60 && why="$T1DEV not ONLINE: $(mt_status "$T1DEV" | tail -n 1)"
			if [ -z "$why" ]; then
				run mt -f "$T1DEV" rewind
				tape_read "$T1DEV" "$W/p.back" bs=256k
				n=$(fsize "$W/p.tar")
				if [ "$PACK" = 0 ] && ! cmp -s "$W/p.tar" "$W/p.back"; then
					why="acknowledged (dd rc 0) but $RD_BYTES of $n bytes read back ($RD_ERR)"
				elif [ "$RD_BYTES" = 0 ]; then
					what="lost: nothing at the beginning of the tape (${RD_ERR:-rc $RD_RC})"
				elif cmp -s -n "$RD_BYTES" "$W/p.tar" "$W/p.back"; then
					what="$RD_BYTES of $n bytes survived, equal to what was written"
				else
					why="$RD_BYTES bytes read, $(cmp "$W/p.tar" "$W/p.back" 2>&1 | head -n 1)"
				fi
			fi
			if [ -z "$why" ]; then
				ok "bucket: $PTAG, killed while its filemark waited for the bucket: $what"
			else
				not_ok "bucket: $PTAG (written while the bucket was unreachable) holds nothing or what was written" "$why"
			fi
			unload_drive 1
		elif [ -n "$PTAG" ]; then
			not_ok "bucket: the dd to $PTAG blocked at the kill ended after the recovery" "still running 60 s after the session came back" "$(dmesg | tail -n 3)"
		fi
	else
		skip "bucket: the recovered inventory" "no session"
		for s in 1 2 3; do skip "bucket: ${BTAG[s]} reads back on the recovered node" "no session"; done
		skip "bucket: the recovered node is writable" "no session"
	fi
	rm -rf "$W"/b[1-4] "$W"/bd[1-3] "$W/pt" "$W"/p.*
fi

# =============================================================================
# two nodes on one bucket: login redirection and failover to the standby
# =============================================================================
# the portals of a session's connection: "current persistent" (iscsiadm -m session -P 1)
session_portals() {
	iscsiadm -m session -r "$1" -P 1 2>/dev/null | awk '
		/Current Portal:/ { c = $3 } /Persistent Portal:/ { p = $3 }
		END { sub(/,.*/, "", c); sub(/,.*/, "", p); print c, p }'
}
if [ "$MODE" = full ] && [ "$CLUSTER_MODE" = 1 ] && want cluster; then
	section cluster "node A serves, node B (standby) redirects, A is killed, B takes over"
	read -r CUR PER <<<"$(session_portals "$LIB_SID")"
	if [ "$CUR" = "$CLUSTER_OWNER_PORTAL" ] && [ "$PER" = "$P" ]; then
		ok "cluster: the login at node B's portal ($P) was redirected to the lease holder, node A ($CUR)"
	else
		not_ok "cluster: the login at node B's portal is redirected to node A ($CLUSTER_OWNER_PORTAL)" \
			"session $LIB_SID: current portal '$CUR', persistent portal '$PER'"
	fi
	for d in $(seq 0 $((LIB_DRIVES - 1))); do unload_drive "$d"; done
	S=$(lib_st)
	CTAG=$(st_tag 1 <<<"$S")
	make_tree "$W/c1" 8 768
	manifest "$W/c1" >"$W/mc1"
	head -c $((3 * 1048576)) /dev/urandom >"$W/cd1"
	CSHA=$(sha "$W/cd1")
	t0=$(now)
	why=""
	if ! ensure_loaded 0 1; then
		why="load slot 1: rc $RUN_RC $(last_line "$RUN_OUT")"
	else
		pair_write "$T0DEV" "$W/c1" "$W/cd1" || why=$PAIR_WHY
		# a rewind is a synchronising point: at durability "bucket" the data is in the bucket
		run mt -f "$T0DEV" rewind || why="${why:-rewind rc $RUN_RC}"
	fi
	if [ -z "$why" ]; then
		ok "cluster: $CTAG written through node A: a tar archive ($(tar_bytes "$W/c1") bytes) and a dd file ($(fsize "$W/cd1") bytes), rewound ($(elapsed "$t0") s)"
	else
		not_ok "cluster: $CTAG written through node A" "$why" "$(dmesg | tail -n 3)"
	fi
	# the cartridge back to its slot and the session closed: the initiator logs in afresh
	# through node B's portal once B holds the store
	unload_drive 0
	run iscsiadm -m node -T "$LIB_IQN" -p "$P" --logout
	t0=$(now)
	host_do failover-target 240
	hrc=$?
	if [ "$hrc" = 0 ]; then
		ok "cluster: node A killed; node B took the store over when A's lease expired ($(elapsed "$t0") s)"
	else
		not_ok "cluster: node B takes over once node A is killed" "host_do failover-target returned $hrc (see hooks.log, target-b.log)"
	fi
	t0=$(now)
	why=""
	if login "$LIB_IQN" && LIB_SID=$(sid_of "$LIB_IQN") && attach "$LIB_SID" "$LIB_DRIVES" 30; then
		CH=$ATT_CH
		LIB_TAPES=$ATT_TAPES
		read -r CUR PER <<<"$(session_portals "$LIB_SID")"
		if [ "$CUR" = "$P" ]; then
			ok "cluster: a new login at node B's portal is served by node B itself, no redirect ($(elapsed "$t0") s)"
		else
			not_ok "cluster: after the failover node B serves the login" "current portal '$CUR', persistent '$PER'"
		fi
		from=$(lib_st | st_slot_of "$CTAG")
		if [ -z "$from" ] || ! run mtx -f "$CH" load "$from" 0; then
			why="load $CTAG (slot '$from'): rc $RUN_RC $(last_line "$RUN_OUT")"
		elif ! T0DEV=$(online_one $LIB_TAPES); then
			why="no single tape device ONLINE after loading $CTAG"
		fi
		[ -z "$why" ] && ! pair_check "$T0DEV" "$W/mc1" "$W/cd1" "$CSHA" && why=$PAIR_WHY
		if [ -z "$why" ]; then
			ok "cluster: $CTAG, written through node A, reads back identical through node B: the tar archive and the dd file (sha256 ${CSHA:0:16}, $(elapsed "$t0") s)"
		else
			not_ok "cluster: $CTAG reads back identical through node B" "$why" "$(dmesg | tail -n 3)"
		fi
	else
		not_ok "cluster: login at node B's portal after the failover" "iscsiadm rc $RUN_RC: $(last_line "$RUN_OUT")"
		skip "cluster: $CTAG reads back through node B" "no session"
	fi
	rm -rf "$W/c1" "$W/cd1" "$W/cd1.back"
fi

# =============================================================================
# partitions
# =============================================================================
# read_position SG: "partition first-block" from READ POSITION short form
read_position() {
	local l
	l=$(timeout 30 sg_raw -r 20 "$1" 34 00 00 00 00 00 00 00 00 00 2>&1 | grep -m1 -E '^ *00 ')
	# shellcheck disable=SC2086
	set -- $l
	[ $# -ge 9 ] && echo "$((16#$3)) $((16#$6$7$8$9))"
}
if [ "$MODE" = full ] && want partition; then
	section partition "mt mkpartition / setpartition on an LTO drive"
	ensure_loaded 0 7
	PTAG=$(lib_st | st_drive_tag 0)
	run mt -f "$T0DEV" setblk 0
	run mt -f "$T0DEV" stsetoptions can-partitions
	run mt -f "$T0DEV" rewind
	make_tree "$W/p0" 4 512
	make_tree "$W/p1" 6 512
	manifest "$W/p0" >"$W/mp0"
	manifest "$W/p1" >"$W/mp1"
	PB1=$(($(tar_bytes "$W/p1") / 262144))
	m=$(dmesg_mark)
	run mt -f "$T0DEV" mkpartition 1000
	mk_rc=$RUN_RC mk_out=$RUN_OUT
	PARTED=0
	if [ "$mk_rc" = 0 ] && run mt -f "$T0DEV" setpartition 1 && [ "$(mt_part "$T0DEV")" = 1 ]; then
		ok "mt mkpartition 1000 on $PTAG, mt setpartition 1: mt status shows partition=1"
		PARTED=1
	else
		not_ok "mt mkpartition 1000, setpartition 1: mt status shows partition=1" "mkpartition rc $mk_rc: $mk_out" \
			"setpartition rc $RUN_RC: $(last_line "$RUN_OUT")" "$(dmesg_since "$m" 6)"
		# Go on with the drive partitioned directly, to check the rest: MODE SELECT
		# of the medium partition page as the drive reports it (14 bytes, partition
		# 0 = the rest, partition 1 = 1 GB), then FORMAT MEDIUM (partition).
		run sg_modes -p 0x11 "${DRV_SG[0]}"
		diag_block "medium partition page before (sg_modes):" "$(grep -A1 'Medium Partition' <<<"$RUN_OUT")"
		printf '\x00\x00\x10\x08\x00\x00\x00\x00\x00\x00\x00\x00\x11\x0e\x03\x01\x3c\x03\x09\x00\xff\xff\x00\x01\x00\x00\x00\x00' >"$W/part.sel"
		run sg_raw -s 28 -i "$W/part.sel" "${DRV_SG[0]}" 15 10 00 00 1c 00
		sel_rc=$RUN_RC sel_out=$RUN_OUT
		run sg_raw "${DRV_SG[0]}" 04 00 01 00 00 00
		fmt_rc=$RUN_RC fmt_out=$RUN_OUT
		if [ "$sel_rc" = 0 ] && [ "$fmt_rc" = 0 ] && run mt -f "$T0DEV" setpartition 1 && [ "$(mt_part "$T0DEV")" = 1 ]; then
			diag "partitioned with sg_raw MODE SELECT (page length 0Eh) + FORMAT MEDIUM instead; the checks below use that"
			PARTED=1
		else
			diag "partitioning by MODE SELECT + FORMAT MEDIUM failed too: select rc $sel_rc ($(last_line "$sel_out")), format rc $fmt_rc ($(last_line "$fmt_out"))"
		fi
	fi
	run sg_modes -p 0x11 "${DRV_SG[0]}"
	diag_block "medium partition page now (sg_modes):" "$(grep -A1 'Medium Partition' <<<"$RUN_OUT")"
fi
if [ "$MODE" = full ] && want partition && [ "$PARTED" = 0 ]; then
	skip "partition 1: archive written, mt status / tell / READ POSITION" "the cartridge could not be partitioned"
	skip "partition 1: reads back after writing partition 0" "the cartridge could not be partitioned"
	skip "partition 0: reads back" "the cartridge could not be partitioned"
	run mt -f "$T0DEV" stclearoptions can-partitions
	unload_drive 0
elif [ "$MODE" = full ] && want partition; then
	if tar_write "$T0DEV" "$W/p1"; then
		pos=$(mt_pos "$T0DEV")
		part=$(mt_part "$T0DEV")
		tell=$(mt_tell "$T0DEV")
		rp=$(read_position "${DRV_SG[0]}")
		if [ "$pos" = 1:0 ] && [ "$part" = 1 ] && [ "$tell" = $((PB1 + 1)) ] && [ "$rp" = "1 $((PB1 + 1))" ]; then
			ok "partition 1: archive written; mt status file 1 block 0 partition=1, mt tell $tell, READ POSITION partition 1 block $tell"
		else
			not_ok "partition 1: after the archive mt status shows partition=1, tell = blocks + 1" \
				"mt status '$pos' partition '$part', tell '$tell' (want $((PB1 + 1))), READ POSITION 'partition block' = '$rp'"
		fi
	else
		not_ok "partition 1: tar archive written" "rc $RUN_RC" "$RUN_OUT"
	fi
	p0ok=0
	if run mt -f "$T0DEV" setpartition 0 && run mt -f "$T0DEV" seek 0 && [ "$(mt_part "$T0DEV")" = 0 ] && tar_write "$T0DEV" "$W/p0"; then
		p0ok=1
	fi
	p0why="rc $RUN_RC: $(last_line "$RUN_OUT")"
	if run mt -f "$T0DEV" setpartition 1 && run mt -f "$T0DEV" seek 0 && [ "$(mt_part "$T0DEV")" = 1 ] && tar_check "$T0DEV" "$W/mp1"; then
		ok "partition 1: after writing partition 0, setpartition 1 + seek 0: the archive reads back identical"
	else
		not_ok "partition 1: setpartition 1 + seek 0, the archive reads back" "rc $RUN_RC: $(last_line "$RUN_OUT"); partition '$(mt_part "$T0DEV")'; $TC_WHY"
	fi
	if [ "$p0ok" = 1 ] && run mt -f "$T0DEV" setpartition 0 && run mt -f "$T0DEV" seek 0 && tar_check "$T0DEV" "$W/mp0"; then
		ok "partition 0: its own archive reads back identical (partitions are independent)"
	else
		not_ok "partition 0: an archive written there reads back" "write: $p0why; read: rc $RUN_RC $TC_WHY"
	fi
	run mt -f "$T0DEV" stclearoptions can-partitions
	unload_drive 0
fi

# =============================================================================
# Bacula btape, Amanda amtapetype
# =============================================================================
# bacula_conf FILE DEVICE CHANGER DRIVE-INDEX AUTOCHANGER(yes|no) [MAX-BLOCK-SIZE]
bacula_conf() {
	local mbs=""
	[ -n "${6:-}" ] && mbs="Maximum Block Size = $6"
	mkdir -p /tmp/bacula-wd
	cat >"$1" <<EOF
Storage {
  Name = reel-vm-sd
  WorkingDirectory = /tmp/bacula-wd
  Pid Directory = /tmp/bacula-wd
  Maximum Concurrent Jobs = 1
  SDAddress = 127.0.0.1
}
Director {
  Name = reel-vm-dir
  Password = "not-used"
}
Device {
  Name = reel-lto
  Media Type = LTO
  Archive Device = $2
  Device Type = Tape
  AutomaticMount = yes
  AlwaysOpen = yes
  RemovableMedia = yes
  RandomAccess = no
  $mbs
  Autochanger = $5
  Changer Device = $3
  Drive Index = $4
  Changer Command = "/etc/bacula/scripts/mtx-changer %c %o %S %a %d"
}
Messages {
  Name = Standard
  console = all
}
EOF
	# Bacula changes volumes by itself (btape fill) only through an Autochanger
	# resource; a Device with "Autochanger = yes" alone is enough for btape auto
	[ "$5" = yes ] && cat >>"$1" <<EOF
Autochanger {
  Name = reel-changer
  Device = reel-lto
  Changer Device = $3
  Changer Command = "/etc/bacula/scripts/mtx-changer %c %o %S %a %d"
}
EOF
	return 0
}
# Amanda's amtapetype -c writes for a fixed time (60 s of random data, then as
# much compressible data), then compares the rates.  (Run next to btape on
# another drive it saved nothing here: the guest is CPU-bound.)
AMT_DRIVE=0 AMT_PID=""
amtapetype_start() {
	local dev=${DRV_NST[$AMT_DRIVE]:-}
	rm -f "$W/amt.rc"
	if [ -z "$dev" ] || ! ensure_loaded "$AMT_DRIVE" 8; then
		echo "255 0 no-drive" >"$W/amt.rc"
		return
	fi
	run mt -f "$dev" rewind
	# Amanda's tools run as its dump user (backup); no udev here to set modes
	chmod 0666 "$dev" "${dev/nst/st}"
	(
		t0=$(now)
		timeout 600 su -s /bin/sh backup -c "amtapetype -c -f -b 256k tape:$dev" >"$ART/amtapetype.log" 2>&1
		echo "$? $(elapsed "$t0") $dev" >"$W/amt.rc"
	) &
	AMT_PID=$!
}
amtapetype_finish() {
	local arc secs dev L=$ART/amtapetype.log
	[ -n "$AMT_PID" ] && wait "$AMT_PID"
	read -r arc secs dev <"$W/amt.rc"
	if [ "$arc" = 0 ] && grep -q "^Compression: " "$L"; then
		rates=$(tr '\r' '\n' <"$L" | awk '/^ *Wrote random/ { r = $(NF - 1) } /^ *Wrote fixed/ { f = $(NF - 1) } END { printf "random %.1f MB/s, compressible %.1f MB/s", r / 1e6, f / 1e6 }')
		ok "amtapetype -c -f -b 256k on $dev: exit 0, '$(grep -m1 '^Compression: ' "$L")' ($rates; $secs s)"
	else
		not_ok "amtapetype -c -f -b 256k exits 0 and reports compression" "rc $arc on '$dev'" "$(tail -c 600 "$L" | tr '\r' '\n' | tail -n 5)"
	fi
	unload_drive "$AMT_DRIVE"
}
if [ "$MODE" = full ] && want btape; then
	section btape "Bacula btape test and auto"
	ensure_loaded 0 1
	run mt -f "$T0DEV" rewind
	bacula_conf "$W/bacula-sd.conf" "$T0DEV" "$CH" 0 no
	L=$ART/btape-test.log
	t0=$(now)
	printf 'test\nquit\n' | timeout "$BTAPE_TIMEOUT" btape -c "$W/bacula-sd.conf" "$T0DEV" >"$L" 2>&1
	brc=$?
	bsecs=$(elapsed "$t0")
	echo "[$t0] btape test on $T0DEV: rc $brc in $bsecs s (log $L)" >>"$REEL_VM_OUT/commands.log"
	diag "btape test: rc $brc in $bsecs s; log tape/btape-test.log"
	diag_block "btape test, key lines:" "$(grep -E '^=== |correct|[Ff]ailed|ERR=|please add|Unable' "$L" | head -n 15)"
	n=$(grep -c "blocks re-read correctly" "$L")
	if [ "$n" -ge 2 ]; then
		ok "btape test: write, rewind, re-read (2 files, $(grep -m1 -o 'Wrote [0-9]* blocks of [0-9]* bytes' "$L"), all re-read correctly)"
	else
		not_ok "btape test: write, rewind, re-read" "$n of 2 files re-read correctly" "$(grep -E 'ERR=|Read block|Bad' "$L" | head -n 3)"
	fi
	n=$(grep -cE "^Block [0-9]+ re-read correctly" "$L")
	if [ "$n" -ge 6 ]; then
		ok "btape test: block positioning test ($n repositioned reads correct)"
	else
		not_ok "btape test: block positioning test" "$n repositioned reads correct (want 6)" "$(grep -E 'Reposition|ERR=' "$L" | head -n 3)"
	fi
	line=$(grep -m1 "We should be in file 3" "$L")
	if grep -q "This is correct" <<<"$line"; then
		ok "btape test: append test with Hardware End of Medium (MTEOM): '$line'"
	else
		not_ok "btape test: append test with Hardware End of Medium (MTEOM)" "${line:-not reached}"
	fi
	if grep -q "=== Forward space files test ===" "$L" && ! sed -n '/=== Forward space files test ===/,$p' "$L" | grep -q "NOT correct"; then
		ok "btape test: forward space files test ($(sed -n '/=== Forward space files test ===/,$p' "$L" | grep -c 'This is correct') positions correct)"
	else
		not_ok "btape test: forward space files test" "$(grep -c '=== Forward space files test ===' "$L") runs, $(grep -c 'NOT correct' "$L") wrong positions"
	fi
	bad=$(grep -cE "Test failed|Unable to correct|NOT correct|ERR=" "$L")
	if [ "$brc" = 0 ] && [ "$bad" = 0 ]; then
		ok "btape test: the whole run is clean, exit 0 ($bsecs s)"
	else
		not_ok "btape test: the whole run is clean, exit 0" "rc $brc, $bad problem lines" "$(grep -E 'Test failed|Unable to correct|NOT correct|ERR=' "$L" | head -n 4)"
	fi
	# btape auto: the autochanger test through Bacula's mtx-changer (slot 1)
	bacula_conf "$W/bacula-sd-ac.conf" "$T0DEV" "$CH" 0 yes
	L=$ART/btape-auto.log
	t0=$(now)
	printf 'auto\ny\nquit\n' | timeout "$BTAPE_TIMEOUT" btape -c "$W/bacula-sd-ac.conf" "$T0DEV" >"$L" 2>&1
	brc=$?
	if grep -q "The test autochanger worked" "$L"; then
		ok "btape auto: the autochanger test worked ($(grep -c 'Issuing autochanger' "$L") changer commands, $(elapsed "$t0") s)"
	else
		not_ok "btape auto: the autochanger test works" "rc $brc" "$(grep -E 'ERR=|Fatal|[Ff]ailed|Bad autochanger' "$L" | head -n 4)"
	fi
	diag_block "btape auto, changer lines:" "$(grep -E 'autochanger|Issuing' "$L" | head -n 8)"
fi
if [ "$MODE" = full ] && want amtapetype; then
	section amtapetype "Amanda amtapetype -c"
	amtapetype_start
	amtapetype_finish
fi

# =============================================================================
# early warning, end of medium, next cartridge (btape fill)
# =============================================================================
if [ "$MODE" = full ] && want fill; then
	section fill "early warning and end of medium on small cartridges; btape fill across two"
	node_new "$FILL_IQN"
	if login "$FILL_IQN" && FSID=$(sid_of "$FILL_IQN") && attach "$FSID" 1 30; then
		FCH=$ATT_CH
		FDEV=${ATT_TAPES%% *}
		S=$(mtx_status "$FCH")
		printf '%s\n' "$S" >"$ART/mtx-status-fill.txt"
		F1=$(st_tag 1 <<<"$S") F2=$(st_tag 2 <<<"$S") F3=$(st_tag 3 <<<"$S")
		diag "fill library: changer $FCH, drive $FDEV; slot 1 $F1, slot 2 $F2, slot 3 $F3 ($TINY_CAP_MB MiB)"
		# st at early warning: dd to the tiny cartridge ends with ENOSPC
		if [ -n "$F3" ] && run mtx -f "$FCH" load 3 0 && wait_online "$FDEV" 60; then
			run mt -f "$FDEV" setblk 0
			run mt -f "$FDEV" rewind
			head -c $(((TINY_CAP_MB + 8) * 1048576)) /dev/urandom >"$W/ew"
			tape_write "$FDEV" "$W/ew" bs=256k
			nw=$(sed -n 's/^\([0-9]*\) bytes.*copied.*/\1/p' "$W/ddw.err" | tail -n 1)
			nw=${nw:-0}
			if [ "$WR_RC" != 0 ] && grep -q "No space left on device" "$W/ddw.err" && [ "$nw" -gt $((TINY_CAP_MB * 1048576 / 2)) ] && [ "$nw" -le $((TINY_CAP_MB * 1048576 + 1048576)) ]; then
				ok "early warning: dd to $F3 ($TINY_CAP_MB MiB) stops with ENOSPC after $nw bytes"
			else
				not_ok "early warning: dd to a $TINY_CAP_MB MiB cartridge stops with ENOSPC near its capacity" "rc $WR_RC, $nw bytes" "$(cat "$W/ddw.err")" "$(dmesg | tail -n 3)"
			fi
			run mt -f "$FDEV" rewind
			tape_read "$FDEV" "$W/ew.back" bs=256k
			if [ "$RD_BYTES" -ge "$nw" ] && [ "$RD_BYTES" -le $((nw + 262144)) ] && cmp -s -n "$RD_BYTES" "$W/ew" "$W/ew.back"; then
				ok "early warning: the $RD_BYTES bytes written up to it read back identical (${RD_ERR:-rc $RD_RC})"
			else
				not_ok "early warning: what was written up to it reads back" "$RD_BYTES bytes read for $nw written, rc $RD_RC: $RD_ERR" "$(cmp "$W/ew" "$W/ew.back" 2>&1 | head -n 1)"
			fi
			rm -f "$W/ew" "$W/ew.back"
			run mt -f "$FDEV" offline
			run mtx -f "$FCH" unload 3 0
		else
			not_ok "early warning: load the tiny cartridge of slot 3" "slot 3 '$F3', rc $RUN_RC: $RUN_OUT"
		fi
		# btape fill, multiple tape test: slots 1 and 2 through mtx-changer
		# btape opens the drive at start (a medium must be there): slot 1 goes in
		run mtx -f "$FCH" load 1 0 && wait_online "$FDEV" 60
		bacula_conf "$W/bacula-fill.conf" "$FDEV" "$FCH" 0 yes "$FILL_BLOCK"
		L=$ART/btape-fill.log
		t0=$(now)
		# "m": the multiple tape test.  Bacula should never ask for a tape here;
		# if it does ("... press return when ready"), nobody answers and the
		# watchdog below ends btape after the third prompt.
		printf 'fill\nm\nquit\n' | timeout "$FILL_TIMEOUT" btape -c "$W/bacula-fill.conf" "$FDEV" >"$L" 2>&1 &
		fpid=$!
		while kill -0 "$fpid" 2>/dev/null; do
			if [ "$(grep -c 'press return when ready' "$L")" -ge 3 ]; then
				diag "btape fill keeps asking for a tape: stopped"
				kill "$fpid" 2>/dev/null
				break
			fi
			sleep 2
		done
		wait "$fpid"
		frc=$?
		fsecs=$(elapsed "$t0")
		echo "[$t0] btape fill on $FDEV: rc $frc in $fsecs s (log $L)" >>"$REEL_VM_OUT/commands.log"
		diag "btape fill: rc $frc in $fsecs s; log tape/btape-fill.log"
		diag_block "btape fill, key lines:" "$(grep -E 'End of Volume|End of medium|Issuing autochanger|status is OK|Wrote Volume label|Wrote 1000|Done filling|matches|succeeded|ERR=|Error|[Ff]atal|Mount' "$L" | cut -c1-150 | head -n 15)"
		eov=$(grep -m1 'End of medium on Volume "TestVolume1"' "$L")
		if grep -q 'End of Volume "TestVolume1"' "$L" && [ -n "$eov" ]; then
			ok "btape fill: the first cartridge ($F1, $FILL_CAP_MB MiB) filled up: $(sed 's/.*End of medium on Volume/End of medium on Volume/' <<<"$eov" | cut -c1-90)"
		else
			not_ok "btape fill: the first cartridge filled up (End of Volume / End of medium on TestVolume1)" "rc $frc" "$(tail -n 6 "$L")"
		fi
		if grep -qE 'Issuing autochanger "unload.*Slot 1, Drive 0"' "$L" && grep -qE 'Autochanger "load.*Slot 2, Drive 0", status is OK' "$L" &&
			grep -q 'Wrote Volume label for volume "TestVolume2"' "$L" && ! grep -q 'press return when ready' "$L"; then
			ok "btape fill: the autochanger swapped to slot 2 ($F2), labelled TestVolume2"
		else
			not_ok "btape fill: the autochanger swapped to slot 2 and labelled TestVolume2" "$(grep -E 'autochanger|Mount|TestVolume2' "$L" | head -n 4)"
		fi
		if grep -q "Wrote 1000 blocks on second tape" "$L" && grep -q "Done filling tapes" "$L"; then
			ok "btape fill: 1000 blocks written on the second cartridge, $(grep -m1 -o 'Wrote state file.*' "$L")"
		else
			not_ok "btape fill: 1000 blocks written on the second cartridge" "$(grep -E 'Error|ERR=|Not OK|canceled' "$L" | head -n 4)"
		fi
		if grep -q "The last block of the first tape matches" "$L"; then
			ok "btape fill: re-read: the last block of the first cartridge matches"
		else
			not_ok "btape fill: re-read: the last block of the first cartridge matches" "$(grep -E 'Reposition|Reading|records read|ERR=' "$L" | head -n 4)"
		fi
		if grep -q "The first block on the second tape matches" "$L" && grep -q "The last block on the second tape matches. Test succeeded" "$L" && [ "$frc" = 0 ]; then
			ok "btape fill: re-read: first and last block of the second cartridge match, test succeeded ($fsecs s)"
		else
			not_ok "btape fill: re-read of the second cartridge, test succeeded, exit 0" "rc $frc" "$(grep -E 'second tape|Reposition|ERR=|Error' "$L" | tail -n 4)"
		fi
		run mtx -f "$FCH" status
		printf '%s\n' "$RUN_OUT" >>"$ART/mtx-status-fill.txt"
		logout "$FILL_IQN"
	else
		not_ok "fill: login to $FILL_IQN with a changer and a drive" "iscsiadm rc $RUN_RC: $(last_line "$RUN_OUT")" "$(lun_table "${FSID:-0}")"
	fi
	run iscsiadm -m node -o delete -T "$FILL_IQN" -p "$P"
fi

# =============================================================================
# every changer personality
# =============================================================================
chg_ident() {
	case $1 in
	ibm-3584) echo "IBM|03584L32" ;;
	stk-l700) echo "STK|L700" ;;
	stk-sl150) echo "STK|SL150" ;;
	hp-msl-g3) echo "HP|MSL G3 Series" ;;
	quantum-scalar-i6000) echo "QUANTUM|Scalar i6000" ;;
	hp-1x8-g2) echo "HP|1x8 G2 AUTOLDR" ;;
	*) echo "?|?" ;;
	esac
}
drv_ident() {
	local g
	case $1 in
	ibm-td?) echo "IBM|ULT3580-TD${1#ibm-td}" ;;
	ibm-td?-hh) g=${1#ibm-td} && echo "IBM|ULT3580-HH${g%-hh}" ;;
	hpe-ultrium[5-7]*) g=${1#hpe-ultrium} && echo "HP|Ultrium ${g%-hh}-SCSI" ;;
	hpe-ultrium[89]*) g=${1#hpe-ultrium} && echo "HPE|Ultrium ${g%-hh}-SCSI" ;;
	quantum-lto?) echo "QUANTUM|ULTRIUM-HH${1#quantum-lto}" ;;
	*) echo "?|?" ;;
	esac
}
if want changers && [ -n "$CHANGER_SPECS" ]; then
	section changers "every changer personality: login, INQUIRY, mtx status, load/unload"
	# all logins at once (each one's LUN scan takes a few seconds), then one by one
	for spec in $CHANGER_SPECS; do
		node_new "$IQN_BASE:${spec%%|*}"
	done
	for spec in $CHANGER_SPECS; do
		iqn=$IQN_BASE:${spec%%|*}
		(
			login "$iqn"
			echo "$RUN_RC $(last_line "$RUN_OUT")" >"$W/login-${spec%%|*}"
		) &
	done
	wait
	for spec in $CHANGER_SPECS; do
		IFS='|' read -r suffix model drive nd ns nie pfx ncart media <<<"$spec"
		iqn=$IQN_BASE:$suffix
		sid=""
		if ! { sid=$(sid_of "$iqn") && attach "$sid" "$nd" 30; }; then
			not_ok "$model: login to $iqn with a changer and $nd drive(s)" "iscsiadm: $(cat "$W/login-$suffix")" "$(lun_table "${sid:-0}")"
			skip "$model: mtx status" "no session"
			skip "$model: mtx load/unload" "no session"
			logout "$iqn"
			run iscsiadm -m node -o delete -T "$iqn" -p "$P"
			continue
		fi
		C=$ATT_CH
		want_c=$(chg_ident "$model")
		want_d=$(drv_ident "$drive")
		got_c=$(awk '$2 == 8 { $1 = $2 = $3 = $4 = ""; sub(/^ +/, ""); print; exit }' <<<"$ATT_TABLE")
		got_d=$(awk '$2 == 1 { $1 = $2 = $3 = $4 = ""; sub(/^ +/, ""); print }' <<<"$ATT_TABLE" | sort -u)
		ntapes=$(awk '$2 == 1' <<<"$ATT_TABLE" | wc -l)
		if [ "$got_c" = "$want_c" ] && [ "$got_d" = "$want_d" ] && [ "$ntapes" = "$nd" ]; then
			ok "$model: changer '${got_c/|/ }' at LUN 0 ($C), $nd drive(s) '${got_d/|/ }'"
		else
			not_ok "$model: changer '${want_c/|/ }' with $nd drive(s) '${want_d/|/ }'" "got changer '$got_c', drives '$got_d' x $ntapes" "$ATT_TABLE"
		fi
		run mtx -f "$C" status
		S=$RUN_OUT
		printf '%s\n' "$S" >"$ART/mtx-status-$model.txt"
		hdr=$(grep -m1 'Storage Changer' <<<"$S" | sed 's/^ *//')
		gd=$(grep -c '^Data Transfer Element' <<<"$S")
		gs=$(grep -Ec '^ *Storage Element [0-9]+:' <<<"$S")
		gi=$(grep -Ec '^ *Storage Element [0-9]+ IMPORT/EXPORT:' <<<"$S")
		gdf=$(grep -Ec '^Data Transfer Element [0-9]+:Full' <<<"$S")
		gfull=$(grep -Ec '^ *Storage Element [0-9]+( IMPORT/EXPORT)?:Full' <<<"$S")
		sfx=L${media#lto}
		badtags=""
		for i in $(seq 1 "$ncart"); do
			w=$(printf '%s%0*d%s' "$pfx" $((6 - ${#pfx})) "$i" "$sfx")
			[ "$(st_tag "$i" <<<"$S")" = "$w" ] || badtags="$badtags slot$i='$(st_tag "$i" <<<"$S")'(want $w)"
		done
		if [ "$RUN_RC" = 0 ] && [ "$gd" = "$nd" ] && [ "$gs" = "$ns" ] && [ "$gi" = "$nie" ] && [ "$gdf" = 0 ] && [ "$gfull" = "$ncart" ] && [ -z "$badtags" ]; then
			ok "$model: mtx status: $gd drive(s), $gs slots, $gi import/export, barcodes ${pfx}..$sfx in slots 1-$ncart [$hdr]"
		else
			not_ok "$model: mtx status: $nd drive(s), $ns slots, $nie import/export, $ncart barcodes ${pfx}..$sfx" \
				"rc $RUN_RC: drives $gd ($gdf full), slots $gs, import/export $gi, full $gfull; barcodes:${badtags:- ok}" "$S"
		fi
		w1=$(st_tag 1 <<<"$S")
		a="" b=""
		run mtx -f "$C" load 1 0 && a=$(mtx_status "$C" | st_drive_tag 0)
		lrc=$RUN_RC lout=$RUN_OUT
		run mtx -f "$C" unload 1 0 && b=$(mtx_status "$C" | st_tag 1)
		if [ -n "$w1" ] && [ "$a" = "$w1" ] && [ "$b" = "$w1" ]; then
			ok "$model: mtx load 1 0 puts $w1 in drive 0, mtx unload 1 0 puts it back"
		else
			not_ok "$model: mtx load 1 0 / unload 1 0 move $w1" "load rc $lrc ($lout): drive 0 '$a'; unload rc $RUN_RC ($RUN_OUT): slot 1 '$b'"
		fi
		logout "$iqn"
		run iscsiadm -m node -o delete -T "$iqn" -p "$P"
	done
fi
section_end

# =============================================================================
# leave the library tidy
# =============================================================================
if [ -n "$CH" ]; then
	for d in $(seq 0 $((LIB_DRIVES - 1))); do unload_drive "$d"; done
	lib_st >"$ART/mtx-status-final.txt"
fi
dmesg >"$ART/dmesg-end.log" 2>&1
diag "section times:$TIMES"
diag "tape-checks: $(elapsed "$T_SCRIPT") s in the guest"
tap_summary
