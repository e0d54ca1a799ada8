#!/usr/bin/env bash
# Build the Debian guest that the VM test harness boots, once, and cache it.
#
#   tests/vm/build-image.sh [--rebuild] [--print-dir] [--quiet]
#
# The image is keyed by a hash of its inputs (suite, package list, this file,
# guest/reel-vm-init, the host's apt sources) and lives in
#   ${REEL_VM_CACHE:-/var/cache/reel-vm}/img-<hash>/
#       vmlinuz  initrd.img  rootfs.ext4  packages.txt  build.log  ok
# With an up-to-date image the script returns at once.  --print-dir prints the
# image directory on stdout (run.sh uses it).  Needs root (mmdebstrap in root
# mode) and the host packages below, which it installs when missing.
set -euo pipefail

VM_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${REEL_VM_CACHE:-/var/cache/reel-vm}
SUITE=bookworm

REBUILD=0 PRINT=0 QUIET=0
while [ $# -gt 0 ]; do
	case "$1" in
	--rebuild) REBUILD=1 ;;
	--print-dir) PRINT=1 ;;
	--quiet) QUIET=1 ;;
	-h | --help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "build-image.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
say() { [ "$QUIET" = 1 ] || echo "build-image: $*" >&2; }

# What goes into the guest.  Tape tools are there for the SSC/SMC checks of
# later issues (mt, mtx, btape, amtapetype).  Not declared by Debian but
# needed: libencode-locale-perl (amtapetype fails without it); msmtp-mta is
# only the smallest way to satisfy amanda's mail-transport-agent dependency.
PACKAGES=(
	linux-image-amd64 initramfs-tools kmod udev iproute2 procps psmisc
	open-iscsi sg3-utils lsscsi
	mt-st mtx tar coreutils
	bacula-sd amanda-server libencode-locale-perl msmtp-mta
	stenc
	bacula-director bacula-director-sqlite3 bacula-fd bacula-console sqlite3 amanda-client
	fuse libfuse2 libxml2 libicu72 libuuid1 attr
	systemd adduser
)
HOST_PACKAGES=(mmdebstrap qemu-system-x86 qemu-utils e2fsprogs socat)

apt_sources() {
	# The host's own apt configuration decides the mirror (this machine may
	# only reach a configured one).  deb822 files are passed to mmdebstrap
	# as they are; one-line sources.list entries for the suite are kept too.
	local f
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] && grep -qiE "^Suites:.*\b$SUITE\b" "$f" && echo "$f"
	done
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -f "$f" ] && grep -qE "^deb .* $SUITE( |-)" "$f" && echo "$f"
	done
	return 0
}
mapfile -t SOURCES < <(apt_sources)

inputs_hash() {
	{
		echo "suite $SUITE"
		echo "packages ${PACKAGES[*]}"
		cat "$VM_DIR/build-image.sh" "$VM_DIR/guest/reel-vm-init"
		for f in "${SOURCES[@]+"${SOURCES[@]}"}"; do cat "$f"; done
	} | sha256sum | cut -c1-16
}
HASH=$(inputs_hash)
IMG="$CACHE/img-$HASH"

ready() { [ -f "$IMG/ok" ] && [ -s "$IMG/vmlinuz" ] && [ -s "$IMG/initrd.img" ] && [ -s "$IMG/rootfs.ext4" ]; }
done_print() { [ "$PRINT" = 1 ] && echo "$IMG"; exit 0; }

if [ "$REBUILD" = 0 ] && ready; then
	say "image $IMG is up to date"
	done_print
fi

[ "$(id -u)" = 0 ] || { echo "build-image.sh: needs root (mmdebstrap --mode=root)" >&2; exit 1; }
[ "${#SOURCES[@]}" -gt 0 ] || { echo "build-image.sh: no apt source for $SUITE in /etc/apt" >&2; exit 1; }

need=()
for p in "${HOST_PACKAGES[@]}"; do
	dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null | grep -qx installed || need+=("$p")
done
if [ "${#need[@]}" -gt 0 ]; then
	say "installing host packages: ${need[*]}"
	apt-get -o DPkg::Lock::Timeout=1200 update -qq
	DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=1200 install -y -qq \
		--no-install-recommends "${need[@]}" >/dev/null
fi

mkdir -p "$CACHE"
# One builder at a time; a second caller waits and then finds the image.
exec 9>"$CACHE/.build.lock"
flock 9
if [ "$REBUILD" = 0 ] && ready; then done_print; fi

T0=$(date +%s)
WORK="$CACHE/work-$HASH"
rm -rf "$WORK" "$IMG"
mkdir -p "$WORK"
LOG="$WORK/build.log"

# Runs before the packages are unpacked: make the kernel's postinst build a
# small initramfs (only the modules listed later, gzip: no zstd in minbase).
cat >"$WORK/essential.sh" <<'EOF'
#!/bin/sh
set -e
mkdir -p "$1/etc/initramfs-tools/conf.d"
printf 'MODULES=list\nCOMPRESS=gzip\n' >"$1/etc/initramfs-tools/conf.d/reel-vm.conf"
EOF

# Runs at the end, inside the finished tree.
cat >"$WORK/customize.sh" <<EOF
#!/bin/sh
set -e
R="\$1"
install -m 0755 "$VM_DIR/guest/reel-vm-init" "\$R/sbin/reel-vm-init"
# Booted with init=/lib/systemd/systemd and reel.systemd on the kernel command line (run.sh
# --systemd), systemd is PID 1 and this unit runs the same per-run guest logic as a service:
# the Debian package's test of reel.service under a real systemd (tests/vm/package-test.sh).
cat >"\$R/etc/systemd/system/reel-vm.service" <<'UNIT'
[Unit]
Description=reel VM test run under systemd
ConditionKernelCommandLine=reel.systemd
After=basic.target
[Service]
Type=simple
ExecStart=/sbin/reel-vm-init
StandardOutput=journal+console
StandardError=journal+console
[Install]
WantedBy=multi-user.target
UNIT
mkdir -p "\$R/etc/systemd/system/multi-user.target.wants"
ln -sf /etc/systemd/system/reel-vm.service "\$R/etc/systemd/system/multi-user.target.wants/reel-vm.service"
# The applications' own daemons stay off (the tape tests start what they need by hand).
# No getty on the serial ports either: ttyS1 is the result port.
for unit in bacula-sd.service bacula-fd.service bacula-director.service amanda.socket \
	getty@tty1.service serial-getty@ttyS0.service serial-getty@ttyS1.service; do
	ln -sf /dev/null "\$R/etc/systemd/system/\$unit"
done
printf 'virtio_pci\nvirtio_blk\next4\n' >>"\$R/etc/initramfs-tools/modules"
chroot "\$R" update-initramfs -u -k all
echo reel-vm >"\$R/etc/hostname"
printf '127.0.0.1 localhost reel-vm\n' >"\$R/etc/hosts"
printf '/dev/vda / ext4 rw 0 1\n' >"\$R/etc/fstab"
for tool in systemctl adduser iscsiadm iscsid sg_inq sg_vpd lsscsi mt mtx tar dd btape amtapetype timeout stenc bacula-dir bacula-fd bconsole sqlite3; do
	chroot "\$R" sh -c "command -v \$tool" >/dev/null || { echo "guest lacks \$tool" >&2; exit 1; }
done
chroot "\$R" dpkg-query -W >"$WORK/packages.txt"
rm -f "\$R"/var/cache/apt/archives/*.deb
rm -rf "\$R"/var/lib/apt/lists/*
EOF
chmod 0755 "$WORK/essential.sh" "$WORK/customize.sh"

say "mmdebstrap $SUITE (${#PACKAGES[@]} packages) into $WORK/root; log: $LOG"
include=$(IFS=,; echo "${PACKAGES[*]}")
if ! mmdebstrap --mode=root --variant=minbase --include="$include" \
	--dpkgopt='path-exclude=/usr/share/doc/*' \
	--dpkgopt='path-include=/usr/share/doc/*/copyright' \
	--dpkgopt='path-exclude=/usr/share/man/*' \
	--dpkgopt='path-exclude=/usr/share/locale/*' \
	--essential-hook="$WORK/essential.sh" \
	--customize-hook="$WORK/customize.sh" \
	"$SUITE" "$WORK/root" "${SOURCES[@]}" >"$LOG" 2>&1; then
	echo "build-image.sh: mmdebstrap failed; end of $LOG:" >&2
	tail -n 25 "$LOG" >&2
	exit 1
fi

kernel=$(cd "$WORK/root/boot" && ls vmlinuz-* | sort -V | tail -n 1)
kver=${kernel#vmlinuz-}
cp "$WORK/root/boot/vmlinuz-$kver" "$WORK/vmlinuz"
cp "$WORK/root/boot/initrd.img-$kver" "$WORK/initrd.img"
used=$(du -sm "$WORK/root" | cut -f1)
size=$((used + used / 4 + 200))
say "root tree ${used} MiB, ext4 image ${size} MiB, kernel $kver"
mke2fs -q -F -t ext4 -L reel-vm -d "$WORK/root" "$WORK/rootfs.ext4" "${size}M" >>"$LOG" 2>&1
rm -rf "$WORK/root"
echo "$kver" >"$WORK/kernel-version"
mv "$WORK" "$IMG"
echo "built $(date -u +%FT%TZ) in $(($(date +%s) - T0)) s" >"$IMG/ok"
# Older images (other input hashes) are dead weight.
for old in "$CACHE"/img-*; do
	[ "$old" = "$IMG" ] || rm -rf "$old"
done
say "done in $(($(date +%s) - T0)) s: $IMG"
done_print
