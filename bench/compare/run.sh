#!/usr/bin/env bash
# The side-by-side comparison: the same tapewrite-style workload (25 % random bytes, each
# 256 KiB block repeated R = 8 times, scattered) in one go through iSCSI to reel and to tgt
# (reel-bench, 1 and 4 drives, 256 KiB records) and from stdin into restic and borgbackup
# (bench/peers/run.sh, local repositories) on the very stream drive 0 of reel-bench writes.
# Writes bench/compare/RESULTS.md (tables with ratios reel/peer and the performance goals,
# met or missed with their margins) and bench/compare/results.json (all raw data). Anything
# below the line "<!-- notes below are kept by run.sh -->" of the old report is carried over.
#
# Usage: bench/compare/run.sh [options]     (as root: tgtd)
#   --size SIZE        bytes per drive / per stream (default 2G)
#   --tools LIST       reel,tgt,restic,borg (default); kopia can be added (bench/peers/run.sh
#                      builds it with `go install`, slow)
#   --identity-size S  size of the stream-identity check (default 512M; 0 skips it)
#   --bin-dir DIR      use reel (for `reel bench tape`) and reel-datagen from DIR instead of building them
#   --work-dir DIR     where targets and repositories live (default /var/tmp)
#   --out FILE         the report (default bench/compare/RESULTS.md; results.json goes next to it)
#   --note TEXT        a remark for the report
# About 6-10 minutes at 2G on 2 cores. Needs tgt, gcc, libiscsi-dev, zstd, python3, root;
# bench/peers/run.sh installs restic and borgbackup if they are missing.
set -euo pipefail

log_prefix=compare
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

size=2G tools=reel,tgt,restic,borg identity_size=512M bin_dir='' work_parent=/var/tmp
out=$compare_dir/RESULTS.md note=''
while (($#)); do
  case $1 in
    --size) size=$2; shift 2 ;;
    --tools) tools=$2; shift 2 ;;
    --identity-size) identity_size=$2; shift 2 ;;
    --bin-dir) bin_dir=$2; shift 2 ;;
    --work-dir) work_parent=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --note) note=$2; shift 2 ;;
    -h | --help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done
size_bytes=$(numfmt --from=iec "$size") || die "--size $size: not a size"
identity_bytes=$(numfmt --from=iec "$identity_size") || die "--identity-size $identity_size: not a size"
outdir=$(cd "$(dirname "$out")" && pwd)
json_out=$outdir/results.json
marker='<!-- notes below are kept by run.sh -->'

targets=() peers=()
for t in ${tools//,/ }; do
  case $t in
    reel | tgt) targets+=("$t") ;;
    restic | borg | kopia) peers+=("$t") ;;
    *) die "--tools: unknown tool $t (reel, tgt, restic, borg, kopia)" ;;
  esac
done

# The workload: reel-bench's defaults, spelled out so both sides get the same numbers. Drive
# i of reel-bench uses seed + i (crates/reel-bench/src/tape/args.rs Workload::generator), so drive
# 0's stream is exactly `reel-datagen $gen_args --total SIZE` (scattered order, no
# incompressible blocks: reel-datagen's defaults).
seed=1 block=256K randomness=0.25 redundancy=8 window=1024 record=256K
gen_args=(--seed "$seed" --block-size "$block" --randomness "$randomness" --redundancy "$redundancy" --window-blocks "$window")

need_tgt_and_client
need numfmt coreutils
need zstd zstd
need sha256sum coreutils
build_client
if [[ -z $bin_dir ]]; then
  need cargo "the Rust toolchain (rustup)"
  build_reel "$log_prefix"
  (cd "$root" && cargo build --release -q -p reel-datagen)
  bin_dir=$bin
  binaries="built from the working tree (cargo build --release)"
else
  binaries="prebuilt, from $bin_dir"
fi
for b in reel reel-datagen; do [[ -x $bin_dir/$b ]] || die "$bin_dir/$b not found"; done

mkdir -p "$work_parent"
work=$(mktemp -d "$work_parent/reel-compare.XXXXXX")
trap 'tgt_stop; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
started=$(date -u '+%Y-%m-%d %H:%M UTC')
commands=()

# --- 1. the streams are the same ------------------------------------------------------------
# reel-bench writes drive 0's stream to a tgt tape; libiscsi-tape --dump reads the tape's
# records back to stdout; its hash must equal that of reel-datagen's output.
identity_json=null
if [[ $identity_bytes != 0 ]]; then
  log "identity check: reel-bench's drive-0 stream on tape vs reel-datagen, $identity_size"
  tgt_start "$bin_dir/reel" "$work/identity" "$identity_bytes"
  cmd=("$bin_dir/reel" bench tape --targets tgt --tgt-addr "127.0.0.1:$tgt_port" --tgt-iqn "$tgt_iqn"
    --drives 1 --record-size "$record" --size "$identity_size" "${gen_args[@]}" --work-dir "$work/rb-identity")
  "${cmd[@]}" >"$work/identity.out" 2>"$work/identity.err" || { tail "$work/identity.err" >&2; die "reel-bench (identity check) failed"; }
  commands+=("reel bench tape --targets tgt --tgt-addr ADDR --tgt-iqn IQN --drives 1 --record-size $record --size $identity_size ${gen_args[*]}")
  "$client" "127.0.0.1:$tgt_port" "$tgt_iqn" 1 "$record" "$identity_size" 1 --dump >"$work/tape.bin" 2>"$work/dump.err" ||
    { cat "$work/dump.err" >&2; die "libiscsi-tape --dump failed"; }
  tape_hash=$(sha256sum <"$work/tape.bin" | cut -d' ' -f1)
  rm -f "$work/tape.bin"
  commands+=("libiscsi-tape ADDR IQN 1 $record $identity_size 1 --dump | sha256sum")
  gen_hash=$("$bin_dir/reel-datagen" "${gen_args[@]}" --total "$identity_size" | sha256sum | cut -d' ' -f1)
  commands+=("reel-datagen ${gen_args[*]} --total $identity_size | sha256sum")
  tgt_stop
  rm -rf "$work/identity"
  same=false
  [[ $tape_hash == "$gen_hash" ]] && same=true
  identity_json="{\"bytes\":$identity_bytes,\"tape_sha256\":\"$tape_hash\",\"datagen_sha256\":\"$gen_hash\",\"identical\":$same}"
  $same || die "the stream reel-bench wrote ($tape_hash) is not reel-datagen's ($gen_hash)"
  log "identity check: identical (sha256 $gen_hash)"
fi

# --- 2. reel and tgt through iSCSI ----------------------------------------------------------
rb_json=$work/reel-bench.json
if ((${#targets[@]})); then
  tlist=$(IFS=,; echo "${targets[*]}")
  # shellcheck disable=SC2054 # --drives 1,4 is one argument
  cmd=("$bin_dir/reel" bench tape --reel-bin "$bin_dir/reel" --targets "$tlist" --drives 1,4 --record-size "$record"
    --size "$size" "${gen_args[@]}" --work-dir "$work/reel-bench-work" --json "$rb_json")
  commands+=("reel bench tape --targets $tlist --drives 1,4 --record-size $record --size $size ${gen_args[*]} --json …")
  log "${commands[-1]}"
  "${cmd[@]}" >"$work/reel-bench.out" || die "reel-bench failed"
else
  echo null >"$rb_json"
fi

# --- 3. restic and borg on drive 0's stream -------------------------------------------------
peers_json=$work/peers.jsonl
: >"$peers_json"
if ((${#peers[@]})); then
  plist=$(IFS=,; echo "${peers[*]}")
  commands+=("REEL_DATAGEN=reel-datagen bench/peers/run.sh --tools $plist ${gen_args[*]} --total $size")
  log "${commands[-1]}"
  REEL_DATAGEN=$bin_dir/reel-datagen PEERS_TMPDIR=$work "$root/bench/peers/run.sh" --json "$peers_json" \
    --tools "$plist" "${gen_args[@]}" --total "$size" >"$work/peers.md"
fi

# --- 4. the ideal reduction of that stream --------------------------------------------------
# Generator dedup (reel-datagen --stats: logical bytes / distinct-block bytes) x zstd level 1
# of each distinct block on its own (zstd -b1 -B256K over the distinct blocks).
log "ideal reduction: distinct blocks of the stream, zstd -1 per 256 KiB block"
"$bin_dir/reel-datagen" "${gen_args[@]}" --total "$size" --stats 2>"$work/gen.stats" |
  python3 -c '
import hashlib, sys
seen, inp, out = set(), sys.stdin.buffer, open(sys.argv[1], "wb")
while True:
    b = inp.read(int(sys.argv[2]))
    if not b:
        break
    h = hashlib.sha1(b).digest()
    if h not in seen:
        seen.add(h)
        out.write(b)
' "$work/distinct.bin" "$(numfmt --from=iec "$block")"
gen_dedup=$(grep -o 'dedup_ratio: [0-9.e+-]*' "$work/gen.stats" | cut -d' ' -f2)
# zstd's benchmark mode compresses each -B piece on its own and prints "NAME : IN -> OUT (xR)".
zline=$(zstd -b1 -e1 -B"$block" -i0 "$work/distinct.bin" 2>&1 | tr '\r' '\n' | grep -- '->' | tail -n 1) ||
  die "zstd -b failed"
read -r distinct_bytes zstd_bytes < <(sed -E 's/.*: *([0-9]+) -> *([0-9]+).*/\1 \2/' <<<"$zline")
[[ $distinct_bytes =~ ^[0-9]+$ && $zstd_bytes =~ ^[0-9]+$ ]] || die "cannot read zstd's benchmark line: $zline"
rm -f "$work/distinct.bin"
commands+=("reel-datagen ${gen_args[*]} --total $size --stats | (distinct $block blocks) | zstd -b1 -B$block")
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

# --- 5. the report ----------------------------------------------------------------------------
{
  echo "# reel next to tgt, restic and borg: one workload, one run"
  echo
  echo "Generated by \`bench/compare/run.sh\` on $started. See BENCHMARKING.md (\"Cross-checks and peers\")."
  echo
  echo "## Machine"
  echo
  compare_machine_md
  echo "- restic: $(restic version 2>/dev/null | awk '{print $2}' || echo -); borg: $(borg --version 2>/dev/null | awk '{print $2}' || echo -); zstd: $(zstd --version | grep -o 'v[0-9.]*')"
  echo "- Binaries: $binaries"
  echo "- Load average before: $load_before; after: $load_after"
  [[ -z $note ]] || { echo; echo "Note: $note"; }
  echo
  echo "## Commands"
  echo
  echo '```'
  printf '%s\n' "${commands[@]}"
  echo '```'
  echo
} >"$work/head.md"

export CMP_RB=$rb_json CMP_PEERS=$peers_json CMP_IDENTITY=$identity_json CMP_GEN_DEDUP=${gen_dedup:-0} \
  CMP_DISTINCT=${distinct_bytes:-0} CMP_ZSTD=${zstd_bytes:-0} CMP_SIZE=$size CMP_SIZE_BYTES=$size_bytes \
  CMP_JSON=$json_out CMP_LOAD_BEFORE=$load_before CMP_LOAD_AFTER=$load_after CMP_STARTED=$started \
  CMP_REDUNDANCY=$redundancy CMP_GEN="${gen_args[*]}" CMP_BINARIES=$binaries
printf '%s\n' "${commands[@]}" >"$work/commands.txt"
export CMP_COMMANDS=$work/commands.txt
python3 - >"$work/body.md" <<'EOF'
import json, os, statistics

env = os.environ
rb = json.load(open(env["CMP_RB"]))
peers = [json.loads(l) for l in open(env["CMP_PEERS"]) if l.strip()]
identity = json.loads(env["CMP_IDENTITY"])
size = int(env["CMP_SIZE_BYTES"])
gen_dedup = float(env["CMP_GEN_DEDUP"])
distinct, zbytes = int(env["CMP_DISTINCT"]), int(env["CMP_ZSTD"])
ideal_comp = distinct / zbytes if zbytes else float("nan")
ideal = gen_dedup * ideal_comp
R = int(env["CMP_REDUNDANCY"])

def run(drives, target):
    for c in (rb or {}).get("cells", []):
        if c.get("drives") == drives and not c.get("flat"):
            for r in c.get("runs", []):
                if r.get("target") == target:
                    return r
    return None

def peer(tool):
    return next((p for p in peers if p.get("tool") == tool), None)

def f(x, fmt="{:.0f}"):
    return "–" if x is None else fmt.format(x)

def gb(n):
    return "–" if n is None else f"{n / 1e9:.3f} GB"

def ratio(a, b):
    return None if a is None or b in (None, 0) else a / b

out = []
p = out.append
p("## Workload")
p("")
p(f"`reel-datagen {env['CMP_GEN']} --total {env['CMP_SIZE']}` per drive (drive i: seed 1 + i) and for the "
  "peers (drive 0's stream): 25 % random bytes in each 256 KiB block, each block appearing R = 8 times, "
  "scattered within 1024-block windows. Tape records of 256 KiB (WRITE(6), 8 in flight per drive, one "
  "filemark at the end, then read back and verified). restic and borg read the same stream from a pipe "
  "into a fresh local repository with their default chunkers and zstd level 1 (bench/peers/run.sh).")
p("")
if identity:
    p(f"**Same stream, checked**: reel-bench wrote {identity['bytes'] >> 20} MiB of drive 0's stream to a tgt "
      "tape; `libiscsi-tape --dump` read the tape's records back, and their SHA-256 "
      f"{'equals' if identity['identical'] else 'DIFFERS FROM'} that of `reel-datagen` with the same "
      f"flags (`{identity['datagen_sha256'][:16]}…`).")
    p("")
p(f"**Ideal reduction** of this stream: the generator's dedup {gen_dedup:.3f} (bytes ÷ bytes of its distinct "
  f"256 KiB blocks, `reel-datagen --stats`; R = {R}) × zstd -1 on each distinct block by itself "
  f"{ideal_comp:.3f} ({distinct} → {zbytes} bytes, `zstd -b1 -B256K`) = **{ideal:.2f}:1**.")
p("")

rows1 = []
reel1, tgt1 = run(1, "reel"), run(1, "tgt")
reel4, tgt4 = run(4, "reel"), run(4, "tgt")

def target_row(name, r, how):
    if r is None:
        return None
    st = r.get("storage") or {}
    w, rd = r["write"], r["read"]
    disk = st.get("disk_bytes")
    return dict(tool=name, how=how, ingest=w["mb_per_s"], read=rd["mb_per_s"], cpu=w.get("server_cpu_s_per_gb"),
                stored=disk, reduction=ratio(w["bytes"], disk), bytes=w["bytes"],
                stats_reduction=st.get("reduction"), dedup=st.get("dedup"), compression=st.get("compression"))

def peer_row(name):
    q = peer(name)
    if q is None:
        return None
    if q.get("status") != "ok":
        return dict(tool=name, how=f"{q.get('version') or ''} {q.get('status')}", ingest=None, read=None, cpu=None,
                    stored=None, reduction=None, bytes=q.get("input_bytes"))
    return dict(tool=name, how=f"{q['version']}, stdin → local repository", ingest=q["mb_per_s"], read=None,
                cpu=q["cpu_s"] / (q["input_bytes"] / 1e9), stored=q["repo_bytes"], reduction=q["reduction"],
                bytes=q["input_bytes"])

one = [x for x in [target_row("reel", reel1, "iSCSI, 1 drive (reel serve)"),
                   target_row("tgt", tgt1, "iSCSI, 1 drive (tgtd)"),
                   peer_row("restic"), peer_row("borg"), peer_row("kopia")] if x]
four = [x for x in [target_row("reel", reel4, "iSCSI, 4 drives at once (reel serve)"),
                    target_row("tgt", tgt4, "iSCSI, 4 drives at once (tgtd)")] if x]

def table(title, rows, note):
    p(f"### {title}")
    p("")
    p(note)
    p("")
    p("| tool | how | ingest MB/s | read / restore MB/s | ingest CPU s/GB | stored | reduction (in ÷ stored) | reel/peer ingest | reel/peer reduction |")
    p("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    base = next((x for x in rows if x["tool"] == "reel"), None)
    for x in rows:
        ri = "–" if x["tool"] == "reel" or base is None else f(ratio(base["ingest"], x["ingest"]), "{:.2f}×")
        rr = "–" if x["tool"] == "reel" or base is None else f(ratio(base["reduction"], x["reduction"]), "{:.2f}×")
        p(f"| {x['tool']} | {x['how']} | {f(x['ingest'])} | {f(x['read']) if x['read'] is not None else 'not measured'} | "
          f"{f(x['cpu'], '{:.2f}')} | {gb(x['stored'])} | {f(x['reduction'], '{:.2f}:1')} | {ri} | {rr} |")
    p("")

p("## Results")
p("")
table(f"One stream: {env['CMP_SIZE']}", one,
      "MB = 10^6 bytes. reel and tgt: reel-bench's write phase (first WRITE to the final filemark's GOOD status) "
      "and read phase (every record read back and compared); CPU is the target process's. restic and borg: "
      "input bytes ÷ wall time of `tool backup/create` reading the pipe; CPU is the tool's user + system "
      "(bench/peers/run.sh measures ingest only, so no restore figure). Stored: reel's data directory "
      "(packs + catalog, allocated), tgt's tape image (allocated), the peers' repository (`du -sb`).")
table(f"Four drives at once: 4 × {env['CMP_SIZE']}", four,
      "Each drive writes its own stream (seed 1 + drive), so the drives do not dedup against each other; MB/s "
      "is all drives together.")

p("reel's own figures as reel-bench records them after each run (logical bytes ÷ pack bytes, the catalog "
  "not counted; reel's own statistics, and where reel-bench has them the same reduction recomputed from "
  "the pack files alone):")
p("")
p("| run | dedup | compression | reduction | of ideal | reduction from the pack files |")
p("|---|---:|---:|---:|---:|---:|")
for name, r in (("1 drive", reel1), ("4 drives", reel4)):
    st = (r or {}).get("storage") or {}
    red = st.get("reduction")
    packs = (st.get("packs") or {}).get("reduction_ratio")
    p(f"| {name} | {f(st.get('dedup'), '{:.2f}')} | {f(st.get('compression'), '{:.2f}')} | {f(red, '{:.2f}:1')} | "
      f"{f(ratio(red, ideal) and ratio(red, ideal) * 100, '{:.1f} %')} | {f(packs, '{:.2f}:1')} |")
p("")

# Goals.
goals = []
def goal(text, value, need, detail):
    if value is None:
        goals.append(dict(goal=text, met=None, detail="not measured"))
        return
    goals.append(dict(goal=text, met=value >= need, value=value, need=need,
                      margin=value / need - 1, detail=detail))

w = lambda r: r["write"]["mb_per_s"] if r else None
goal("reel ingest ≥ 1.2× tgt, one drive (256 KiB records)", ratio(w(reel1), w(tgt1)), 1.2,
     f"{f(ratio(w(reel1), w(tgt1)), '{:.2f}')}× ({f(w(reel1))} vs {f(w(tgt1))} MB/s)")
goal("reel ingest ≥ 1.5× tgt, four drives (256 KiB records)", ratio(w(reel4), w(tgt4)), 1.5,
     f"{f(ratio(w(reel4), w(tgt4)), '{:.2f}')}× ({f(w(reel4))} vs {f(w(tgt4))} MB/s)")
for name, r in (("one drive", reel1), ("four drives", reel4)):
    red = ((r or {}).get("storage") or {}).get("reduction")
    tgt_r = tgt1 if r is reel1 else tgt4
    tgt_red = ratio(tgt_r["write"]["bytes"], (tgt_r.get("storage") or {}).get("disk_bytes")) if tgt_r else None
    goal(f"reel's data reduction ≥ 0.97 of ideal ({name})", ratio(red, ideal), 0.97,
         f"{f(red, '{:.2f}')}:1 of an ideal {ideal:.2f}:1 = {f(ratio(red, ideal), '{:.3f}')} (tgt stores everything: {f(tgt_red, '{:.2f}')}:1)")
ok_peers = [x for x in one if x["tool"] in ("restic", "borg", "kopia") and x["ingest"] is not None]
if ok_peers and reel1:
    fastest = max(ok_peers, key=lambda x: x["ingest"])
    r1 = one[0]
    goal(f"reel ingest ≥ 2× the faster of restic and borg ({fastest['tool']})", ratio(r1["ingest"], fastest["ingest"]), 2.0,
         f"{ratio(r1['ingest'], fastest['ingest']):.2f}× ({r1['ingest']:.0f} vs {fastest['ingest']:.0f} MB/s)")
    goal(f"… with a reduction at least as good as {fastest['tool']}'s", ratio(r1["reduction"], fastest["reduction"]), 1.0,
         f"{r1['reduction']:.2f}:1 vs {fastest['reduction']:.2f}:1 (bytes in ÷ bytes stored on disk)")
else:
    goals.append(dict(goal="reel ingest ≥ 2× the faster of restic and borg, reduction at least as good", met=None,
                      detail="not measured (no peer or no reel run)"))

p("## Goals")
p("")
for g in goals:
    state = "not measured" if g["met"] is None else ("MET" if g["met"] else "MISSED")
    margin = "" if g["met"] is None else f"; margin {g['margin'] * 100:+.0f} %"
    p(f"- **{state}** {g['goal']} — {g['detail']}{margin}")
p("")
p("Margin: how far the measured figure is above (+) or below (−) what the goal needs, relative to what it needs.")
if rb:
    m = rb.get("machine", {})
    p("")
    p(f"reel-bench's own load averages: {m.get('load_average_start')} at its start, {m.get('load_average_end')} at its end.")
print("\n".join(out))

merged = dict(generated=env["CMP_STARTED"], binaries=env["CMP_BINARIES"], size_per_stream=size,
              generator=env["CMP_GEN"], load_average_before=env["CMP_LOAD_BEFORE"],
              load_average_after=env["CMP_LOAD_AFTER"],
              commands=[l.rstrip("\n") for l in open(env["CMP_COMMANDS"])],
              identity=identity,
              ideal=dict(generator_dedup=gen_dedup, distinct_block_bytes=distinct, zstd1_bytes=zbytes,
                         compression=ideal_comp, reduction=ideal),
              goals=goals, reel_bench=rb, peers=peers)
with open(env["CMP_JSON"], "w") as fh:
    json.dump(merged, fh, indent=1)
    fh.write("\n")
EOF

{
  cat "$work/head.md" "$work/body.md"
  if [[ -s $work/peers.md ]]; then
    echo
    echo "bench/peers/run.sh's own table:"
    echo
    cat "$work/peers.md"
  fi
  echo
  carry_notes "$out" "$marker"
} >"$work/report.md"
mv "$work/report.md" "$out"
cat "$work/body.md"
log "wrote $out and $json_out"
