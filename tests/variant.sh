#!/bin/sh
# The build configuration without readline and without LLVM: compile dyn from the sources
# with a config.h that has neither, then run the diagnostics suite, the golden programs that
# do not depend on the back end, and the terminal tests with the built-in line editor.
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
top_builddir=${top_builddir:-$top_srcdir}
CC=${CC:-cc}
work=$(mktemp -d "${TMPDIR:-/tmp}/dynvariant.XXXXXX") || exit 99
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src" "$work/tests/pty"
version=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"/\1/p' "$top_builddir/config.h")
cat > "$work/config.h" <<EOF2
#define PACKAGE_VERSION "$version"
#define _GNU_SOURCE 1
EOF2
sh "$top_srcdir/build-aux/embed.sh" "$work/src/stdlib_embed.c" "$top_srcdir"/stdlib/*.dyn || exit 99
sh "$top_srcdir/build-aux/embed.sh" --text "$work/src/cuda_prelude.c" curender_ "$top_srcdir"/src/cuda/prelude.cu \
  "$top_srcdir"/src/cuda/prelude_mma.cu || exit 99
# the library's sources as Makefile.am lists them (its LLVM-only part is listed apart), main and repl
srcs="$top_srcdir/src/main.c $top_srcdir/src/repl.c"
for f in $(sed -n '/^libdyn_int_la_SOURCES = /,/^[^\t]*$/p' "$top_srcdir/Makefile.am" | tr -d '\\' | tr ' \t' '\n\n' | grep '\.c$'); do
  srcs="$srcs $top_srcdir/$f"
done
if ! $CC -std=gnu11 -O1 -w -I"$work" -I"$top_srcdir/src" -DDYN_SRCDIR="\"$top_srcdir\"" \
     -DDYN_PKGDATADIR="\"/nonexistent\"" -o "$work/dyn" $srcs "$work/src/stdlib_embed.c" "$work/src/cuda_prelude.c" -lm -lpthread 2> "$work/cc.log"; then
  cat "$work/cc.log"; echo "variant: 0 passed, 1 failed"; exit 1
fi
cp "$top_builddir/tests/pty/ptydrive" "$work/tests/pty/" 2>/dev/null
cp "$top_builddir/config.h" "$work/config.h.real"
pass=0; fail=0
run() {
  if "$@" > "$work/log" 2>&1; then pass=$((pass + 1)); else fail=$((fail + 1)); cat "$work/log"; fi
}
"$work/dyn" -e ':target' | grep -q "target: ref" && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "the variant's default target is not ref"; }
run env top_srcdir="$top_srcdir" top_builddir="$work" sh "$top_srcdir/tests/errors.sh"
run env top_srcdir="$top_srcdir" top_builddir="$work" sh "$top_srcdir/tests/repl.sh"
[ -x "$work/tests/pty/ptydrive" ] && run env top_srcdir="$top_srcdir" top_builddir="$work" sh "$top_srcdir/tests/pty.sh"
echo "variant: $pass passed, $fail failed"
[ $fail = 0 ]
