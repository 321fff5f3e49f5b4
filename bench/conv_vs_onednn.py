#!/usr/bin/env python3
"""Convolution on the CPU: gpuc's im2col + OpenBLAS against oneDNN.

    /usr/bin/python3 bench/conv_vs_onednn.py [--batch 128] [--threads N]

gpuc: the example CNN's training step with --profile, summing the time of
its conv2d, conv2d_backward_input and conv2d_backward_filter steps. oneDNN:
PyTorch's CPU convolution (mkldnn, i.e. oneDNN, when torch reports it) on the
same two layers and shapes, forward plus the same gradients (no input
gradient for the first layer, as in gpuc's step), same thread count, one run.
"""
import argparse
import os
import re
import subprocess
import tempfile
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = "/usr/share/datasets/fashion-mnist"


def gpuc_conv_ms(args, work, env):
    out = os.path.join(work, "cnn")
    subprocess.run([args.gpuc, "compile", os.path.join(ROOT, "examples/cnn.onnx"),
                    "--batch", str(args.batch), "--optimizer", "adam",
                    "--target", "cpu", "-o", out], check=True,
                   stdout=subprocess.DEVNULL, env=env)
    r = subprocess.run([os.path.join(out, "train"), "--data", DATA,
                        "--bench-steps", str(args.steps),
                        "--profile", os.path.join(work, "trace.json")],
                       check=True, capture_output=True, text=True, env=env)
    # The roofline table: function, step, index, ms/run, ...
    total = 0.0
    for line in r.stderr.splitlines():
        fields = line.split()
        if len(fields) > 4 and fields[0] == "train_step" and \
                fields[1].startswith("conv2d"):
            total += float(fields[3])
    return total


def onednn_conv_ms(args):
    torch.set_num_threads(args.threads)
    layers = [((args.batch, 1, 28, 28), (32, 1, 3, 3), False),
              ((args.batch, 32, 14, 14), (64, 32, 3, 3), True)]
    tensors = []
    for x_shape, w_shape, input_grad in layers:
        x = torch.randn(x_shape, requires_grad=input_grad)
        w = torch.randn(w_shape, requires_grad=True)
        tensors.append((x, w))

    def step():
        for x, w in tensors:
            y = torch.nn.functional.conv2d(x, w, padding=1)
            y.backward(torch.ones_like(y))
    for _ in range(3):
        step()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        step()
    return 1000.0 * (time.perf_counter() - t0) / args.steps


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--gpuc", default=os.path.join(ROOT, "build/bin/gpuc"))
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--steps", type=int, default=20)
    args = p.parse_args()
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads),
               OPENBLAS_NUM_THREADS=str(args.threads))
    with tempfile.TemporaryDirectory() as work:
        g = gpuc_conv_ms(args, work, env)
    o = onednn_conv_ms(args)
    print("CNN convolutions per training step, batch %d, %d threads "
          "(torch mkldnn available: %s)" % (args.batch, args.threads,
                                            torch.backends.mkldnn.is_available()))
    print("gpuc im2col+OpenBLAS %.2f ms, oneDNN via PyTorch %.2f ms, "
          "ratio %.2f" % (g, o, g / o))


if __name__ == "__main__":
    main()
