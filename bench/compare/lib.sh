# shellcheck shell=bash
# Shared by bench/compare/crosscheck.sh and bench/compare/run.sh (sourced, not run): where
# things are (`compare_dir`, this directory; `root`, the source tree), logging (callers set
# `log_prefix` first), checking tools, building the libiscsi client, and one tgtd with one
# preloaded SSC tape drive through `reel bench tgt start|stop` (reel-bench's tgtd setup, as
# `reel bench tape` has it, without a changer) and its sessions' counters. Callers call
# `tgt_stop` from their EXIT trap. bench/lib.sh (building reel, the machine section) comes
# with it.

compare_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$compare_dir/../.." && pwd)
# shellcheck source=../lib.sh
source "$root/bench/lib.sh"

tgt_iqn=iqn.2026-11.org.reel.bench:compare-tape
tgt_pid='' tgt_port='' tgt_cport='' tgt_dir='' tgt_reel=''

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

tgt_admin() { tgtadm -C "$tgt_cport" --lld iscsi "$@"; }

# tgt_start REEL DIR SIZE_BYTES [MAX_BURST]: `REEL bench tgt start`, the one tgtd setup of
# reel-bench (crates/reel-bench/src/tgt.rs): tgtd on a free loopback port, target $tgt_iqn
# with the tape drive at LUN 1 holding a fresh tape image DIR/tape big enough for SIZE_BYTES
# of records, loaded and online, with `reel bench tape`'s session limits (MaxBurstLength
# 1 MiB unless given). Sets tgt_pid, tgt_port and tgt_cport.
tgt_start() {
  tgt_reel=$1 tgt_dir=$2
  local size=$3 max_burst=${4:-1048576} vars
  vars=$("$tgt_reel" bench tgt start --dir "$tgt_dir" --size "$size" --max-burst "$max_burst" \
    --iqn "$tgt_iqn") || die "reel bench tgt start failed"
  [[ $vars =~ ^tgt_pid=[0-9]+\ tgt_port=[0-9]+\ tgt_cport=[0-9]+$ ]] ||
    die "reel bench tgt start printed: $vars"
  eval "$vars"
  log "tgtd $tgt_pid on 127.0.0.1:$tgt_port (control port $tgt_cport), $tgt_iqn LUN 1: tape image in $tgt_dir"
}

# tgt_stop: `reel bench tgt stop` (the orderly way down), then the image.
tgt_stop() {
  if [[ -n $tgt_pid ]]; then
    "$tgt_reel" bench tgt stop --pid "$tgt_pid" --control-port "$tgt_cport" || log "tgtd $tgt_pid had to be killed"
  fi
  tgt_pid=''
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
