#!/bin/sh
# model-error.sh -- the analytical model held to account: times each statement of the bench's
# shape files with :time (the median of its runs) beside the time the model predicts for it,
# and prints each line's error (predicted / measured - 1) and each suite's mean |error|.
# Not part of make check, since it times things; run it on a quiet machine.  Each statement is
# timed ROUNDS times, the rounds interleaved over the statements, and the best median kept;
# with --min the least run of all rounds instead, the closer figure to a quiet machine's on a
# shared one, where other processes only ever add to a run's time.
#
#   tests/bench/model-error.sh [--rounds N] [--threads N] [--hw NAME] [--min] [SHAPE-FILE ...]
#
# With no file: tests/bench/shapes/rowwise.txt, eltwise.txt, reduce.txt and gemm.txt, and
# the shared suite's rowwise.txt beside the tree where there is one.  GEMM_MAX (default 12)
# caps how many lines of a gemm file are timed.  DYN (default ./dyn) is the binary.
set -e
here=$(cd "$(dirname "$0")/../.." && pwd)
dyn=${DYN:-$here/dyn}
rounds=3
threads=2
hw=
stat=median
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --hw) hw="--hw=$2"; shift 2 ;;
    --min) stat=min; shift ;;
    --) shift; break ;;
    -*) echo "usage: $0 [--rounds N] [--threads N] [--hw NAME] [--min] [SHAPE-FILE ...]" >&2; exit 2 ;;
    *) break ;;
  esac
done
if [ $# -eq 0 ]; then
  s=$here/tests/bench/shapes
  set -- $s/rowwise.txt $s/eltwise.txt $s/reduce.txt $s/gemm.txt
  if [ -f "$here/../shared/bench/rowwise.txt" ]; then set -- "$here/../shared/bench/rowwise.txt" "$@"; fi
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# One program: the functions the stdlib lacks, then per round every statement, each after a
# marker naming its suite and its line.
for f in "$@"; do
  # named as make bench names it: the shared suite's rowwise.txt and shapes/rowwise.txt apart
  suite=$(basename "$f" .txt)
  case $(basename "$(dirname "$f")") in shapes) suite=shapes/$suite ;; esac
  grep -v '^[[:space:]]*#' "$f" | grep -v '^[[:space:]]*$' | sed "s,^,$suite ,"
done | awk -v rounds="$rounds" -v gmax="${GEMM_MAX:-12}" '
  function dims(n, i, s) { s = ""; for (i = 0; i < n; i++) s = s (i ? ", " : "") "D" i; return s }
  function sumfn(spec, n,   name, i, out, red, k) {
    name = "sum_" n "_" spec
    if (name in defined) return name
    defined[name] = 1
    out = ""; red = ""; k = 0
    for (i = 0; i < n; i++)
      if (index(spec, i "")) red = red (red == "" ? "" : ", ") "i" i
      else { out = out (k++ ? ", " : "") "i" i }
    printf "fn %s(X: f32[%s]) -> f32[", name, dims(n)
    k = 0
    for (i = 0; i < n; i++) if (!index(spec, i "")) printf "%sD%d", (k++ ? ", " : ""), i
    printf "] {\n  Y[%s] = sum[%s] X[", out, red
    for (i = 0; i < n; i++) printf "%si%d", (i ? ", " : ""), i
    printf "]\n  return Y\n}\n"
    return name
  }
  {
    suite = $1; op = $2
    if (suite ~ /gemm$/ && op ~ /^[0-9]+$/) {
      if (++ng > gmax) next
      setup = sprintf("A = randn(f32[%d, %d])\nB = randn(f32[%d, %d])", $2, $4, $4, $3)
      stmt = "C = matmul(A, B)"; what = "matmul " $2 "x" $3 "x" $4
    } else if (op == "sum") {
      n = NF - 3; sh = ""
      for (i = 4; i <= NF; i++) sh = sh (i > 4 ? ", " : "") $i
      name = sumfn($3, n)
      setup = "X = randn(f32[" sh "])"
      stmt = "Y = " name "(X)"; what = "sum[" $3 "] " sh
    } else if (NF == 4) {
      setup = sprintf("X = randn(f32[%d, %d])", $3, $4); what = op " " $3 "x" $4
      if (op == "layernorm") { setup = setup sprintf("\ng = randn(f32[%d])\nb = randn(f32[%d])", $4, $4); stmt = "Y = layernorm(X, g, b)" }
      else if (op == "rmsnorm") { setup = setup sprintf("\ng = randn(f32[%d])", $4); stmt = "Y = rmsnorm(X, g)" }
      else if (op == "chain") { setup = setup sprintf("\ng = randn(f32[%d])\nR = randn(f32[%d, %d])", $4, $3, $4); stmt = "Y = bias_silu_residual(X, g, R)" }
      else stmt = "Y = " op "(X)"
    } else next
    n_ = ++nst; S[n_] = setup; T[n_] = stmt; W[n_] = suite "|" what
  }
  END {
    print "fn bias_silu_residual(X: f32[B, N], bias: f32[N], R: f32[B, N]) -> f32[B, N] {"
    print "  Z[b, n] = X[b, n] + bias[n]"
    print "  Y[b, n] = Z[b, n] * sigmoid(Z[b, n]) + R[b, n]"
    print "  return Y"
    print "}"
    for (r = 1; r <= rounds; r++)
      for (i = 1; i <= nst; i++) printf "%s\nprint(\"@@ %s\")\n:time %s\n", S[i], W[i], T[i]
  }' > "$tmp/prog.dyn"

DYN_HW_DIR=${DYN_HW_DIR:-$here/hw} "$dyn" --threads="$threads" $hw "$tmp/prog.dyn" > "$tmp/out" 2>&1 || {
  tail -20 "$tmp/out" >&2; exit 1; }

awk -v stat="$stat" '
  /^@@ / { key = substr($0, 4); next }
  /^time: median/ { med = (stat == "min" ? $6 : $3) }
  /predicted [0-9.]+ ms/ && key != "" {
    match($0, /predicted [0-9.]+ ms/); p = substr($0, RSTART + 10, RLENGTH - 13) + 0
    if (!(key in best) || med < best[key]) { best[key] = med; pred[key] = p }
    if (!(key in seen)) { seen[key] = 1; order[++n] = key }
    key = ""
  }
  END {
    printf "%-16s %-26s %11s %11s %7s\n", "suite", "statement", "measured", "predicted", "error"
    for (i = 1; i <= n; i++) {
      k = order[i]; split(k, a, "|"); e = pred[k] / best[k] - 1
      printf "%-16s %-26s %8.3f ms %8.3f ms %+6.0f%%\n", a[1], a[2], best[k], pred[k], 100 * e
      sum[a[1]] += (e < 0 ? -e : e); cnt[a[1]]++
      if (!(a[1] in so)) { so[a[1]] = 1; sorder[++ns] = a[1] }
    }
    for (i = 1; i <= ns; i++)
      printf "mean |error| %-16s %4.0f%% over %d lines\n", sorder[i], 100 * sum[sorder[i]] / cnt[sorder[i]], cnt[sorder[i]]
  }' "$tmp/out"
