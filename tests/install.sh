#!/bin/sh
# An installed dyn stands alone.  Under make check: `make install DESTDIR=...` puts the
# program, its manual page, the hardware models, the standard library, the Vim files and the
# VS Code extension folder where they belong; no path of the source tree is compiled into the
# program; and the installed program, run from elsewhere without DYN_HW_DIR, looks for its
# hardware models where they were installed ($(pkgdatadir)/hw), never in the source tree's
# hw/, though that is there.  Under make installcheck (and so distcheck), with the real
# prefix: tests/install.sh --installed BINDIR PKGDATADIR DATADIR, where :hw a100 must say it
# read $(pkgdatadir)/hw/a100.hw, a program runs with the prelude, and the installed editor
# files pass tests/editor.sh.
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
top_builddir=${top_builddir:-$top_srcdir}
work=$(mktemp -d "${TMPDIR:-/tmp}/dyninstall.XXXXXX") || exit 99
trap 'rm -rf "$work"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); }
no() { fail=$((fail + 1)); echo "FAIL $*"; }
unset DYN_HW_DIR

# The installed dyn, run from an empty directory: :hw a100 and a line of arithmetic.
run_hw() {
  (cd "$work/elsewhere" && "$1" -e ':hw a100' > "$work/hw.out" 2> "$work/hw.err" < /dev/null)
}
mkdir -p "$work/elsewhere"

if [ "$1" = --installed ]; then
  bindir=$2; pkgdatadir=$3; datadir=$4
  run_hw "$bindir/dyn"
  if grep -qx "  from:    $pkgdatadir/hw/a100.hw" "$work/hw.out"; then ok
  else no ":hw a100 did not read $pkgdatadir/hw/a100.hw:"; cat "$work/hw.out" "$work/hw.err"; fi
  out=$(cd "$work/elsewhere" && "$bindir/dyn" -e 'print(dot(full(f32[5], 2.0), full(f32[5], 1.0)))' 2>&1)
  [ "$out" = "f32 10" ] && ok || no "the installed dyn computed '$out', expected f32 10"
  VIMFILES=$datadir/vim/vimfiles VSCODE_DIR=$pkgdatadir/vscode/dyn DYN=$bindir/dyn \
    sh "$top_srcdir/tests/editor.sh" && ok || no "the installed editor files (above)"
  echo "install: $pass passed, $fail failed"
  [ $fail = 0 ]; exit
fi

dest=$work/dest
(unset MAKEFLAGS MFLAGS; ${MAKE:-make} -s -C "$top_builddir" install DESTDIR="$dest") > "$work/make.log" 2>&1 ||
  { echo "FAIL make install DESTDIR=...:"; tail -20 "$work/make.log"; exit 1; }
# where configure's prefix put things, read back from the tree
hwdir=$(cd "$dest" && find . -type d -path '*/share/dyn/hw' | sed 's/^\.//')
bin=$(cd "$dest" && find . -type f -path '*/bin/dyn' | sed 's/^\.//')
[ -n "$hwdir" ] && [ -n "$bin" ] || { echo "FAIL make install: no bin/dyn or share/dyn/hw under DESTDIR"; exit 1; }
pkgdatadir=${hwdir%/hw}; datadir=${pkgdatadir%/dyn}
for f in "$pkgdatadir/hw/a100.hw" "$pkgdatadir/hw/generic-avx2.hw" "$pkgdatadir/stdlib/nn.dyn" \
         "$datadir/man/man1/dyn.1" "$datadir/vim/vimfiles/syntax/dyn.vim" \
         "$datadir/vim/vimfiles/ftdetect/dyn.vim" "$pkgdatadir/vscode/dyn/package.json" \
         "$pkgdatadir/vscode/dyn/language-configuration.json" \
         "$pkgdatadir/vscode/dyn/syntaxes/dyn.tmLanguage.json"; do
  [ -f "$dest$f" ] && ok || no "make install did not install $f"
done
# the source tree's hw/ is in no string of the program
if grep -aqF "$top_srcdir/hw" "$dest$bin"; then no "the installed dyn holds the path $top_srcdir/hw"; else ok; fi
# The program from DESTDIR looks in $(pkgdatadir)/hw: not there yet (unless an install is),
# but never the source tree's hw/, which holds a100.hw.
run_hw "$dest$bin"
if grep -qx "  from:    $pkgdatadir/hw/a100.hw" "$work/hw.out" ||
   grep -qF "cannot read the hardware directory $pkgdatadir/hw" "$work/hw.err"; then ok
else no ":hw a100 of the installed dyn did not look in $pkgdatadir/hw:"; cat "$work/hw.out" "$work/hw.err"; fi
if grep -qF "$top_srcdir" "$work/hw.out" "$work/hw.err"; then no "the installed dyn read the source tree"; else ok; fi
VIMFILES=$dest$datadir/vim/vimfiles VSCODE_DIR=$dest$pkgdatadir/vscode/dyn \
  sh "$top_srcdir/tests/editor.sh" && ok || no "the installed editor files (above)"
echo "install: $pass passed, $fail failed"
[ $fail = 0 ]
