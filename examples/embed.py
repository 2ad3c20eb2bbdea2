"""embed.py -- dyn inside a Python program: define a function, call it on NumPy arrays (read
in place, never copied), and catch a mistake as dyn.Error with its place."""
import numpy as np

import dyn

s = dyn.Session(threads=2)
s.run("""
fn scale(x: f32[N], a: f32) -> f32[N] {
  y[i] = x[i] * a
  return y
}
""", "embed.dyn")
x = np.arange(1, 6, dtype=np.float32)
print(s["scale"](x, 1.5))                       # [1.5 3.  4.5 6.  7.5]
A, B = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
print(s["matmul"](A, B).sum())                  # 24.0
try:
    s["matmul"](A, A)
except dyn.Error as e:
    print("error:", e.message)
