#!/usr/bin/env bash
# The whole test suite, as CI runs it. Installs what it needs on a fresh Debian machine with the
# Rust toolchain. Usage: scripts/test-all.sh [--quick] [--no-vm]
#   --quick  skips the fuzz smoke run; --no-vm skips the kernel-initiator VM checks (tests/vm)
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0 vm=1 skipped=""
for arg in "$@"; do
  case $arg in
    --quick) quick=1 ;;
    --no-vm) vm=0 ;;
    *) echo "unknown argument: $arg" >&2; exit 2 ;;
  esac
done

# Each step's wall time is printed when the next one starts (CI's limit is on the whole run).
step_name="" step_started=$SECONDS
step() {
  [ -z "$step_name" ] || printf '    (took %d s; %d s since the start)\n' $((SECONDS - step_started)) "$SECONDS"
  step_name=$* step_started=$SECONDS
  printf '\n==> %s\n' "$*"
}

need_pkgs=()
{ command -v cc && command -v c++; } >/dev/null || need_pkgs+=(build-essential)
command -v pkg-config >/dev/null || need_pkgs+=(pkg-config)
# libiscsi's clients and test suite run against `reel serve` (crates/reel/tests/libiscsi.rs).
command -v iscsi-test-cu >/dev/null || need_pkgs+=(libiscsi-bin)
[ -f /usr/include/iscsi/iscsi.h ] || need_pkgs+=(libiscsi-dev)
[ -x /usr/sbin/tgtd ] && [ -x /usr/sbin/tgtadm ] && [ -x /usr/sbin/tgtimg ] || need_pkgs+=(tgt)
command -v openssl >/dev/null || need_pkgs+=(openssl)
command -v curl >/dev/null || need_pkgs+=(curl)
if [ "$vm" -eq 1 ]; then
  # The VM harness's host side (tests/vm/run.sh checks for these before it builds the image).
  command -v socat >/dev/null || need_pkgs+=(socat)
  command -v qemu-system-x86_64 >/dev/null || need_pkgs+=(qemu-system-x86)
  command -v qemu-img >/dev/null || need_pkgs+=(qemu-utils)
  command -v mmdebstrap >/dev/null || need_pkgs+=(mmdebstrap)
fi
if [ ${#need_pkgs[@]} -gt 0 ]; then
  step "installing Debian packages: ${need_pkgs[*]}"
  sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${need_pkgs[@]}"
fi
rustup component add rustfmt clippy >/dev/null 2>&1 || true

step "format"
cargo fmt --all -- --check

step "S3 servers for the object-storage tests (versitygw, s3proxy)"
scripts/s3-servers.sh install
step "clippy and tests (release profile; crash test: ${REEL_CRASH_KILLS:-200} kills; two test binaries at a time)"
# cargo test --workspace --release, but two test binaries at a time (many of them mostly wait:
# leases expiring, S3 servers answering 503 on purpose, processes killed and restarted).
# --clippy: the build is clippy-driver's with -D warnings, which lints what `cargo clippy
# --workspace --all-targets --all-features --release -- -D warnings` would, without that
# command's separate check build of every crate (scripts/run-tests.py says how).
python3 scripts/run-tests.py --clippy
step "tape cross-check smoke run: libiscsi client (gcc -Werror) and reel bench tape against tgt, 32 MiB" && bench/compare/crosscheck.sh --smoke --reel target/release/reel

# The alerting rules with Prometheus's own checker: syntax, then their unit tests (each alert fires
# on the series that should raise it). crates/reel/tests/monitoring.rs checks the metric names.
step "monitoring: promtool check rules, promtool test rules"
promtool=$(scripts/promtool.sh)
(cd packaging/monitoring && "$promtool" check rules reel-alerts.yml && "$promtool" test rules reel-alerts.test.yml)

# The web console in headless Debian chromium (Playwright) against a real `reel serve`;
# installs chromium and a Python venv on first use.
step "web console in a real browser"
REEL_BIN=target/release/reel tests/browser/run.sh -q

# The Debian package: built, installed into a clean bookworm root (mmdebstrap), its unit's
# ExecStart run as the unit would (user reel, sd_notify readiness), served over iSCSI, upgraded
# (conffile and data kept), purged.
step "Debian package: build, install, serve, upgrade, purge"
packaging/deb/test.sh --binary target/release/reel

if [ "$vm" -eq 1 ]; then
  # A real Linux kernel initiator (open-iscsi, st, sg, ch, mt, mtx, tar, btape) in qemu against
  # `reel serve` on loopback; the scripts install qemu/mmdebstrap/socat and build the guest
  # image once (cached under /var/cache/reel-vm).
  #
  # The suites run two at a time: under TCG one VM keeps about 1.2 of the 2 cores busy (the
  # guest's tools, reel, socat), so two lanes take well under the time of one after the other.
  # Each suite starts its own reel (and S3 server) on ports chosen at random by
  # scripts/free-ports.py and boots its own copy-on-write VM of the one image; its TAP goes to
  # DIR/NAME.tap, its messages to DIR/NAME.log, and both are printed in order once the lanes are
  # done. target/vm-tap/ feeds the compatibility matrix (docs/compatibility-matrix.md).
  #   iscsi      login, CHAP, ACL, digests, restart
  #   bucket     disaster recovery on object storage through the kernel's st: versitygw on
  #              loopback, tar/dd on three cartridges, the node's directory deleted, reel
  #              recover, everything read back
  #   cluster    two nodes on one bucket: a login at the standby's portal is redirected to the
  #              lease holder, the holder is killed, the standby takes over and serves what was
  #              written through the first
  #   tape       tape drives through st/sg/ch, mt, mtx, tar, dd, btape fill
  #   tape-apps  whole Bacula jobs (director, autochanger, file daemon), LTFS, Amanda, every
  #              changer personality
  #   package    the Debian package under a real systemd: the same image booted with systemd as
  #              PID 1 installs it, waits for sd_notify readiness, writes and reads a tape
  #              through the kernel initiator, stops, upgrades and purges it
  # Bacula's and Amanda's long drive tests (btape test/auto, amtapetype: ~5 min under TCG) run
  # only with REEL_VM_TAPE=full; REEL_VM_TAPE=0 skips the tape suites.
  rm -rf target/vm-tap target/vm-package && mkdir -p target/vm-tap target/vm-package
  step "kernel initiator in VMs, two suites at a time"
  tests/vm/build-image.sh --quiet
  tape_sections="inventory map basics tar eod ili dd cartridge bench wp encryption shared multi restart kill partition fill"
  app_sections="bacula ltfs amanda changers"
  case "${REEL_VM_TAPE:-ci}" in
    full | 1) tape_sections="$tape_sections btape amtapetype" ;;
    0 | off) tape_sections="" app_sections="" skipped="$skipped vm-tape-suites(REEL_VM_TAPE=0)" ;;
    *) skipped="$skipped vm-long-drive-tests(btape test/auto, amtapetype: REEL_VM_TAPE=full)" ;;
  esac
  vm_suite() { # NAME: run suite NAME, its outcome into DIR/NAME.{tap,log,rc,s}
    local name=$1 dir=target/vm-tap t0=$SECONDS rc=0 cmd
    local reel=target/release/reel
    case $name in
      iscsi) cmd=(tests/vm/iscsi-test.sh --target reel --reel-bin "$reel") ;;
      bucket) cmd=(tests/vm/tape-test.sh --reel-bin "$reel" --bucket) ;;
      cluster) cmd=(tests/vm/tape-test.sh --reel-bin "$reel" --cluster) ;;
      tape) cmd=(tests/vm/tape-test.sh --reel-bin "$reel" --sections "$tape_sections") ;;
      tape-apps) cmd=(tests/vm/tape-test.sh --reel-bin "$reel" --sections "$app_sections") ;;
      package) cmd=(tests/vm/package-test.sh --binary "$reel") dir=target/vm-package ;;
    esac
    case $name in tape) [ -n "$tape_sections" ] || return 0 ;; tape-apps) [ -n "$app_sections" ] || return 0 ;; esac
    "${cmd[@]}" >"$dir/$name.tap" 2>"$dir/$name.log" </dev/null || rc=$?
    echo "$rc" >"$dir/$name.rc"
    echo $((SECONDS - t0)) >"$dir/$name.s"
    printf '    %s: %s (exit %d, %d s)\n' "$name" "$(tail -n 1 "$dir/$name.tap")" "$rc" $((SECONDS - t0))
  }
  # Two lanes of about the same length (alone, on 2 cores under TCG: tape-apps ~9 min,
  # package ~2; iscsi ~1.5, bucket ~2.3, cluster ~1.4, tape ~7).
  (for name in tape-apps package; do vm_suite "$name"; done) &
  lane_a=$!
  (for name in iscsi bucket cluster tape; do vm_suite "$name"; done) &
  lane_b=$!
  wait "$lane_a" "$lane_b" || true
  vm_failed=""
  for entry in \
    "iscsi|kernel initiator in a VM: iSCSI login, CHAP, ACL, digests, restart" \
    "bucket|kernel initiator in a VM: disaster recovery from an S3 bucket" \
    "cluster|kernel initiator in a VM: two nodes on one bucket, login redirect and failover" \
    "tape|kernel initiator in a VM: tape drives and the tools of the Linux tape stack" \
    "tape-apps|kernel initiator in a VM: Bacula, LTFS, Amanda and every changer personality" \
    "package|Debian package under systemd in a VM: readiness, tape through the kernel initiator, stop, upgrade, purge"; do
    name=${entry%%|*} dir=target/vm-tap
    [ "$name" = package ] && dir=target/vm-package
    case $name in tape) [ -n "$tape_sections" ] || continue ;; tape-apps) [ -n "$app_sections" ] || continue ;; esac
    # a suite that left no exit status never finished: a failure, not a pass
    [ -f "$dir/$name.rc" ] || { echo "VM suite $name left no result" >&2; vm_failed="$vm_failed $name"; continue; }
    printf '\n==> %s (%s s in its lane)\n' "${entry#*|}" "$(cat "$dir/$name.s")"
    cat "$dir/$name.tap"
    [ -s "$dir/$name.log" ] && sed 's/^/    | /' "$dir/$name.log" >&2
    [ "$(cat "$dir/$name.rc")" = 0 ] || vm_failed="$vm_failed $name"
  done
  [ -z "$vm_failed" ] || { echo "VM suites failed:$vm_failed" >&2; exit 1; }
  step "compatibility matrix from the VM runs (docs/compatibility-matrix.md)"
  tests/vm/matrix.sh docs/compatibility-matrix.md target/vm-tap/*.tap
fi

if [ "$quick" -eq 0 ]; then
  step "fuzz smoke run (${REEL_FUZZ_SECONDS:-5} s per target)"
  if rustup toolchain list | grep -q nightly || rustup toolchain install nightly --profile minimal >/dev/null 2>&1; then
    command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked -q
    # Every target in one build, so the runs below find them built (built one run at a time,
    # each linked in turn: the stage took five times as long). Debug assertions (overflow
    # checks in every parser) instead of AddressSanitizer: the workspace denies unsafe code,
    # so ASan watched only the dependencies, and cost ~45 s of the build (179 → 132 s, one run each).
    fuzz_flags=(--sanitizer none --debug-assertions)
    (cd fuzz && cargo +nightly fuzz build "${fuzz_flags[@]}")
    # Two targets at a time (libFuzzer runs one thread each: 13 targets took 82 s one after
    # the other on 2 cores); each one's last lines are printed whole, in order, once both end.
    fuzz_log=target/fuzz-smoke && rm -rf "$fuzz_log" && mkdir -p "$fuzz_log"
    fuzz_one() { # TARGET: its output into $fuzz_log/TARGET.log, its exit status into .rc
      local target=$1 seeds="" rc=0
      # fuzz/seeds/<target> is the committed corpus; new finds go to the ignored fuzz/corpus.
      mkdir -p "fuzz/corpus/$target"
      [ -d "fuzz/seeds/$target" ] && seeds="seeds/$target"
      (cd fuzz && cargo +nightly fuzz run "${fuzz_flags[@]}" "$target" "corpus/$target" $seeds -- -max_total_time="${REEL_FUZZ_SECONDS:-5}" -rss_limit_mb=2048) >"$fuzz_log/$target.log" 2>&1 || rc=$?
      echo "$rc" >"$fuzz_log/$target.rc"
    }
    fuzz_failed=""
    fuzz_targets=($(cd fuzz && cargo +nightly fuzz list))
    for ((i = 0; i < ${#fuzz_targets[@]}; i += 2)); do
      pair=("${fuzz_targets[@]:i:2}")
      for target in "${pair[@]}"; do fuzz_one "$target" & done
      wait
      for target in "${pair[@]}"; do
        rc=$(cat "$fuzz_log/$target.rc" 2>/dev/null || echo none)
        echo "--- $target (exit $rc)"
        if [ "$rc" = 0 ]; then tail -n 3 "$fuzz_log/$target.log"; else tail -n 40 "$fuzz_log/$target.log"; fi
        [ "$rc" = 0 ] || fuzz_failed="$fuzz_failed $target"
      done
    done
    [ -z "$fuzz_failed" ] || { echo "fuzz targets failed:$fuzz_failed (logs in $fuzz_log)" >&2; exit 1; }
  else
    echo "no nightly toolchain available: fuzz smoke run skipped" >&2
    skipped="$skipped fuzz-smoke-run(no-nightly)"
  fi
fi

# What did not run is named, never counted as passed.
[ "$quick" -eq 0 ] || skipped="$skipped fuzz-smoke-run(--quick)"
[ "$vm" -eq 1 ] || skipped="$skipped vm-suites(--no-vm)"
if [ -n "$skipped" ]; then
  step "all tests that ran passed; not run:$skipped"
else
  step "all tests passed"
fi
