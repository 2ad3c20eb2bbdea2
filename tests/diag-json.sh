#!/bin/sh
# dyn --diagnostics=json: every program of tests/errors run with it writes only JSON lines on
# standard error, one object a diagnostic, whose fields say what the text form (NAME.err, the
# exact expected text) says: severity, file, line, column, message and each note; and the
# escapes of RFC 8259 are right for names and messages that hold quotes, backslashes, tabs,
# non-ASCII letters and bytes that are not UTF-8.  Parsed by Python's json module.
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
top_builddir=${top_builddir:-$top_srcdir}
dyn=$top_builddir/dyn
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3) || { echo "diag-json: no python3: skipped"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/dyndiag.XXXXXX") || exit 99
trap 'rm -rf "$work"' EXIT
cp -R "$top_srcdir/tests/errors/." "$work/" && chmod -R u+w "$work"
cd "$work" || exit 99

# Files whose names and messages need escapes.  The script's name holds a tab, a quote, a
# backslash and an é; it imports a file whose name holds the same (the message quotes it).
# Another is named with the byte 0xff, which JSON cannot carry: it must come as U+FFFD.
printf 'x = 1\nimport "q\\"b\\\\c\\td\303\251.dyn"\n' > "$(printf 'esc\t"\\\303\251.dyn')"
printf 'y = undefined_\303\251 + 1\n' > "$(printf 'bad\377name.dyn')"
printf 'x = 1\n\377\n' > not-utf8.dyn

for f in *.dyn; do
  name=${f%.dyn}
  "$dyn" --diagnostics=json "$f" > /dev/null 2> "$name.json" < /dev/null
  echo $? > "$name.status"
  [ -f "$name.err" ] || "$dyn" "$f" > /dev/null 2> "$name.err" < /dev/null
done

"$py" - "$dyn" <<'PY'
import glob, json, os, re, sys
fails = []
head = re.compile(r'^(?:(.+):(\d+):(\d+)|dyn): (error|warning|note): (.*)$')
def check(name):
    text = open(name + '.err', encoding='utf-8', errors='surrogateescape').read().splitlines()
    # what the text form says: the FILE:LINE:COL: lines (and dyn: error: without a place)
    want = []
    for ln in text:
        m = head.match(ln)
        if m:
            want.append((m.group(1), int(m.group(2)) if m.group(2) else None,
                         int(m.group(3)) if m.group(3) else None, m.group(4), m.group(5)))
    got = []
    raw = open(name + '.json', 'rb').read()
    try:
        lines = raw.decode('utf-8').splitlines()
    except UnicodeDecodeError as e:
        return 'standard error is not UTF-8: %s' % e
    if not lines:
        return 'no diagnostic'
    for ln in lines:
        try:
            d = json.loads(ln)
        except ValueError as e:
            return 'not a JSON line: %r (%s)' % (ln, e)
        keys = {'severity', 'code', 'file', 'line', 'column', 'span', 'message', 'notes'}
        if set(d) != keys:
            return 'fields %s, expected %s' % (sorted(d), sorted(keys))
        if d['severity'] not in ('error', 'warning') or not re.match(r'^[EW]_[A-Z0-9_]+$', d['code']):
            return 'severity %r, code %r' % (d['severity'], d['code'])
        if d['file'] is not None:
            sp = d['span']
            if (sp['start']['line'], sp['start']['column']) != (d['line'], d['column']):
                return 'the span starts at %s, not at line %d column %d' % (sp['start'], d['line'], d['column'])
            if (sp['end']['line'], sp['end']['column']) < (d['line'], d['column']):
                return 'the span ends at %s, before its start' % sp['end']
        elif d['span'] is not None or d['line'] is not None:
            return 'a diagnostic without a file has a place'
        got.append((d['file'], d['line'], d['column'], d['severity'], d['message']))
        for n in d['notes']:
            if set(n) != {'file', 'line', 'column', 'message'}:
                return 'note fields %s' % sorted(n)
            got.append((n['file'], n['line'], n['column'], 'note', n['message']))
    # the text form prints a name's bytes as they are; JSON carries U+FFFD for a bad byte
    want = [(w[0].replace('\udcff', '\ufffd') if w[0] else w[0],) + w[1:] for w in want]
    if got != want:
        return 'JSON says\n    %s\n  the text form says\n    %s' % (
            '\n    '.join(map(repr, got)), '\n    '.join(map(repr, want)))
    return None

names = sorted(f[:-5] for f in glob.glob('*.json'))
for n in names:
    why = check(n)
    if why:
        fails.append(n)
        print('FAIL %s.dyn: %s' % (n, why))
    elif open(n + '.status').read().strip() != '1':
        fails.append(n)
        print('FAIL %s.dyn: exit status %s, expected 1' % (n, open(n + '.status').read().strip()))

# The escapes, byte for byte: a tab is \t, a quote \", a backslash \\, é itself, 0xff U+FFFD.
esc = open('esc\t"\\\u00e9.json', encoding='utf-8').read()
for piece in [r'"file":"esc\t\"\\' + '\u00e9.dyn"', r'cannot open q\"b\\c\td' + '\u00e9.dyn']:
    if piece not in esc:
        fails.append('esc'); print('FAIL escapes: %r not in %r' % (piece, esc))
bad = open('bad\udcffname.json', 'rb').read()
if b'"file":"bad\\ufffdname.dyn"' not in bad:
    fails.append('bad'); print('FAIL the byte 0xff in a name: %r' % bad)
print('diag-json: %d passed, %d failed' % (len(names) + 2 - len(fails), len(fails)))
sys.exit(1 if fails else 0)
PY
st=$?

# a format dyn does not know is a usage error
"$dyn" --diagnostics=xml -e 'x = 1' > /dev/null 2> usage.err
if [ $? != 2 ] || ! grep -q "unknown diagnostics format 'xml'" usage.err; then
  echo "FAIL --diagnostics=xml is not a usage error"; st=1
fi
exit $st
