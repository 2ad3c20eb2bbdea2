#!/bin/sh
# The manual page, doc/dyn.1, against the program: every option `dyn --help` prints is
# described in the page's OPTIONS, and every option described there is one `--help` prints;
# and groff (or man) renders the page without a warning, where one is installed.
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
top_builddir=${top_builddir:-$top_srcdir}
dyn=$top_builddir/dyn
page=$top_srcdir/doc/dyn.1
work=$(mktemp -d "${TMPDIR:-/tmp}/dynman.XXXXXX") || exit 99
trap 'rm -rf "$work"' EXIT
pass=0; fail=0

# The options of --help: the first column of the lines that start with two spaces and a dash
# (the descriptions' continuation lines start further in).
"$dyn" --help > "$work/help.txt" 2>&1 || { echo "FAIL: dyn --help failed"; exit 1; }
grep '^  -' "$work/help.txt" | awk -F'  +' '{print $2}' |
  grep -oE -- '(^|[ ,|])--?[a-z][a-z-]*' | tr -d ' ,|' | sort -u > "$work/help.opts"
# The options of the page: the tags (the line after .TP) of the section OPTIONS, with roff's
# \- made a dash and its font changes removed.
sed -n '/^\.SH OPTIONS/,/^\.SH /p' "$page" | sed 's/\\-/-/g; s/\\f[BIRP]//g' |
  awk 'tag { print; tag = 0 } /^\.TP/ { tag = 1 }' |
  grep -oE -- '(^|[ ,|])--?[a-z][a-z-]*' | tr -d ' ,|' | sort -u > "$work/man.opts"
if [ ! -s "$work/help.opts" ] || [ ! -s "$work/man.opts" ]; then
  fail=$((fail + 1)); echo "FAIL: no options found in --help or in the page's OPTIONS"
fi
for o in $(comm -23 "$work/help.opts" "$work/man.opts"); do
  fail=$((fail + 1)); echo "FAIL: $o is in dyn --help but not in doc/dyn.1's OPTIONS"
done
for o in $(comm -13 "$work/help.opts" "$work/man.opts"); do
  fail=$((fail + 1)); echo "FAIL: $o is in doc/dyn.1's OPTIONS but not in dyn --help"
done
[ $fail = 0 ] && pass=$((pass + 1))

# Rendering: groff's warnings (-ww) on standard error, or man's where only man is there.
if command -v groff > /dev/null 2>&1; then
  groff -man -Tutf8 -ww -P -cbou "$page" > "$work/page.txt" 2> "$work/warn.txt"
  render=groff
elif command -v man > /dev/null 2>&1; then
  MANWIDTH=80 man --warnings -l "$page" 2> "$work/warn.txt" | sed 's/.\x08//g' > "$work/page.txt"
  render=man
else
  render=
fi
if [ -n "$render" ]; then
  if [ -s "$work/warn.txt" ] || ! grep -q 'OPTIONS' "$work/page.txt"; then
    fail=$((fail + 1)); echo "FAIL: $render does not render doc/dyn.1 cleanly:"; sed -n '1,10p' "$work/warn.txt"
  else
    pass=$((pass + 1))
  fi
else
  echo "man: neither groff nor man is installed: rendering not checked"
fi

echo "man: $pass passed, $fail failed"
[ $fail = 0 ]
