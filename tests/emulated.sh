#!/bin/sh
# emulated.sh -- the compiled-code suites again, on a CPU this machine is not: QEMU user mode
# as an AVX2-only x86-64 (qemu-x86_64 -cpu Haswell, Debian package qemu-user).  dyn must
# detect that CPU (x86-64 with AVX2+FMA, no AVX-512), compile for it, and give the same
# answers as the reference evaluator and NumPy; a model whose vector extensions that CPU lacks
# (zen5.hw) must be for looking only, never an illegal instruction.
#
# Runs, each through a wrapper that starts dyn under the emulator:
#   - fused attention on each of its paths (:check; its C kernels' AVX2 copy),
#   - tests/differential.sh (every :check of it), tests/models.sh (every model in hw/),
#   - tests/numpy.sh on a share of its cases (DYN_EMU_NUMPY, default: matmul, reductions,
#     softmax, long rows, math functions, gemm layouts), the other cases' kernels being the
#     same code,
#   - the random programs of tests/random_programs.py, a share of tests/random.sh's,
#   - the Check suite of the CPU back end (tests/unit/test_cpu), whose expectations come from
#     the model in use, never from the CPU under them, and test_gemm's case of other CPUs'
#     models (described, never run).  (The rest of test_gemm is not run here: its operands
#     sit against inaccessible pages, and the AVX2 kernels' edges load with vmaskmovps, whose
#     masked-off lanes never fault on hardware but do under QEMU's emulation, which reads the
#     whole vector; and its model checks are calibrated at the emulator's speed.)
# Skipped (77) on a host that is not x86-64, without qemu-x86_64 or without LLVM.
# $DYN_EMU_CPU picks another QEMU CPU (default Haswell, less the features QEMU's TCG cannot
# emulate, so that it prints no warnings).
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
top_builddir=${top_builddir:-$top_srcdir}
top_srcdir=$(cd "$top_srcdir" && pwd); top_builddir=$(cd "$top_builddir" && pwd)
dyn=$top_builddir/dyn
[ -x "$dyn" ] || { echo "no dyn binary at $dyn"; exit 99; }
[ "$(uname -m)" = x86_64 ] || { echo "not an x86-64 host: skipped"; exit 77; }
qemu=$(command -v qemu-x86_64) || { echo "no qemu-x86_64 (Debian package qemu-user): skipped"; exit 77; }
grep -q "define HAVE_LLVM 1" "$top_builddir/config.h" 2>/dev/null || { echo "built without LLVM: skipped"; exit 77; }
cpu=${DYN_EMU_CPU:-Haswell,-pcid,-x2apic,-tsc-deadline,-hle,-invpcid,-rtm}

work=$(mktemp -d "${TMPDIR:-/tmp}/dynemu.XXXXXX") || exit 99
trap 'rm -rf "$work"' EXIT
# A build folder of its own whose dyn is the real one under the emulator.
mkdir "$work/build" "$work/tmp" || exit 99
cat > "$work/build/dyn" <<EOF
#!/bin/sh
exec "$qemu" -cpu "$cpu" "$dyn" "\$@"
EOF
chmod +x "$work/build/dyn"
ln -s "$top_builddir/config.h" "$work/build/config.h"
export HOME="$work" DYN_CUDA_DRIVER=/nonexistent/libcuda.so.1 TMPDIR="$work/tmp"
st=0
fail() { echo "FAIL $1"; st=1; }

# The emulated CPU is what dyn sees: AVX2 and FMA, and no AVX-512.
hw=$("$work/build/dyn" -e ':hw' 2>&1)
echo "$hw" | sed -n 1p
echo "$hw" | grep -q 'x86-64 with AVX2+FMA' || fail "the emulated CPU was not detected as x86-64 with AVX2+FMA"
echo "$hw" | grep -q '256-bit vectors' || fail "the emulated CPU's vectors are not 256 bits"
# A model the emulated CPU cannot run is for looking; statements run on its own code.
out=$("$work/build/dyn" --hw=zen5 -e 'A = rand(f32[20, 30])
:check softmax(A)
:check matmul(A, rand(f32[30, 9]))' 2>&1); rc=$?
[ $rc = 0 ] || fail "--hw=zen5 under the emulated CPU: exit status $rc: $out"
echo "$out" | grep -q 'cpu vs ref.*: ok' || fail "--hw=zen5 under the emulated CPU: no :check: $out"

# The fused attention's C kernels in their AVX2 copy (cpu_attn_kern.h; the host runs its
# own): each path against the reference evaluator, on rows and keys past a vector's edge and
# a group of four rows', masked (causal, S != T), and a decoder's step.
att='Q = randn(f32[2, 7, 37])
K = randn(f32[2, 61, 37])
V = randn(f32[2, 61, 37])
:check attention(Q, K, V)
:check causal_attention(Q, K, V)
Q1 = randn(f32[3, 1, 64])
K1 = randn(f32[3, 129, 64])
:check attention(Q1, K1, K1)
Q2 = randn(f32[1, 70, 16])
K2 = randn(f32[1, 70, 16])
:check causal_attention(Q2, K2, K2)'
for path in rows tiles; do
  out=$(DYN_ATTENTION=$path "$work/build/dyn" -e "$att" 2>&1)
  n=$(echo "$out" | grep -c 'cpu vs ref.*: ok')
  [ "$n" = 4 ] || fail "attention on the $path path under the emulated CPU: $n of 4 :check ok: $out"
done

run() {   # NAME SCRIPT [ARG...]: a suite with the emulated dyn
  name=$1; shift
  t0=$(date +%s)
  top_srcdir=$top_srcdir top_builddir=$work/build "$@" > "$work/$name.log" 2>&1; rc=$?
  tail -n 1 "$work/$name.log"
  echo "$name: exit status $rc under $cpu, $(( $(date +%s) - t0 )) s"
  case $rc in
    0|77) ;;
    # what failed, wherever in the log it is (compare.py repeats its failures at the end)
    *) grep -v '^PASS' "$work/$name.log" | tail -n 40; fail "$name" ;;
  esac
}
run differential sh "$top_srcdir/tests/differential.sh"
run models sh "$top_srcdir/tests/models.sh"
# Check's and compare.py's time limits are for native speed; the emulator is ten to twenty
# times slower.  (A batch of twelve NumPy cases took 356 s of its 420 under the emulator on a
# quiet machine, and more on a loaded one, where it timed out: compare.py then runs each case
# alone, with 120 s each, too few for the largest.)
export CK_TIMEOUT_MULTIPLIER=10 DYN_TEST_TIMEOUT_SCALE=10 DYN_HW_DIR="$top_srcdir/hw"
for t in test_cpu; do
  if [ -x "$top_builddir/tests/unit/$t" ]; then
    run "unit-$t" "$qemu" -cpu "$cpu" "$top_builddir/tests/unit/$t"
  else
    echo "unit-$t: not built (make check builds it): skipped"
  fi
done
# test_gemm's models of other CPUs alone (its case "jit": neoverse-v2's engine and zen5's
# bf16 plans, described and never run), which must hold on a CPU without AVX-512
if [ -x "$top_builddir/tests/unit/test_gemm" ]; then
  run unit-test_gemm-models env CK_RUN_CASE=jit "$qemu" -cpu "$cpu" "$top_builddir/tests/unit/test_gemm"
else
  echo "unit-test_gemm-models: not built (make check builds it): skipped"
fi
py=
for p in "${PYTHON_NUMPY:-}" /usr/bin/python3 python3; do
  if [ -n "$p" ] && "$p" -c 'import numpy; numpy.zeros(1)' >/dev/null 2>&1; then py=$p; break; fi
done
if [ -n "$py" ]; then
  # shellcheck disable=SC2086
  run numpy "$py" "$top_srcdir/tests/numpy/compare.py" "$work/build/dyn" "$work/tmp" \
    ${DYN_EMU_NUMPY:-matmul reductions softmax "long rows" "math" "gemm layouts" "special values" layernorm}
  gen=$top_srcdir/tests/random_programs.py
  run random-f32 "$py" "$gen" "$work/build/dyn" --seed 1 --count 60 --threads 2
  run random-f64 "$py" "$gen" "$work/build/dyn" --seed 4 --count 30 --elem f64
  run random-windows "$py" "$gen" "$work/build/dyn" --seed 7 --count 30 --windows --threads 3
else
  echo "no Python with NumPy: the NumPy comparisons and random programs did not run"
fi
exit $st
