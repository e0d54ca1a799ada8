#!/bin/bash
# iSCSI acceptance checks, run INSIDE the test VM by run.sh (iscsi-test.sh
# drives it).  The target under test must offer (see iscsi-test.sh):
#   $BASE:open    no CHAP, one disk LUN (null or RAM disk) of >= DD_MB MiB
#   $BASE:chap    one-way CHAP reel-user / reel-secret-12
#   $BASE:mutual  the same plus target credentials reel-target / target-secret-1
#   $BASE:acl     only initiator $BASE:someone-else may log in
# and restart itself when the guest asks `host_do restart-target`.
#
# Tunables (run.sh --env): IQN_BASE (iqn.2026-11.org.reel.test), DD_MB (64),
# SMALL_DD_MB (16, for the digest and restart passes), REPLACEMENT_TIMEOUT
# (60), RESTART_HOOK_TIMEOUT (120), CMD_TIMEOUT (120 s per command).
# shellcheck disable=SC1090
. "$REEL_VM_LIB"

BASE=${IQN_BASE:-iqn.2026-11.org.reel.test}
T_OPEN=$BASE:open T_CHAP=$BASE:chap T_MUTUAL=$BASE:mutual T_ACL=$BASE:acl
CHAP_USER=reel-user CHAP_SECRET=reel-secret-12
TGT_USER=reel-target TGT_SECRET=target-secret-1
OTHER_INITIATOR=$BASE:someone-else
OTHER_IFACE=reel-other
P=$REEL_VM_PORTAL
DD_MB=${DD_MB:-64}
SMALL_DD_MB=${SMALL_DD_MB:-16}
REPLACEMENT_TIMEOUT=${REPLACEMENT_TIMEOUT:-60}
ISCSID_LOG=$REEL_VM_OUT/iscsid.log

# --- helpers ---------------------------------------------------------------------
log_mark() { wc -c <"$ISCSID_LOG" 2>/dev/null || echo 0; }
log_since() { tail -c +"$(($1 + 1))" "$ISCSID_LOG" 2>/dev/null | grep -v "^$" | tail -n "${2:-8}"; }
dmesg_mark() { dmesg | wc -l; }
dmesg_since() { dmesg | tail -n +"$(($1 + 1))" | tail -n "${2:-8}"; }

# node_new TARGET [IFACE]: a node record with the guest-side portal.  The
# target's SendTargets answer names its own address (127.0.0.1 as seen on
# the host), which is not reachable from the guest, so discovery results are
# never used as node records.
node_new() {
	local t=$1 ifc=${2:-default}
	run iscsiadm -m node -o delete -T "$t" -p "$P" -I "$ifc"
	run iscsiadm -m node -o new -T "$t" -p "$P" -I "$ifc" || return 1
	node_set "$t" node.session.timeo.replacement_timeout "$REPLACEMENT_TIMEOUT" "$ifc"
	# fail fast when the portal does not answer instead of 8 retries
	node_set "$t" node.session.initial_login_retry_max 2 "$ifc"
	node_set "$t" node.conn[0].timeo.login_timeout 15 "$ifc"
}
node_set() { run iscsiadm -m node -T "$1" -p "$P" -I "${4:-default}" -o update -n "$2" -v "$3"; }
node_chap() { # TARGET USER SECRET [TUSER TSECRET]
	node_set "$1" node.session.auth.authmethod CHAP
	node_set "$1" node.session.auth.username "$2"
	node_set "$1" node.session.auth.password "$3"
	if [ -n "${4:-}" ]; then
		node_set "$1" node.session.auth.username_in "$4"
		node_set "$1" node.session.auth.password_in "$5"
	fi
}
node_del() { run iscsiadm -m node -o delete -T "$1" -p "$P" -I "${2:-default}"; }
login() { run iscsiadm -m node -T "$1" -p "$P" -I "${2:-default}" --login; }
logout() { run iscsiadm -m node -T "$1" -p "$P" -I "${2:-default}" --logout; }

# session_id TARGET: the sid of our session to TARGET ("" if none)
session_id() {
	local s
	for s in /sys/class/iscsi_session/session*; do
		[ -f "$s/targetname" ] || continue
		if [ "$(cat "$s/targetname")" = "$1" ]; then
			echo "${s##*/session}"
			return 0
		fi
	done
	return 1
}
# session_disk SID [WAIT]: "sdX sgN" of the first disk LUN of that session
session_disk() {
	local sid=$1 wait=${2:-20} d b g deadline
	deadline=$(($(cut -d. -f1 /proc/uptime) + wait))
	while :; do
		for d in /sys/class/iscsi_session/session"$sid"/device/target*/*:*:*:*; do
			[ -f "$d/type" ] && [ "$(cat "$d/type")" = 0 ] || continue
			b=$(ls "$d/block" 2>/dev/null | head -n 1)
			g=$(ls "$d/scsi_generic" 2>/dev/null | head -n 1)
			if [ -n "$b" ] && [ -n "$g" ] && [ -b "/dev/$b" ]; then
				echo "$b $g"
				return 0
			fi
		done
		[ "$(cut -d. -f1 /proc/uptime)" -ge "$deadline" ] && return 1
		sleep 0.2
	done
}
luns_of() { # SID: "H:C:T:L type" of every LUN, for diagnostics
	local d
	for d in /sys/class/iscsi_session/session"$1"/device/target*/*:*:*:*; do
		[ -f "$d/type" ] && echo "${d##*/} type $(cat "$d/type") $(cat "$d/vendor" "$d/model" 2>/dev/null | tr -s ' \n' ' ')"
	done
}
session_state() { cat "/sys/class/iscsi_session/session$1/state" 2>/dev/null; }

# dd_io DEV MB write|read: O_DIRECT transfer; sets DD_SUMMARY; ok when dd
# exits 0 and moved exactly MB MiB in whole records
DD_SUMMARY=""
dd_io() {
	local dev=$1 mb=$2 dir=$3 want=$(($2 * 1048576))
	if [ "$dir" = write ]; then
		run dd if=/dev/zero of="/dev/$dev" bs=1M count="$mb" oflag=direct conv=fsync
	else
		run dd if="/dev/$dev" of=/dev/null bs=1M count="$mb" iflag=direct
	fi
	local rc=$RUN_RC
	DD_SUMMARY=$(printf '%s\n' "$RUN_OUT" | grep 'copied' | tail -n 1)
	[ "$rc" = 0 ] || return 1
	printf '%s\n' "$RUN_OUT" | grep -q "^$mb+0 records" || return 1
	printf '%s\n' "$DD_SUMMARY" | grep -q "^$want bytes" || return 1
}
rate_of() { printf '%s\n' "$1" | sed -n 's/.*, \([0-9.,]* [kMG]B\/s\)$/\1/p'; }

# login_refused DESC TARGET [IFACE]: the login must fail; sets REFUSED_RC
# and REFUSED_WHY (the iscsid line that explains it)
REFUSED_RC="" REFUSED_WHY=""
login_attempt_fails() {
	local t=$1 ifc=${2:-default} m
	m=$(log_mark)
	login "$t" "$ifc"
	REFUSED_RC=$RUN_RC
	REFUSED_WHY=$(log_since "$m" | grep -iE 'login rejected|auth|not found|failed' | tail -n 2 | tr '\n' ' ')
	[ -z "$REFUSED_WHY" ] && REFUSED_WHY=$(printf '%s\n' "$RUN_OUT" | grep -i 'error' | tail -n 1)
	if [ "$REFUSED_RC" != 0 ]; then
		return 0
	fi
	# it logged in after all: do not leave the session behind
	logout "$t" "$ifc"
	return 1
}

T_SCRIPT=$(now)
diag "iscsi-checks: portal $P (host $REEL_VM_HOST_PORTAL), initiator $REEL_VM_INITIATOR, targets $BASE:{open,chap,mutual,acl}"

# --- 1, 2: discovery ---------------------------------------------------------------
t0=$(now)
run iscsiadm -m discovery -t sendtargets -p "$P" -o nonpersistent
disc_rc=$RUN_RC disc=$RUN_OUT
printf '%s\n' "$disc" >"$REEL_VM_OUT/discovery.txt"
diag_block "SendTargets as $REEL_VM_INITIATOR (rc $disc_rc, $(elapsed "$t0") s):" "$disc"
missing="" badportal=""
for t in "$T_OPEN" "$T_CHAP" "$T_MUTUAL"; do
	line=$(printf '%s\n' "$disc" | awk -v t="$t" '$2 == t' | head -n 1)
	if [ -z "$line" ]; then
		missing="$missing ${t##*:}"
		continue
	fi
	# "ADDRESS:PORT,TPGT IQN": the target must name the portal it listens on
	case "${line%% *}" in
	"$REEL_VM_HOST_PORTAL",* | "$P",*) ;;
	*) badportal="$badportal ${t##*:}=${line%% *}" ;;
	esac
done
if [ "$disc_rc" = 0 ] && [ -z "$missing" ] && [ -z "$badportal" ]; then
	ok "discovery: SendTargets lists open, chap and mutual at portal $REEL_VM_HOST_PORTAL"
else
	not_ok "discovery: SendTargets lists open, chap and mutual at portal $REEL_VM_HOST_PORTAL" \
		"iscsiadm rc $disc_rc; missing:${missing:- none}; wrong portal:${badportal:- none}" "$disc"
fi
if printf '%s\n' "$disc" | awk '{print $2}' | grep -qxF "$T_ACL"; then
	ACL_IN_DISCOVERY=listed
else
	ACL_IN_DISCOVERY=hidden
fi
diag "acl target in SendTargets for a non-allowed initiator: $ACL_IN_DISCOVERY"

# the acl target as seen by the initiator it allows (its own iface record)
run iscsiadm -m iface -I "$OTHER_IFACE" -o new
run iscsiadm -m iface -I "$OTHER_IFACE" -o update -n iface.initiatorname -v "$OTHER_INITIATOR"
run iscsiadm -m discovery -t sendtargets -p "$P" -I "$OTHER_IFACE" -o nonpersistent
disc2_rc=$RUN_RC disc2=$RUN_OUT
if [ "$disc2_rc" = 0 ] && printf '%s\n' "$disc2" | awk '{print $2}' | grep -qxF "$T_ACL"; then
	ok "discovery: SendTargets lists acl for the allowed initiator $OTHER_INITIATOR (all four targets offered)"
else
	not_ok "discovery: SendTargets lists acl for the allowed initiator $OTHER_INITIATOR" "iscsiadm rc $disc2_rc" "$disc2"
fi

# --- 3-9: plain login, INQUIRY, I/O, logout ------------------------------------------
node_new "$T_OPEN"
t0=$(now)
m=$(log_mark)
DISK="" SG=""
if login "$T_OPEN"; then
	sid=$(session_id "$T_OPEN")
	if [ -n "$sid" ] && read -r DISK SG < <(session_disk "$sid"); then
		sectors=$(cat "/sys/block/$DISK/size")
		ok "login: open without CHAP, disk /dev/$DISK (/dev/$SG, $((sectors / 2048)) MiB) in $(elapsed "$t0") s"
	else
		not_ok "login: open without CHAP shows a disk LUN" "logged in (sid ${sid:-?}) but no disk LUN within 20 s; LUNs:" \
			"$(luns_of "${sid:-0}")" "$(dmesg_since 0 | grep -i scsi | tail -n 5)"
	fi
else
	not_ok "login: open without CHAP" "iscsiadm rc $RUN_RC: $(printf '%s\n' "$RUN_OUT" | tail -n 2)" "$(log_since "$m")"
fi

if [ -n "$DISK" ]; then
	run sg_inq "/dev/$SG"
	inq=$RUN_OUT
	pdt=$(printf '%s\n' "$inq" | sed -n 's/.*PDT=\([0-9]*\).*/\1/p' | head -n 1)
	vendor=$(printf '%s\n' "$inq" | sed -n 's/^ *Vendor identification: *//p')
	product=$(printf '%s\n' "$inq" | sed -n 's/^ *Product identification: *//p')
	if [ "$RUN_RC" = 0 ] && [ "$pdt" = 0 ] && [ -n "$vendor$product" ]; then
		ok "sg_inq: standard INQUIRY, PDT 0 (disk), '$vendor' '$product'"
	else
		not_ok "sg_inq: standard INQUIRY says PDT 0 with vendor/product" "sg_inq rc $RUN_RC, PDT '${pdt}'" "$inq"
	fi

	run sg_inq -p 0x80 "/dev/$SG"
	sn=$(printf '%s\n' "$RUN_OUT" | sed -n 's/^ *Unit serial number: *//p' | head -n 1)
	if [ "$RUN_RC" = 0 ] && [ -n "$sn" ]; then
		ok "sg_inq -p 0x80: unit serial number '$sn'"
	else
		not_ok "sg_inq -p 0x80: unit serial number page" "sg_inq rc $RUN_RC" "$RUN_OUT"
	fi

	run sg_inq -p 0x83 "/dev/$SG"
	ndesc=$(printf '%s\n' "$RUN_OUT" | grep -c 'Designation descriptor number')
	types=$(printf '%s\n' "$RUN_OUT" | sed -n 's/.*designator_type: *\([^,]*\),.*/\1/p' | sort -u | tr '\n' ',' | sed 's/,$//')
	if [ "$RUN_RC" = 0 ] && [ "$ndesc" -ge 1 ]; then
		ok "sg_inq -p 0x83: device identification page, $ndesc designator(s): $types"
	else
		not_ok "sg_inq -p 0x83: device identification page with a designator" "sg_inq rc $RUN_RC" "$RUN_OUT"
	fi

	if dd_io "$DISK" "$DD_MB" write; then
		ok "dd: write $DD_MB MiB (O_DIRECT, 1 MiB blocks) at $(rate_of "$DD_SUMMARY")"
	else
		not_ok "dd: write $DD_MB MiB with O_DIRECT" "dd rc $RUN_RC" "$RUN_OUT" "$(dmesg_since 0 | tail -n 5)"
	fi
	if dd_io "$DISK" "$DD_MB" read; then
		ok "dd: read $DD_MB MiB back (O_DIRECT), full length at $(rate_of "$DD_SUMMARY")"
	else
		not_ok "dd: read $DD_MB MiB with O_DIRECT, full length" "dd rc $RUN_RC" "$RUN_OUT" "$(dmesg_since 0 | tail -n 5)"
	fi
else
	for c in "sg_inq: standard INQUIRY" "sg_inq -p 0x80" "sg_inq -p 0x83" "dd: write $DD_MB MiB" "dd: read $DD_MB MiB"; do
		not_ok "$c" "no disk to test (login to open failed)"
	done
fi

if logout "$T_OPEN" && ! session_id "$T_OPEN" >/dev/null && { [ -z "$DISK" ] || [ ! -e "/sys/block/$DISK" ]; }; then
	ok "logout: open, session and disk gone"
else
	not_ok "logout: open, session and disk gone" "iscsiadm rc $RUN_RC: $RUN_OUT" "sessions: $(iscsiadm -m session 2>&1)"
fi

# --- 10-12: digests ------------------------------------------------------------------------
node_set "$T_OPEN" node.conn[0].iscsi.HeaderDigest CRC32C
node_set "$T_OPEN" node.conn[0].iscsi.DataDigest CRC32C
t0=$(now)
m=$(log_mark)
if login "$T_OPEN" && sid=$(session_id "$T_OPEN"); then
	run iscsiadm -m session -r "$sid" -P 2
	hd=$(printf '%s\n' "$RUN_OUT" | sed -n 's/^[[:space:]]*HeaderDigest: *//p' | head -n 1)
	dg=$(printf '%s\n' "$RUN_OUT" | sed -n 's/^[[:space:]]*DataDigest: *//p' | head -n 1)
	if [ "$hd" = CRC32C ] && [ "$dg" = CRC32C ]; then
		ok "digests: login to open with HeaderDigest=DataDigest=CRC32C, negotiated CRC32C/CRC32C ($(elapsed "$t0") s)"
	else
		not_ok "digests: negotiated HeaderDigest and DataDigest are CRC32C" "negotiated HeaderDigest '$hd', DataDigest '$dg'" \
			"$(printf '%s\n' "$RUN_OUT" | grep -A 20 'Negotiated iSCSI params')"
	fi
	if read -r DDISK _ < <(session_disk "$sid") && dd_io "$DDISK" "$SMALL_DD_MB" write && w=$(rate_of "$DD_SUMMARY") &&
		dd_io "$DDISK" "$SMALL_DD_MB" read; then
		ok "digests: dd write+read $SMALL_DD_MB MiB through the CRC32C session ($w / $(rate_of "$DD_SUMMARY"))"
	else
		not_ok "digests: dd write+read $SMALL_DD_MB MiB through the CRC32C session" "disk '${DDISK:-none}', dd rc $RUN_RC" \
			"$RUN_OUT" "$(dmesg_since 0 | tail -n 6)"
	fi
	logout "$T_OPEN"
else
	not_ok "digests: login to open with HeaderDigest=DataDigest=CRC32C" "iscsiadm rc $RUN_RC: $(printf '%s\n' "$RUN_OUT" | tail -n 2)" "$(log_since "$m")"
	not_ok "digests: dd through the CRC32C session" "no session"
fi
node_del "$T_OPEN"

# --- 13-15: one-way CHAP ---------------------------------------------------------------------
node_new "$T_CHAP"
node_chap "$T_CHAP" "$CHAP_USER" "$CHAP_SECRET"
t0=$(now)
m=$(log_mark)
if login "$T_CHAP"; then
	ok "chap: login with $CHAP_USER and the right secret ($(elapsed "$t0") s)"
	logout "$T_CHAP"
else
	not_ok "chap: login with $CHAP_USER and the right secret" "iscsiadm rc $RUN_RC: $(printf '%s\n' "$RUN_OUT" | tail -n 2)" "$(log_since "$m")"
fi
node_set "$T_CHAP" node.session.auth.password "wrong-secret-9"
if login_attempt_fails "$T_CHAP" && [ "$REFUSED_RC" = 24 ]; then
	ok "chap: a wrong secret is refused (iscsiadm status 24, authorization failure)"
else
	not_ok "chap: a wrong secret is refused with iscsiadm status 24" "status $REFUSED_RC; $REFUSED_WHY"
fi
node_set "$T_CHAP" node.session.auth.authmethod None
if ! login_attempt_fails "$T_CHAP"; then
	not_ok "chap: a login without CHAP is refused with status 24" "the login succeeded"
elif [ "$REFUSED_RC" = 24 ]; then
	ok "chap: a login without CHAP is refused (status 24, authentication failure)"
else
	not_ok "chap: a login without CHAP is refused with status 24" "status $REFUSED_RC; $REFUSED_WHY"
fi
node_del "$T_CHAP"

# --- 16, 17: mutual CHAP -----------------------------------------------------------------------
node_new "$T_MUTUAL"
node_chap "$T_MUTUAL" "$CHAP_USER" "$CHAP_SECRET" "$TGT_USER" "$TGT_SECRET"
t0=$(now)
m=$(log_mark)
if login "$T_MUTUAL"; then
	ok "mutual: login with both secrets right ($(elapsed "$t0") s)"
	logout "$T_MUTUAL"
else
	not_ok "mutual: login with both secrets right" "iscsiadm rc $RUN_RC: $(printf '%s\n' "$RUN_OUT" | tail -n 2)" "$(log_since "$m")"
fi
node_set "$T_MUTUAL" node.session.auth.password_in "wrong-target-9"
# It must fail *because* the target's CHAP response does not verify, not for
# any other reason on the way (iscsid says which).
if ! login_attempt_fails "$T_MUTUAL"; then
	not_ok "mutual: a wrong target secret makes the login fail" "the login succeeded: the initiator accepted the target's CHAP response"
elif printf '%s\n' "$REFUSED_WHY" | grep -qiE 'incorrect CHAP response|authentication failed'; then
	ok "mutual: a wrong target secret makes the login fail: the target's CHAP response is rejected (status $REFUSED_RC)"
else
	not_ok "mutual: a wrong target secret makes the login fail at the target's CHAP response" \
		"status $REFUSED_RC, but for another reason: $REFUSED_WHY"
fi
node_del "$T_MUTUAL"

# --- 18, 19: initiator ACL ---------------------------------------------------------------------
node_new "$T_ACL"
if login_attempt_fails "$T_ACL"; then
	case "$REFUSED_RC:$REFUSED_WHY" in
	24:*) how="authorization failure (status 24)" ;;
	*"not found"* | *"(02/03)"*) how="target not found (status $REFUSED_RC)" ;;
	*) how="" ;;
	esac
	if [ -n "$how" ]; then
		ok "acl: $REEL_VM_INITIATOR is refused: $how"
	else
		not_ok "acl: $REEL_VM_INITIATOR is refused with authorization failure or not found" "status $REFUSED_RC; $REFUSED_WHY"
	fi
	diag "acl refusal: $REFUSED_WHY"
else
	not_ok "acl: $REEL_VM_INITIATOR is refused" "the login succeeded"
fi
node_del "$T_ACL"
node_new "$T_ACL" "$OTHER_IFACE"
t0=$(now)
m=$(log_mark)
if login "$T_ACL" "$OTHER_IFACE"; then
	ok "acl: the allowed initiator $OTHER_INITIATOR logs in ($(elapsed "$t0") s)"
	logout "$T_ACL" "$OTHER_IFACE"
else
	not_ok "acl: the allowed initiator $OTHER_INITIATOR logs in" "iscsiadm rc $RUN_RC: $(printf '%s\n' "$RUN_OUT" | tail -n 2)" "$(log_since "$m")"
fi
node_del "$T_ACL" "$OTHER_IFACE"

# --- 20-22: session recovery across a target restart ---------------------------------------------
node_new "$T_OPEN"
RDISK="" rsid=""
if login "$T_OPEN" && rsid=$(session_id "$T_OPEN") && read -r RDISK _ < <(session_disk "$rsid"); then
	m=$(log_mark)
	dm=$(dmesg_mark)
	t0=$(now)
	host_do restart-target "${RESTART_HOOK_TIMEOUT:-120}"
	hrc=$?
	t_back=$(now)
	if [ "$hrc" = 0 ]; then
		ok "restart: the host restarted the target ($(elapsed "$t0") s)"
	else
		not_ok "restart: the host restarted the target" "host_do restart-target returned $hrc (see run.sh's hooks.log)"
	fi
	# Recovered = the connection dropped (kernel "conn error"), iscsid has
	# since reported the connection operational again ("... is operational
	# after recovery", or "now" after a target-requested logout) and the
	# session is LOGGED_IN, all within replacement_timeout.
	deadline=$(($(cut -d. -f1 /proc/uptime) + REPLACEMENT_TIMEOUT + 5))
	dropped="" recovered=""
	while [ "$(cut -d. -f1 /proc/uptime)" -lt "$deadline" ]; do
		[ -z "$dropped" ] && dmesg_since "$dm" 50 | grep -q 'conn error' && dropped=$(now)
		if [ -n "$dropped" ] && log_since "$m" 200 | grep -q 'is operational' && [ "$(session_state "$rsid")" = LOGGED_IN ]; then
			recovered=$(now)
			break
		fi
		# a target that never dropped the connection: nothing to recover
		if [ -z "$dropped" ] && [ "$(elapsed "$t_back" | cut -d. -f1)" -ge 10 ]; then
			break
		fi
		sleep 0.5
	done
	if [ -n "$recovered" ]; then
		ok "restart: session $rsid recovered, LOGGED_IN $(elapsed "$t_back") s after the target was back (replacement_timeout $REPLACEMENT_TIMEOUT s)"
		diag "restart: $(log_since "$m" 200 | grep 'is operational' | tail -n 1)"
	elif [ -z "$dropped" ]; then
		not_ok "restart: the session noticed the restart and recovered" "no connection error in dmesg: the restart did not drop the connection" \
			"state $(session_state "$rsid")"
	else
		not_ok "restart: session recovered within replacement_timeout ($REPLACEMENT_TIMEOUT s)" "state '$(session_state "$rsid")'" \
			"$(log_since "$m")" "$(dmesg_since "$dm")"
	fi
	if [ -b "/dev/$RDISK" ] && dd_io "$RDISK" "$SMALL_DD_MB" write && w=$(rate_of "$DD_SUMMARY") && dd_io "$RDISK" "$SMALL_DD_MB" read; then
		ok "restart: dd write+read $SMALL_DD_MB MiB on /dev/$RDISK after the restart ($w / $(rate_of "$DD_SUMMARY"))"
	else
		not_ok "restart: dd write+read $SMALL_DD_MB MiB on /dev/$RDISK after the restart" "dd rc $RUN_RC" "$RUN_OUT" "$(dmesg_since "$dm")"
	fi
else
	not_ok "restart: login to open and find its disk before the restart" "iscsiadm rc $RUN_RC: $(printf '%s\n' "$RUN_OUT" | tail -n 2)"
	skip "restart: session recovered" "no session"
	skip "restart: dd after the restart" "no session"
fi

# --- 23: clean end ---------------------------------------------------------------------------------
run iscsiadm -m node --logoutall=all
lo_rc=$RUN_RC lo_out=$RUN_OUT
run iscsiadm -m session
if [ "$RUN_RC" = 21 ] && [ -z "$(ls /sys/class/iscsi_session 2>/dev/null)" ]; then
	ok "final: logout of everything, no session left"
else
	not_ok "final: logout of everything, no session left" "logoutall rc $lo_rc: $lo_out" "iscsiadm -m session rc $RUN_RC: $RUN_OUT"
fi

diag "iscsi-checks: $(elapsed "$T_SCRIPT") s in the guest"
tap_summary
