/* fuzz_npy.c -- a libFuzzer entry point over npy_parse and npy_load: any byte string must
 * give a tensor or a message naming the input, never a crash, an out-of-bounds read or a
 * huge allocation, and the file reader must agree with the memory parser on every input
 * (same tensor or same message).  Loaded tensors are printed, so the printer sees odd shapes.
 * Build and run: `make fuzz` (tests/fuzz/run.sh, beside fuzz_dyn.c), or by hand from the top
 * of the tree after ./configure:
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -Isrc -I. src/util.c src/tensor.c \
 *     src/npy.c tests/fuzz/fuzz_npy.c -lm -o fuzz_npy && ./fuzz_npy -max_total_time=60 */
#include "config.h"
#include "dyn_int.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static bool same(const Tensor *a, const Tensor *b) {
  if (a->elem != b->elem || a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (a->shape[i] != b->shape[i]) return false;
  return !memcmp(tensor_data(a), tensor_data(b), (size_t)(tensor_numel(a) * elem_size(a->elem)));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char err[256], ferr[256];
  /* A copy of exactly `size` bytes, so reading one past the end is caught. */
  uint8_t *copy = xmalloc(size);
  if (size) memcpy(copy, data, size);
  Tensor *t = npy_parse(copy, size, "in.npy", err, sizeof err);
  free(copy);
  if (!t && strncmp(err, "in.npy: ", 8) != 0) __builtin_trap(); /* every error names the file */

  /* The same bytes through the file reader, via an anonymous in-memory file. */
  static int fd = -1;
  static char path[64];
  if (fd < 0) {
    fd = memfd_create("in.npy", 0);
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  }
  if (fd >= 0 && ftruncate(fd, 0) == 0 && pwrite(fd, data, size, 0) == (ssize_t)size) {
    Tensor *u = npy_load(path, NULL, ferr, sizeof ferr);
    size_t pl = strlen(path);
    if (!t != !u) __builtin_trap();
    if (t && !same(t, u)) __builtin_trap();
    if (!t && (strncmp(ferr, path, pl) || strcmp(ferr + pl, err + 6))) __builtin_trap();
    tensor_release(u);
  }

  if (t) {
    /* Printing is summarised, so it stays cheap whatever the shape. */
    Buf b = {0};
    tensor_format(t, &b);
    buf_free(&b);
    tensor_release(t);
  }
  return 0;
}
