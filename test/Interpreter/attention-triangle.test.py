"""An attention whose mask the flash lowering dropped for its triangle
(`triangle P`, no operand) against the same attention with its mask as an
operand, in the interpreter: forward and backward, and under bthd (whose
`le` kept is the operand's `gt` excluded), bit for bit; and a triangle
beside a padding operand as the two masks in one operand. The first query
sees only its own key and the last sees them all.

    attention-triangle.test.py GPUC INPUT WORKDIR
"""
import os
import subprocess
import sys

import numpy as np

gpuc, module, work = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(work, exist_ok=True)
rng = np.random.default_rng(3)
q = rng.standard_normal((1, 2, 5, 4)).astype(np.float32)
d = rng.standard_normal((1, 2, 5, 4)).astype(np.float32)
inputs = {"q": q, "do": d, "qt": q.transpose(0, 2, 1, 3).copy(),
          "dot": d.transpose(0, 2, 1, 3).copy()}
args = [gpuc, "run", module, "--output-dir", os.path.join(work, "out")]
for name, value in inputs.items():
    np.save(os.path.join(work, name + ".npy"), value)
    args += ["--input", "%s=%s" % (name, os.path.join(work, name + ".npy"))]
subprocess.run(args, check=True)


def load(name):
    return np.load(os.path.join(work, "out", name + ".npy"))


def heads_second(x):
    return x.transpose(0, 2, 1, 3)


for what in ("o", "dq"):
    mask = load(what + "_mask")
    assert np.array_equal(mask, load(what + "_triangle")), what
    assert np.array_equal(mask, heads_second(load(what + "_bthd"))), what
for what in ("o", "dq"):
    padded = load(what + "_padded_mask")
    assert np.array_equal(padded, load(what + "_padded_triangle")), what
    assert not np.array_equal(padded, load(what + "_mask")), what
out = load("o_mask")
assert np.allclose(out[0, :, 0], q[0, :, 0]), "the first query sees its own key"
assert not np.allclose(out[0, :, 4], q[0, :, 4]), "the last query sees them all"
print("the triangle is the mask")
