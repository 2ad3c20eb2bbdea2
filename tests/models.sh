#!/bin/sh
# Every model in hw/ is for use or for looking, never a crash.  For each file, dyn --hw=NAME
# runs statements (checked against the reference evaluator), :sched, :cost and :code of a
# contraction and a row-wise kernel, and must exit 0 with no internal error.  What is
# expected comes from the model file and from the host's instruction set (uname -m), never
# from the host's CPU features:
#   - the assembly :code prints is the model's: AArch64 FMAs for an aarch64 model, zmm
#     registers for a 512-bit x86 model, ymm for a 256-bit one;
#   - a model of another instruction set says once that statements run on this CPU's code,
#     and :sched names the model it was compiled for; a model this CPU can run says nothing.
# Then a REPL session switches to a model of another instruction set and back, and keeps its
# bindings and its answers.  A bf16 matmul's code holds vdpbf16ps exactly on the models
# whose llvm_features have avx512bf16.  $DYN_RUN_PREFIX (an emulator, e.g. "qemu-x86_64 -cpu Haswell")
# runs dyn when set.
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
top_builddir=${top_builddir:-$top_srcdir}
dyn=$top_builddir/dyn
[ -x "$dyn" ] || { echo "no dyn binary at $dyn"; exit 99; }
work=$(mktemp -d "${TMPDIR:-/tmp}/dynmodels.XXXXXX") || exit 99
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 99
export HOME="$work" DYN_CUDA_DRIVER=/nonexistent/libcuda.so.1 DYN_HW_DIR="$top_srcdir/hw"
run() { $DYN_RUN_PREFIX "$dyn" "$@"; }
pass=0; fail=0
bad() { fail=$((fail + 1)); echo "FAIL $1"; }

# After a failed run of prog.dyn with --hw=$1 and status $2: its standard error, the last
# lines it printed (a script's output is flushed statement by statement, so they end where
# the run stopped), and for a signal (an intermittent crash) the statement it was running,
# from the same run again through the REPL, which echoes each statement before running it.
why() {
  sed -n '1,5p' err.txt
  [ "$2" -gt 128 ] || return 0
  sig=$(kill -l "$(($2 - 128))" 2>/dev/null || echo "$(($2 - 128))")
  echo "  killed by SIG$sig; the last lines it printed:"
  tail -n 4 out.txt | cut -c1-100 | sed 's/^/  | /'
  run --hw="$1" -q -i - < prog.dyn > again.txt 2>&1
  st2=$?
  if [ $st2 -gt 128 ]; then
    echo "  run again: status $st2, in: $(grep '^dyn> ' again.txt | tail -n 1 | sed 's/^dyn> //')"
  else
    echo "  run again (through the REPL): status $st2, so the crash depends on timing or memory layout"
  fi
}

# Without LLVM there is no code to look at: the reference evaluator runs everything.
run -e ':target' 2>&1 | grep -q '^target: cpu' || { echo "no CPU back end in this build: skipped"; exit 77; }
host_arch=$(uname -m)

cat > prog.dyn <<'EOF'
seed(3)
A = rand(f32[37, 53])
B = rand(f32[53, 29])
C = matmul(A, B)
:check matmul(A, B)
:check softmax(A)
print(shape(C))
:sched matmul M=512 N=512 K=512
:sched softmax B=100 N=1000
:sched matmul M=8 N=8 K=100000
:sched matmul M=1 N=1000 K=1000
:sched --explain
:cost softmax B=100 N=1000
:code matmul asm
:code softmax asm
EOF

for f in "$top_srcdir"/hw/*.hw; do
  name=$(basename "$f" .hw)
  key() { sed -n "s/^$1 *= *\"\{0,1\}\([^\"#]*\)\"\{0,1\}.*/\1/p" "$f" | sed 's/ *$//'; }
  kind=$(key kind)
  run --hw="$name" prog.dyn > out.txt 2> err.txt < /dev/null
  st=$?
  if [ $st != 0 ] || grep -q "internal error" out.txt err.txt; then
    bad "$name: exit status $st"; why "$name" $st; continue
  fi
  # :sched fits an 80-column terminal on every model (from its first answer to :cost's)
  wide=$(sed -n '/^matmul: compiled/,/^softmax:$/p' out.txt | awk 'length > 80' | head -3)
  [ -z "$wide" ] || { bad "$name: :sched lines over 80 columns:"; echo "$wide"; continue; }
  checks=$(grep -c ': ok; ' out.txt)
  if [ "$checks" != 2 ] || grep -q MISMATCH out.txt; then
    bad "$name: the statements' results differ from the reference evaluator"; grep -m2 'vs ref' out.txt; continue
  fi
  grep -qx '\[37, 29\]' out.txt || { bad "$name: no result"; continue; }
  notes=$(grep -c "statements run on code for this CPU" err.txt)
  if [ "$kind" = gpu ]; then
    # a GPU model with target cpu: the CPU runs and :sched says so
    if [ "$notes" != 0 ] || ! grep -q "^(the GPU model $name is loaded, and the target is cpu" out.txt; then
      bad "$name: a GPU model on target cpu: no note in :sched"; continue
    fi
    pass=$((pass + 1)); continue
  fi
  arch=$(key arch); arch=${arch:-x86_64}
  bits=$(key vector_bits)
  case $arch in
    aarch64) want='fmla' ;;
    *) if [ "$bits" = 512 ]; then want='zmm'; else want='ymm'; fi ;;
  esac
  if ! grep -q "$want" out.txt; then
    bad "$name: :code shows no '$want' ($arch, $bits-bit vectors)"; continue
  fi
  if [ "$arch" != "$host_arch" ] && [ "$notes" != 1 ]; then
    bad "$name: an $arch model on an $host_arch host: $notes notes that statements run on this CPU's code, want 1"
    cat err.txt; continue
  fi
  if [ "$notes" -gt 1 ]; then bad "$name: the note is said $notes times"; continue; fi
  if [ "$notes" = 1 ]; then
    n=$(grep -c "^matmul: compiled for $name (.*), which this CPU cannot run" out.txt)
  else
    n=$(grep -A1 "^matmul: compiled 1 time, for every shape (.* ms)\$" out.txt | grep -c "^  cpu .*, hardware $name\$")
  fi
  [ "$n" = 3 ] || { bad "$name: :sched does not name the model in each of its 3 answers"; grep -m1 '^matmul:' out.txt; continue; }
  [ ! -s err.txt ] || [ "$notes" = 1 ] || { bad "$name: unexpected standard error"; cat err.txt; continue; }
  pass=$((pass + 1))
done

# A file whose CPU name or features this LLVM does not know (a typo, or a CPU newer than the
# LLVM) is compiled for its fallback CPU without those features, and LLVM's complaints about
# them are not repeated at every compile.
sed 's/^name = .*/name = typo/; s/^llvm_cpu = .*/llvm_cpu = znver99/; s/^llvm_cpu_fallback = .*//' \
  "$top_srcdir/hw/generic-avx2.hw" > typo.hw
run --hw=typo.hw prog.dyn > out.txt 2> err.txt < /dev/null
st=$?
if [ $st != 0 ] || [ "$(grep -c ': ok; ' out.txt)" != 2 ] || grep -q "not a recognized" err.txt out.txt ||
   ! grep -q "^  cpu generic" out.txt; then
  bad "an unknown llvm_cpu: status $st"; sed -n '1,5p' err.txt; grep -m1 '^matmul:' out.txt
else
  pass=$((pass + 1))
fi

# A REPL session that switches models keeps its bindings, and its answers do not change.
cat > switch.in <<'EOF'
seed(5)
A = rand(f32[19, 23])
C = matmul(A, transpose(A))
print(sum[i, j] C[i, j])
:hw neoverse-v2
D = matmul(A, transpose(A))
print(sum[i, j] D[i, j])
print(max[i, j] abs(C[i, j] - D[i, j]))
:hw host
E = softmax(C)
print(shape(E))
EOF
run -q -i - < switch.in > switch.out 2>&1
st=$?
sums=$(grep -A1 '^dyn> print(sum' switch.out | grep '^f32' | sort -u | wc -l)
if [ $st != 0 ] || [ "$sums" != 1 ] || ! grep -qx 'f32 0' switch.out || ! grep -qx '\[19, 19\]' switch.out; then
  bad "switching models: status $st"; cat switch.out
elif [ "$host_arch" != aarch64 ] && [ "$(grep -c '^note: neoverse-v2 is an aarch64 CPU' switch.out)" != 1 ]; then
  bad "switching models: no note that statements run on this CPU's code"; cat switch.out
else
  pass=$((pass + 1))
fi

# A bf16 contraction's code is the model's: vdpbf16ps exactly where the model file's
# llvm_features has avx512bf16 with 512-bit vectors, and :sched predicts its time.  Only
# code is looked at here: nothing compiled for a model runs.
cat > half.dyn <<'EOF'
fn mmbf(A: bf16[M, K], B: bf16[K, N]) -> bf16[M, N] {
  C[i, j] = sum[k] A[i, k] * B[k, j]
  return C
}
:sched mmbf M=256 N=256 K=256
:code mmbf asm
EOF
for f in "$top_srcdir"/hw/*.hw; do
  name=$(basename "$f" .hw)
  [ "$(key kind)" = cpu ] && [ "$(key arch)" != aarch64 ] || continue
  run --hw="$name" half.dyn > out.txt 2> err.txt < /dev/null
  st=$?
  case ",$(key llvm_features)," in
    *,+avx512bf16,*) if [ "$(key vector_bits)" = 512 ]; then want=1; else want=0; fi ;;
    *) want=0 ;;
  esac
  got=$(grep -c 'vdpbf16ps' out.txt)
  if [ $st != 0 ] || grep -q "internal error" out.txt err.txt; then
    bad "$name: a bf16 matmul's :sched and :code: exit status $st"; sed -n '1,5p' err.txt
  elif { [ $want = 1 ] && [ "$got" -lt 24 ]; } || { [ $want = 0 ] && [ "$got" != 0 ]; }; then
    bad "$name: a bf16 matmul's code has $got vdpbf16ps (want them: $want)"
  elif ! grep -q '^at M=256 N=256 K=256: predicted [0-9.]* ms' out.txt; then
    bad "$name: :sched of a bf16 matmul predicts no time"; grep -m3 predicted out.txt
  else
    pass=$((pass + 1))
  fi
done

echo "models: $pass passed, $fail failed"
[ $fail = 0 ]
