#!/bin/sh
# dyntest.sh DIR STATUS [EXPECTED] -- run every DIR/*.dyn (DIR relative to the source tree)
# with dyn and compare with what is expected, in EXPECTED (default: DIR itself):
#   NAME.out  the exact standard output (absent: must be empty)
#   NAME.err  the exact standard error  (absent: must be empty)
#   output.filter  optional, one for the suite: an awk program that every program's standard
#             output passes through before the comparison, to make stable what varies with the
#             machine or the moment (tests/examples/output.filter: schedules, timings); NAME.out
#             then holds the filtered output
#   STATUS    the exit status every program must have (0 for golden programs, 1 for errors)
# Programs run in a scratch copy of DIR, so they may write files and their diagnostics
# name them as NAME.dyn.  Prints one line per failure and a closing count.
dir=$1; want=$2; expdir=${3:-$1}
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
top_builddir=${top_builddir:-$top_srcdir}
dyn=$top_builddir/dyn
[ -x "$dyn" ] || { echo "no dyn binary at $dyn"; exit 99; }
work=$(mktemp -d "${TMPDIR:-/tmp}/dyntest.XXXXXX") || exit 99
trap 'rm -rf "$work"' EXIT
cp -R "$top_srcdir/$dir/." "$work/" && cp -R "$top_srcdir/$expdir/." "$work/" && chmod -R u+w "$work"
pass=0; fail=0
cd "$work" || exit 99
for f in *.dyn; do
  [ -e "$f" ] || continue
  name=${f%.dyn}
  "$dyn" "$f" > "$name.actual.out" 2> "$name.actual.err" < /dev/null
  st=$?
  if [ -f output.filter ]; then
    awk -f output.filter "$name.actual.out" > "$name.kept.out" && mv "$name.kept.out" "$name.actual.out"
  fi
  ok=1
  if [ "$st" != "$want" ]; then
    echo "FAIL $dir/$f: exit status $st, expected $want"; ok=0
  fi
  for stream in out err; do
    exp=$name.$stream
    [ -f "$exp" ] || exp=/dev/null
    if ! cmp -s "$exp" "$name.actual.$stream"; then
      echo "FAIL $dir/$f: standard $stream differs:"
      diff -u "$exp" "$name.actual.$stream" | sed -n '3,40p'
      ok=0
    fi
  done
  if [ $ok = 1 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
done
echo "$dir: $pass passed, $fail failed"
[ $fail = 0 ]
