#!/usr/bin/env bash
# Real S3 servers for reel's object-storage tests (crates/reel-s3test finds them here).
# Usage: scripts/s3-servers.sh install
#   Installs versitygw (Go) into $REEL_TOOLS_DIR/bin/versitygw and s3proxy (Java) as
#   $REEL_TOOLS_DIR/s3proxy.jar; REEL_TOOLS_DIR defaults to ~/.cache/reel-tools. Idempotent: an
#   installed server of the pinned version is kept, so a second run takes well under a second.
set -euo pipefail

VERSITYGW_VERSION=v1.8.0
S3PROXY_VERSION=4.1.0
tools=${REEL_TOOLS_DIR:-$HOME/.cache/reel-tools}

case ${1:-} in
  install) ;;
  *) echo "usage: $0 install" >&2; exit 2 ;;
esac

# Debian packages, only for what is missing. Go is often installed outside apt (/usr/local/go);
# versitygw v1.8.0 needs a recent Go (1.21 or later fetches the toolchain it asks for itself).
[ -x /usr/local/go/bin/go ] && PATH=$PATH:/usr/local/go/bin
need_pkgs=()
command -v go >/dev/null || need_pkgs+=(golang-go)
command -v java >/dev/null || need_pkgs+=(default-jre-headless)
command -v mvn >/dev/null || need_pkgs+=(maven)
command -v curl >/dev/null || need_pkgs+=(curl) # the tests sign requests with curl --aws-sigv4
if [ ${#need_pkgs[@]} -gt 0 ]; then
  echo "installing Debian packages: ${need_pkgs[*]}"
  sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${need_pkgs[@]}"
fi

mkdir -p "$tools/bin"

# A stamp file records the installed version, since neither binary reports it cheaply.
if [ -x "$tools/bin/versitygw" ] && [ "$(cat "$tools/versitygw.version" 2>/dev/null)" = "$VERSITYGW_VERSION" ]; then
  echo "versitygw $VERSITYGW_VERSION: installed"
else
  echo "versitygw $VERSITYGW_VERSION: installing (a few minutes on a cold Go cache)"
  GOBIN="$tools/bin" go install "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION"
  echo "$VERSITYGW_VERSION" >"$tools/versitygw.version"
fi

if [ -f "$tools/s3proxy.jar" ] && [ "$(cat "$tools/s3proxy.version" 2>/dev/null)" = "$S3PROXY_VERSION" ]; then
  echo "s3proxy $S3PROXY_VERSION: installed"
else
  echo "s3proxy $S3PROXY_VERSION: installing"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  # Maven's output (colour codes even with -q) is shown only if it fails.
  if ! mvn -q -B org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy \
    -Dartifact="org.gaul:s3proxy:$S3PROXY_VERSION:jar:jar-with-dependencies" \
    -DoutputDirectory="$tmp" >"$tmp/mvn.log" 2>&1; then
    cat "$tmp/mvn.log" >&2
    echo "s3proxy $S3PROXY_VERSION: Maven could not fetch it" >&2
    exit 1
  fi
  mv "$tmp/s3proxy-$S3PROXY_VERSION-jar-with-dependencies.jar" "$tools/s3proxy.jar"
  echo "$S3PROXY_VERSION" >"$tools/s3proxy.version"
fi
