"""Compares two checkpoints of one model tensor by tensor: each floating
tensor's distance relative to its norm, ||a - b|| / ||a||, must be at most
--rtol; integer tensors must be equal. Prints the worst distance.

    compare_checkpoints.py A B [--rtol R]
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import safetensors_read  # noqa: E402

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("a")
parser.add_argument("b")
parser.add_argument("--rtol", type=float, default=1e-3)
args = parser.parse_args()
a, b = safetensors_read.read(args.a), safetensors_read.read(args.b)
if sorted(a) != sorted(b):
    sys.exit("the checkpoints hold different tensors")
worst, worst_name = 0.0, ""
for name in sorted(a):
    x, y = a[name].astype(np.float64), b[name].astype(np.float64)
    if x.shape != y.shape:
        sys.exit("%s: shapes %s and %s" % (name, x.shape, y.shape))
    if not np.issubdtype(a[name].dtype, np.floating):
        if not np.array_equal(x, y):
            sys.exit("%s: integer tensors differ" % name)
        continue
    norm = np.linalg.norm(x)
    distance = np.linalg.norm(x - y) / norm if norm else np.linalg.norm(y)
    if distance > worst:
        worst, worst_name = distance, name
if worst > args.rtol:
    sys.exit("%s: relative distance %.3g > %.3g" % (worst_name, worst,
                                                     args.rtol))
print("close: %d tensors, worst relative distance %.3g (%s)" %
      (len(a), worst, worst_name or "none"))
