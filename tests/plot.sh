#!/bin/sh
# :plot: a sweep of one size drawn as a text chart and as an SVG file.  What a user relies
# on, never the speeds: the points swept (geometric when hi >= 8 lo, else even), one table
# row and one marker column a point, the roofline from the hardware model in use (flat at
# its bandwidth for a function that computes nothing), variant letters that agree between
# the axis and the table, a well-formed SVG, and located errors for bad requests.
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
top_builddir=${top_builddir:-$top_srcdir}
dyn=$top_builddir/dyn
work=$(mktemp -d "${TMPDIR:-/tmp}/dynplot.XXXXXX") || exit 99
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 99
export HOME="$work" DYN_CUDA_DRIVER=/nonexistent/libcuda.so.1
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL $1"; [ -f "$2" ] && sed -n '1,40p' "$2"; }

# the table's rows: "  X  measured  predicted  rate  roof  LETTER"
rows() { awk '$1 ~ /^[0-9]+$/ && NF == 6 { print }' "$1"; }

"$dyn" -e ':plot matmul M=16..1024 N=32 K=48' > mm.txt 2>&1 || bad "matmul: exit status $?" mm.txt
[ "$(rows mm.txt | awk '{printf "%s ", $1}')" = "16 23 34 50 73 106 155 226 329 481 702 1024 " ] &&
  ok || bad "matmul: not the geometric points of 16..1024" mm.txt
# every measured and predicted time positive, every roof the same non-zero at one intensity
# or above: the roof is min(peak, intensity x bandwidth), so it never falls as M grows here
rows mm.txt | awk '$2 <= 0 || $3 <= 0 || $5 <= 0 || $5 < prev { bad = 1 } { prev = $5 } END { exit bad }' &&
  ok || bad "matmul: a time or roof not positive, or the roof falling" mm.txt
grep -q '^matmul on [a-z]*, [0-9]* threads\{0,1\}: M=16..1024 N=32 K=48$' mm.txt && ok || bad "matmul: title" mm.txt
[ "$(grep -c '^ *[0-9][0-9.]* |' mm.txt)$(grep -c '^         |' mm.txt)" = "313" ] && ok || bad "matmul: not 16 chart rows" mm.txt
grep -q '(log scale)$' mm.txt && ok || bad "matmul: no log scale for 16..1024" mm.txt
# the letters on the axis are the table's, in the order the variants first appear
axis=$(grep '^         +' mm.txt | tr -cd 'A-Z')
table=$(rows mm.txt | awk '$6 != last { printf "%s", $6; last = $6 }')
[ -n "$axis" ] && [ "$axis" = "$table" ] && ok || bad "matmul: axis letters '$axis', table '$table'" mm.txt
for v in $(rows mm.txt | awk '{print $6}' | sort -u); do
  grep -q "^  $v: " mm.txt || { bad "matmul: variant $v not described" mm.txt; break; }
done

# a function that computes nothing is drawn in GB/s against a flat roof: the bandwidth of
# the hardware model's memory for the threads used (here hw/zen4.hw's, whatever the host)
cat > tr.dyn <<'DYN'
fn transpose(X: f32[M, N]) -> f32[N, M] {
  Y[n, m] = X[m, n]
  return Y
}
:threads 1
:plot transpose M=10..20 N=33
DYN
"$dyn" --hw=zen4 tr.dyn > tr.txt 2>&1 || bad "transpose: exit status $?" tr.txt
[ "$(rows tr.txt | awk '{printf "%s ", $1}')" = "10 11 12 13 14 15 16 17 18 19 20 " ] &&
  ok || bad "transpose: not the even points of 10..20" tr.txt
grep -q '^GB/s: ' tr.txt && ! grep -q 'log scale' tr.txt && ok || bad "transpose: not GB/s on a linear axis" tr.txt
bw=$(sed -n 's/^dram\.gbs *= *\([0-9.]*\).*/\1/p' "$top_srcdir/hw/zen4.hw")
[ -n "$bw" ] && [ "$(rows tr.txt | awk '{print $5}' | sort -u)" = "$(printf '%.1f' "$bw")" ] &&
  ok || bad "transpose: the roof is not zen4's $bw GB/s for one thread" tr.txt

# the SVG: a well-formed document with one marker a point and the three series
"$dyn" -e ':plot matmul M=1..9 N=5 K=7 > mm.svg' > svg.txt 2>&1 || bad "svg: exit status $?" svg.txt
grep -q '^wrote mm.svg (9 points, [0-9]* variants\{0,1\})$' svg.txt && ok || bad "svg: message" svg.txt
py=${PYTHON_NUMPY:-}
for p in /usr/bin/python3 python3; do [ -z "$py" ] && command -v "$p" > /dev/null && py=$p; done
if [ -n "$py" ]; then
  "$py" - mm.svg <<'PY' && ok || bad "svg: not the document expected" mm.svg
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
ns = "{http://www.w3.org/2000/svg}"
assert root.tag == ns + "svg", root.tag
assert len(root.findall(ns + "circle")) == 9
lines = root.findall(ns + "polyline")
assert len(lines) == 3 and all(len(l.get("points").split()) == 9 for l in lines)
assert any("matmul on" in (t.text or "") for t in root.findall(ns + "text"))
PY
fi

# bad requests: located errors, and the session goes on
cat > errs.dyn <<'DYN'
:plot matmul M=10..2 N=4 K=4
:plot matmul M=4..10 N=4 K=4 >
:plot matmul Q=1..4 N=1 K=1
:plot matmul M=1..4 N=1
:plot matmul M=1..4 N=100000 K=100000000
print(1)
DYN
"$dyn" -i - < errs.dyn > errs.txt 2>&1
cat > errs.want <<'TXT'
<repl:1>:1:1: error: :plot sweeps one size from lo to hi: :plot NAME DIM=lo..hi [DIM=v ...] [> file.svg], with 1 <= lo < hi
<repl:2>:1:1: error: :plot: '>' needs a file name, such as > plot.svg
<repl:3>:1:1: error: matmul has no size Q (its sizes: M, K, N)
<repl:4>:1:1: error: give every size of matmul: K is missing
TXT
grep 'error:' errs.txt | head -4 > errs.got
if ! cmp -s errs.want errs.got; then
  bad "errors: not the messages expected" errs.txt
elif ! grep -q 'the arguments at M=4 take 37254.4 GiB, over half' errs.txt || ! grep -q '^i64 1$' errs.txt; then
  bad "errors: the memory guard, or the session did not go on" errs.txt
else
  ok
fi

echo "plot: $pass passed, $fail failed"
[ $fail = 0 ]
