"""Compares two checkpoints tensor by tensor: the parameters (and the
optimizer state both have) agree within a relative tolerance of the
tensor's largest magnitude."""
import json
import struct
import sys

import numpy as np


def read(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        dtype = {"F32": np.float32, "I64": np.int64}[t["dtype"]]
        out[name] = np.frombuffer(data[a:b], dtype=dtype).reshape(t["shape"])
    return out


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
