#!/bin/sh
# aarch64-sysroot.sh [DIR] -- the Arm64 libraries tests/aarch64.sh links dyn with and runs it
# on: Debian's arm64 packages of LLVM 19, Check and their run-time libraries, fetched with
# apt-get download and unpacked with dpkg -x into DIR (default: the cache dir below), so that
# nothing is installed over the host's amd64 LLVM.  Needs `dpkg --add-architecture arm64` and
# apt-get update (build-aux/setup.sh does both).  Safe to run again: a stamp names the
# versions unpacked, and the packages are fetched again only when one of them changed.
dir=${1:-${DYN_AARCH64_SYSROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/dyn/aarch64-sysroot}}
# What LLVM's shared library, Check's static one and a C program need at link and run time.
pkgs="libc6 libgcc-s1 libstdc++6 libllvm19 llvm-19-dev libedit2 libbsd0 libmd0 libtinfo6
      libffi8 libxml2 libicu72 liblzma5 libz3-4 libzstd1 zlib1g check libsubunit-dev libsubunit0"
want=
for p in $pkgs; do
  v=$(apt-cache policy "$p:arm64" 2>/dev/null | sed -n 's/^ *Candidate: *//p')
  case $v in
    ''|'(none)') echo "aarch64-sysroot: no arm64 package $p (dpkg --add-architecture arm64; apt-get update)" >&2
                 exit 1 ;;
  esac
  want="$want$p=$v
"
done
if [ -f "$dir/.stamp" ] && [ "$(cat "$dir/.stamp")" = "$want" ]; then
  echo "$dir"; exit 0
fi
rm -rf "$dir" && mkdir -p "$dir/.debs" || exit 1
( cd "$dir/.debs" && apt-get download -qq -o APT::Sandbox::User=root $(for p in $pkgs; do printf '%s:arm64 ' "$p"; done) ) ||
  { echo "aarch64-sysroot: apt-get download failed" >&2; exit 1; }
for d in "$dir"/.debs/*.deb; do dpkg -x "$d" "$dir" || exit 1; done
rm -rf "$dir/.debs" "$dir/usr/share/doc" "$dir/usr/share/man"
# llvm-19-dev's static component libraries: the cross build links libLLVM-19.so alone.
rm -f "$dir"/usr/lib/llvm-19/lib/*.a
# Absolute symbolic links (libfoo.so -> /lib/...) would lead out of the sysroot: make them
# relative to it.
find "$dir" -type l | while read -r l; do
  t=$(readlink "$l")
  case $t in /*) ln -sfn "$dir$t" "$l" ;; esac
done
printf '%s' "$want" > "$dir/.stamp"
echo "$dir"
