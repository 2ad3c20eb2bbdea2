#!/bin/sh
# Differential tests: the compiled CPU back end against the reference evaluator, through
# :check, on random data and awkward sizes -- 1, primes, and the sides of the register and
# cache tiles (each size -1, +0, +1).  Any disagreement makes :check fail the script.
# Skipped (77) when dyn was built without LLVM.
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
top_builddir=${top_builddir:-$top_srcdir}
dyn=$top_builddir/dyn
grep -q "define HAVE_LLVM 1" "$top_builddir/config.h" 2>/dev/null || { echo "built without LLVM: skipped"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/dyndiff.XXXXXX") || exit 99
trap 'rm -rf "$work"' EXIT
s=$work/diff.dyn
{
  echo "seed(11)"
  # matmul: every pair from a list of awkward sizes for M and N, K from another list
  for m in 1 2 7 15 16 17 31 32 33 63 64 65 97; do
    for n in 1 3 13 15 16 17 47 48 49 64 65; do
      k=$(( (m * 7 + n * 3) % 37 + 1 ))
      echo "A = randn(f32[$m, $k]); B = randn(f32[$k, $n])"
      echo ":check matmul(A, B)"
    done
  done
  # long reductions: either side of typical kc blocks
  for k in 127 128 129 255 256 257 383 384 385 511 512 513; do
    echo "A = randn(f32[19, $k]); B = randn(f32[$k, 23])"
    echo ":check matmul(A, B)"
  done
  # a call reuses the tables of the call before only for the same sizes: shapes come back
  for m in 5 9 5 5 9 1 5; do
    echo ":check matmul(randn(f32[$m, 7]), randn(f32[7, $((m + 6))]))"
    echo ":check softmax(randn(f32[$m, $((m * 3))]))"
  done
  # large enough to be split across threads and cache blocks
  echo "A = randn(f32[257, 129]); B = randn(f32[129, 263])"
  echo ":check matmul(A, B)"
  # f64 contractions
  echo "fn matmul64(A: f64[M, K], B: f64[K, N]) -> f64[M, N] { C[i, j] = sum[k] A[i, k] * B[k, j]; return C }"
  for m in 1 5 17 33; do echo ":check matmul64(f64(randn(f32[$m, 19])), f64(randn(f32[19, $((m + 4))])))"; done
  # batched and transposed operands go through the same engine
  echo "fn bmm(A: f32[B, M, K], X: f32[B, K, N]) -> f32[B, M, N] { C[b, i, j] = sum[k] A[b, i, k] * X[b, k, j]; return C }"
  echo "fn mtm(A: f32[K, M], X: f32[N, K]) -> f32[M, N] { C[i, j] = sum[k] A[k, i] * X[j, k]; return C }"
  for b in 1 3; do for m in 1 17 64; do
    echo ":check bmm(randn(f32[$b, $m, 13]), randn(f32[$b, 13, 31]))"
    echo ":check mtm(randn(f32[13, $m]), randn(f32[31, 13]))"
  done; done
  # row-wise kernels and elementwise functions over awkward widths
  for r in 1 3 16 17; do
    for c in 1 2 15 16 17 31 33 127 768 1025; do
      echo "X = randn(f32[$r, $c]) * 3; g = rand(f32[$c]); b = randn(f32[$c])"
      echo ":check softmax(X)"
      echo ":check layernorm(X, g, b)"
      echo ":check gelu(X)"
      echo ":check relu(X)"
    done
  done
  # every math function and operator, through a user function compiled once
  echo "fn mathf(X: f32[N]) -> f32[N] { Y[i] = exp(X[i] * 0.1) + log(abs(X[i]) + 1) + sqrt(abs(X[i])) + rsqrt(abs(X[i]) + 1) + sin(X[i]) + cos(X[i]) + tanh(X[i]) + sigmoid(X[i]) + erf(X[i]) + floor(X[i]) + ceil(X[i]) + round(X[i]) + max(X[i], 0.5) + min(X[i], -0.5) + pow(abs(X[i]), 1.5) + X[i] % 0.7; return Y }"
  echo "fn intf(X: i64[N]) -> i64[N] { Y[i] = X[i] / 3 + X[i] % 5 - abs(X[i]) * 2 + max(X[i], 7) + where(X[i] > 0, 1, -1); return Y }"
  echo "fn cmpf(X: f32[N]) -> bool[N] { Y[i] = X[i] > 0.5 or X[i] < -1.0 and not (X[i] == 0.0); return Y }"
  echo "fn casts(X: f32[N]) -> i32[N] { Y[i] = i32(X[i] * 1000.0) + i32(f64(X[i]) > 0.0); return Y }"
  for n in 1 7 16 17 100 1001; do
    echo "X = randn(f32[$n]) * 4"
    echo ":check mathf(X)"
    echo ":check cmpf(X)"
    echo ":check casts(X)"
    echo ":check intf(i64(X * 100.0))"
  done
  # gathers by i32 and i64 index tensors, and an i32 index in arithmetic (i32 subscripts
  # once made code that did not verify, and :check compared the evaluator with itself)
  echo "fn gather32(X: f32[N], I: i32[M]) -> f32[M] { Y[m] = X[I[m]] + X[(I[m] + 1) % N]; return Y }"
  echo "fn gather64(X: f32[N, K], I: i64[M]) -> f32[M, K] { Y[m, k] = X[I[m], k]; return Y }"
  for n in 1 7 33; do
    echo "X = randn(f32[$n]); I = i32(rand(f32[50]) * $n)"
    echo ":check gather32(X, I)"
    echo ":check gather64(randn(f32[$n, 5]), i64(I))"
  done
  # a quotient by a square root at 0 and -0 is infinity, not a target's reciprocal estimate
  echo "fn rsq(X: f32[N]) -> (f32[N], f32[N]) { Y[i] = 1.0 / sqrt(X[i]); Z[i] = X[i] / sqrt(abs(X[i])); return (Y, Z) }"
  echo ":check rsq(where(rand(f32[37]) > 0.5, 0.0, rand(f32[37])))"
  echo ":check rsq([0, -0.0, 4, 1e-30, 16, 1, 2, 3, 0, 5, 6, 7, 8, 9, 10, 11, 12])"
  # every back end draws the same random numbers, and a top-level statement is compiled too
  echo ":check rand(f32[3])"
  echo ":check randn(f32[4, 5]) * 2.0 + 1.0"
  echo ":check softmax(rand(f32[3, 7]))"
  # padding with where(...), reductions of every kind, a convolution
  echo "fn pad(X: f32[H], P: size) -> f32[H + 2*P] { Y[i] = where(i >= P and i < H + P, X[i - P], 0.0); return Y }"
  echo "fn conv(X: f32[H], Wt: f32[R]) -> f32[H - R + 1] { O[h] = sum[r] X[h + r] * Wt[r]; return O }"
  echo "fn reds(X: f32[B, N]) -> (f32[B], f32[B], f32[B], f32[N]) { a[b] = max[n] X[b, n]; c[b] = min[n] X[b, n]; p[b] = prod[n] X[b, n]; s[n] = sum[b] X[b, n]; return (a, c, p, s) }"
  for n in 1 2 9 64 65; do
    echo ":check pad(randn(f32[$n]), 3)"
    echo ":check conv(randn(f32[$((n + 4))]), randn(f32[5]))"
    echo ":check reds(randn(f32[7, $n]))"
  done
  # a per-row reduction accumulated in the loop before it, and ones that must not be: read at
  # another element, or under a where
  echo "fn fsum(X: f32[B, N]) -> (f32[B, N], f32[B]) { e[b, n] = exp(X[b, n]); s[b] = max[n] e[b, n] * 2.0; Y[b, n] = e[b, n] / s[b]; return (Y, s) }"
  echo "fn frev(X: f32[B, N]) -> f32[B] { e[b, n] = exp(X[b, n]); s[b] = sum[n] e[b, n] * e[b, N - 1 - n]; return s }"
  echo "fn fwhere(X: f32[B, N]) -> f32[B] { e[b, n] = exp(X[b, n]); s[b] = where(X[b, 0] > 0.0, sum[n] e[b, n], -1.0); return s }"
  for n in 1 2 17 64 129; do
    echo "X = randn(f32[5, $n])"
    for f in fsum frev fwhere; do echo ":check $f(X)"; done
  done
  # statements whose values are not returned still compile: inlined sigmoids beside a
  # where() over a reduction took InstCombine two rounds, and a pipeline that asked it to
  # verify one ended the process
  echo "fn sigwhere(P0: f32[N, M], P1: f32[N]) -> f32 { T0[n] = (sigmoid((P1[n] * P1[n])) * (sigmoid(P1[n]) / (abs((P1[n] / (abs(P1[n]) + 1.0))) + 1.0))); T1[n] = where(P1[n] > (min(P1[n], T0[n]) * T0[n]), (max[m] (P0[n, m])), sigmoid(T0[n])); T2 = -1.87; return T2 }"
  echo ":check sigwhere(randn(f32[64, 16]), randn(f32[64]))"
  # reductions over a written range
  echo "fn evens(X: f32[B, N]) -> f32[B] { s[b] = sum[k < N / 2] X[b, 2 * k]; return s }"
  echo "fn window(X: f32[B, N]) -> f32[B, N - 2] where N >= 3 { Y[b, i] = max[k < 3] X[b, i + k]; return Y }"
  for n in 3 4 17 64 129; do
    echo ":check evens(randn(f32[3, $n]))"
    echo ":check window(randn(f32[2, $n]))"
  done
  # layout changes (stores along one axis, loads along another: tiles transposed in
  # registers): every side on either side of the tile's width at any model's vector width
  # (2 to 16 lanes), each element type, a permutation of rank 3 and 4 that moves the last
  # axis, a value computed from two layouts, a checked subscript inside a tile
  echo "fn tr64(A: f64[M, N]) -> f64[N, M] { B[j, i] = A[i, j] * 2.0; return B }"
  echo "fn tri(A: i32[M, N]) -> i32[N, M] { B[j, i] = A[i, j] - 1; return B }"
  echo "fn trl(A: i64[M, N]) -> i64[N, M] { B[j, i] = A[i, j]; return B }"
  echo "fn mix(A: f32[M, N], C: f32[N, M]) -> f32[N, M] { B[j, i] = A[i, j] * 3.0 + C[j, i]; return B }"
  echo "fn p3(X: f32[A, B, C]) -> f32[C, A, B] { Y[c, a, b] = X[a, b, c]; return Y }"
  echo "fn p4(X: f32[A, B, C, D]) -> f32[A, D, B, C] { Y[a, d, b, c] = X[a, b, c, d]; return Y }"
  echo "fn shifted(A: f32[M, N], I: i64[K]) -> f32[N, K] { B[j, k] = A[I[k], j]; return B }"
  for m in 1 3 7 8 9 15 16 17 33; do for n in 1 2 15 16 17 31 32 65; do
    echo ":check transpose(randn(f32[$m, $n]))"
  done; done
  for mn in "1, 1" "7, 9" "16, 16" "17, 33" "64, 65" "129, 47" "300, 257"; do
    echo "X = randn(f32[$mn])"
    echo ":check transpose(X)"
    echo ":check tr64(f64(X))"
    echo ":check tri(i32(X * 100))"
    echo ":check trl(i64(X * 100))"
    echo ":check mix(X, transpose(X))"
  done
  for dims in "2, 3, 17" "5, 16, 33" "3, 31, 64" "1, 1, 1"; do echo ":check p3(randn(f32[$dims]))"; done
  for dims in "2, 3, 5, 17" "1, 16, 2, 33"; do echo ":check p4(randn(f32[$dims]))"; done
  echo ":check shifted(randn(f32[40, 35]), i64([39, 0, 5, 17, 3, 3, 38, 1, 2, 4, 6, 7, 8, 9, 10, 11, 12, 13]))"
  # every standard library function, on shapes with 1 and primes
  echo "import reduce"
  for b in 1 3; do for n in 1 7 33; do
    echo "X = randn(f32[$b, $n]); g = rand(f32[$n]); v = randn(f32[$n])"
    for f in relu gelu gelu_erf silu softmax log_softmax sum mean var std amax argmax transpose; do echo ":check $f(X)"; done
    echo ":check layernorm(X, g, v)"
    echo ":check rmsnorm(X, g)"
    echo ":check matvec(randn(f32[$b, $n]), v)"
    echo ":check outer(randn(f32[$b]), v)"
    echo ":check dot(v, g)"
    echo ":check linear(X, randn(f32[5, $n]), randn(f32[5]))"
    echo ":check mlp(X, randn(f32[6, $n]), randn(f32[6]), randn(f32[4, 6]), randn(f32[4]))"
    echo ":check bmm(randn(f32[$b, 5, $n]), randn(f32[$b, $n, 3]))"
    echo ":check attention(randn(f32[$b, 5, $n]), randn(f32[$b, 7, $n]), randn(f32[$b, 7, $n]))"
    echo ":check causal_attention(randn(f32[$b, 5, $n]), randn(f32[$b, 7, $n]), randn(f32[$b, 7, $n]))"
  done; done
  for st in 1 2; do for p in 0 1; do
    echo ":check conv1d(randn(f32[2, 3, 11]), randn(f32[4, 3, 3]), $st, $p)"
    echo ":check conv2d(randn(f32[1, 2, 7, 9]), randn(f32[3, 2, 3, 3]), $st, $p)"
  done; done
  echo ":check maxpool2d(randn(f32[1, 2, 7, 9]), 2, 2)"
  echo ":check avgpool2d(randn(f32[1, 2, 7, 9]), 3, 1)"
  # reductions built under their vector axis (each step updates the result's row): column
  # sums and maxima of every type, the row split across threads (20011 columns), a stage
  # of a row-wise kernel, windows with strides, and the padded convolutions at more sizes
  echo "fn colsum(X: f32[B, N]) -> f32[N] { s[n] = sum[b] X[b, n]; return s }"
  echo "fn colmax64(X: f64[B, N]) -> f64[N] { s[n] = max[b] X[b, n]; return s }"
  echo "fn colsumi(X: i32[B, N]) -> i32[N] { s[n] = sum[b] X[b, n]; return s }"
  echo "fn colprod(X: i64[A, B, N]) -> i64[A, N] { s[a, n] = prod[b] X[a, b, n]; return s }"
  echo "fn rowsub(X: f32[A, B, N]) -> f32[A, B, N] { m[a, n] = sum[b] X[a, b, n]; Y[a, b, n] = X[a, b, n] - m[a, n]; return Y }"
  for n in 1 15 16 17 33 20011; do for b in 1 3 64; do
    echo "X = randn(f32[$b, $n])"
    echo ":check colsum(X)"
    echo ":check colmax64(f64(X))"
    echo ":check colsumi(i32(X * 50.0))"
  done; done
  for n in 1 17 65; do
    echo ":check colprod(i64(randn(f32[3, 4, $n]) * 3.0))"
    echo ":check rowsub(randn(f32[2, 5, $n]))"
  done
  for w in 1 2 16 17 31; do for st in 1 2 3; do
    echo ":check conv2d(randn(f32[2, 3, 5, $w]), randn(f32[4, 3, 1, 1]), $st, 0)"
    echo ":check conv2d(randn(f32[1, 2, 6, $w]), randn(f32[3, 2, 3, 3]), $st, 1)"
    echo ":check conv1d(randn(f32[2, 3, $w]), randn(f32[5, 3, 3]), $st, 2)"
  done; done
  for w in 2 3 17 34; do echo ":check maxpool2d(randn(f32[2, 3, 6, $w]), 2, 2)"; echo ":check maxpool2d(randn(f32[1, 2, 5, $w]), 2, 1)"; done
  # windowed contractions on the micro-kernels (run_window): images that share out over the
  # threads and ones that do not (7 of 16 x 64 x 64, and single images: each in parts along
  # Q), f64, two M axes and a window over two axes of B, and a weight read through a window
  # of its own (not a windowed contraction: the loop kernel)
  echo ":check conv2d(randn(f32[7, 16, 64, 64]), randn(f32[2, 16, 3, 3]), 1, 1)"
  echo "fn conv64(X: f64[N, C, L], Wt: f64[F, C, K]) -> f64[N, F, L - K + 1] where L >= K { Y[n, f, l] = sum[c, k] X[n, c, l + k] * Wt[f, c, k]; return Y }"
  echo "fn twom(X: f32[N, C, H], Wt: f32[F, G, C, R]) -> f32[N, F, G, H - R + 1] where H >= R { Y[n, f, g, h] = sum[c, r] X[n, c, h + r] * Wt[f, g, c, r]; return Y }"
  echo "fn part(X: f32[N, C, H, W], Wt: f32[F, C, 3, 3]) -> f32[N, F, H - 1, W - 1] where H >= 2, W >= 2 { Y[n, f, h, w] = sum[c, i < 2, j < 2] X[n, c, h + i, w + j] * Wt[f, c, i, j]; return Y }"
  # a weight computed first stays a tensor the GEMM reads (inlined, it made a loop kernel)
  echo "fn wconv(X: f32[N, C, H, W], Wt: f32[F, C, 3, 3]) -> f32[N, F, H, W] where H >= 1, W >= 1 { W2[f, c, i, j] = Wt[f, c, i, j] * 0.5; Y = conv2d(X, W2, 1, 1); return Y }"
  echo ":check wconv(randn(f32[2, 3, 9, 8]), randn(f32[4, 3, 3, 3]))"
  # weights in other layouts: read in place as K x M (HWIO, CRSM), their taps in the order
  # of A's strides; one whose reduction axes M splits (CMRS) is gathered into an M x K matrix first
  echo "fn hwio(X: f32[N, C, H, W], Wt: f32[R, S, C, M]) -> f32[N, M, H - R + 1, W - S + 1] where H >= R, W >= S { Y[n, m, h, w] = sum[c, r, s] X[n, c, h + r, w + s] * Wt[r, s, c, m]; return Y }"
  echo "fn crsm(X: f32[N, C, H, W], Wt: f32[C, R, S, M]) -> f32[N, M, H - R + 1, W - S + 1] where H >= R, W >= S { Y[n, m, h, w] = sum[c, r, s] X[n, c, h + r, w + s] * Wt[c, r, s, m]; return Y }"
  echo "fn cmrs(X: f32[N, C, H, W], Wt: f32[C, M, R, S]) -> f32[N, M, H - R + 1, W - S + 1] where H >= R, W >= S { Y[n, m, h, w] = sum[c, r, s] X[n, c, h + r, w + s] * Wt[c, m, r, s]; return Y }"
  for c in 1 3; do for w in 3 17; do
    echo ":check hwio(randn(f32[2, $c, 6, $w]), randn(f32[3, 2, $c, 5]))"
    echo ":check hwio(randn(f32[2, $c, 6, $w]), randn(f32[1, 1, $c, 7]))"
    echo ":check crsm(randn(f32[3, $c, 5, $w]), randn(f32[$c, 3, 3, 4]))"
    echo ":check cmrs(randn(f32[2, $c, 5, $w]), randn(f32[$c, 4, 2, 3]))"
  done; done
  for l in 3 17 64; do
    echo ":check conv64(f64(randn(f32[3, 5, $l])), f64(randn(f32[4, 5, 3])))"
    echo ":check twom(randn(f32[2, 3, $l]), randn(f32[3, 2, 3, 3]))"
    echo ":check part(randn(f32[2, 3, 5, $l]), randn(f32[4, 3, 3, 3]))"
  done
} > "$s"
cd "$work" || exit 99
"$dyn" "$s" > out.txt 2> err.txt
st=$?
# a back end that fell back to the evaluator would make :check compare it with itself
if grep -q "compiling for the CPU failed" err.txt; then grep -m3 "compiling for the CPU failed" err.txt; st=1; fi
ok=$(grep -c ': ok;' out.txt)
bad=$(grep -c 'MISMATCH' out.txt)
if [ $st != 0 ]; then cat err.txt; grep -B1 MISMATCH out.txt | head -20; fi
echo "differential: $ok passed, $((bad + (st != 0 && bad == 0))) failed"
[ $st = 0 ] || exit 1
# :sched breaks its lines at 80 columns, each continuation indented 4 past its line: joined
unwrap() {
  awk '{ match($0, /^ */); ind = RLENGTH
         if (have && ind == base + 4) { line = line " " substr($0, ind + 1); next }
         if (have) print line
         line = $0; base = ind; have = 1 }
       END { if (have) print line }'
}
# the checks above ran the interchanged loops and the gathered windows: :sched says which
# kernels get them (conv2d's loop kernel is what a layout the micro-kernels cannot take runs)
{
  printf ':sched conv2d\n:sched maxpool2d\n:sched softmax\n:sched conv2d N=2 C=3 H=9 W=8 F=4 KH=3 KW=3 S=2 P=1\n'
  grep '^fn wconv' "$s"
  printf ':sched wconv N=2 C=3 H=9 W=8 F=4\n'
  grep '^fn hwio\|^fn cmrs' "$s"
  printf ':sched hwio N=2 C=3 H=6 W=17 R=3 S=2 M=5\n:sched hwio N=1 C=3 H=6 W=17 R=3 S=2 M=5\n'
  printf ':sched cmrs N=2 C=3 H=5 W=17 M=4 R=2 S=3\n'
} | "$dyn" --threads=2 2>&1 | unwrap > ic.txt
ic=$(grep -c "inside the reduction's loops" ic.txt)
echo "interchanged: $ic of conv2d, maxpool2d, softmax (want 2)"
[ "$ic" = 2 ] || { cat ic.txt; exit 1; }
# cmrs's weight, not an M x K matrix in place, is gathered into one first (4 x 3 * 2 * 3)
ga=$(grep -c "^  Wt gathered first into a 4 x 18 matrix (its layout is not one): predicted" ic.txt)
echo "weight gathered first: $ga of cmrs (want 1)"
[ "$ga" = 1 ] || { cat ic.txt; exit 1; }
on=", on the thread that multiplies it: a GEMM of"
win=$(grep -c "^  gathered: 27 x 20 for each of 2$on M 4, N 20, K 27 each:" ic.txt)
wwin=$(grep -c "^  gathered: 27 x 72 for each of 2$on M 4, N 72, K 27 each:" ic.txt)
# (hwio's windows have 6 taps: gathered, as cpu_conv_gemm.c leaves windows of several taps)
hwin=$(grep -c "^  gathered: 18 x 64 for each of 2 (rows r, s, c)$on M 5, N 64, K 18 each:" ic.txt)
pwin=$(grep -c "^  gathered: 18 x 64 for each of 1 (rows r, s, c), in 2 parts of up to 32 columns$on M 5, N 32, K 18 each:" ic.txt)
mwin=$(grep -c "^  gathered: 18 x 60 for each of 2$on M 4, N 60, K 18 each:" ic.txt)
cwin=$(grep -c "^  gathered: " ic.txt)
echo "gathered windows: $win of conv2d at N=2 C=3 H=9 W=8 F=4 S=2 P=1, $wwin of wconv, $hwin + $pwin of hwio at N=2 and N=1, $mwin of cmrs, $cwin in all (want 1, 1, 1 + 1, 1 and 5)"
[ "$win" = 1 ] && [ "$wwin" = 1 ] && [ "$hwin" = 1 ] && [ "$pwin" = 1 ] && [ "$mwin" = 1 ] && [ "$cwin" = 5 ] || { cat ic.txt; exit 1; }

# the layout changes above ran in tiles as wide as the model's vectors of f32 (at most 16)
bits=$("$dyn" -e ':hw' 2>/dev/null | sed -n 's/.* \([0-9]*\)-bit vectors.*/\1/p' | head -n 1)
w=$(( ${bits:-256} / 32 )); [ "$w" -gt 16 ] && w=16
printf 'fn p3(X: f32[A, B, C]) -> f32[C, A, B] { Y[c, a, b] = X[a, b, c]; return Y }\n:sched transpose\n:sched p3\n' |
  "$dyn" 2>&1 | unwrap > lay.txt
tiles=$(grep -c "a layout change (it reads along .*, writes along .*), in tiles of $w x $w transposed in registers" lay.txt)
echo "layout changes: $tiles of transpose, p3 in tiles of $w x $w (want 2)"
[ "$tiles" = 2 ] || { cat lay.txt; exit 1; }

# a chain of reductions down the columns (softmax over axis 0) is not grouped per column,
# whose reductions would read an element a line: each is its own kernel, interchanged
printf '%s\n' 'fn cs(X: f32[R, C]) -> f32[R, C] {' '  m[c] = max[r] X[r, c]' '  s[c] = sum[r] exp(X[r, c] - m[c])' \
  '  Y[r, c] = exp(X[r, c] - m[c]) / s[c]' '  return Y' '}' ':sched cs' ':check cs(rand(f32[37, 19]))' |
  "$dyn" 2>&1 | unwrap > cols.txt
cr=$(grep -c "a reduction in runs of axes, outer to inner: r reduced, c kept" cols.txt)
rw=$(grep -c "row-wise" cols.txt)
echo "columns: $cr reductions of softmax over axis 0 interchanged, $rw row-wise kernels (want 2, 0)"
[ "$cr" = 2 ] && [ "$rw" = 0 ] && grep -q 'cpu vs ref: .*: ok' cols.txt || { cat cols.txt; exit 1; }

# a join along the last axis runs its loop in two parts, each reading its operand in plain
# vectors: no gather in its code for any x86 model in hw/ (one loop with a where per lane
# became a gather of both operands)
# (on an x86-64 host: elsewhere x86 code is an LLVM target the build may lack)
"$dyn" -e ':hw' 2>/dev/null | head -n 2 | grep -q 'Arm64\|Neoverse\|Cortex' || for f in "$top_srcdir"/hw/*.hw; do
  m=$(basename "$f" .hw)
  grep -q '^kind *= *gpu\|aarch64' "$f" && continue
  printf '%s\n' 'fn cat2(A: f32[M, N], B: f32[M, K]) -> f32[M, N + K] {' '  C = concat(A, B, 1)' '  return C' '}' \
    ':code cat2 llvm' | "$dyn" --hw="$m" > join.txt 2>&1
  # (the kernel, not its streaming twin _nt, which keeps one loop)
  awk '/^define/ { k = ($0 ~ /_k0\(/) } k' join.txt > join_k0.txt
  g=$(grep -c 'gather' join_k0.txt); v=$(grep -c 'load <[0-9]* x float>' join_k0.txt)
  [ "$g" = 0 ] && [ "$v" -gt 0 ] || { echo "join along the last axis on $m: $g gathers, $v vector loads (want 0, some)"; exit 1; }
done
echo "joins along the last axis: plain vector loads on every x86 model"

# Streaming stores: a result that with its inputs outgrows the last cache is written by a twin kernel with
# non-temporal stores, each row's elements before its first line boundary by plain ones.  A
# hardware file with a 64 KiB last cache (this machine's own figures otherwise) makes small
# results take that path: rows of whole lines, rows that start mid-line (1000, 1025), rows
# shorter than the gap to a boundary (7, 17); results that fit take the plain kernel.  Both
# must agree with the reference evaluator.
# The small file is the model dyn chose for this CPU (the file :hw names), so that its code
# runs here, whatever the CPU: never /proc/cpuinfo, which an emulator does not change.
base=$("$dyn" -e ':hw' 2>/dev/null | sed -n 's/.* from \([A-Za-z0-9_.-]*\)\.hw$/\1/p' | head -n 1)
if [ -n "$base" ] && [ -f "$top_srcdir/hw/$base.hw" ]; then
  sed -e 's/^l1\.bytes = .*/l1.bytes = 16K/' -e 's/^l2\.bytes = .*/l2.bytes = 32K/' \
      -e 's/^l3\.bytes = .*/l3.bytes = 64K/' "$top_srcdir/hw/$base.hw" > small.hw
  {
    echo "seed(5)"
    echo "fn scale(X: f32[B, N]) -> f32[B, N] { Y[b, n] = X[b, n] * 2.0 + 1.0; return Y }"
    echo "fn scale64(X: f64[B, N]) -> f64[B, N] { Y[b, n] = X[b, n] * 2.0 + 1.0; return Y }"
    for r in 1 17 64; do for c in 16 32 48 1000 1024 1025 4096; do
      echo "X = randn(f32[$r, $c]) * 3; g = rand(f32[$c]); v = randn(f32[$c])"
      for f in softmax gelu scale; do echo ":check $f(X)"; done
      echo ":check layernorm(X, g, v)"
      echo ":check scale64(f64(X))"
    done; done
    for shape in "5000, 7" "3001, 17" "2, 9000"; do
      echo "X = randn(f32[$shape])"
      for f in softmax scale; do echo ":check $f(X)"; done
    done
    # the innermost axis split across threads: tasks start mid-row, so no streaming twin
    echo "fn scale1(X: f32[N]) -> f32[N] { Y[i] = X[i] * 2.0 + 1.0; return Y }"
    for n in 16384 20000 65537; do echo ":check scale1(randn(f32[$n]))"; done
    echo "fn scale3(X: f32[A, B, C]) -> f32[A, B, C] { Y[a, b, c] = X[a, b, c] * 2.0 - 1.0; return Y }"
    for c in 1024 1000; do echo ":check scale3(randn(f32[3, 5, $c]))"; done
    # joins and paddings along the last axis, split where their where flips (not in the
    # streaming twin, whose vector stores start on a line: a part may start anywhere)
    echo "fn cat1(A: f32[M, N], B: f32[M, K]) -> f32[M, N + K] { C = concat(A, B, 1); return C }"
    echo "fn pad(X: f32[M, N]) -> f32[M + 2, N + 3] { Y[i, j] = where(i >= 1 and i <= M and j >= 2 and j < N + 2, X[i - 1, j - 2], 0.5); return Y }"
    for shape in "100, 301" "7, 4099" "33, 31"; do
      echo ":check cat1(randn(f32[$shape]), randn(f32[${shape%%,*}, 299]))"
      echo ":check pad(randn(f32[$shape]))"
    done
    # convolutions whose gathered matrices outgrow the small L2: each image in parts
    for st in 1 2; do
      echo ":check conv2d(randn(f32[3, 8, 20, 23]), randn(f32[5, 8, 3, 3]), $st, 1)"
      echo ":check conv2d(randn(f32[1, 6, 31, 9]), randn(f32[4, 6, 2, 2]), $st, 0)"
    done
  } > stream.dyn
  "$dyn" --hw=small.hw --threads=2 stream.dyn > sout.txt 2> serr.txt
  st=$?
  ok=$(grep -c ': ok;' sout.txt)
  bad=$(grep -c 'MISMATCH' sout.txt)
  if [ $st != 0 ] || [ -s serr.txt ]; then cat serr.txt; grep -B1 MISMATCH sout.txt | head -20; fi
  echo "streaming: $ok passed, $((bad + (st != 0 && bad == 0))) failed"
  [ $st = 0 ] && [ "$ok" = "$(grep -c '^:check' stream.dyn)" ] && [ ! -s serr.txt ] || exit 1
  # which kernels have a twin: not gelu (a sigmoid per element); layernorm (an rsqrt per row) does
  printf ':sched layernorm\n:sched softmax\n:sched relu\n:sched gelu\n' | "$dyn" --hw=small.hw 2>&1 | unwrap > sched.txt
  tw=$(grep -c '^  streaming stores to Y' sched.txt)
  gelu_tw=$(sed -n '/^kernel gelu/,$p' sched.txt | grep -c streaming)
  echo "streaming twins: $tw of layernorm, softmax, relu, gelu (want 3, none for gelu: $gelu_tw)"
  [ "$tw" = 3 ] && [ "$gelu_tw" = 0 ] || { cat sched.txt; exit 1; }
  # softmax writes row b - 1's result in the loop of row b's exp (row pipelining), so the
  # checks above ran that path, twin and all; layernorm has no such stage
  pipe=$(grep '^  pipelined:' sched.txt)
  echo "pipelined: $pipe"
  [ "$pipe" = "  pipelined: row b's stage e runs in one loop with row b - 1's stage Y" ] || { cat sched.txt; exit 1; }
  # when the twin runs: 4 x 1000 (16 KB out, 16 KB in) fits the 64 KiB cache; 10 x 1000
  # (40 KB out, under it) does not with its 40 KB input, so the twin is compiled then
  printf 'Y = softmax(rand(f32[4, 1000]))\n:sched softmax\nY = softmax(rand(f32[10, 1000]))\n:sched softmax\n' |
    "$dyn" --hw=small.hw 2>&1 | unwrap > when.txt
  grep 'streaming stores to Y' when.txt | sed 's/([0-9.]* ms)/(T ms)/' > when.got
  printf '%s\n' \
    "  streaming stores to Y when it and the kernel's inputs are over 64 KiB (the last cache): twin compiled on first use (not yet)" \
    "  streaming stores to Y when it and the kernel's inputs are over 64 KiB (the last cache): twin compiled on first use (T ms)" > when.want
  diff when.want when.got || { cat when.txt; exit 1; }
fi
