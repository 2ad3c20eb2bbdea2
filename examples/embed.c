/* embed.c -- dyn inside a C program: define a function, call it on our own array (read in
 * place), print the result, free it.  cc embed.c $(pkg-config --cflags --libs dyn) */
#include <dyn/dyn.h>
#include <stdio.h>

int main(void) {
  dyn_session *s = dyn_session_new(NULL, NULL);
  if (!s || dyn_run(s, "fn scale(x: f32[N], a: f32) -> f32[N] {\n"
                       "  y[i] = x[i] * a\n  return y\n}", "embed.dyn")) {
    for (int i = 0; s && i < dyn_diagnostic_count(s); i++) fputs(dyn_diagnostic_get(s, i)->text, stderr);
    return 1;
  }
  float x[5] = {1, 2, 3, 4, 5}, a = 1.5f;
  int64_t n = 5;
  DLTensor args[2] = {{x, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, &n, NULL, 0},
                      {&a, {kDLCPU, 0}, 0, {kDLFloat, 32, 1}, NULL, NULL, 0}};
  DLManagedTensor *y;
  if (dyn_call(s, "scale", args, 2, &y, 1, NULL)) {
    fputs(dyn_diagnostic_get(s, 0)->text, stderr);
    return 1;
  }
  const float *v = y->dl_tensor.data;
  for (int64_t i = 0; i < y->dl_tensor.shape[0]; i++) printf("%g%c", v[i], i + 1 < y->dl_tensor.shape[0] ? ' ' : '\n');
  y->deleter(y);
  dyn_session_free(s);
  return 0;
}
