"""Compares two checkpoints tensor by tensor: the parameters (and the
optimizer state both have) agree within a relative tolerance of the
tensor's largest magnitude."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_read import read  # noqa: E402

acc, big, tol = read(sys.argv[1]), read(sys.argv[2]), float(sys.argv[3])
compared = 0
for name, b in big.items():
    if name not in acc or b.dtype != np.float32:
        continue
    a = acc[name]
    scale = max(float(np.abs(b).max()), 1e-12)
    err = float(np.abs(a.astype(np.float64) - b).max()) / scale
    print("%-32s max relative difference %.2e" % (name, err))
    assert err <= tol, (name, err, tol)
    compared += 1
# Every parameter took part.
assert compared >= 4, compared
