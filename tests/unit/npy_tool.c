/* npy_tool.c -- a small driver over npy.c and tensor.c for the NumPy comparison script
 * (tests/npy-numpy.sh): it prints what dyn reads, writes known data for NumPy to check, and
 * copies a file through a dyn tensor so NumPy can compare the bytes.
 *   npy_tool dump FILE                  print tensor_format of FILE
 *   npy_tool write TYPE DIM... FILE     write arange data (bool: odd indices true)
 *   npy_tool copy IN OUT                load IN, save OUT */
#include "config.h"
#include "dyn_int.h"

#include <stdlib.h>
#include <string.h>

static int usage(void) {
  fprintf(stderr, "usage: npy_tool dump FILE | write TYPE DIM... FILE | copy IN OUT\n");
  return 2;
}

int main(int argc, char **argv) {
  char err[512];
  if (argc == 3 && !strcmp(argv[1], "dump")) {
    Tensor *t = npy_load(argv[2], NULL, err, sizeof err);
    if (!t) {
      fprintf(stderr, "%s\n", err);
      return 1;
    }
    Buf b = {0};
    tensor_format(t, &b);
    printf("%s\n", b.s);
    buf_free(&b);
    tensor_release(t);
    return 0;
  }
  if (argc == 4 && !strcmp(argv[1], "copy")) {
    Tensor *t = npy_load(argv[2], NULL, err, sizeof err);
    bool ok = t && npy_save(t, argv[3], NULL, err, sizeof err);
    tensor_release(t);
    if (!ok) fprintf(stderr, "%s\n", err);
    return ok ? 0 : 1;
  }
  if (argc >= 4 && !strcmp(argv[1], "write")) {
    DynElem e;
    int rank = argc - 4;
    int64_t shape[DYN_MAX_RANK];
    if (!elem_from_name(argv[2], strlen(argv[2]), &e) || rank > DYN_MAX_RANK) return usage();
    for (int i = 0; i < rank; i++) shape[i] = strtoll(argv[3 + i], NULL, 10);
    Tensor *t = tensor_new(e, rank, shape, err, sizeof err);
    if (!t) {
      fprintf(stderr, "%s\n", err);
      return 1;
    }
    for (int64_t k = 0, n = tensor_numel(t); k < n; k++)
      tensor_set_i64(t, k, e == DYN_BOOL ? k % 2 : k);
    bool ok = npy_save(t, argv[argc - 1], NULL, err, sizeof err);
    if (!ok) fprintf(stderr, "%s\n", err);
    tensor_release(t);
    return ok ? 0 : 1;
  }
  return usage();
}
