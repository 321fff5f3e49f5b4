"""A grouped-query attention (4 query heads over 2 key and value heads)
against the same attention with its keys and values repeated for each
query head, in the interpreter: the result and the queries' gradient bit
for bit, the keys' and values' gradients (summed in double one way, in
f32 over each group the other) to a few f32 roundings; under bthd, the
same result and keys' gradient.

    grouped-attention.test.py GPUC INPUT WORKDIR
"""
import os
import subprocess
import sys

import numpy as np

gpuc, module, work = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(work, exist_ok=True)
rng = np.random.default_rng(5)
q = rng.standard_normal((1, 4, 5, 4)).astype(np.float32)
k = rng.standard_normal((1, 2, 5, 4)).astype(np.float32)
v = rng.standard_normal((1, 2, 5, 4)).astype(np.float32)
d = rng.standard_normal((1, 4, 5, 4)).astype(np.float32)


def rows_second(x):
    return x.transpose(0, 2, 1, 3).copy()


inputs = {"q": q, "k": k, "v": v, "do": d, "qt": rows_second(q),
          "kt": rows_second(k), "vt": rows_second(v), "dot": rows_second(d)}
args = [gpuc, "run", module, "--output-dir", os.path.join(work, "out")]
for name, value in inputs.items():
    np.save(os.path.join(work, name + ".npy"), value)
    args += ["--input", "%s=%s" % (name, os.path.join(work, name + ".npy"))]
subprocess.run(args, check=True)


def load(name):
    return np.load(os.path.join(work, "out", name + ".npy"))


for what in ("o", "dq"):
    assert np.array_equal(load(what + "_grouped"),
                          load(what + "_repeated")), what
for what in ("dk", "dv"):
    grouped, repeated = load(what + "_grouped"), load(what + "_repeated")
    assert np.allclose(grouped, repeated, rtol=1e-6, atol=1e-6), what
assert np.array_equal(rows_second(load("o_bthd")), load("o_grouped")), "bthd"
assert np.allclose(rows_second(load("dk_bthd")), load("dk_grouped"),
                   rtol=1e-6, atol=1e-6), "bthd dk"
print("grouped heads are repeated heads")
