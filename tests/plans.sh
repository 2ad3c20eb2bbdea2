#!/bin/sh
# plans.sh -- contractions' and convolutions' plans as :sched prints them, for every model in
# hw/.
# A 1 x 1 convolution at stride 2 of one image is an implicit GEMM (src/cpu_conv_gemm.c)
# whose product is M x K by K x (P Q); its tasks take the grid the GEMM model chose for that
# product, as :sched of matmul of the same sizes prints it in the same process (so that the
# kernel rates a model's host measures at start-up are the same for both): as many runs of
# rows as the grid's blocks of M, and at least as many chunks of columns as its blocks of N
# (more where the panels of a chunk would not fit half of L2).  The shapes put A (the
# filters) in and out of L2, and the columns (192) are a multiple of every tile's width.
# And a 1 x 1 convolution written as a user writes it (below) runs on the micro-kernels, so
# does a product batched over two axes (a multi-head attention's scores, one GEMM over both
# where they nest), and nn's conv2d at P = 0 reads X in place, its padding not run.
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
top_builddir=${top_builddir:-$top_srcdir}
dyn=$top_builddir/dyn
work=$(mktemp -d "${TMPDIR:-/tmp}/dynplans.XXXXXX") || exit 99
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 99
export HOME="$work" DYN_CUDA_DRIVER=/nonexistent/libcuda.so.1 DYN_HW_DIR="$top_srcdir/hw"
"$dyn" --target=cpu -e ':target' > probe.txt 2>&1
grep -q 'target: cpu' probe.txt || { echo "plans: no compiled CPU back end, skipped"; exit 77; }
pass=0; fail=0

# A 1 x 1 convolution written as a user writes it, Y[n, f, h, w] = sum[c] X[n, c, h, w] *
# Wt[f, c] (more output axes than a matrix product has), runs on the micro-kernels as a
# window on the image in place, not as a loop kernel; a product batched over two axes runs
# on them as one GEMM: every model's :sched says so.
cat > pw.dyn <<'EOF'
fn pw(X: f32[N, C, H, W], Wt: f32[F, C]) -> f32[N, F, H, W] {
  Y[n, f, h, w]: f32[N, F, H, W] = sum[c] X[n, c, h, w] * Wt[f, c]
  return Y
}
fn scores(Q: f32[B, H, S, D], K: f32[B, H, T, D]) -> f32[B, H, S, T] {
  Y[b, h, i, j]: f32[B, H, S, T] = sum[d] Q[b, h, i, d] * K[b, h, j, d]
  return Y
}
:sched pw N=2 C=64 H=9 W=31 F=65
:sched scores B=2 H=8 S=97 T=128 D=64
EOF

for f in "$top_srcdir"/hw/*.hw; do
  hw=$(basename "$f" .hw)
  "$dyn" --hw="$hw" pw.dyn > out.txt 2>&1
  flat=$(tr '\n' ' ' < out.txt | sed 's/  */ /g')
  if echo "$flat" | grep -q 'then packed micro-kernels .*(read in place: the windows are the image itself)'; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1)); echo "FAIL --hw=$hw: the pointwise convolution is not a window on the image in place:"; head -12 out.txt
  fi
  if echo "$flat" | grep -q 'kernel scores_Y contraction over d (Q, batched x K -> Y): packed micro-kernels, sizes chosen at run time batch axes that nest: one GEMM over them all .* shape: batch 16, M 97, N 128, K 64'; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1)); echo "FAIL --hw=$hw: the product batched over two axes is not one GEMM of batch 16:"; sed -n '/^kernel scores_Y/,$p' out.txt | head -12
  fi
  for threads in 2 4; do
    for mk in "2048 1024" "512 2048" "256 512" "96 64"; do
      set -- $mk
      printf ':sched conv2d N=1 C=%s H=24 W=32 F=%s KH=1 KW=1 S=2 P=0\n:sched matmul M=%s K=%s N=192\n' \
        "$2" "$1" "$1" "$2" > plan.dyn
      "$dyn" --hw="$hw" --threads "$threads" plan.dyn > out.txt 2>&1
      flat=$(tr '\n' ' ' < out.txt | sed 's/  */ /g')
      conv=$(echo "$flat" | grep -o '[0-9]* tasks ([0-9]* chunks of columns an image[^)]*)')
      grid=$(echo "$flat" | grep -o 'cores: 1 x [0-9]* x [0-9]* blocks')
      what="--hw=$hw --threads $threads, M $1 K $2 N 192"
      if [ -z "$grid" ] && grep -q 'chosen: \(row streaming\|inner products\)' out.txt; then
        continue                                 # not a plan of tiles: the gathered path's
      fi
      if [ -z "$conv" ] || [ -z "$grid" ]; then
        fail=$((fail + 1)); echo "FAIL $what: no implicit GEMM's tasks or no matmul grid in:"; head -20 out.txt
        continue
      fi
      chunks=$(echo "$conv" | sed 's/.*(\([0-9]*\) chunks.*/\1/')
      parts=$(echo "$conv" | sed -n 's/.*each in \([0-9]*\) runs of rows.*/\1/p')
      tm=$(echo "$grid" | sed 's/cores: 1 x \([0-9]*\) x.*/\1/')
      tn=$(echo "$grid" | sed 's/cores: 1 x [0-9]* x \([0-9]*\) blocks/\1/')
      if [ "${parts:-1}" -ne "$tm" ] || [ "$chunks" -lt "$tn" ]; then
        fail=$((fail + 1))
        echo "FAIL $what: the implicit GEMM's $conv, the GEMM model's grid 1 x $tm x $tn"
      else
        pass=$((pass + 1))
      fi
    done
  done
done
# nn's conv2d at P = 0: its padding is not run and the convolution reads X in place; at
# P = 1 the padding is fused into the convolution
for pp in 0 1; do
  "$dyn" -e 'import nn' -e ":sched conv2d N=2 C=16 H=9 W=8 F=17 KH=1 KW=1 S=1 P=$pp" > out.txt 2>&1
  flat=$(tr '\n' ' ' < out.txt | sed 's/  */ /g')
  if [ "$pp" = 0 ] && ! echo "$flat" | grep -q 'kernel conv2d_Xp no padding at these sizes: not run; conv2d_Y reads X in place kernel conv2d_Y .*(read in place: the windows are the image itself)'; then
    fail=$((fail + 1)); echo "FAIL conv2d at P=0: the padding not said to be skipped:"; head -12 out.txt
  elif [ "$pp" = 1 ] && ! echo "$flat" | grep -q 'kernel conv2d_Y (and conv2d_Xp, the padding it reads, fused)'; then
    fail=$((fail + 1)); echo "FAIL conv2d at P=1: the padding not fused:"; head -12 out.txt
  else
    pass=$((pass + 1))
  fi
done
echo "plans: $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
