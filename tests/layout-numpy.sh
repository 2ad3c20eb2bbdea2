#!/bin/sh
# layout-numpy.sh -- transposes and permutations of rank 2 to 5 against NumPy, in a function
# and at top level, f32, f64, i32 and bf16, at extents derived from each hardware model's
# tiles, bands and blocks (the host's and narrower ones: tests/numpy/layout.py), on every
# back end, through numpy.sh's runner.  Skips (77) without a Python that has NumPy.
NUMPY_SCRIPT=layout.py exec "$(dirname "$0")/numpy.sh"
