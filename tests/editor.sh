#!/bin/sh
# Editor support as installed: Vim, started headless with nothing but the syntax and ftdetect
# files of lang/ (or of an install: VIMFILES=DIR), takes a .dyn file for filetype dyn and
# colours its keywords, types, reductions, strings and comments with the expected groups; and
# the VS Code extension folder's package.json declares the language and a grammar whose
# scope is the grammar's own, at dyn's version.  Skipped (77) when neither vim nor a python3
# is there.
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
top_builddir=${top_builddir:-$top_srcdir}
work=$(mktemp -d "${TMPDIR:-/tmp}/dyneditor.XXXXXX") || exit 99
trap 'rm -rf "$work"' EXIT
pass=0; fail=0; ran=0

vimfiles=${VIMFILES:-}
if [ -z "$vimfiles" ]; then
  vimfiles=$work/vimfiles
  mkdir -p "$vimfiles/syntax" "$vimfiles/ftdetect"
  cp "$top_srcdir/lang/dyn.vim" "$vimfiles/syntax/dyn.vim"
  cp "$top_srcdir/lang/ftdetect/dyn.vim" "$vimfiles/ftdetect/dyn.vim"
fi
vim=$(command -v vim.basic || command -v vim.nox || command -v vim)
# vim-tiny is built without syntax highlighting: it is no test of the file
if [ -n "$vim" ] && "$vim" --version 2>/dev/null | grep -q '+syntax'; then
  ran=1
  cat > "$work/prog.dyn" <<'DYN'
fn f(X f32[N]) -> f32[N] { return X * 2.0 }
y = sum[i] f(zeros(f32[3]))[i]   # TODO a comment
print("a\tb")
DYN
  # line, column, the expected group and the highlight group it ends in through its links
  cat > "$work/expect" <<'EXP'
1 1 dynKeyword Statement
1 8 dynType Type
1 28 dynKeyword Statement
1 39 dynFloat Constant
2 5 dynReduction Statement
2 14 dynBuiltin Special
2 34 dynComment Comment
2 36 dynTodo Todo
3 7 dynString Constant
3 9 dynEscape Special
EXP
  # a Vim script that writes the filetype, then the group of each probe and what it links to
  { echo "let out = [&filetype]"
    while read -r line col _; do
      echo "let id = synID($line, $col, 1)"
      echo "call add(out, synIDattr(id, 'name') . ' ' . synIDattr(synIDtrans(id), 'name'))"
    done < "$work/expect"
    echo "call writefile(out, '$work/got')"
  } > "$work/probe.vim"
  "$vim" -Nu NONE -i NONE -es \
    -c "set rtp^=$vimfiles" -c 'filetype on' -c 'syntax on' -c "edit $work/prog.dyn" \
    -c "source $work/probe.vim" -c 'qall!' < /dev/null > /dev/null 2>&1
  if [ "$(head -n 1 "$work/got" 2>/dev/null)" != dyn ]; then
    fail=$((fail + 1)); echo "FAIL vim: prog.dyn has filetype '$(head -n 1 "$work/got" 2>/dev/null)', expected dyn"
  else
    pass=$((pass + 1))
  fi
  awk '{ print $3, $4 }' "$work/expect" > "$work/want"
  sed 1d "$work/got" > "$work/got.groups" 2>/dev/null
  if cmp -s "$work/want" "$work/got.groups"; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1)); echo "FAIL vim: syntax groups (line column: expected / got):"
    paste -d' ' "$work/expect" "$work/got.groups" | awk '{ print "  " $1 ":" $2 ": " $3 " " $4 " / " $5 " " $6 }'
  fi
else
  echo "editor: no vim with +syntax: the Vim syntax not checked"
fi

py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3)
vscode=${VSCODE_DIR:-$top_srcdir/lang/vscode}
grammar=${VSCODE_DIR:+$VSCODE_DIR/syntaxes/dyn.tmLanguage.json}
grammar=${grammar:-$top_srcdir/lang/dyn.tmLanguage.json}
if [ -n "$py" ]; then
  ran=1
  version=$("${DYN:-$top_builddir/dyn}" --version | sed 's/^dyn //')
  if "$py" - "$vscode" "$grammar" "$version" <<'PY'
import json, os, sys
folder, grammar_file, version = sys.argv[1:]
pkg = json.load(open(os.path.join(folder, 'package.json')))
grammar = json.load(open(grammar_file))
c = pkg['contributes']
lang = [l for l in c['languages'] if l['id'] == 'dyn']
assert lang and '.dyn' in lang[0]['extensions'], 'no language dyn for .dyn files'
conf = json.load(open(os.path.join(folder, lang[0]['configuration'])))
assert conf['comments']['lineComment'] == '#', 'the line comment is not #'
g = [g for g in c['grammars'] if g['language'] == 'dyn']
assert g, 'no grammar for dyn'
assert g[0]['scopeName'] == grammar['scopeName'], 'scope %s, the grammar says %s' % (g[0]['scopeName'], grammar['scopeName'])
assert os.path.basename(g[0]['path']) == 'dyn.tmLanguage.json' and g[0]['path'].startswith('./syntaxes/'), g[0]['path']
assert pkg['version'] == version, 'package.json is at version %s, dyn at %s' % (pkg['version'], version)
PY
  then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL vscode: package.json (above)"; fi
fi
[ $ran = 0 ] && { echo "editor: neither vim nor python3: skipped"; exit 77; }
echo "editor: $pass passed, $fail failed"
[ $fail = 0 ]
