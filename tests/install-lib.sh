#!/bin/sh
# install-lib.sh -- libdyn as someone who embeds it gets it: make install into a temporary
# prefix, then examples/embed.c built with pkg-config against what was installed (shared,
# then static), examples/embed.py run with the installed module (which must load the
# installed library, by the path make install wrote into it), and the shared library's
# dynamic symbols: dyn_* alone.  The examples run from the build tree first.  Skips (77)
# without pkg-config or the shared library.
srcdir_=$(cd "$(dirname "$0")" && pwd)
top_srcdir=${top_srcdir:-$srcdir_/..}
top_builddir=${top_builddir:-$top_srcdir}
cc=${CC:-cc}
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
if ! command -v pkg-config >/dev/null 2>&1; then echo "install-lib.sh: no pkg-config; skipped"; exit 77; fi
if [ ! -f "$top_builddir/.libs/libdyn.so.0" ]; then echo "install-lib.sh: no shared libdyn; skipped"; exit 77; fi
py=
for p in "${PYTHON_NUMPY:-}" /usr/bin/python3 python3; do
  if [ -n "$p" ] && "$p" -c 'import numpy' >/dev/null 2>&1; then py=$p; break; fi
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dyn-install.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
want_c="1.5 3 4.5 6 7.5"
want_py="[1.5 3.  4.5 6.  7.5]
24.0
error: matmul: K is 3 from A (f32[2, 3]) but 2 from B (f32[2, 3])"

# ---- from the build tree ----
if $cc -I"$top_srcdir/include" "$top_srcdir/examples/embed.c" -L"$top_builddir/.libs" -ldyn \
     -Wl,-rpath,"$top_builddir/.libs" -o "$tmp/embed-tree" 2>"$tmp/cc.log" &&
   [ "$("$tmp/embed-tree")" = "$want_c" ]; then ok; else bad "examples/embed.c from the build tree"; cat "$tmp/cc.log"; fi
if [ -n "$py" ]; then
  out=$(cd "$tmp" && DYN_LIBRARY="$top_builddir/.libs/libdyn.so.0" PYTHONPATH="$top_srcdir/python" "$py" "$top_srcdir/examples/embed.py" 2>&1)
  if [ "$out" = "$want_py" ]; then ok; else bad "examples/embed.py from the build tree"; echo "$out"; fi
fi

# ---- installed ----
prefix=$tmp/usr
# the Python directory may have been configured outside the prefix (Debian's dist-packages)
if ! (cd "$top_builddir" && env -u MAKEFLAGS -u MFLAGS make install prefix="$prefix" \
        dyn_pythondir="$prefix/lib/python3/dist-packages" >"$tmp/install.log" 2>&1); then
  tail -20 "$tmp/install.log"; echo "install: $pass passed, $((fail + 1)) failed"; exit 1
fi
# the library directory is the configured one under the prefix: lib, or a multiarch one
lib=$(dirname "$(find "$prefix" -name libdyn.so.0 | head -1)")
for f in "$lib/libdyn.so.0" "$lib/libdyn.a" "$prefix/include/dyn/dyn.h" "$prefix/include/dyn/dlpack.h" \
         "$lib/pkgconfig/dyn.pc" "$prefix/bin/dyn"; do
  if [ -e "$f" ]; then ok; else bad "make install did not install ${f#"$prefix"/}"; fi
done
# dyn.pc names the configured prefix; the test's prefix replaces it
export PKG_CONFIG_PATH="$lib/pkgconfig"
pkgconf() { pkg-config --define-variable=prefix="$prefix" "$@"; }
if [ "$(pkgconf --modversion dyn)" = "$(sed -n 's/^#define DYN_VERSION_STRING "\(.*\)"/\1/p' "$top_srcdir/include/dyn/dyn.h")" ]; then ok
else bad "pkg-config --modversion dyn is not the header's version"; fi
# shared, found at run time through LD_LIBRARY_PATH as an uninstalled prefix must be
# shellcheck disable=SC2046
if $cc -Wall -Wextra -Werror "$top_srcdir/examples/embed.c" $(pkgconf --cflags --libs dyn) -o "$tmp/embed" 2>"$tmp/cc.log" &&
   [ "$(LD_LIBRARY_PATH="$lib" "$tmp/embed")" = "$want_c" ]; then ok; else bad "embed.c against the installed libdyn.so"; cat "$tmp/cc.log"; fi
# static: libdyn.a, then what it needs (pkg-config's Libs.private)
# shellcheck disable=SC2046
if $cc "$top_srcdir/examples/embed.c" $(pkgconf --cflags dyn) "$lib/libdyn.a" \
     $(pkgconf --static --libs-only-other --libs-only-l dyn | sed 's/-ldyn\( \|$\)//') $(pkgconf --static --libs-only-L dyn) \
     -o "$tmp/embed-static" 2>"$tmp/cc.log" &&
   ! ldd "$tmp/embed-static" | grep -q libdyn && [ "$("$tmp/embed-static")" = "$want_c" ]; then ok
else bad "embed.c against the installed libdyn.a"; cat "$tmp/cc.log"; fi
# the header alone, strictly, in C and C++
if printf '#include <dyn/dyn.h>\n' | $cc -std=c99 -pedantic -Wall -Wextra -Werror -fsyntax-only -I"$prefix/include" -x c - 2>"$tmp/cc.log"; then ok
else bad "dyn/dyn.h is not C99 on its own"; cat "$tmp/cc.log"; fi
if command -v c++ >/dev/null 2>&1; then
  if printf '#include <dyn/dyn.h>\nint main() { return dyn_version() == 0; }\n' | c++ -Wall -Werror -fsyntax-only -I"$prefix/include" -x c++ - 2>"$tmp/cc.log"; then ok
  else bad "dyn/dyn.h does not compile as C++"; cat "$tmp/cc.log"; fi
fi
# every dynamic symbol is dyn_*, less what the toolchain adds, and every DYN_API one is there
others=$(nm -D --defined-only "$lib/libdyn.so.0" | awk '{ print $3 }' | grep -v -e '^dyn_' -e '^_init$' -e '^_fini$')
if [ -z "$others" ]; then ok; else bad "libdyn.so exports more than dyn_*:"; echo "$others" | head -20; fi
declared=$(sed -n 's/^DYN_API [^(]*[ *]\(dyn_[a-z_]*\)(.*/\1/p' "$top_srcdir/include/dyn/dyn.h" | sort)
exported=$(nm -D --defined-only "$lib/libdyn.so.0" | awk '{ print $3 }' | grep '^dyn_' | sort)
if [ -n "$declared" ] && [ "$declared" = "$exported" ]; then ok; else bad "the exports are not dyn.h's functions"; echo "$declared" > "$tmp/d"; echo "$exported" > "$tmp/e"; diff "$tmp/d" "$tmp/e"; fi
if [ -n "$py" ]; then
  site=$(dirname "$(find "$prefix" -path '*/dyn/__init__.py' | head -1)")
  site=$(dirname "$site")
  out=$(cd "$tmp" && PYTHONPATH="$site" "$py" -c 'import dyn; print(dyn._lib._name)')
  if [ "$out" = "$lib/libdyn.so.0" ]; then ok; else bad "the installed module loads $out, not the installed library"; fi
  out=$(cd "$tmp" && PYTHONPATH="$site" "$py" "$top_srcdir/examples/embed.py" 2>&1)
  if [ "$out" = "$want_py" ]; then ok; else bad "examples/embed.py with the installed module"; echo "$out"; fi
fi
echo "install: $pass passed, $fail failed"
[ "$fail" = 0 ]
