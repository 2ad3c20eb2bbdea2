#!/bin/sh
# lang-docs.sh -- keeps the language documentation true of the built dyn.
#
#  1. Every row of lang/diag.def has an entry "### `ID`" in lang/diagnostics.md, and every
#     such entry is a row of diag.def.
#  2. Every example program in lang/reference.md and lang/diagnostics.md still prints what
#     the page says.  The convention: a fenced block opened with ```dyn-run is a whole
#     program; the fenced block opened with ```output that follows it (blank lines between
#     are allowed) is everything it prints, standard output and standard error together.
#     The program is saved as demo.dyn in an empty directory and run as `dyn demo.dyn`; the
#     exit status must be 1 when the expected output has an "error: " line, else 0.
#     reference.md must keep at least MIN_EXAMPLES of them.
#  3. Every line "- Example: `tests/errors/NAME.dyn` gives `TEXT`" in diagnostics.md names a
#     program that exists, and TEXT occurs in its NAME.err.
# Prints one line per failure (with a diff for outputs) and a closing count:
#   lang-docs: N passed, N failed
# Runs in a scratch directory: the source tree may be read-only (make distcheck).
MIN_EXAMPLES=10
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
top_builddir=${top_builddir:-$top_srcdir}
dyn=$top_builddir/dyn
ref=$top_srcdir/lang/reference.md
diags=$top_srcdir/lang/diagnostics.md
table=$top_srcdir/lang/diag.def
[ -x "$dyn" ] || { echo "lang-docs: no dyn binary at $dyn"; exit 99; }
for f in "$ref" "$diags" "$table"; do
  [ -f "$f" ] || { echo "lang-docs: missing $f"; exit 99; }
done
work=$(mktemp -d "${TMPDIR:-/tmp}/lang-docs.XXXXXX") || exit 99
trap 'rm -rf "$work"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL $*"; fail=$((fail + 1)); }

# ---- 1. diagnostics: diag.def and diagnostics.md list the same IDs ----
sed -n 's/^D(\([A-Z0-9_]*\),.*/\1/p' "$table" > "$work/ids.def"
sed -n 's/^### `\([A-Z0-9_]*\)`.*/\1/p' "$diags" > "$work/ids.md"
[ -s "$work/ids.def" ] || bad "lang/diag.def: no rows found"
while IFS= read -r id; do
  if grep -qx "$id" "$work/ids.md"; then ok; else bad "lang/diagnostics.md: no entry for $id of lang/diag.def"; fi
done < "$work/ids.def"
while IFS= read -r id; do
  grep -qx "$id" "$work/ids.def" || bad "lang/diagnostics.md: $id is not a row of lang/diag.def"
done < "$work/ids.md"

# ---- 2. example programs and their output ----
mkdir "$work/ex"
awk -v root="$work/ex" '
  FNR == 1 { mode = ""; pending = 0; name = FILENAME; sub(/^.*\//, "lang/", name) }
  mode != "" {
    if ($0 ~ /^```[ \t]*$/) { close(f); if (mode == "prog") pending = 1; mode = "" }
    else print > f
    next
  }
  /^```dyn-run[ \t]*$/ {
    n++; base = sprintf("%s/%03d", root, n)
    f = base ".loc"; print name ":" FNR > f; close(f)
    f = base ".dyn"; printf "" > f
    mode = "prog"; pending = 0; next
  }
  pending && /^```output[ \t]*$/ { f = base ".exp"; printf "" > f; mode = "out"; pending = 0; next }
  pending && /^[ \t]*$/ { next }
  { pending = 0 }
' "$ref" "$diags"
nref=$(grep -c '^```dyn-run[ 	]*$' "$ref")
if [ "$nref" -ge "$MIN_EXAMPLES" ]; then ok; else
  bad "lang/reference.md: $nref checked examples, fewer than $MIN_EXAMPLES"
fi
for prog in "$work"/ex/*.dyn; do
  [ -e "$prog" ] || continue
  base=${prog%.dyn}
  loc=$(cat "$base.loc")
  if [ ! -f "$base.exp" ]; then
    bad "$loc: a dyn-run block with no output block after it"
    continue
  fi
  mkdir "$base.d" && cp "$prog" "$base.d/demo.dyn" || exit 99
  (cd "$base.d" && "$dyn" demo.dyn > "$base.act" 2>&1 < /dev/null)
  st=$?
  if grep -q 'error: ' "$base.exp"; then want=1; else want=0; fi
  if [ "$st" != "$want" ]; then
    bad "$loc: exit status $st, expected $want"
  elif ! cmp -s "$base.exp" "$base.act"; then
    bad "$loc: the output differs:"
    diff -u "$base.exp" "$base.act" | sed -n '3,40p'
  else
    ok
  fi
done

# ---- 3. examples in diagnostics.md that name a program of tests/errors ----
awk '
  /^- Example: `tests\/errors\/[^`]*\.dyn` gives `.*`[ \t]*$/ {
    s = $0; sub(/^- Example: `/, "", s)
    file = s; sub(/`.*$/, "", file)
    text = s; sub(/^[^`]*` gives `/, "", text); sub(/`[ \t]*$/, "", text)
    print file; print text
  }
' "$diags" > "$work/named"
while IFS= read -r file && IFS= read -r text; do
  err=$top_srcdir/${file%.dyn}.err
  if [ ! -f "$top_srcdir/$file" ] || [ ! -f "$err" ]; then
    bad "lang/diagnostics.md: names $file, but it or its .err file does not exist"
  elif grep -qF -- "$text" "$err"; then
    ok
  else
    bad "lang/diagnostics.md: '$text' is not in ${file%.dyn}.err"
  fi
done < "$work/named"

echo "lang-docs: $pass passed, $fail failed"
[ "$fail" = 0 ]
