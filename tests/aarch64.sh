#!/bin/sh
# aarch64.sh -- dyn on Arm64, from this x86-64 machine: cross-built with Debian's
# gcc-aarch64-linux-gnu and run under QEMU user mode (qemu-aarch64, package qemu-user).
#
#   1. Without LLVM: the reference evaluator's Check suite (test_eval, when Check's arm64
#      package is in the sysroot) and the golden programs.  (The error programs are not run:
#      their diagnostics come before any arithmetic, and QEMU's start costs 2 s a program.)
#   2. With LLVM 19's arm64 libraries (build-aux/aarch64-sysroot.sh unpacks them): one build,
#      whose evaluator runs the suites of 1 (--target=ref), then twice, as a NEON-only core
#      (-cpu cortex-a72) and as one with SVE (-cpu max): dyn must detect the Arm host and its
#      extensions, its compiled softmax, gelu, log_softmax, math chain, matmul and
#      reductions (a folded plan, column sums of few rows) and fused attention must agree with the reference
#      evaluator (:check), a model of another ISA (zen5) is for looking
#      only, and test_hw passes; the NEON core must take hw/neoverse-n1.hw, and its compiled
#      long sum (numpy.sh's "long sums" case of 2^21 terms, with a Python that has NumPy)
#      holds NumPy's.
#      With DYN_AARCH64_FULL=1, also the golden programs on compiled code,
#      tests/differential.sh and the CPU back end's Check suite (test_cpu).
#
# Both builds are out of tree, under this test's temporary directory, from a clean copy of the
# sources; ccache is used when present.  Skipped (77) without the cross compiler or
# qemu-aarch64; part 2 is skipped (and said so) without the sysroot, whose place is
# $DYN_AARCH64_SYSROOT or the default of build-aux/aarch64-sysroot.sh.  DYN_KEEP=1 keeps the
# temporary directory (builds and logs) for a look after a failure.
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
top_srcdir=$(cd "$top_srcdir" && pwd)
cc=$(command -v aarch64-linux-gnu-gcc) ||
  { echo "no aarch64-linux-gnu-gcc (Debian package gcc-aarch64-linux-gnu): skipped"; exit 77; }
qemu=$(command -v qemu-aarch64) || { echo "no qemu-aarch64 (Debian package qemu-user): skipped"; exit 77; }
[ -x "$top_srcdir/configure" ] || { echo "no configure in $top_srcdir (autoreconf -fi)"; exit 99; }
sysroot=${DYN_AARCH64_SYSROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/dyn/aarch64-sysroot}
[ -f "$sysroot/.stamp" ] || sysroot=
# Where the emulated programs find their loader and libraries: the sysroot has libc6:arm64
# and the rest; without it the cross compiler's own libraries serve the build without LLVM.
ldprefix=${sysroot:-/usr/aarch64-linux-gnu}
command -v ccache > /dev/null && cc="ccache $cc"

work=$(mktemp -d "${TMPDIR:-/tmp}/dynarm.XXXXXX") || exit 99
[ -n "$DYN_KEEP" ] || trap 'rm -rf "$work"' EXIT
mkdir "$work/tmp" || exit 99
st=0
fail() { echo "FAIL $1"; st=1; }
t_start=$(date +%s)
# ccache finds its earlier objects though each run's temporary directory has a new name.
export CCACHE_BASEDIR="$work" CCACHE_NOHASHDIR=1
export HOME="$work" DYN_CUDA_DRIVER=/nonexistent/libcuda.so.1 DYN_HW_DIR="$top_srcdir/hw"
export QEMU_LD_PREFIX="$ldprefix" CK_TIMEOUT_MULTIPLIER=10 DYN_TEST_TIMEOUT_SCALE=10

# A clean copy of the sources: an in-tree build leaves objects that a VPATH build would take
# for its own, and configure refuses a source tree that is configured.
mkdir "$work/src" || exit 99
(cd "$top_srcdir" && tar cf - --exclude='*.o' --exclude='*.lo' --exclude='*.la' --exclude='*.a' \
   --exclude=.deps --exclude=.libs --exclude=config.status --exclude=config.h --exclude=Makefile \
   --exclude=libtool --exclude=stamp-h1 --exclude=.git --exclude=autom4te.cache \
   --exclude=fuzz-out --exclude=notebooks --exclude=python --exclude=debian \
   configure configure.ac Makefile.am Makefile.in aclocal.m4 config.h.in dyn.pc.in build-aux m4 src include stdlib hw \
   lang tests doc examples README.md LICENSE) | (cd "$work/src" && tar xf -) || exit 99
# Programs built in the source tree (dyn, tests/unit/test_*) must not stand in for the
# cross-built ones.
rm -f "$work/src/dyn" "$work/src/src/stdlib_embed.c" "$work/src/src/cuda_prelude.c"
find "$work/src/tests" -type f -perm -u+x ! -name '*.sh' ! -name '*.py' -exec rm -f {} +

build() {   # NAME CONFIGURE-ARGS...: configure and make dyn and the Check suites in $work/NAME
  name=$1; shift
  mkdir "$work/$name" || exit 99
  t0=$(date +%s)
  if ! (cd "$work/$name" && "$work/src/configure" --host=aarch64-linux-gnu CC="$cc" \
          --without-readline --without-png --without-zlib "$@" > configure.log 2>&1); then
    tail -n 30 "$work/$name/configure.log"; fail "$name: configure"; return 1
  fi
  units=
  if grep -q "^HAVE_CHECK_TRUE=''" "$work/$name/config.log"; then
    units=tests/unit/test_eval
    if grep -q "define HAVE_LLVM 1" "$work/$name/config.h"; then
      units=tests/unit/test_hw
      [ -n "$DYN_AARCH64_FULL" ] && units="$units tests/unit/test_cpu"
    fi
  fi
  if ! (cd "$work/$name" && make -j2 dyn $units > make.log 2>&1); then
    tail -n 20 "$work/$name/make.log"; fail "$name: make"; return 1
  fi
  echo "$name: built in $(( $(date +%s) - t0 )) s (${units:-no Check suites})"
}

wrapper() {   # BUILD CPU [OPTION]: $work/run-BUILD-CPU/dyn, the build's dyn under that CPU
  d=$work/run-$1-$2${3:+-ref}
  mkdir -p "$d" || exit 99
  printf '#!/bin/sh\nexec "%s" -cpu %s "%s/%s/dyn" %s "$@"\n' "$qemu" "$2" "$work" "$1" "$3" > "$d/dyn"
  chmod +x "$d/dyn"
  ln -sf "$work/$1/config.h" "$d/config.h"
  echo "$d"
}

run() {   # NAME DIR SCRIPT|PROGRAM [ARG...]: a suite, with DIR as the build tree it sees
  name=$1; dir=$2; shift 2
  t0=$(date +%s)
  top_srcdir=$work/src top_builddir=$dir TMPDIR="$work/tmp" "$@" > "$work/$name.log" 2>&1; rc=$?
  tail -n 1 "$work/$name.log"
  echo "$name: exit status $rc, $(( $(date +%s) - t0 )) s"
  case $rc in
    0|77) ;;
    *) grep -v '^PASS' "$work/$name.log" | head -n 40; fail "$name" ;;
  esac
}

py=${PYTHON_NUMPY:-/usr/bin/python3}
pc=/nonexistent
[ -n "$sysroot" ] && pc=$sysroot/usr/lib/aarch64-linux-gnu/pkgconfig
evaluator() {   # BUILD: the reference evaluator's suites on BUILD's dyn
  d=$(wrapper "$1" cortex-a72 --target=ref)
  run golden-ref "$d" sh "$work/src/tests/golden.sh"
  # An LLVM build's test_eval calls compiled code (session_call on the host's back end), so it
  # is the evaluator's suite only in the build without LLVM.
  if [ -x "$work/$1/tests/unit/test_eval" ] && ! grep -q "define HAVE_LLVM 1" "$work/$1/config.h"; then
    run unit-test_eval "$d" "$qemu" -cpu cortex-a72 "$work/$1/tests/unit/test_eval"
  else
    echo "unit-test_eval: not built without LLVM and Check for arm64: skipped"
  fi
}

if [ -z "$sysroot" ] || [ ! -f "$sysroot/usr/lib/llvm-19/include/llvm-c/Core.h" ]; then
  # ---- 1. without the arm64 LLVM: the reference evaluator alone ----
  echo "no arm64 LLVM sysroot (sh build-aux/aarch64-sysroot.sh): the LLVM back end on Arm64 skipped"
  PKG_CONFIG_LIBDIR=$pc PKG_CONFIG_SYSROOT_DIR=$sysroot build eval --without-llvm && evaluator eval
  echo "aarch64.sh: $(( $(date +%s) - t_start )) s in all"
  exit $st
fi

# ---- 2. with LLVM: one build, whose reference evaluator runs too (--target=ref) ----
# llvm-config for the arm64 libraries, answering what configure asks.
lv=$(sed -n 's/^#define LLVM_VERSION_STRING "\(.*\)"/\1/p' "$sysroot/usr/lib/llvm-19/include/llvm/Config/llvm-config.h")
cat > "$work/llvm-config" <<EOF
#!/bin/sh
case \$1 in
  --version) echo "$lv" ;;
  --cflags) echo "-I$sysroot/usr/lib/llvm-19/include -D__STDC_CONSTANT_MACROS -D__STDC_FORMAT_MACROS -D__STDC_LIMIT_MACROS" ;;
  --ldflags) echo "-L$sysroot/usr/lib/llvm-19/lib -Wl,-rpath-link,$sysroot/usr/lib/aarch64-linux-gnu -Wl,-rpath-link,$sysroot/lib/aarch64-linux-gnu" ;;
  --libs) echo "-lLLVM-19" ;;
esac
EOF
chmod +x "$work/llvm-config"
PKG_CONFIG_LIBDIR=$pc PKG_CONFIG_SYSROOT_DIR=$sysroot build llvm --with-llvm="$work/llvm-config" || exit 1
evaluator llvm

for cpu in cortex-a72 max; do
  d=$(wrapper llvm $cpu)
  t0=$(date +%s)
  hw=$("$d/dyn" -e ':hw' 2>&1)
  echo "$cpu: $(echo "$hw" | sed -n 1p)"
  echo "$hw" | grep -q 'Arm64\|Neoverse\|Cortex' || fail "$cpu: not detected as an Arm64 host: $hw"
  case $cpu in
    max) echo "$hw" | grep -q '+sve' || fail "$cpu: SVE not detected: $hw" ;;
    *) echo "$hw" | grep -q '+sve' && fail "$cpu: SVE detected on a NEON-only core: $hw"
       # a Cortex-A72 is NEON-only: the Neoverse N1 file, and LLVM's name for the core
       echo "$hw" | grep -q 'from neoverse-n1.hw' || fail "$cpu: not from neoverse-n1.hw: $hw"
       echo "$hw" | grep -q 'cortex-a72' || fail "$cpu: not LLVM's cortex-a72: $hw" ;;
  esac
  # and the reductions' run-time nests on NEON's lanes (cpu_reduce.c): a short innermost
  # run under another reduced axis, W results at a time (runs of 9 and 17), and column sums
  # of few rows in registers (333 columns: chunks of 8 vectors and a last one shifted back)
  out=$("$d/dyn" -e 'seed(3)
fn fo(X: f32[A, B, C, D]) -> f32[B, C] { Y[b, c] = sum[a, d] X[a, b, c, d]; return Y }
fn cs(X: f32[R, C]) -> f32[C] { Y[c] = sum[r] X[r, c]; return Y }
A = randn(f32[37, 129])
:check softmax(A)
:check gelu(A)
:check log_softmax(A)
:check sqrt(abs(sin(A)) + cos(A) * cos(A)) + log(1 + abs(A))
:check matmul(A, randn(f32[129, 31]))
:check matmul(randn(f32[1, 5]), randn(f32[5, 17]))
:check fo(randn(f32[5, 3, 11, 9]))
:check fo(randn(f32[3, 2, 13, 17]))
:check cs(randn(f32[7, 333]))' 2>&1)
  n=$(echo "$out" | grep -c 'cpu vs ref.*: ok')
  [ "$n" = 9 ] || fail "$cpu: $n of 9 :check ok: $out"
  # fused attention's C kernels in their portable copy (cpu_attn_kern.h), on the row path (a
  # decoder's step) and the tiles (causal, S != T, past a vector's edge)
  out=$(DYN_ATTENTION=fused "$d/dyn" -e 'seed(5)
K = randn(f32[2, 37, 19])
:check attention(randn(f32[2, 1, 19]), K, K)
:check causal_attention(randn(f32[2, 21, 19]), K, K)' 2>&1)
  n=$(echo "$out" | grep -c 'cpu vs ref.*: ok')
  [ "$n" = 2 ] || fail "$cpu: attention: $n of 2 :check ok: $out"
  # A model of another ISA is for looking; statements run on the host's own code.  The host
  # here is the emulated Arm CPU ($cpu), never the machine running the test, and zen5 is an
  # x86 model, foreign to it whatever that machine is.
  out=$("$d/dyn" --hw=zen5 -e 'A = rand(f32[20, 30])
:check softmax(A)' 2>&1); rc=$?
  [ $rc = 0 ] && echo "$out" | grep -q 'cpu vs ref.*: ok' || fail "$cpu: --hw=zen5: status $rc: $out"
  echo "$cpu: detection and :check, $(( $(date +%s) - t0 )) s"
  [ -x "$work/llvm/tests/unit/test_hw" ] && run "unit-test_hw-$cpu" "$d" "$qemu" -cpu $cpu "$work/llvm/tests/unit/test_hw"
  # A long sum on NEON's 4 lanes, where a running sum per lane loses most (numpy.sh's case of
  # 2^21 terms, compiled code only; the shorter ones, 3.5 minutes for all under QEMU, check
  # the blocks' edges, which are the same code on every host).
  if [ $cpu = cortex-a72 ] && "$py" -c 'import numpy' > /dev/null 2>&1; then
    mkdir "$work/numpy" || exit 99
    run "numpy-long-sums-$cpu" "$d" env DYN_NUMPY_TARGETS=cpu "$py" \
      "$work/src/tests/numpy/compare.py" "$d/dyn" "$work/numpy" "long sums 1x2097152"
  fi
  # LLVM itself runs emulated here, 20 to 60 times slower than on hardware: the long suites
  # (each over 5 minutes) run when asked for.
  if [ -n "$DYN_AARCH64_FULL" ]; then
    run "golden-$cpu" "$d" sh "$work/src/tests/golden.sh"
    run "differential-$cpu" "$d" sh "$work/src/tests/differential.sh"
    [ -x "$work/llvm/tests/unit/test_cpu" ] && run "unit-test_cpu-$cpu" "$d" "$qemu" -cpu $cpu "$work/llvm/tests/unit/test_cpu"
  fi
done
echo "aarch64.sh: $(( $(date +%s) - t_start )) s in all"
exit $st
