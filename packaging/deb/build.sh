#!/usr/bin/env bash
# Build reel's Debian package from this checkout.
#
#   packaging/deb/build.sh [--version VERSION] [--binary PATH] [--out DIR]
#
# VERSION defaults to the workspace version with Debian revision 1 (0.1.0-1); --binary to
# target/release/reel (built when missing); DIR to target/deb. Prints the .deb's path.
# The package: /usr/bin/reel (debug info stripped), reel.service (Type=notify, hardened),
# /etc/reel/reel.toml (a conffile: the embedded default made explicit), man pages and shell
# completions generated from the command-line definition (`reel man`, `reel completions`), the
# README and the user guide; maintainer scripts make the `reel` system user and /var/lib/reel
# (0700), and purge the user (the data only with REEL_PURGE_DATA=yes). Needs dpkg-deb, binutils.
set -euo pipefail

DEB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$DEB_DIR/../.." && pwd)
VERSION="" BIN="" OUT=$REPO/target/deb
while [ $# -gt 0 ]; do
	case "$1" in
	--version) VERSION=${2:?}; shift 2 ;;
	--binary) BIN=${2:?}; shift 2 ;;
	--out) OUT=${2:?}; shift 2 ;;
	-h | --help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "build.sh: unknown option $1" >&2; exit 2 ;;
	esac
done
if [ -z "$VERSION" ]; then
	VERSION="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$REPO/Cargo.toml" | head -n 1)-1"
fi
if [ -z "$BIN" ]; then
	BIN=$REPO/target/release/reel
	[ -x "$BIN" ] || (cd "$REPO" && cargo build --release -p reel >&2)
fi
[ -x "$BIN" ] || { echo "build.sh: no reel binary at $BIN" >&2; exit 1; }
ARCH=$(dpkg --print-architecture)

ROOT=$(mktemp -d)
trap 'rm -rf "$ROOT"' EXIT
install -d -m 0755 "$ROOT/usr/bin" "$ROOT/DEBIAN"
strip --strip-debug -o "$ROOT/usr/bin/reel" "$BIN"
chmod 0755 "$ROOT/usr/bin/reel"
install -D -m 0644 "$DEB_DIR/reel.service" "$ROOT/lib/systemd/system/reel.service"
install -D -m 0644 "$DEB_DIR/reel.toml" "$ROOT/etc/reel/reel.toml"
# Man pages and completions come from the binary's own command-line definition.
install -d -m 0755 "$ROOT/usr/share/man/man1"
"$ROOT/usr/bin/reel" man "$ROOT/usr/share/man/man1"
gzip -9n "$ROOT"/usr/share/man/man1/*.1
install -d -m 0755 "$ROOT/usr/share/bash-completion/completions" \
	"$ROOT/usr/share/zsh/vendor-completions" "$ROOT/usr/share/fish/vendor_completions.d"
"$ROOT/usr/bin/reel" completions bash >"$ROOT/usr/share/bash-completion/completions/reel"
"$ROOT/usr/bin/reel" completions zsh >"$ROOT/usr/share/zsh/vendor-completions/_reel"
"$ROOT/usr/bin/reel" completions fish >"$ROOT/usr/share/fish/vendor_completions.d/reel.fish"
install -d -m 0755 "$ROOT/usr/share/doc/reel/guide"
install -m 0644 "$REPO/README.md" "$ROOT/usr/share/doc/reel/README.md"
install -m 0644 "$REPO"/docs/guide/*.md "$ROOT/usr/share/doc/reel/guide/"
cat >"$ROOT/usr/share/doc/reel/copyright" <<'EOF'
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: reel
Files: *
License: see the project's repository
EOF
find "$ROOT/usr/share" -type f -exec chmod 0644 {} +
install -m 0755 "$DEB_DIR/postinst" "$DEB_DIR/prerm" "$DEB_DIR/postrm" "$ROOT/DEBIAN/"
echo /etc/reel/reel.toml >"$ROOT/DEBIAN/conffiles"
# Depends: the packages of the shared libraries the binary needs.
deps=$(objdump -p "$BIN" | awk '$1 == "NEEDED" { print $2 }' | while read -r lib; do
	{ dpkg -S "*/$lib" 2>/dev/null || true; } | head -n 1 | cut -d: -f1
done | sort -u | paste -sd, | sed 's/,/, /g')
cat >"$ROOT/DEBIAN/control" <<EOF
Package: reel
Version: $VERSION
Architecture: $ARCH
Maintainer: reel developers <reel@localhost>
Depends: ${deps:-libc6}, adduser
Section: admin
Priority: optional
Installed-Size: $(du -sk --exclude=DEBIAN "$ROOT" | cut -f1)
Description: deduplicating virtual tape library over iSCSI
 reel serves LTO tape drives and a robotic changer over iSCSI to unmodified backup
 software and keeps the cartridges in a deduplicating, compressing chunk store on local
 disk or S3-compatible object storage. The service (reel.service) starts one library on
 loopback, configured in /etc/reel/reel.toml, with its data in /var/lib/reel.
EOF
mkdir -p "$OUT"
deb=$OUT/reel_${VERSION}_${ARCH}.deb
dpkg-deb --root-owner-group -Zxz --build "$ROOT" "$deb" >/dev/null
echo "$deb"
