#!/bin/sh
# conv-numpy.sh -- convolutions of dyn against NumPy: nn's conv2d and conv1d and a depthwise
# convolution on random data at strides 1 and 2, padding 0 to 3, kernels 1 to 7 and awkward
# shapes (tests/numpy/conv.py), on every back end, through numpy.sh's runner.  Skips (77)
# without a Python that has NumPy.
NUMPY_SCRIPT=conv.py exec "$(dirname "$0")/numpy.sh"
