# shellcheck shell=bash disable=SC2154 # compare_dir and root are the caller's
# Shared by bench/compare/crosscheck.sh and bench/compare/run.sh (sourced, not run):
# checking tools, building the libiscsi client, and one tgtd with one preloaded SSC tape
# drive on a free loopback port, set up the way `reel bench tape` sets up its tgt
# (crates/reel-bench/src/tape/targets.rs start_tgt, harness/procs.rs Tgtd) but without a
# changer. Callers set `compare_dir` and `root` and call `tgt_stop` from their EXIT trap.
# bench/lib.sh (building reel, the machine section) comes with it.

# shellcheck source=../lib.sh
source "$root/bench/lib.sh"

tgt_iqn=iqn.2026-11.org.reel.bench:compare-tape
tgt_pid='' tgt_port='' tgt_cport='' tgt_dir=''
tgt_socket_dir=/var/run/tgtd

log() { echo "${log_prefix:-compare}: $*" >&2; }
die() { log "$*"; exit 1; }

# need CMD PACKAGE: fail with the Debian package to install when CMD is missing.
need() {
  command -v "$1" >/dev/null 2>&1 || [[ -x /usr/sbin/$1 ]] ||
    die "$1 not found: apt-get install -y $2"
}

# need_tgt_and_client: what the libiscsi client and tgt need.
need_tgt_and_client() {
  need gcc gcc
  need tgtd tgt
  need tgtadm tgt
  need tgtimg tgt
  [[ -f /usr/include/iscsi/iscsi.h ]] || die "libiscsi headers not found: apt-get install -y libiscsi-dev"
  need python3 python3
  [[ $(id -u) == 0 ]] || die "tgtd needs root"
}

# build_client: compiles libiscsi-tape.c (warnings are errors) into bench/compare/.build.
build_client() {
  mkdir -p "$compare_dir/.build"
  client=$compare_dir/.build/libiscsi-tape
  gcc -O2 -Wall -Wextra -Werror -o "$client" "$compare_dir/libiscsi-tape.c" -liscsi ||
    die "compiling libiscsi-tape.c failed"
}

# A loopback port nobody listens on (bash's /dev/tcp refuses the connection).
free_port() {
  local p
  for _ in $(seq 200); do
    p=$((20000 + RANDOM % 30000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return; fi
  done
  die "no free loopback port"
}

tgt_admin() { tgtadm -C "$tgt_cport" --lld iscsi "$@"; }

# tgt_start DIR SIZE_BYTES [MAX_BURST]: tgtd on a free loopback port, target $tgt_iqn with
# the tape drive at LUN 1 holding a fresh tape image in DIR big enough for SIZE_BYTES of
# records (tgt's 48-byte record headers included), loaded and online. Session limits as
# reel-bench sets them on its tgt: MaxRecvDataSegmentLength and MaxXmitDataSegmentLength
# 256 KiB, FirstBurstLength 256 KiB, ImmediateData Yes, MaxBurstLength 1 MiB unless given.
tgt_start() {
  local dir=$1 size=$2 max_burst=${3:-1048576}
  tgt_dir=$dir
  mkdir -p "$dir" "$tgt_socket_dir"
  local mb=$(((size + size / 16) / 1048576 + 64))
  tgtimg --op new --device-type tape --type data --barcode CMP001L9 --size "$mb" \
    --file "$dir/tape" >/dev/null || die "tgtimg failed"
  tgt_port=$(free_port)
  # The control port only names tgtd's socket (/var/run/tgtd/socket.N): one nobody uses.
  tgt_cport=''
  for _ in $(seq 200); do
    local c=$((10000 + RANDOM % 22000))
    if [[ ! -e $tgt_socket_dir/socket.$c ]]; then tgt_cport=$c; break; fi
  done
  [[ -n $tgt_cport ]] || die "no free tgtd control port in $tgt_socket_dir"
  tgtd -f -C "$tgt_cport" --iscsi "portal=127.0.0.1:$tgt_port" >"$dir/tgtd.log" 2>&1 &
  tgt_pid=$!
  local t=0
  until (exec 3<>"/dev/tcp/127.0.0.1/$tgt_port") 2>/dev/null; do
    kill -0 "$tgt_pid" 2>/dev/null || { cat "$dir/tgtd.log" >&2; tgt_pid=''; die "tgtd exited"; }
    sleep 0.05
    t=$((t + 1))
    ((t < 1200)) || die "tgtd did not listen on 127.0.0.1:$tgt_port within 60 s"
  done
  tgt_admin --op new --mode target --tid 1 -T "$tgt_iqn" || die "tgtadm: new target"
  local kv
  for kv in MaxRecvDataSegmentLength=262144 MaxXmitDataSegmentLength=262144 \
    MaxBurstLength="$max_burst" FirstBurstLength=262144 ImmediateData=Yes; do
    tgt_admin --op update --mode target --tid 1 --name "${kv%%=*}" --value "${kv#*=}" ||
      die "tgtadm: setting $kv"
  done
  tgt_admin --op new --mode logicalunit --tid 1 --lun 1 --device-type tape --bstype ssc \
    --backing-store "$dir/tape" || die "tgtadm: new tape LUN"
  tgt_admin --op bind --mode target --tid 1 -I ALL || die "tgtadm: bind"
  log "tgtd $tgt_pid on 127.0.0.1:$tgt_port (control port $tgt_cport), $tgt_iqn LUN 1: ${mb} MiB tape image"
}

# tgt_stop: the orderly way down (tgtd ignores SIGTERM while it has targets), then the image.
tgt_stop() {
  if [[ -n $tgt_pid ]] && kill -0 "$tgt_pid" 2>/dev/null; then
    tgtadm -C "$tgt_cport" --op update --mode sys --name State -v offline >/dev/null 2>&1 || true
    tgt_admin --op delete --mode target --tid 1 --force >/dev/null 2>&1 || true
    tgtadm -C "$tgt_cport" --op delete --mode system >/dev/null 2>&1 || true
    local t=0
    while kill -0 "$tgt_pid" 2>/dev/null && ((t < 100)); do sleep 0.05; t=$((t + 1)); done
    if kill -0 "$tgt_pid" 2>/dev/null; then
      kill -TERM "$tgt_pid" 2>/dev/null || true
      sleep 1
      kill -KILL "$tgt_pid" 2>/dev/null || true
    fi
    wait "$tgt_pid" 2>/dev/null || true
  fi
  tgt_pid=''
  if [[ -n $tgt_cport ]]; then rm -f "$tgt_socket_dir/socket.$tgt_cport" "$tgt_socket_dir/socket.$tgt_cport.lock"; fi
  if [[ -n $tgt_dir ]]; then rm -f "$tgt_dir/tape"; fi
}

# tgt_sessions: "SID INITIATOR" for every session of target 1.
tgt_sessions() {
  tgt_admin --op show --mode target 2>/dev/null |
    awk '/I_T nexus:/ {sid = $3} /Initiator:/ && sid != "" {print sid, $2; sid = ""}'
}

# tgt_conn_stats: one line per session, "INITIATOR sid cid rxdata_octets txdata_octets
# dataout_pdus datain_pdus cmd_pdus rsp_pdus" (tgt's per-connection counters).
tgt_conn_stats() {
  local sid ini
  while read -r sid ini; do
    tgt_admin --op stat --mode session --tid 1 --sid "$sid" 2>/dev/null |
      awk -v ini="$ini" 'f && NF == 8 {print ini, $0} /^sid cid rxdata_octets/ {f = 1}'
  done < <(tgt_sessions)
}

# compare_machine_md: the machine section of a report, with the libiscsi client's build.
compare_machine_md() {
  machine_md
  echo "- libiscsi: $(dpkg-query -W -f '${Version}' libiscsi-dev 2>/dev/null || echo unknown) (Debian libiscsi-dev); gcc $(gcc -dumpfullversion)"
}
