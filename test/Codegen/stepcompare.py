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

# Mixed precision (compare_dirs(..., **TOLERANCE[precision])): both sides
# round every f16/bf16 value the same way (the interpreter with APFloat,
# kernels with Float16.h, cuBLASLt/cuDNN once from f32 accumulators), so they differ only
# where an f32 result differs by reduction order or libm and lands on the
# other side of a rounding boundary of the storage type: one ulp there,
# which the following ops carry on. The tolerance is 8 ulps of the storage
# type (2^-10 relative for f16, 2^-7 for bf16), with an absolute floor of
# the same size at 0.01 (gradients of order 1e-2 near zero) plus 2 ulps of
# the tensor's largest element: a logit near zero is the difference of a
# GEMM result of order 1 and a bias, so one ulp of the GEMM's rounding
# (double accumulation in the interpreter, float in OpenBLAS) is all of its
# error. Adam's first
# step moves every parameter by +-lr whatever its gradient's size, so a
# gradient at the noise level of its cancelling sum (below 8 storage ulps
# of its tensor's largest, or 1e-5 in f16 and 1e-4 in bf16; the conv bias
# before a batch norm is all noise) takes a step of random sign: those
# elements are counted, not compared, as in fp32 below 1e-7.
TOLERANCE = {
    "fp32": {},
    "fp16": {"rtol": 8 * 2.0 ** -10, "atol": 8 * 2.0 ** -10 * 1e-2,
             "atol_relative": 2 * 2.0 ** -10,
             "moment_floor": 1e-6, "moment_relative": 8 * 2.0 ** -10},
    "bf16": {"rtol": 8 * 2.0 ** -7, "atol": 8 * 2.0 ** -7 * 1e-2,
             "atol_relative": 2 * 2.0 ** -7,
             "moment_floor": 1e-5, "moment_relative": 8 * 2.0 ** -7},
}


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
        # The parameter's 16-bit copy (mixed precision) moves with it.
        base = f[:-4]
        for suffix in (".exp_avg_sq", ".exp_avg", ".f16", ".bf16"):
            if base.endswith(suffix):
                base = base[:-len(suffix)]
        parameter = f in (base + ".npy", base + ".f16.npy", base + ".bf16.npy")
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
                    parameter or not moment_relative):
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
