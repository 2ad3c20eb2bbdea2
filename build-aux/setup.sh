#!/bin/sh
# setup.sh -- install what dyn needs on Debian 12 (when missing), then configure and build.
# Used by the README's first two commands and by CI.  Safe to run again: it installs only
# what is missing and rebuilds only what changed.
set -e
cd "$(dirname "$0")/.."
pkgs="build-essential autoconf automake libtool pkg-config llvm-19-dev libreadline-dev check
      libopenblas-dev libdnnl-dev python3-numpy python3-torch qemu-user libpng-dev vim zlib1g-dev"
missing=
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  if [ "$(id -u)" = 0 ]; then sudo=; else sudo=sudo; fi
  echo "setup: installing$missing"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $missing
fi
[ -x configure ] || autoreconf -fi
[ -f Makefile ] || ./configure
make -j"$(nproc)"
