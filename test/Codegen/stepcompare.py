"""One training step's results against a reference, tensor by tensor.

Shared by the interpreter parity test (step_parity.py) and the GPU bundle's
check of the CUDA device against the CPU device (scripts/gpu/gpu_check.py).
Every `.npy` in the reference folder (loss, outputs, each updated parameter
and optimizer-state tensor) must be in the other with the same shape and
agree within |got - ref| <= RTOL * |ref| + ATOL.

RTOL/ATOL leave room for a few thousand float32 ulps of accumulated rounding:
reductions are summed in another order (the interpreter in double, the CPU
kernels in double, the GPU in a float tree, cuBLAS/cuDNN in their own).
"""
import os

import numpy as np

RTOL, ATOL = 1e-4, 1e-5


def compare_dirs(ref, got, rtol=RTOL, atol=ATOL, moment_floor=1e-8,
                 moment_relative=0.0, atol_relative=0.0):
    """Returns (tensors compared, worst excess, its file, noisy elements,
    failures). An excess of 1.0 is the tolerance. An Adam element is noise
    where its first moment is at most `moment_floor`, or at most
    `moment_relative` times the largest of its tensor. `atol_relative`
    adds that fraction of the tensor's largest magnitude to the absolute
    tolerance (a value computed by cancellation carries the absolute error
    of its operands)."""
    worst, worst_name, compared, failures, noisy = 0.0, "", 0, [], 0
    for f in sorted(os.listdir(ref)):
        if not f.endswith(".npy"):
            continue
        r = np.load(os.path.join(ref, f)).astype(np.float64)
        path = os.path.join(got, f)
        if not os.path.exists(path):
            failures.append("%s: missing from the step under test" % f)
            continue
        g = np.load(path).astype(np.float64)
        if g.shape != r.shape:
            failures.append("%s: shape %s vs %s" % (f, g.shape, r.shape))
            continue
        compared += 1
        floor = atol + atol_relative * (float(np.abs(r).max()) if r.size
                                        else 0.0)
        excess = np.abs(g - r) / (rtol * np.abs(r) + floor)
        # Adam divides the first moment by the root of the second, so a
        # gradient that is zero in exact arithmetic but float noise (a bias
        # before batch norm, the attention key bias) becomes a full-size
        # step of random sign in any implementation. Those elements are
        # counted, not compared.
        base = f[:-4]
        for suffix in (".exp_avg_sq", ".exp_avg"):
            if base.endswith(suffix):
                base = base[:-len(suffix)]
        moment = os.path.join(ref, base + ".exp_avg.npy")
        if os.path.exists(moment):
            m = np.load(moment).astype(np.float64)
            # |gradient| <= 10 * moment_floor after one step.
            noise = np.abs(m) <= max(
                moment_floor,
                moment_relative * (float(np.abs(m).max()) if m.size else 0.0))
            # In mixed precision (a relative floor) only the parameter is
            # spared: its moments are still compared everywhere.
            if noise.shape == excess.shape and (
                    f == base + ".npy" or not moment_relative):
                if f == base + ".npy":
                    noisy += int((noise & (m != 0)).sum())
                excess = np.where(noise, 0.0, excess)
        e = float(excess.max()) if excess.size else 0.0
        if not np.isfinite(e):
            e = float("inf")
        if e > worst:
            worst, worst_name = e, f
        if e > 1.0:
            i = int(np.nan_to_num(excess, nan=np.inf).argmax())
            failures.append("%s: element %d is %r, the reference says %r" %
                            (f, i, g.flat[i], r.flat[i]))
    return compared, worst, worst_name, noisy, failures
