#!/bin/sh
# setup.sh -- install what dyn needs on Debian 12 (when missing), then configure and build.
# Used by the README's first two commands and by CI.  Safe to run again: it installs only
# what is missing and rebuilds only what changed.
set -e
cd "$(dirname "$0")/.."
pkgs="build-essential autoconf automake libtool pkg-config llvm-19-dev libreadline-dev check
      libopenblas-dev libdnnl-dev python3-numpy python3-torch qemu-user libpng-dev vim zlib1g-dev"
# the Jupyter kernel's tests, without the recommended TeX and pandoc nbconvert would bring
lean="python3-ipykernel jupyter-nbconvert"
missing=
for p in $pkgs $lean; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  if [ "$(id -u)" = 0 ]; then sudo=; else sudo=sudo; fi
  echo "setup: installing$missing"
  $sudo apt-get update -qq
  full= bare=
  for p in $missing; do
    case " $lean " in *" $p "*) bare="$bare $p" ;; *) full="$full $p" ;; esac
  done
  [ -z "$full" ] || DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $full
  [ -z "$bare" ] || DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $bare
fi
# tests/aarch64.sh: dyn cross-built for Arm64 and run under qemu-aarch64, with Debian's arm64
# LLVM, Check and libraries unpacked into a sysroot of their own (nothing arm64 is installed).
# Only on an x86-64 Debian; without any of it that test skips.
if [ "$(dpkg --print-architecture 2>/dev/null)" = amd64 ]; then
  if [ "$(id -u)" = 0 ]; then sudo=; else sudo=sudo; fi
  if ! dpkg-query -W -f='${Status}' gcc-aarch64-linux-gnu 2>/dev/null | grep -q "ok installed"; then
    echo "setup: installing gcc-aarch64-linux-gnu"
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq gcc-aarch64-linux-gnu libc6-dev-arm64-cross || true
  fi
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    $sudo dpkg --add-architecture arm64 && $sudo apt-get update -qq || true
  fi
  sh build-aux/aarch64-sysroot.sh > /dev/null || echo "setup: no arm64 sysroot: tests/aarch64.sh runs without LLVM"
fi
[ -x configure ] || autoreconf -fi
[ -f Makefile ] || ./configure
make -j"$(nproc)"
