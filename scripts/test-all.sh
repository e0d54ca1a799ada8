#!/usr/bin/env bash
# The whole test suite, as CI runs it. Installs what it needs on a fresh Debian machine with the
# Rust toolchain. Usage: scripts/test-all.sh [--quick] [--no-vm]
#   --quick  skips the fuzz smoke run; --no-vm skips the kernel-initiator VM checks (tests/vm)
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0 vm=1
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

step "clippy"
cargo clippy --workspace --all-targets --all-features --release -- -D warnings

step "S3 servers for the object-storage tests (versitygw, s3proxy)"
scripts/s3-servers.sh install
step "tests (release profile; crash test: ${REEL_CRASH_KILLS:-200} kills)"
cargo test --workspace --release
step "tape cross-check smoke run: libiscsi client (gcc -Werror) and reel bench tape against tgt, 32 MiB" && bench/compare/crosscheck.sh --smoke

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
  # Every VM run's TAP output also goes to target/vm-tap/, from which tests/vm/matrix.sh writes
  # the compatibility matrix (docs/compatibility-matrix.md) at the end.
  rm -rf target/vm-tap && mkdir -p target/vm-tap
  step "kernel initiator in a VM: iSCSI login, CHAP, ACL, digests, restart"
  tests/vm/iscsi-test.sh --target reel --reel-bin target/release/reel | tee target/vm-tap/iscsi.tap
  # Disaster recovery on object storage through the kernel's st: versitygw on loopback, tar/dd
  # on three cartridges, the node's directory deleted, reel recover, everything read back.
  step "kernel initiator in a VM: disaster recovery from an S3 bucket"
  tests/vm/tape-test.sh --reel-bin target/release/reel --bucket | tee target/vm-tap/bucket.tap
  # Two nodes on one bucket: a login at the standby's portal is redirected to the lease holder,
  # the holder is killed, the standby takes over and serves what was written through the first.
  step "kernel initiator in a VM: two nodes on one bucket, login redirect and failover"
  tests/vm/tape-test.sh --reel-bin target/release/reel --cluster | tee target/vm-tap/cluster.tap
  # Tape drives and changers through st/sg/ch, mt, mtx, tar, dd, btape fill. CI runs every
  # section (Bacula jobs through director, autochanger and file daemon included) but Bacula's and
  # Amanda's long drive tests (btape test/auto, amtapetype: ~5 min
  # under TCG); REEL_VM_TAPE=full runs them too, REEL_VM_TAPE=0 skips the tape VM.
  case "${REEL_VM_TAPE:-ci}" in
    0|off) ;;
    full|1)
      step "kernel initiator in a VM: tape drives and changers (all sections)"
      tests/vm/tape-test.sh --reel-bin target/release/reel | tee target/vm-tap/tape.tap ;;
    *)
      step "kernel initiator in a VM: tape drives and changers (all but btape test and amtapetype)"
      tests/vm/tape-test.sh --reel-bin target/release/reel \
        --sections "inventory map basics tar eod ili dd cartridge bench wp encryption bacula ltfs amanda shared multi restart kill partition fill changers" \
        | tee target/vm-tap/tape.tap ;;
  esac
  # The Debian package under a real systemd: the same image booted with systemd as PID 1
  # installs it, waits for sd_notify readiness, writes and reads a tape through the kernel
  # initiator, stops, upgrades and purges it (packaging/deb/test.sh above covers the chroot
  # side: systemd-analyze verify, conffiles, reel doctor).
  step "Debian package under systemd in a VM: readiness, tape through the kernel initiator, stop, upgrade, purge"
  tests/vm/package-test.sh --binary target/release/reel | tee target/vm-package.tap
  step "compatibility matrix from the VM runs (docs/compatibility-matrix.md)"
  tests/vm/matrix.sh docs/compatibility-matrix.md target/vm-tap/*.tap
fi

if [ "$quick" -eq 0 ]; then
  step "fuzz smoke run (${REEL_FUZZ_SECONDS:-5} s per target)"
  if rustup toolchain list | grep -q nightly || rustup toolchain install nightly --profile minimal >/dev/null 2>&1; then
    command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked -q
    for target in $(cd fuzz && cargo +nightly fuzz list); do
      # fuzz/seeds/<target> is the committed corpus; new finds go to the ignored fuzz/corpus.
      mkdir -p "fuzz/corpus/$target"
      seeds=""; [ -d "fuzz/seeds/$target" ] && seeds="seeds/$target"
      (cd fuzz && cargo +nightly fuzz run "$target" "corpus/$target" $seeds -- -max_total_time="${REEL_FUZZ_SECONDS:-5}" -rss_limit_mb=2048 2>&1 | tail -n 3)
    done
  else
    echo "no nightly toolchain available: fuzz smoke run skipped" >&2
  fi
fi

step "all tests passed"
