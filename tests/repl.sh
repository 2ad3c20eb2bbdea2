#!/bin/sh
# REPL transcripts through the non-terminal path: `dyn -i -` reads tests/repl/NAME.in as
# typed input (REPL semantics: values printed, errors reported and survived) and echoes each
# line after its prompt; standard output and error together must equal NAME.out.  The GPU
# driver is pointed at a path that does not exist, so that a transcript reads the same on a
# machine with a GPU as without one.
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
top_builddir=${top_builddir:-$top_srcdir}
work=$(mktemp -d "${TMPDIR:-/tmp}/dynrepl.XXXXXX") || exit 99
trap 'rm -rf "$work"' EXIT
pass=0; fail=0
cd "$work" || exit 99
for t in "$top_srcdir"/tests/repl/*.in; do
  name=$(basename "$t" .in)
  HOME=$work DYN_CUDA_DRIVER=/nonexistent/libcuda.so.1 "$top_builddir/dyn" -i - < "$t" > "$name.actual" 2>&1
  if cmp -s "$top_srcdir/tests/repl/$name.out" "$name.actual"; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1)); echo "FAIL repl/$name:"; diff -u "$top_srcdir/tests/repl/$name.out" "$name.actual" | sed -n '3,60p'
  fi
done
echo "repl: $pass passed, $fail failed"
[ $fail = 0 ]
