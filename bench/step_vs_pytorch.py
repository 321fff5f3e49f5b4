#!/usr/bin/env python3
"""Times one training step of gpuc's generated trainer (fused, and with
--no-fuse one kernel per op) against a PyTorch training step of the same
model, batch, optimizer and thread count (eager, and with --torch-modes
eager,compile also torch.compile), in one run, and prints the ratios.

    /usr/bin/python3 bench/step_vs_pytorch.py [--models mlp,cnn] [--batch 128]
        [--threads N] [--steps 50] [--torch-modes eager[,compile]]

PyTorch 2.x (torch.compile) on this CPU-only machine: scripts/torch-peer.sh
installs PyPI's wheel into /opt/torchpeer and prints the command to run
this script with it.

gpuc: `gpuc compile examples/<model>.onnx --batch B --optimizer adam` then
`out/train --bench-steps N` (OMP_NUM_THREADS = N;
warm-up steps excluded; the batch is already in memory). PyTorch: the model
class from examples/export_models.py with the weights of the same ONNX file,
torch.optim.Adam, torch.set_num_threads(N), forward + cross-entropy +
backward + step on a resident batch, same warm-up.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import torch
from onnx import numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))
import export_models  # noqa: E402

DATA = "/usr/share/datasets/fashion-mnist"


def torch_model(name, onnx_path):
    model = {"mlp": export_models.MLP, "cnn": export_models.CNN}[name]()
    weights = {t.name: numpy_helper.to_array(t)
               for t in onnx.load(onnx_path).graph.initializer}
    state = model.state_dict()
    for key in state:
        if key in weights:
            state[key] = torch.from_numpy(weights[key].copy())
    model.load_state_dict(state)
    return model


def time_torch(name, onnx_path, batch, steps, warmup, mode="eager"):
    torch.manual_seed(0)
    model = torch_model(name, onnx_path).train()
    # The strongest setup a PyTorch 2.x user picks on a CPU: the model
    # compiled (inductor's C++/OpenMP kernels) and the fused Adam step.
    fused = mode == "compile" and hasattr(torch, "compile")
    opt = torch.optim.Adam(model.parameters(), lr=1e-3,
                           **({"fused": True} if fused else {}))
    if mode == "compile":
        model = torch.compile(model)
    x = torch.randn(batch, 1, 28, 28)
    y = torch.randint(0, 10, (batch,))
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
    for _ in range(warmup):
        step()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    return 1000.0 * (time.perf_counter() - t0) / steps


def compile_gpuc(args, name, onnx_path, work, env, fuse):
    out = os.path.join(work, name + ("" if fuse else "-unfused"))
    subprocess.run([args.gpuc, "compile", onnx_path, "--batch",
                    str(args.batch), "--optimizer", "adam", "--lr", "0.001",
                    "--target", "cpu", "-o", out] +
                   ([] if fuse else ["--no-fuse"]), check=True,
                   stdout=subprocess.DEVNULL, env=env)
    plan = json.load(open(os.path.join(out, "plan.json")))
    steps = plan["functions"]["train_step"]["steps"]
    kernels = sum(1 for s in steps if s["op"] == "kernel")
    return out, kernels, len(steps)


def time_gpuc(args, out, env):
    r = subprocess.run([os.path.join(out, "train"), "--data", DATA,
                        "--bench-steps", str(args.steps)],
                       check=True, capture_output=True, text=True, env=env)
    return json.loads(r.stdout.strip().splitlines()[-1])["ms_per_step"]


def load_average():
    return " ".join(open("/proc/loadavg").read().split()[:3])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--gpuc", default=os.path.join(ROOT, "build/bin/gpuc"))
    p.add_argument("--models", default="mlp,cnn")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--repeats", type=int, default=3,
                   help="rounds of (gpuc unfused, gpuc fused, PyTorch)")
    p.add_argument("--torch-modes", default="eager",
                   help="eager and/or compile (torch.compile, PyTorch 2.x)")
    args = p.parse_args()
    modes = args.torch_modes.split(",")
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    torch.set_num_threads(args.threads)
    print("batch %d, Adam, %d threads, %d timed steps after 3 warm-up steps, "
          "%d interleaved rounds (best and median); torch %s; load average "
          "%s" % (args.batch, args.threads, args.steps, args.repeats,
                  torch.__version__, load_average()))
    print("%-6s %-8s %10s %10s %10s %10s %7s %8s %6s %s" % (
        "model", "gpuc", "gpuc best", "median", "torch best", "median",
        "ratio", "kernels", "steps", "torch mode"))
    with tempfile.TemporaryDirectory() as work:
        for name in args.models.split(","):
            onnx_path = os.path.join(ROOT, "examples", name + ".onnx")
            builds = {label: compile_gpuc(args, name, onnx_path, work, env,
                                          label == "fused")
                      for label in ("unfused", "fused")}
            times = {"unfused": [], "fused": []}
            times.update({mode: [] for mode in modes})
            for _ in range(args.repeats):
                for label in ("unfused", "fused"):
                    times[label].append(time_gpuc(args, builds[label][0],
                                                  env))
                for mode in modes:
                    # torch.compile's first steps compile: more warm-up.
                    times[mode].append(time_torch(
                        name, onnx_path, args.batch, args.steps,
                        3 if mode == "eager" else 10, mode))
            for mode in modes:
                t = times[mode]
                for label in ("unfused", "fused"):
                    g = times[label]
                    print("%-6s %-8s %10.2f %10.2f %10.2f %10.2f %7.2f %8d "
                          "%6d %s" % (
                              name, label, min(g), statistics.median(g),
                              min(t), statistics.median(t), min(g) / min(t),
                              builds[label][1], builds[label][2], mode))
    print("ratio = best gpuc / best PyTorch step time of the mode in the last "
          "column (below 1: gpuc is faster); kernels = generated kernels per "
          "step, steps = all step-program entries; load average now %s"
          % load_average())


if __name__ == "__main__":
    main()
