#!/bin/sh
# robust.sh -- dyn against hostile files, streams and limits, as a careless or malicious
# user meets them: each section says what it holds dyn to.  Whatever could run away (an
# endless input) runs under limits on memory and time.  tests/full-disk.sh does the same
# for a full file system.
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
top_builddir=${top_builddir:-$top_srcdir}
dyn=$top_builddir/dyn
[ -x "$dyn" ] || { echo "no dyn binary at $dyn"; exit 99; }
work=$(mktemp -d "${TMPDIR:-/tmp}/dynrobust.XXXXXX") || exit 99
kids=
trap 'for k in $kids; do kill $k 2>/dev/null; done; rm -rf "$work"' EXIT
cd "$work" || exit 99
mkdir home
export HOME="$work/home" DYN_CUDA_DRIVER=/nonexistent/libcuda.so.1
unset XDG_CACHE_HOME
have_llvm=no
grep -q "define HAVE_LLVM 1" "$top_builddir/config.h" 2>/dev/null && have_llvm=yes
pass=0; fail=0; skipped=
ok() { pass=$((pass + 1)); }
# bad NAME WHY [FILE...]: a failure, with the first lines of each file
bad() {
  fail=$((fail + 1)); echo "FAIL $1: $2"; shift 2
  for f; do echo "--- $f"; sed -n '1,8p' "$f"; done
}
skip() { skipped="$skipped $1"; }
# endless CMD...: under a limit on memory and time, so that a regression cannot take the
# machine with it; the status and message checked by the caller
endless() { ( ulimit -v 2000000; exec timeout 60 "$@" ) > out 2> err; st=$?; }

# ---- saves and loads: the old file survives a failed save, and no temporary is left;
# Ctrl-C stops both in the REPL; a load checks the memory it needs first ----
# fresh: a small good x.npy, kept as old.npy to compare with
fresh() {
  rm -f x.npy .x.npy.tmp*
  "$dyn" -e 'save(i32([1, 2, 3]), "x.npy")' && cp x.npy old.npy
}
intact() { cmp -s x.npy old.npy && ! ls -A | grep -q '^\.x\.npy\.tmp'; }

# A file size limit (ulimit -f): SIGXFSZ used to kill dyn half-way through the file.
fresh
( ulimit -f 8; exec "$dyn" -e 'save(zeros(f32[100000]), "x.npy")' ) > out 2> err
st=$?
if [ $st = 1 ] && grep -qF 'x.npy: write error: File too large' err && intact; then ok
else bad save-file-size-limit "status $st; x.npy changed or a temporary left" err; fi

# killed SIG INPUT CMD...: a save of 256 MiB in CMD (standard input from INPUT) is stopped
# while its temporary exists, then sent SIG; the old file must be intact and the temporary
# gone.  Leaves CMD's status in st.
printf 'save(zeros(f32[64, 1048576]), "x.npy")\nprint(load("x.npy"))\n' > big.dyn
# A save that finished before the signal came (status 0: the poll was not scheduled while
# the temporary existed, as happens beside a parallel make check) replaced the file whole,
# which is right; it is tried again, up to 5 times, so that the signal lands mid-save.
killed() {
  sig=$1 input=$2; shift 2
  tries=0
  while :; do
    fresh
    "$@" < "$input" > out 2> err &
    pid=$!
    while kill -0 $pid 2>/dev/null; do
      for tmp in .x.npy.tmp*; do :; done
      [ -e "$tmp" ] && break
    done
    kill -STOP $pid 2>/dev/null
    kill -$sig $pid 2>/dev/null
    kill -CONT $pid 2>/dev/null
    wait $pid 2>/dev/null
    st=$?
    tries=$((tries + 1))
    [ $st = 0 ] && [ $tries -lt 5 ] || break
  done
}
killed TERM /dev/null "$dyn" big.dyn
if [ $st = 143 ] && intact; then ok
else bad save-killed-term "status $st (143 expected); x.npy changed or a temporary left" err; fi
# under nohup SIGHUP comes ignored, and dyn keeps it so, as a program should: give it back
if env --default-signal=HUP true 2>/dev/null; then
  killed HUP /dev/null env --default-signal=HUP "$dyn" big.dyn
  if [ $st = 129 ] && intact; then ok
  else bad save-killed-hup "status $st (129 expected); x.npy changed or a temporary left" err; fi
else
  skip save-killed-hup
fi
# a background job of a script starts with SIGINT ignored: give dyn the default back
if env --default-signal=INT true 2>/dev/null; then
  killed INT /dev/null env --default-signal=INT "$dyn" big.dyn
  if [ $st = 130 ] && intact; then ok
  else bad save-killed-int "status $st (130 expected); x.npy changed or a temporary left" err; fi
else
  skip save-killed-int
fi
# In the REPL, Ctrl-C stops the save, which says so; the session goes on and reads the old
# file back.
killed INT big.dyn "$dyn" -q -i -
if [ $st = 0 ] && intact && grep -qF '<repl:1>:1:1: error: x.npy: interrupted' err &&
   grep -qF '[1, 2, 3]' out; then ok
else bad repl-save-interrupted "status $st; no 'interrupted', x.npy changed, or the session ended" out err; fi

# Ctrl-C in the REPL during a load() that waits on a FIFO: the header has come, the data
# never does.
"$dyn" -e 'save(zeros(f32[1000]), "h.npy")'
head -c 128 h.npy > head.bin
mkfifo f.npy
( cat head.bin; : > opened; exec sleep 60 ) > f.npy &
writer=$!
kids="$kids $writer"
printf 'x = load("f.npy")\nprint(7)\n' > load.in
"$dyn" -q -i - < load.in > out 2> err &
pid=$!
n=0
while [ ! -e opened ] && [ $n -lt 300 ]; do sleep 0.1; n=$((n + 1)); done
sleep 0.2
kill -INT $pid
wait $pid
st=$?
kill $writer 2>/dev/null
if [ $st = 0 ] && grep -qF '<repl:1>:1:5: error: f.npy: interrupted' err && grep -qF 'i64 7' out; then ok
else bad repl-load-interrupted "status $st" out err; fi

# A pipe whose header declares a petabyte, then zeros for ever: refused before a byte of
# data is buffered.
hdr=$(printf "%-117s" "{'descr': '<f4', 'fortran_order': False, 'shape': (281474976710656,), }")
endless sh -c '( printf "\223NUMPY\001\000v\000"; printf "%s\n" "$1"; exec cat /dev/zero ) 2>/dev/null |
  "$0" -e "x = load(\"/dev/stdin\")"' "$dyn" "$hdr"
if [ $st = 1 ] && grep -qF "/dev/stdin: the header declares 1125899.9 GB of data, more than this machine's memory" err; then ok
else bad load-pipe-petabyte "status $st" err; fi

# ---- standard output that cannot be written ----
if [ -w /dev/full ]; then
  printf 'print(1)\nsave(i32([5]), "after.npy")\n' > two.dyn
  full() {    # full NAME CMD...: status 1, the message once, and nothing after the print
    name=$1; shift
    rm -f after.npy
    "$@" > /dev/full 2> err
    st=$?
    if [ $st = 1 ] && [ "$(cat err)" = "dyn: standard output: No space left on device" ] &&
       [ ! -e after.npy ]; then ok
    else bad "$name" "status $st" err; fi
  }
  full stdout-full-script "$dyn" two.dyn
  full stdout-full-e "$dyn" -e 'print(1); save(i32([5]), "after.npy")'
  full stdout-full-piped sh -c '"$0" < two.dyn' "$dyn"
  full stdout-full-version "$dyn" --version
else
  skip stdout-full
fi

# ---- scripts: NUL bytes, byte-order marks, endless inputs ----
printf 'print(1)\n\000print(2)\n' | "$dyn" > out 2> err
st=$?
if [ $st = 1 ] && [ ! -s out ] &&
   [ "$(sed -n 1p err)" = "<stdin>:2:1: error: a NUL byte in the source: a script must be text" ]; then ok
else bad stdin-nul "status $st: the script ran, or no located error" out err; fi
printf '\357\273\277print(1)\n' | "$dyn" > out 2> err
if [ $? = 0 ] && [ "$(cat out)" = "i64 1" ] && [ ! -s err ]; then ok
else bad stdin-bom "a byte-order mark not skipped" out err; fi

endless "$dyn" -e ':load /dev/zero'
if [ $st = 1 ] && grep -qF -- '-e:1:1: error: /dev/zero is larger than 64 MiB, the most a script may be' err; then ok
else bad load-dev-zero "status $st" err; fi
endless "$dyn" /dev/zero
if [ $st = 1 ] && [ "$(cat err)" = "dyn: /dev/zero is larger than 64 MiB, the most a script may be" ]; then ok
else bad script-dev-zero "status $st" err; fi
endless sh -c 'exec "$0" < /dev/zero' "$dyn"
if [ $st = 1 ] && [ "$(cat err)" = "dyn: standard input is larger than 64 MiB, the most a script may be" ]; then ok
else bad stdin-dev-zero "status $st" err; fi
mkfifo endless.dyn
( exec cat /dev/zero ) > endless.dyn 2>/dev/null &
kids="$kids $!"
endless "$dyn" -e 'import "endless.dyn"'
if [ $st = 1 ] && grep -qF 'endless.dyn is larger than 64 MiB, the most a script may be' err; then ok
else bad import-fifo "status $st" err; fi
# ---- the calibration cache ----
cache=$HOME/.cache/dyn
mkdir -p "$cache"
cal=$cache/calibration.txt
# cached NAME NOTE: a start-up must finish, run the script, and say NOTE
cached() {
  timeout 30 "$dyn" -e 'print(1)' > out 2> err
  st=$?
  if [ $st = 0 ] && [ "$(cat out)" = "i64 1" ] && grep -qF "dyn: ignoring $cal: $2" err; then ok
  else bad "$1" "status $st (124: it hung)" out err; fi
  rm -f "$cal"
}
mkfifo "$cal"
cached calibration-fifo "not a regular file"
ln -s /dev/zero "$cal"
cached calibration-dev-zero "not a regular file"
if [ $have_llvm = yes ] && "$dyn" --calibrate > out 2>&1; then
  cp "$cal" cal.good
  sed 's/^peak_gflops_f32 = .*/peak_gflops_f32 = 1e30/' cal.good > "$cal"
  cached calibration-absurd "a peak of 1e+30 GFLOP/s is not plausible"
  sed 's/^peak_gflops_f32 = .*/peak_gflops_f32 = nan/' cal.good > "$cal"
  cached calibration-nan "a peak of nan GFLOP/s is not plausible"
  { grep -v '^sync_us' cal.good; echo 'sync_us = 1e9'; } > "$cal"
  cached calibration-sync "a fork-join of 1e+09 us is not plausible"
  { grep -v '^call_us' cal.good; echo 'call_us = -3'; } > "$cal"
  cached calibration-call "a call of -3 us is not plausible"
  { grep -v '^write_cost' cal.good; echo 'write_cost = 9'; } > "$cal"
  cached calibration-write "a written byte costing 9 read bytes is not plausible"
  { grep -v '^lane_scale' cal.good; echo 'lane_scale = 40'; } > "$cal"
  cached calibration-lanes "vector math at 40 of its pipes' rate is not plausible"
else
  skip calibration-values
fi

# ---- running out of memory ----
# A limit dyn can start under, with room for little more (none: skip, as under a sanitizer).
lim=
for l in 400000 600000 800000; do
  if ( ulimit -v $l; exec "$dyn" --target=ref -e 'x = 1' ) > /dev/null 2>&1; then lim=$l; break; fi
done
if [ -n "$lim" ]; then
  # a literal of two million numbers takes far more to parse than the limit leaves
  awk 'BEGIN { printf "X = ["; for (i = 0; i < 2000000; i++) printf "1, "; print "1]" }' > lit.dyn
  ( ulimit -v $lim; exec "$dyn" --target=ref lit.dyn ) > out 2> err
  st=$?
  if [ $st = 1 ] && grep -qF "dyn: out of memory: could not allocate" err; then ok
  else bad oom-parse "status $st (134: abort)" err; fi
else
  skip oom-parse
fi
# LLVM ends the process when it runs out while compiling, so a tensor may not take the last
# of the address space: find the largest tensor that can be made under the limit, then
# compile with tensors just below it.  One thread: each thread's stack and malloc arena take
# address space, which would make the limit mean something else on a host with many cores.
lim=800000
if [ $have_llvm = yes ] && ( ulimit -v $lim; exec "$dyn" --threads=1 -e 'x = 1' ) > /dev/null 2>&1; then
  lo=0; hi=$((lim * 256)); step=262144          # elements of f32; a step is 1 MiB
  while [ $((hi - lo)) -gt $step ]; do
    mid=$(((lo + hi) / 2))
    if ( ulimit -v $lim; exec "$dyn" --threads=1 -e "X = zeros(f32[$mid])" ) > /dev/null 2>&1; then lo=$mid; else hi=$mid; fi
  done
  aborted=
  for k in 0 2 4 8 12 16 24 32 48 64; do
    n=$((lo - k * step))
    [ $n -gt 0 ] || continue
    ( ulimit -v $lim; exec "$dyn" --threads=1 -e "X = zeros(f32[$n])
A = rand(f32[300, 300])
B = matmul(A, A)
C = softmax(B)" ) > out 2> err
    st=$?
    [ $st -le 1 ] || aborted="$aborted $k:$st"
  done
  if [ -z "$aborted" ]; then ok
  else bad oom-compile "a compile ran out and ended dyn (MiB below the largest tensor:status):$aborted" err; fi
else
  skip oom-compile
fi

[ -n "$skipped" ] && echo "robust: skipped:$skipped"
echo "robust: $pass passed, $fail failed"
[ $fail = 0 ]
