#!/usr/bin/env bash
# Build LTFS, the reference Linear Tape File System (mkltfs, ltfs, ltfsck), from the
# source snapshot in ../shared/third-party for the VM's `ltfs` section, once, and cache it.
#
#   tests/vm/build-ltfs.sh     prints the path of ltfs-opt.tar.gz: the /opt/ltfs tree
#
# LTFS is a test-only client, not part of reel: it is built from the snapshot into a
# scratch directory, never copied into the repository. The snapshot is looked up in
# REEL_THIRD_PARTY (default: ../shared/third-party next to the repository, where CI has it);
# without it the script says so and exits 3. Cache: ${REEL_VM_CACHE:-/var/cache/reel-vm}/ltfs-HASH/.
# Needs root for the host build packages (installed when missing).
set -euo pipefail

VM_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$VM_DIR/../.." && pwd)
THIRD_PARTY=${REEL_THIRD_PARTY:-$REPO/../shared/third-party}
SRC=$THIRD_PARTY/ltfs-7c01479.tar.gz
CACHE=${REEL_VM_CACHE:-/var/cache/reel-vm}
[ -f "$SRC" ] || {
	echo "build-ltfs.sh: $SRC not found: the LTFS source snapshot (CI has ../shared/third-party)" >&2
	exit 3
}
HASH=$({ sha256sum <"$SRC"; cat "$0"; } | sha256sum | cut -c1-16)
OUT=$CACHE/ltfs-$HASH
if [ -s "$OUT/ltfs-opt.tar.gz" ]; then
	echo "$OUT/ltfs-opt.tar.gz"
	exit 0
fi

# Debian bookworm's build dependencies (the snapshot's README lists them).
PACKAGES=(automake autoconf libtool pkg-config make gcc libfuse-dev fuse libxml2-dev uuid-dev
	libicu-dev icu-devtools uthash-dev)
need=()
for p in "${PACKAGES[@]}"; do
	dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null | grep -qx installed || need+=("$p")
done
if [ "${#need[@]}" -gt 0 ]; then
	echo "build-ltfs.sh: installing ${need[*]}" >&2
	apt-get -o DPkg::Lock::Timeout=1200 update -qq
	DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=1200 install -y -qq \
		--no-install-recommends "${need[@]}" >/dev/null
fi

mkdir -p "$CACHE"
exec 9>"$CACHE/.ltfs.lock"
flock 9
[ -s "$OUT/ltfs-opt.tar.gz" ] && { echo "$OUT/ltfs-opt.tar.gz"; exit 0; }
WORK=$(mktemp -d "$CACHE/ltfs-work.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
LOG=$WORK/build.log
tar xzf "$SRC" -C "$WORK"
cd "$WORK/ltfs"
# bookworm has ICU only as pkg-config files; LTFS's configure asks icu-config.
mkdir -p "$WORK/shim"
cat >"$WORK/shim/icu-config" <<'EOF'
#!/bin/sh
case "$1" in
--cppflags | --cflags) exec pkg-config --cflags icu-uc icu-i18n ;;
--version) exec pkg-config --modversion icu-uc ;;
*) exec pkg-config --libs icu-uc icu-i18n ;;
esac
EOF
chmod +x "$WORK/shim/icu-config"
# The snapshot's uthash submodule is empty: Debian's uthash-dev has the headers.
mkdir -p src/libltfs/uthash_submodule/src
ln -sf /usr/include/ut*.h src/libltfs/uthash_submodule/src/
echo "build-ltfs.sh: building LTFS (log: $LOG)" >&2
if ! (
	export PATH=$WORK/shim:$PATH
	./autogen.sh && ./configure --prefix=/opt/ltfs --disable-snmp --enable-icu-6x &&
		nice make -j"$(nproc)" && make install DESTDIR="$WORK/root"
) >"$LOG" 2>&1; then
	tail -n 30 "$LOG" >&2
	echo "build-ltfs.sh: the LTFS build failed" >&2
	exit 1
fi
mkdir -p "$OUT"
tar czf "$OUT/ltfs-opt.tar.gz.tmp" -C "$WORK/root" opt
mv "$OUT/ltfs-opt.tar.gz.tmp" "$OUT/ltfs-opt.tar.gz"
echo "$OUT/ltfs-opt.tar.gz"
