/* fuzz_dyn.c -- a libFuzzer entry point over the whole front end and the reference
 * evaluator: any text, run as a script in a session on the reference target, must give
 * values or located diagnostics, never a crash, a hang or undefined behaviour.  Allocation
 * sizes are capped by the environment (ASAN_OPTIONS=allocator_may_return_null=1).
 * Build (not part of make), from the top of the tree after ./configure --without-llvm or
 * with the same flags as the library:
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -Isrc -I. -DDYN_SRCDIR='"."' \
 *     -DDYN_PKGDATADIR='"."' src/util.c src/tensor.c src/npy.c src/poly.c src/hw.c \
 *     src/diag.c src/lex.c src/parse.c src/sema.c src/lower.c src/eval.c src/session.c \
 *     src/cost.c src/cpu.c src/cuda.c src/stdlib_embed.c tests/fuzz/fuzz_dyn.c -lm -lpthread -ldl \
 *     -o fuzz_dyn      (make src/stdlib_embed.c first)
 *   ASAN_OPTIONS=allocator_may_return_null=1 ./fuzz_dyn -max_total_time=60 -max_len=512 \
 *     CORPUS_DIR tests/golden tests/errors */
#include "config.h"
#include "dyn.h"

#include <stdlib.h>
#include <string.h>

static Session *session;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!session) {
    SessionOptions opt = {.target = "ref", .threads = 1};
    FILE *null = fopen("/dev/null", "w");
    session = session_new(&opt, null, null);
  }
  char *text = xstrndup((const char *)data, size);
  /* commands that touch the file system or take long are left out */
  if (!strstr(text, ":load") && !strstr(text, "save") && !strstr(text, "import \"") && !strstr(text, ":time") &&
      !strstr(text, ":hw") && !strstr(text, ":calibrate"))
    session_run(session, text, "fuzz");
  free(text);
  return 0;
}
