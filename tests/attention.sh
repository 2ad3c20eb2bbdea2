#!/bin/sh
# attention.sh -- fused attention on the CPU back end (src/fuse_attn.c, src/cpu_attn.c).
#   - :sched says, for nn's attention and causal_attention and for a chain a user wrote
#     with other names, another scale and no batch, that the scores are never stored, and
#     that a long T runs fused (the model's choice: the scores of 4 x 4096 x 4096 outgrow
#     every cache of every model); for two chains of another form (the scores also
#     returned, a max over the other axis) it says nothing of the kind;
#   - :sched says that a decoder's step (S = 1) runs fused on the row path;
#   - :sched's prediction on the tiles for one query row and one key past the block is a
#     little more than the block's, not the four whole blocks it runs;
#   - :sched of a function with two chains of the same sizes, attention and causal_attention,
#     gives each chain its own prediction and choice, those of its function alone;
#   - NumPy's float64 results on random data (tests/numpy/attention.py: shapes 0, 1, primes
#     and the block the model gives +-1; NaN and infinities; masks) agree with the compiled
#     code with the fusion forced on (DYN_ATTENTION=fused), on each of its paths (=tiles,
#     =rows) and off (=unfused), and with the reference evaluator; the row path again under
#     --hw=zen3, a model of 256-bit vectors, whose lanes and blocks the cases then follow.
# Skips (77) without the compiled CPU back end or without a Python that has NumPy.
srcdir_=$(cd "$(dirname "$0")" && pwd)
top_builddir=${top_builddir:-$srcdir_/..}
dyn=$top_builddir/dyn
work=$(mktemp -d "${TMPDIR:-/tmp}/dynattn.XXXXXX") || exit 99
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
export DYN_CUDA_DRIVER=/nonexistent/libcuda.so.1 HOME="$work"
unset DYN_ATTENTION

"$dyn" --target=cpu -e ':target' > "$work/probe.txt" 2>&1
grep -q 'target: cpu' "$work/probe.txt" || { echo "attention: no compiled CPU back end, skipped"; exit 77; }
py=
for p in "${PYTHON_NUMPY:-}" /usr/bin/python3 python3; do
  if [ -n "$p" ] && "$p" -c 'import numpy; numpy.zeros(1)' >/dev/null 2>&1; then py=$p; break; fi
done
[ -n "$py" ] || { echo "attention: no Python with NumPy; skipped"; exit 77; }

fail=0
check() {   # check NAME PATTERN yes|no FILE
  if grep -q -- "$2" "$4"; then found=yes; else found=no; fi
  if [ "$found" = "$3" ]; then
    echo "PASS: $1"
  else
    echo "FAIL: $1 (\"$2\" expected: $3)"; sed 's/^/    /' "$4"; fail=1
  fi
}

"$py" -c "import sys; sys.path.insert(0, '$srcdir_/numpy'); import attention; print(attention.USER)" \
  > "$work/chains.dyn" || exit 99
cat >> "$work/chains.dyn" <<'EOF'
:sched attention B=4 S=4096 T=4096 D=64
EOF
"$dyn" "$work/chains.dyn" > "$work/long.txt" 2>&1
check ":sched attention: the scores are not stored" 'the scores a.c\[b, s, t\] never stored' yes "$work/long.txt"
check ":sched attention, long T: fused" 'unfused (scores stored): fused' yes "$work/long.txt"
for f in causal_attention; do
  "$dyn" -e ":sched $f B=2 S=100 T=300 D=64" > "$work/causal.txt" 2>&1
  check ":sched $f: the scores are not stored, masked blocks skipped" 'masked blocks skipped' yes "$work/causal.txt"
done
"$dyn" -e ":sched attention B=12 S=1 T=128 D=64" > "$work/decode.txt" 2>&1
check ":sched attention, S = 1: fused on the row path" 'predicted [0-9.]* ms: fused on rows' yes "$work/decode.txt"
# two chains of the same sizes in one function, whose model prefers another path for each
# (the mask halves the causal one's keys): each chain keeps its own prediction and choice,
# the same as its function's alone in the same session, and never the other's
cat > "$work/pair.dyn" <<'EOF'
fn pair(Q: f32[B, S, D], K: f32[B, T, D], V: f32[B, T, D]) -> f32[B, S, D] {
  P = attention(Q, K, V)
  O = causal_attention(P, K, V)
  return O
}
:sched pair B=16 S=1024 T=1024 D=64
:sched attention B=16 S=1024 T=1024 D=64
:sched causal_attention B=16 S=1024 T=1024 D=64
EOF
"$dyn" "$work/pair.dyn" 2>&1 | tr '\n' ' ' | tr -s ' ' |
  grep -oE 'predicted [0-9.]+ ms( fused, [0-9.]+ ms unfused \(scores stored\))?: (fused on rows|fused|unfused|not taken)' \
  > "$work/pair.txt"
if [ "$(wc -l < "$work/pair.txt")" -eq 8 ] && [ "$(sed -n 1,4p "$work/pair.txt")" = "$(sed -n 5,8p "$work/pair.txt")" ] &&
   [ "$(sed -n 1,2p "$work/pair.txt")" != "$(sed -n 3,4p "$work/pair.txt")" ]; then
  echo "PASS: :sched of two chains of equal sizes: each its own plan"
else
  echo "FAIL: :sched of two chains of equal sizes: each its own plan"; sed 's/^/    /' "$work/pair.txt"; fail=1
fi
# the tiles' prediction prices the blocks of the last query rows and keys at their sizes: one
# row and one key past the model's block (n) add a little, where four whole blocks were priced
sched_fused() {   # sched_fused S: the tiles' predicted ms of attention B=8 S=T=S D=64, 2 threads
  "$dyn" -e ':threads 2' -e ":sched attention B=8 S=$1 T=$1 D=64" 2>&1 | tr '\n' ' ' | tr -s ' ' |
    sed -n 's/.*tasks; predicted \([0-9.]*\) ms fused,.*/\1/p'
}
n=$("$dyn" -e ':sched attention B=8 S=4096 T=4096 D=64' 2>&1 | sed -n 's/.*blocks: \([0-9]*\) query rows.*/\1/p')
t0=$(sched_fused "$n"); t1=$(sched_fused $((n + 1)))
if [ -n "$t0" ] && [ -n "$t1" ] && awk -v a="$t0" -v b="$t1" 'BEGIN { exit !(b > a && b < 1.5 * a) }'; then
  echo "PASS: :sched attention, S = T = $((n + 1)): the last blocks at their size ($t0 -> $t1 ms)"
else
  echo "FAIL: :sched attention, S = T = $((n + 1)): the last blocks at their size ($n: '$t0' -> '$t1' ms)"; fail=1
fi
sed '/^:sched/d' "$work/chains.dyn" > "$work/user.dyn"
for f in "myattn N=100 M=300 E=64 F=32:yes" "withscores S=100 T=300 D=64:no" "colmax S=100 T=300 D=64:no"; do
  { cat "$work/user.dyn"; echo ":sched ${f%:*}"; } > "$work/one.dyn"
  "$dyn" "$work/one.dyn" > "$work/one.txt" 2>&1
  check ":sched ${f%% *}: fused ${f##*:}" 'never stored' "${f##*:}" "$work/one.txt"
done

for mode in fused unfused tiles rows rows:--hw=zen3; do
  flags=; case $mode in *:*) flags=${mode#*:};; esac
  dir=$work/$(echo "$mode" | tr ':=-' '___')
  mkdir "$dir"
  DYN_ATTENTION=${mode%%:*} DYN_NUMPY_FLAGS=$flags "$py" "$srcdir_/numpy/compare.py" "$dyn" "$dir" attention \
    > "$dir.txt" 2>&1
  rc=$?
  grep -v '^PASS' "$dir.txt" | sed "s/^/$mode: /"
  [ $rc -eq 0 ] || fail=1
done
exit $fail
