"""The attentions of Inputs/triangle-bands.mlir three ways in the
interpreter: as the ops, as whole GEMMs and as GEMMs in bands (WORKDIR
holds the two lowerings, whole.mlir and bands.mlir). Bands and whole GEMMs
must agree bit for bit, and no result may be NaN; both must agree with the
ops to rounding.

    triangle-bands.test.py GPUC INPUT WORKDIR
"""
import os
import subprocess
import sys

import numpy as np

gpuc, module, work = sys.argv[1], sys.argv[2], sys.argv[3]
rng = np.random.default_rng(5)
inputs = {name: rng.standard_normal((1, 2, 7, 4)).astype(np.float32)
          for name in ("q", "k", "v", "do")}
args = []
for name, value in inputs.items():
    np.save(os.path.join(work, name + ".npy"), value)
    args += ["--input", "%s=%s" % (name, os.path.join(work, name + ".npy"))]
results = {}
for how, path in (("ops", module),
                  ("whole", os.path.join(work, "whole.mlir")),
                  ("bands", os.path.join(work, "bands.mlir"))):
    out = os.path.join(work, how)
    subprocess.run([gpuc, "run", path, "--output-dir", out] + args,
                   check=True)
    results[how] = {name[:-4]: np.load(os.path.join(out, name))
                    for name in sorted(os.listdir(out))}
names = sorted(results["ops"])
assert names == ["dk", "dk_kept", "dq", "dq_kept", "dv", "dv_kept", "lse",
                 "o", "o_kept"], names
for name in names:
    bands, whole = results["bands"][name], results["whole"][name]
    assert not np.isnan(bands).any(), "%s: NaN from the bands" % name
    assert np.array_equal(bands, whole), "%s: bands differ from whole" % name
    assert np.allclose(bands, results["ops"][name], rtol=1e-5, atol=1e-6), \
        "%s: GEMMs differ from the op" % name
for name in ("o", "dq", "dk", "dv"):
    assert np.allclose(results["bands"][name], results["bands"][name + "_kept"],
                       rtol=1e-5, atol=1e-6), name
print("bands agree with whole GEMMs and the ops")
