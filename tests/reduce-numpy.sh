#!/bin/sh
# reduce-numpy.sh -- sums over every subset of the axes of rank 2 to 4 tensors against
# NumPy, in a function and at top level, f32, f64 and integers, at awkward extents and with
# inputs read in place in Fortran order (tests/numpy/reduce.py), on every back end, through
# numpy.sh's runner.  Skips (77) without a Python that has NumPy.
NUMPY_SCRIPT=reduce.py exec "$(dirname "$0")/numpy.sh"
