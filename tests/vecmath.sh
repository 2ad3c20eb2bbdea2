#!/bin/sh
# Every math function is vectorised at the width each CPU model asks for.  For every
# `kind = cpu` file in hw/ (read from the directory, so new models are covered), dyn
# compiles without running (`:code FN llvm`) softmax, gelu, gelu_erf, silu, log_softmax, a
# chain of math functions and each math function alone, in f32 and f64, and the optimised IR
# must have
#   - no call of a scalar math routine: no libm function and no llvm.exp/log/sin/cos/pow...
#     intrinsic (LLVM has no vector library here, so in a loop they are scalar calls);
#   - no innermost loop doing math (multiply-adds, square roots) that the loop vectoriser
#     left alone (a loop without llvm.loop.isvectorized; the remainders of a vectorised
#     loop carry it, and the prologues of unrolled loops, .prol/.epil, are judged by their
#     loop), and no scalar math inside a vector loop (one that loads or stores vectors: a
#     call the vectoriser replicated);
#   - its math at L lanes, L = the model's vector_bits / 32 for f32 and / 64 for f64: some
#     vector multiply-add or square root of <L x T>, none wider.
# AArch64 models are checked the same way (NEON <L x T> or SVE <vscale x L x T>) once dyn can
# compile for them on this host; until then they are skipped with a message.
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
top_builddir=${top_builddir:-$top_srcdir}
dyn=$top_builddir/dyn
work=$(mktemp -d "${TMPDIR:-/tmp}/dynvm.XXXXXX") || exit 99
trap 'rm -rf "$work"' EXIT
export DYN_CUDA_DRIVER=/nonexistent/libcuda.so.1 HOME="$work"
pass=0; fail=0; skip=0

# No LLVM in this build: nothing is compiled.
"$dyn" --hw=generic-avx2 -e ':code softmax llvm' > "$work/probe.txt" 2>&1
grep -q '^define' "$work/probe.txt" || { echo "vecmath: no compiled CPU back end, skipped"; exit 77; }

# The program: stdlib functions in f32, their f64 twins, a chain and each function alone.
{
  for t in f32 f64; do
    cat <<EOF
fn sm_$t(X: $t[B, N]) -> $t[B, N] {
  m[b] = max[n] X[b, n]
  e[b, n] = exp(X[b, n] - m[b])
  s[b] = sum[n] e[b, n]
  Y[b, n] = e[b, n] / s[b]
  return Y
}
fn lsm_$t(X: $t[B, N]) -> $t[B, N] {
  m[b] = max[n] X[b, n]
  s[b] = sum[n] exp(X[b, n] - m[b])
  Y[b, n] = X[b, n] - m[b] - log(s[b])
  return Y
}
fn gelu_$t(X: $t[B, N]) -> $t[B, N] {
  Y[b, n] = 0.5 * X[b, n] * (1.0 + tanh(0.7978845608028654 * (X[b, n] + 0.044715 * X[b, n] * X[b, n] * X[b, n])))
  return Y
}
fn gelu_erf_$t(X: $t[B, N]) -> $t[B, N] {
  Y[b, n] = 0.5 * X[b, n] * (1.0 + erf(0.7071067811865476 * X[b, n]))
  return Y
}
fn silu_$t(X: $t[B, N]) -> $t[B, N] {
  Y[b, n] = X[b, n] * sigmoid(X[b, n])
  return Y
}
fn chain_$t(X: $t[B, N], P: $t[B, N]) -> $t[B, N] {
  Y[b, n] = sin(X[b, n]) * cos(X[b, n]) + log(P[b, n]) * sqrt(P[b, n]) + tanh(X[b, n]) - sigmoid(X[b, n]) + exp(X[b, n]) + pow(P[b, n], X[b, n])
  return Y
}
fn pow_$t(X: $t[B, N], P: $t[B, N]) -> $t[B, N] {
  Y[b, n] = P[b, n] ** X[b, n]
  return Y
}
EOF
    for f in exp log sqrt rsqrt sin cos tanh sigmoid erf; do
      printf 'fn %s_%s(X: %s[B, N]) -> %s[B, N] {\n  Y[b, n] = %s(X[b, n])\n  return Y\n}\n' "$f" "$t" "$t" "$t" "$f"
    done
  done
  # the standard library's own, f32
  for f in softmax gelu gelu_erf silu log_softmax; do
    printf 'print("@@ %s f32")\n:code %s llvm\n' "$f" "$f"
  done
  for t in f32 f64; do
    for f in sm lsm gelu gelu_erf silu chain pow exp log sqrt rsqrt sin cos tanh sigmoid erf; do
      printf 'print("@@ %s_%s %s")\n:code %s_%s llvm\n' "$f" "$t" "$t" "$f" "$t"
    done
  done
} > "$work/prog.dyn"

# check MODEL BITS FILE: one line per failure, "ok N" at the end
check() {
  awk -v bits="$2" -v model="$1" '
  function flush(   i, j, k, n, inner, math, sc, vv, vec, s) {
    if (sec == "") return
    for (i = 1; i <= nl; i++) {               # innermost loops doing math, not vectorised
      inner = 1
      for (j = 1; j <= nl; j++)
        if (j != i && lfn[j] == lfn[i] && lat[j] >= hdr[i] && lat[j] < lat[i]) inner = 0
      if (!inner || hname[i] ~ /\.(prol|epil)$/) continue
      math = 0; sc = 0; vv = 0
      for (k = hdr[i]; k <= lat[i]; k++) { if (bmath[k]) math = 1; if (bscal[k]) sc = 1; if (bvec[k]) vv = 1 }
      vec = 0
      n = split(md[pend[i]], s, " ")
      for (j = 1; j <= n; j++) if (s[j] in isvec) vec = 1
      if (math && !vec) { print "FAIL vecmath " model " " sec ": a loop doing math was not vectorised (block " hname[i] ")"; bad = 1 }
      if (vec && vv && sc) { print "FAIL vecmath " model " " sec ": scalar math inside the vector loop (block " hname[i] ")"; bad = 1 }
    }
    if (!widest) { print "FAIL vecmath " model " " sec ": no vector math at all (want <" L " x " ety ">)"; bad = 1 }
    else if (widest != L) { print "FAIL vecmath " model " " sec ": math at " widest " lanes, want " L; bad = 1 }
    if (!bad) ok++
  }
  function reset() { nb = 0; nl = 0; widest = 0; bad = 0; delete bmath; delete bscal; delete bvec; delete bidx; called = 0; delete isvec; delete pend; delete md; fn = 0 }
  /^@@ / {
    flush(); reset(); sec = $2; ety = ($3 == "f64") ? "double" : "float"
    L = bits / ($3 == "f64" ? 64 : 32); sfx = ($3 == "f64") ? "f64" : "f32"; next
  }
  sec == "" { next }
  /^define / { fn++ }
  /^[A-Za-z0-9._]+:/ { nb++; name = $1; sub(/:$/, "", name); bidx[fn "/" name] = nb; bname[nb] = name; next }
  # metadata: loop ids that carry llvm.loop.isvectorized
  /^![0-9]+ = !\{!"llvm.loop.isvectorized"/ { isvec[$1] = 1; next }
  /^![0-9]+ = distinct !\{/ { id = $1; line = $0; sub(/^[^{]*\{/, "", line); gsub(/[,}]/, " ", line); md[id] = line; next }
  /call / && /@(llvm\.(exp|exp2|exp10|log|log2|log10|sin|cos|tan|pow|powi|ldexp|frexp)\.|(exp|log|log2|log10|sin|cos|tan|tanh|sinh|cosh|erf|erfc|pow|expm1|log1p|atan|asin|acos)f?\()/ {
    if (!called) print "FAIL vecmath " model " " sec ": a call of a math routine is left (libm, or an LLVM intrinsic that becomes one): " $0
    called = 1; bad = 1
  }
  nb && /(load|store) <(vscale x )?[0-9]+ x (float|double)>|@llvm\.masked\.(load|store)/ { bvec[nb] = 1 }
  nb && /@llvm\.(fmuladd|fma|sqrt)\.f(32|64)\(/ { bscal[nb] = 1 }
  /@llvm\.(fmuladd|fma|sqrt)\./ {
    if (nb) bmath[nb] = 1
    line = $0
    while (match(line, /@llvm\.(fmuladd|fma|sqrt)\.(nx)?v[0-9]+f(32|64)/)) {
      w = substr(line, RSTART, RLENGTH); line = substr(line, RSTART + RLENGTH)
      if (w !~ sfx "$") continue
      sub(/^@llvm\.[a-z]+\.(nx)?v/, "", w); sub(/f(32|64)$/, "", w)
      if (w + 0 > widest) widest = w + 0
    }
  }
  /^  br / && /!llvm\.loop ![0-9]+/ {
    line = $0; match(line, /!llvm\.loop ![0-9]+/); mdid = substr(line, RSTART + 11, RLENGTH - 11)
    best = 0; rest = line
    while (match(rest, /label %[A-Za-z0-9._]+/)) {
      t = substr(rest, RSTART + 7, RLENGTH - 7); rest = substr(rest, RSTART + RLENGTH)
      k = bidx[fn "/" t]
      if (k && k <= nb && k > best) best = k
    }
    if (best) { nl++; hdr[nl] = best; lat[nl] = nb; lfn[nl] = fn; hname[nl] = bname[best]; pend[nl] = mdid }
  }
  END { flush(); print "ok " ok }' "$3"
}

for hwf in "$top_srcdir"/hw/*.hw; do
  grep -q '^kind *= *cpu' "$hwf" || continue
  model=$(basename "$hwf" .hw)
  bits=$(sed -n 's/^vector_bits *= *\([0-9]*\).*/\1/p' "$hwf")
  feats=$(sed -n 's/^llvm_features *= *//p' "$hwf")
  case "$feats" in
    *+avx*|*+sse*) isa=x86 ;;
    *+neon*|*+sve*|*+fp-armv8*) isa=aarch64 ;;
    *) echo "SKIP vecmath $model: an ISA this test does not know ($feats)"; skip=$((skip + 1)); continue ;;
  esac
  if [ "$isa" = aarch64 ] && ! "$dyn" --hw="$model" -e ':code softmax llvm' > "$work/probe.txt" 2>&1; then
    echo "SKIP vecmath $model: dyn cannot compile for this AArch64 model on this host yet"
    skip=$((skip + 1)); continue
  fi
  "$dyn" --hw="$model" "$work/prog.dyn" > "$work/$model.ll" 2>&1
  st=$?
  nsec=$(grep -c '^@@ ' "$work/$model.ll")
  if [ "$st" != 0 ] || [ "$nsec" -lt 37 ]; then
    fail=$((fail + 1)); echo "FAIL vecmath $model: dyn exited with $st after $nsec functions:"; tail -5 "$work/$model.ll"; continue
  fi
  check "$model" "$bits" "$work/$model.ll" > "$work/$model.res"
  grep '^FAIL' "$work/$model.res"
  n=$(sed -n 's/^ok //p' "$work/$model.res")
  pass=$((pass + n)); fail=$((fail + nsec - n))
done

echo "vecmath: $pass passed, $fail failed, $skip models skipped"
[ "$fail" = 0 ]
