#!/bin/sh
# run.sh [SECONDS] -- build the libFuzzer harnesses (fuzz_dyn.c, fuzz_npy.c) with clang and
# AddressSanitizer + UndefinedBehaviorSanitizer, then run each for SECONDS (default 60).
# `make fuzz` calls it with the build's flags (FUZZ_SECONDS=N to choose); skipped (77) when
# clang cannot build a fuzzer.  Objects, corpora and crash-* files are kept in fuzz-out/ of
# the build tree: a crash reproduces with `fuzz-out/fuzz_dyn fuzz-out/crash-HASH`.
# Environment (set by make): FUZZ_CC (clang), SOURCES (the library's sources, relative to
# the source tree), LLVM_CFLAGS, LLVM_LIBS, READLINE_LIBS, OTHER_LIBS (configure's LIBS:
# zlib, libpng), top_srcdir, top_builddir.
secs=${1:-60}
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
top_builddir=${top_builddir:-$top_srcdir}
cc=${FUZZ_CC:-clang}
san="-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined"
out=$top_builddir/fuzz-out
mkdir -p "$out/obj" || exit 99
printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }\n' > "$out/probe.c"
if ! $cc -g $san "$out/probe.c" -o "$out/probe" >/dev/null 2>&1; then
  echo "fuzz: $cc cannot build a libFuzzer program (clang and libclang-rt-dev are needed): skipped"
  exit 77
fi
[ -n "$SOURCES" ] || SOURCES=$(cd "$top_srcdir" && ls src/*.c | grep -v -e src/main.c -e src/stdlib_embed.c -e src/cuda_prelude.c)
flags="-g -O1 -std=gnu11 $san -I$top_srcdir/src -I$top_builddir -DDYN_SRCDIR=\"$top_srcdir\" -DDYN_PKGDATADIR=\"$top_srcdir\""

# compile what changed since its object (or since dyn_int.h did)
objs=
for f in $SOURCES src/stdlib_embed.c src/cuda_prelude.c; do
  case $f in *.c) ;; *) continue ;; esac
  src=$top_srcdir/$f
  [ -f "$src" ] || src=$top_builddir/$f
  o=$out/obj/$(basename "$f" .c).o
  if [ ! "$o" -nt "$src" ] || [ "$top_srcdir/src/dyn_int.h" -nt "$o" ] || [ "$top_builddir/config.h" -nt "$o" ]; then
    echo "  CC (fuzz) $f"
    # shellcheck disable=SC2086
    $cc $flags $LLVM_CFLAGS -fsanitize=fuzzer-no-link -c "$src" -o "$o" || exit 99
  fi
  objs="$objs $o"
done
npy_objs="$out/obj/util.o $out/obj/tensor.o $out/obj/half.o $out/obj/file.o $out/obj/npy.o"
# shellcheck disable=SC2086
$cc $flags $LLVM_CFLAGS "$top_srcdir/tests/fuzz/fuzz_dyn.c" $objs $READLINE_LIBS $LLVM_LIBS $OTHER_LIBS -lm -lpthread \
  -o "$out/fuzz_dyn" || exit 99
# shellcheck disable=SC2086
$cc $flags "$top_srcdir/tests/fuzz/fuzz_npy.c" $npy_objs $OTHER_LIBS -lm -o "$out/fuzz_npy" || exit 99

# seeds: the reproducers kept in the tree, the golden and error programs; .npy files from dyn
mkdir -p "$out/seed-dyn" "$out/seed-npy" "$out/corpus-dyn" "$out/corpus-npy"
cp "$top_srcdir"/tests/fuzz/corpus/dyn/* "$top_srcdir"/tests/golden/*.dyn "$top_srcdir"/tests/errors/*.dyn "$out/seed-dyn/" 2>/dev/null
cp "$top_srcdir"/tests/fuzz/corpus/npy/* "$out/seed-npy/" 2>/dev/null
if [ -x "$top_builddir/dyn" ]; then
  (cd "$out/seed-npy" && DYN_CUDA_DRIVER=/nonexistent "$top_builddir/dyn" -e '
save(ones(f32[2, 3]), "f32.npy"); save(f64([1.5, -2]), "f64.npy"); save(i32([1, 2, 3]), "i32.npy")
save(i64([[1], [2]]), "i64.npy"); save([true, false], "bool.npy"); save(zeros(f32[0, 3]), "empty.npy")
save(f32(7), "scalar.npy")' >/dev/null 2>&1)
fi

st=0
export ASAN_OPTIONS=allocator_may_return_null=1:max_allocation_size_mb=256:detect_leaks=1
export UBSAN_OPTIONS=print_stacktrace=1
cd "$out" || exit 99
for h in dyn npy; do
  echo "fuzz: fuzz_$h for $secs s"
  ./fuzz_$h -max_total_time="$secs" -max_len=2048 -timeout=30 -rss_limit_mb=4096 -print_final_stats=1 \
    corpus-$h seed-$h > "fuzz_$h.log" 2>&1 || st=1
  grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb)|^==[0-9]+==ERROR|SUMMARY|^artifact_prefix|Test unit written' "fuzz_$h.log"
done
[ $st = 0 ] || echo "fuzz: a harness failed; its log is in $out"
exit $st
