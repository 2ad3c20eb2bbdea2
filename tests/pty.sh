#!/bin/sh
# REPL tests through a real pseudo-terminal (tests/pty/ptydrive), with each line editor:
# GNU readline (when dyn was built with it) and the built-in editor.  Each script types
# keys and waits for what a person would see.
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
top_builddir=${top_builddir:-$top_srcdir}
drive=$top_builddir/tests/pty/ptydrive
[ -x "$drive" ] || { echo "no ptydrive: skipped"; exit 77; }
home=$(mktemp -d "${TMPDIR:-/tmp}/dynpty.XXXXXX") || exit 99
trap 'rm -rf "$home"' EXIT
pass=0; fail=0
# pager.pty: a pager that marks the lines it shows
export PAGER="sed s/^/paged:/"
editors=builtin
"$top_builddir/dyn" --version >/dev/null && grep -q "define HAVE_READLINE 1" "$top_builddir/config.h" 2>/dev/null && editors="readline builtin"
for ed in $editors; do
  for t in "$top_srcdir"/tests/pty/*.pty; do
    name=$(basename "$t" .pty)
    rm -rf "$home/h"; mkdir "$home/h"
    if [ $ed = builtin ]; then export DYN_LINE_EDITOR=builtin; else unset DYN_LINE_EDITOR; fi
    if HOME=$home/h TERM=xterm "$drive" -w 60 "$t" -- "$top_builddir/dyn" -q > "$home/out" 2>&1; then
      pass=$((pass + 1))
    else
      fail=$((fail + 1)); echo "FAIL $name ($ed)"; sed -n '1,60p' "$home/out"
    fi
  done
done
echo "pty: $pass passed, $fail failed"
[ $fail = 0 ]
