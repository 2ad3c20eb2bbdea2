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
[ -x configure ] || autoreconf -fi
[ -f Makefile ] || ./configure
make -j"$(nproc)"
