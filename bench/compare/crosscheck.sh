#!/usr/bin/env bash
# Cross-check reel-bench's tape throughput against an independent client: libiscsi-tape.c, a
# small C program on libiscsi doing the same WRITE(6)/READ(6) sequence. Both drive ONE tgtd
# (one SSC tape drive, its cartridge preloaded) on a free loopback port, alternately, for the
# same record size, queue depth and size, and the medians are compared (goal: within 10 %).
# Writes bench/compare/CROSSCHECK.md (anything below its line
# "<!-- notes below are kept by crosscheck.sh -->" is carried over).
#
# Usage: bench/compare/crosscheck.sh [options]     (as root, from anywhere)
#   --size SIZE          bytes written and read back per run (default 2G)
#   --rounds K           runs of each tool per configuration (default 3)
#   --record-size LIST   comma separated (default 256K)
#   --queue-depth LIST   commands in flight, comma separated (default 8)
#   --max-burst SIZE     tgt's MaxBurstLength (default 256K, what libiscsi offers, so both
#                        initiators negotiate the same; reel-bench's own tgt uses 1M, which
#                        only matters for records above FirstBurstLength, 256K)
#   --reel PATH          use this reel binary (for `reel bench tape`) instead of building it
#   --work-dir DIR       where the tape image goes (default /var/tmp; needs ~SIZE + 6 %)
#   --out FILE           the report (default bench/compare/CROSSCHECK.md)
#   --note TEXT          a remark for the report
#   --smoke              a functional pass for CI: 32M, one round of each tool at 256K / QD 8;
#                        checks that both wrote, read back and verified every byte; judges
#                        no speed and writes no report
# Needs: gcc, libiscsi-dev, tgt (tgtd, tgtadm, tgtimg), python3, cargo; root (tgtd).
set -euo pipefail

log_prefix=crosscheck
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

invocation="bench/compare/crosscheck.sh$(printf " %q" "$@")"
size=2G rounds=3 record_list=256K depth_list=8 max_burst=256K rb='' work_parent=/var/tmp
out=$compare_dir/CROSSCHECK.md note='' smoke=0
while (($#)); do
  case $1 in
    --size) size=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --record-size) record_list=$2; shift 2 ;;
    --queue-depth) depth_list=$2; shift 2 ;;
    --max-burst) max_burst=$2; shift 2 ;;
    --reel) rb=$2; shift 2 ;;
    --work-dir) work_parent=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --note) note=$2; shift 2 ;;
    --smoke) smoke=1; shift ;;
    -h | --help) sed -n '2,26p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done
if ((smoke)); then size=32M rounds=1 record_list=256K depth_list=8; fi
size_bytes=$(numfmt --from=iec "$size") || die "--size $size: not a size"
burst_bytes=$(numfmt --from=iec "$max_burst") || die "--max-burst $max_burst: not a size"
[[ $rounds =~ ^[1-9][0-9]*$ ]] || die "--rounds $rounds: must be a positive number"
IFS=, read -r -a records <<<"$record_list"
IFS=, read -r -a depths <<<"$depth_list"
marker='<!-- notes below are kept by crosscheck.sh -->'

need_tgt_and_client
need numfmt coreutils
build_client
if [[ -z $rb ]]; then
  need cargo "the Rust toolchain (rustup)"
  build_reel "$log_prefix"
  rb=$reel
fi
[[ -x $rb ]] || die "$rb not found"

mkdir -p "$work_parent"
work=$(mktemp -d "$work_parent/reel-crosscheck.XXXXXX")
sampler=''
cleanup() {
  if [[ -n $sampler ]]; then kill "$sampler" 2>/dev/null || true; wait "$sampler" 2>/dev/null || true; fi
  tgt_stop
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free=$(df -P -B1 "$work" | awk 'NR==2 {print $4}')
need_bytes=$((size_bytes + size_bytes / 16 + (128 << 20)))
((free > need_bytes)) || die "$work_parent has $free bytes free; the tape image needs about $need_bytes"

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
tgt_start "$rb" "$work/tgt" "$size_bytes" "$burst_bytes"

# sample FILE: tgt's per-connection counters once a second until killed.
sample() {
  while :; do
    tgt_conn_stats >>"$1" || true
    sleep 0.5
  done
}

runs=$work/runs.tsv
: >"$runs"

# run_tool TOOL RECORD QD ROUND: one write + read-back on the tape, appended to $runs.
run_tool() {
  local tool=$1 r=$2 q=$3 k=$4 tag=$1-$2-$3-$4 load
  load=$(cut -d' ' -f1 /proc/loadavg)
  sample "$work/stats-$tag" &
  sampler=$!
  if [[ $tool == reel-bench ]]; then
    if ! "$rb" bench tape --targets tgt --tgt-addr "127.0.0.1:$tgt_port" --tgt-iqn "$tgt_iqn" --tgt-pid "$tgt_pid" \
      --drives 1 --record-size "$r" --queue-depth "$q" --size "$size" \
      --work-dir "$work/reel-bench-work" --json "$work/$tag.json" >"$work/$tag.out" 2>"$work/$tag.err"; then
      tail -n 20 "$work/$tag.err" >&2
      die "reel-bench failed ($tag)"
    fi
    python3 - "$work/$tag.json" "$tool" "$r" "$q" "$k" "$load" >>"$runs" <<'EOF'
import json, sys
path, tool, r, q, k, load = sys.argv[1:]
run = json.load(open(path))["cells"][0]["runs"][0]
w, rd = run["write"], run["read"]
nan = lambda v: "nan" if v is None else v
print("\t".join(map(str, [r, q, k, tool, w["mb_per_s"], rd["mb_per_s"], w["seconds"],
                          w["data_seconds"], rd["seconds"], w["bytes"], rd["bytes"], load,
                          nan(w.get("client_cpu_s_per_gb")), nan(rd.get("client_cpu_s_per_gb")),
                          nan(w.get("server_cpu_s_per_gb")), nan(rd.get("server_cpu_s_per_gb"))])))
EOF
  else
    if ! "$client" "127.0.0.1:$tgt_port" "$tgt_iqn" 1 "$r" "$size" "$q" --target-pid "$tgt_pid" \
      >"$work/$tag.out" 2>"$work/$tag.err"; then
      tail -n 20 "$work/$tag.err" >&2
      die "libiscsi-tape failed ($tag)"
    fi
    # "libiscsi-tape key=value ..." -> the columns of $runs
    awk -v r="$r" -v q="$q" -v k="$k" -v tool="$tool" -v load="$load" '
      $1 == "libiscsi-tape" {
        for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
        print r "\t" q "\t" k "\t" tool "\t" v["write_mb_s"] "\t" v["read_mb_s"] "\t" v["write_s"] "\t" \
          v["write_data_s"] "\t" v["read_s"] "\t" v["total_bytes"] "\t" v["verified_bytes"] "\t" load "\t" \
          v["write_client_cpu_s_per_gb"] "\t" v["read_client_cpu_s_per_gb"] "\t" \
          (("write_target_cpu_s_per_gb" in v) ? v["write_target_cpu_s_per_gb"] : "nan") "\t" \
          (("read_target_cpu_s_per_gb" in v) ? v["read_target_cpu_s_per_gb"] : "nan")
      }' "$work/$tag.out" >>"$runs"
  fi
  kill "$sampler" 2>/dev/null || true
  wait "$sampler" 2>/dev/null || true
  sampler=''
  tail -n 1 "$runs" | awk -F'\t' '{printf "crosscheck: %-13s %5s QD %-2s round %s: write %7.1f MB/s, read %7.1f MB/s\n", $4, $1, $2, $3, $5, $6}' >&2
}

# One untimed pass first, so that no measured run is the first to write into the sparse image
# tgtimg just created (in three full runs without it, the very first run, reel-bench's each
# time, was 25-45 % slower to write than the others; whether that was the fresh image or the
# busy machine is not established). Every measured run then overwrites the same file.
if ((!smoke)); then
  log "warm-up: one untimed libiscsi-tape pass over the whole tape image"
  "$client" "127.0.0.1:$tgt_port" "$tgt_iqn" 1 256K "$size" 8 >/dev/null 2>"$work/warmup.err" ||
    { cat "$work/warmup.err" >&2; die "warm-up pass failed"; }
fi

pair=0
for r in "${records[@]}"; do
  for q in "${depths[@]}"; do
    for ((k = 1; k <= rounds; k++)); do
      # Alternate which tool goes first (counting across configurations), so drift on a busy
      # machine hits both alike.
      pair=$((pair + 1))
      if ((pair % 2)); then order=(reel-bench libiscsi-tape); else order=(libiscsi-tape reel-bench); fi
      for tool in "${order[@]}"; do run_tool "$tool" "$r" "$q" "$k"; done
    done
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

if ((smoke)); then
  # Both wrote and read back every byte (the client verified each record; reel-bench
  # compared every byte and fails otherwise). No speed is judged.
  awk -F'\t' -v n="$size_bytes" '
    $10 != n || $11 != n { printf "crosscheck: smoke FAILED: %s wrote %s and read %s bytes of %s\n", $4, $10, $11, n > "/dev/stderr"; bad = 1 }
    { seen[$4] = 1 }
    END { if (!seen["reel-bench"] || !seen["libiscsi-tape"]) { print "crosscheck: smoke FAILED: a tool did not run" > "/dev/stderr"; bad = 1 }; exit bad }' "$runs"
  log "smoke OK: reel-bench and libiscsi-tape each wrote, read back and verified $size_bytes bytes on tgt"
  exit 0
fi

# The negotiated parameters reel-bench recorded for its session, and tgt's counters for the
# first round of each tool and configuration.
export CC_RUNS=$runs CC_WORK=$work CC_SIZE=$size CC_ROUNDS=$rounds CC_BURST=$burst_bytes \
  CC_LOAD_BEFORE=$load_before CC_LOAD_AFTER=$load_after CC_NOTE=$note
{
  echo "# Cross-check: reel-bench against an independent libiscsi client"
  echo
  echo "Generated by \`bench/compare/crosscheck.sh\` on $(date -u '+%Y-%m-%d %H:%M UTC'). See BENCHMARKING.md (\"Cross-checks and peers\")."
  echo
  echo "## Machine"
  echo
  compare_machine_md
  echo "- Load average before: $load_before; after: $load_after"
  [[ -z $note ]] || { echo; echo "Note: $note"; }
  echo
  echo "## Commands"
  echo
  echo '```'
  echo "$invocation"
  echo "# each round, in turns:"
  echo "reel bench tape --targets tgt --tgt-addr 127.0.0.1:PORT --tgt-iqn $tgt_iqn --tgt-pid PID --drives 1 --record-size R --queue-depth Q --size $size --json …"
  echo "libiscsi-tape 127.0.0.1:PORT $tgt_iqn 1 R $size Q"
  echo '```'
  echo
  python3 - <<'EOF'
import glob, json, os, statistics

env = os.environ
rows = [l.rstrip("\n").split("\t") for l in open(env["CC_RUNS"]) if l.strip()]
burst = int(env["CC_BURST"])
work = env["CC_WORK"]

def kib(n):
    n = int(n)
    return f"{n >> 20} MiB" if n >= 1 << 20 and n % (1 << 20) == 0 else f"{n >> 10} KiB" if n % 1024 == 0 else str(n)

print("## What ran")
print()
print(f"One `tgtd`, one SSC tape drive (LUN 1) with its cartridge preloaded, on a loopback port; "
      f"each run writes {env['CC_SIZE']} in variable-length records of the given size with QD commands "
      "in flight, one filemark (IMMED=0), rewinds, reads every record back and verifies it. The two "
      f"tools take turns ({env['CC_ROUNDS']} runs each per configuration, the first tool alternating "
      "from one round to the next, counted across configurations), on the same tape image, after one untimed "
      "pass over it.")
print()
print("- **reel-bench**: `reel bench tape --targets tgt --tgt-addr … --tgt-iqn … --tgt-pid … --drives 1 "
      "--record-size R --queue-depth Q --size SIZE` (reel's initiator, `reel_iscsi_net::Client`; "
      "data from reel-datagen, generated on a thread of its own and compared byte for byte on read).")
print("- **libiscsi-tape**: `bench/compare/libiscsi-tape.c` on libiscsi's async API "
      "(`iscsi_scsi_command_async` with hand-built WRITE(6)/READ(6) CDBs, a `poll` + `iscsi_service` "
      "loop, reads land in its own buffers via `scsi_task_add_data_in_buffer`; records are slices of a "
      "64 MiB pseudo-random pool, every byte compared on read). Like reel's client, libiscsi sets "
      "TCP_NODELAY; unlike it, libiscsi sends each PDU's 48-byte header with one `send` and its data with "
      "a second call (`writev`), and reads header and data with separate calls.")
print("- Timing, both: write = first WRITE(6) sent → GOOD status of the final WRITE FILEMARKS (IMMED=0, "
      "so tgt's `fsync` of the image is included); read = first READ(6) → last READ(6) status. "
      "MB = 10^6 bytes.")
print()

# Negotiated parameters.
neg = None
for path in sorted(glob.glob(os.path.join(work, "reel-bench-*.json"))):
    neg = json.load(open(path))["cells"][0]["runs"][0]["negotiated"]
    break
lib_burst = min(262144, burst)
print("## Session parameters")
print()
print(f"tgt is set up as reel-bench sets up its own tgt (MaxRecvDataSegmentLength and "
      f"MaxXmitDataSegmentLength 256 KiB, FirstBurstLength 256 KiB, ImmediateData Yes, InitialR2T left at "
      f"its default Yes), except MaxBurstLength = {kib(burst)} (reel-bench's tgt: 1 MiB; libiscsi 1.19 "
      "always offers 256 KiB and has no setting for it). reel-bench's column is what it recorded (its "
      "negotiation probe); libiscsi's is what libiscsi offers (fixed in its `iscsi_create_context`: "
      "MaxRecvDataSegmentLength 256 KiB, FirstBurstLength 256 KiB, MaxBurstLength 256 KiB, InitialR2T No, "
      "ImmediateData Yes) against tgt's answers, checked against tgt's PDU counters below.")
print()
yn = lambda b: "Yes" if b else "No"
print("| parameter | reel-bench | libiscsi-tape |")
print("|---|---:|---:|")
if neg:
    print(f"| MaxRecvDataSegmentLength (target's: Data-Out / immediate data per PDU) | {neg['target_max_recv_data_segment_length']} | 262144 |")
    print(f"| MaxRecvDataSegmentLength (initiator's: Data-In per PDU) | {neg['initiator_max_recv_data_segment_length']} | 262144 |")
    print(f"| MaxBurstLength | {neg['max_burst_length']} | {lib_burst} |")
    print(f"| FirstBurstLength | {neg['first_burst_length']} | {min(262144, lib_burst)} |")
    print(f"| ImmediateData | {yn(neg['immediate_data'])} | Yes |")
    print(f"| InitialR2T | {yn(neg['initial_r2t'])} | Yes |")
    print(f"| HeaderDigest / DataDigest | {yn(neg['header_digest'])} / {yn(neg['data_digest'])} | No / No |")
print()

# tgt's counters: the busiest session of each run's last sample.
def stats(tag):
    best = None
    try:
        for line in open(os.path.join(work, "stats-" + tag)):
            f = line.split()
            if len(f) != 9:
                continue
            v = dict(zip(["ini", "sid", "cid", "rx", "tx", "dout", "din", "cmd", "rsp"], f))
            if best is None or int(v["cmd"]) >= int(best["cmd"]):
                best = v
    except OSError:
        pass
    return best

configs = []
for r in rows:
    if (r[0], r[1]) not in configs:
        configs.append((r[0], r[1]))
print("tgt's own counters for each tool's drive session in round 1 (`tgtadm --op stat`, sampled every "
      "half second, so the end is missing; write and read together; tgt does not count its Data-In PDUs):")
print()
print("| record | QD | tool | SCSI command PDUs | Data-Out PDUs | bytes received | bytes sent |")
print("|---|---:|---|---:|---:|---:|---:|")
for r, q in configs:
    for tool in ("reel-bench", "libiscsi-tape"):
        s = stats(f"{tool}-{r}-{q}-1")
        if not s:
            print(f"| {r} | {q} | {tool} | (no sample) | | | |")
            continue
        print(f"| {r} | {q} | {tool} | {s['cmd']} | {s['dout']} | {s['rx']} | {s['tx']} |")
print()
print("Data-Out PDUs = 0: every WRITE(6) carried its whole record as immediate data in the command PDU "
      "(records up to FirstBurstLength, 256 KiB); larger records need R2Ts and Data-Out PDUs.")
print()

print("## Every run")
print()
print("CPU s/GB: CPU seconds (user + system) per 10^9 bytes moved, of the client process and of tgtd, "
      "write / read phase.")
print()
print("| record | QD | round | tool | write MB/s | read MB/s | write s | of which after the last WRITE (filemark sync) s | read s | client CPU s/GB w / r | tgtd CPU s/GB w / r | load avg (1 min) at start |")
print("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for r in rows:
    rec, q, k, tool, w, rd, ws, wds, rs, wb, rb, load, cw, cr, sw, sr = r
    print(f"| {rec} | {q} | {k} | {tool} | {float(w):.1f} | {float(rd):.1f} | {float(ws):.2f} | "
          f"{float(ws) - float(wds):.2f} | {float(rs):.2f} | {float(cw):.2f} / {float(cr):.2f} | "
          f"{float(sw):.2f} / {float(sr):.2f} | {load} |")
print()

print("## Medians and agreement")
print()
print("| record | QD | reel-bench write MB/s | libiscsi write MB/s | write ratio | reel-bench read MB/s | libiscsi read MB/s | read ratio | verdict |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
verdicts = []
for r, q in configs:
    med = {}
    for tool in ("reel-bench", "libiscsi-tape"):
        sel = [x for x in rows if (x[0], x[1], x[3]) == (r, q, tool)]
        med[tool] = (statistics.median(float(x[4]) for x in sel), statistics.median(float(x[5]) for x in sel),
                     min(float(x[4]) for x in sel), max(float(x[4]) for x in sel),
                     min(float(x[5]) for x in sel), max(float(x[5]) for x in sel))
    a, b = med["reel-bench"], med["libiscsi-tape"]
    wr, rr = a[0] / b[0], a[1] / b[1]
    def say(name, x):
        d = (x - 1) * 100
        return f"{name} within 10 % ({d:+.1f} %)" if abs(d) <= 10 else f"{name} differs by {d:+.1f} %"
    verdict = "; ".join([say("write", wr), say("read", rr)])
    verdicts.append((r, q, verdict))
    print(f"| {r} | {q} | {a[0]:.1f} ({a[2]:.0f}–{a[3]:.0f}) | {b[0]:.1f} ({b[2]:.0f}–{b[3]:.0f}) | {wr:.3f} | "
          f"{a[1]:.1f} ({a[4]:.0f}–{a[5]:.0f}) | {b[1]:.1f} ({b[4]:.0f}–{b[5]:.0f}) | {rr:.3f} | {verdict} |")
print()
print("Medians of the runs, (min–max) in brackets; ratio = reel-bench ÷ libiscsi-tape. The acceptance "
      "criterion is agreement within 10 % for the same record size and queue depth.")
print()
print("Split of the write phase and CPU (medians): the data part ends with the last WRITE(6) status, "
      "the rest is the final filemark, i.e. tgt's `fsync` of the image (the same work for both tools).")
print()
print("| record | QD | tool | write MB/s to the last WRITE | filemark sync s | client CPU s/GB w / r | tgtd CPU s/GB w / r |")
print("|---|---:|---|---:|---:|---:|---:|")
for r, q in configs:
    for tool in ("reel-bench", "libiscsi-tape"):
        sel = [x for x in rows if (x[0], x[1], x[3]) == (r, q, tool)]
        md = lambda i: statistics.median(float(x[i]) for x in sel)
        data_mb = statistics.median(float(x[9]) / float(x[7]) / 1e6 for x in sel)
        sync = statistics.median(float(x[6]) - float(x[7]) for x in sel)
        print(f"| {r} | {q} | {tool} | {data_mb:.1f} | {sync:.2f} | {md(12):.2f} / {md(13):.2f} | {md(14):.2f} / {md(15):.2f} |")
print()
print("Verdict:")
print()
for r, q, v in verdicts:
    print(f"- {r} records, QD {q}: {v}")
EOF
} >"$work/report.md"

{
  cat "$work/report.md"
  echo
  carry_notes "$out" "$marker"
} >"$work/final.md"
mv "$work/final.md" "$out"
cat "$work/report.md"
log "wrote $out"
