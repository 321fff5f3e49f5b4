#!/usr/bin/env python3
"""CPU training step of a torchvision classifier: gpuc's compiled trainer
against PyTorch eager (and torch.compile where the PyTorch has it), in
interleaved rounds, with the load average printed.

    /usr/bin/python3 bench/torchvision_step_vs_pytorch.py
        [--model densenet121] [--batch 4] [--size 64] [--classes 10]
        [--threads 2]
        [--steps 10] [--rounds 3] [--gpuc build/bin/gpuc]
        [--baseline-gpuc OTHER/bin/gpuc]

Both sides train the same network (torchvision's class as
examples/torchvision_model.py builds and exports it, --classes outputs,
the ONNX export's weights) with SGD, momentum 0.9 (gpuc's default optimizer),
on a resident random batch of `size`x`size` RGB images; warm-up steps are
excluded. gpuc: `gpuc compile --target cpu` then `train --bench-steps`.
`--baseline-gpuc` times a second gpuc (another build, say the commit before
a change) in the same rounds, as "gpuc baseline".
"""
import argparse
import json
import os
import subprocess
import tempfile
import time

import sys

import numpy as np
import onnx
import torch
from onnx import numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))
import torchvision_model  # noqa: E402


def torch_step_ms(name, classes, onnx_path, batch, size, steps, mode):
    model = torchvision_model.build(name, classes)
    weights = {t.name: numpy_helper.to_array(t)
               for t in onnx.load(onnx_path).graph.initializer}
    state = model.state_dict()
    for key in state:
        if key in weights:
            state[key] = torch.from_numpy(weights[key].copy())
    model.load_state_dict(state)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    if mode == "compile":
        model = torch.compile(model)
    x = torch.randn(batch, 3, size, size)
    y = torch.randint(0, classes, (batch,))
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        opt.step()
    for _ in range(3):
        step()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return 1000.0 * (time.perf_counter() - start) / steps


def gpuc_step_ms(out, data, steps, env):
    r = subprocess.run([os.path.join(out, "train"), "--data", data,
                        "--device", "cpu", "--bench-steps", str(steps)],
                       check=True, capture_output=True, text=True, env=env)
    return json.loads(r.stdout.strip().splitlines()[-1])["ms_per_step"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="densenet121")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--gpuc", default=os.path.join(ROOT, "build/bin/gpuc"))
    p.add_argument("--baseline-gpuc", default=None)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    work = tempfile.mkdtemp(prefix="gpuc-tv-step-")
    onnx_path = os.path.join(work, args.model + ".onnx")
    torchvision_model.export(torchvision_model.build(args.model, args.classes),
                             args.size, onnx_path)
    builds = {"gpuc": args.gpuc}
    if args.baseline_gpuc:
        builds["gpuc baseline"] = args.baseline_gpuc
    outs = {}
    for name, gpuc in builds.items():
        outs[name] = os.path.join(work, name.replace(" ", "-"))
        subprocess.run([gpuc, "compile", onnx_path, "--batch",
                        str(args.batch), "--target", "cpu", "-o", outs[name]],
                       check=True, stdout=subprocess.DEVNULL, env=env)
    data = os.path.join(work, "data")
    os.makedirs(data)
    rng = np.random.default_rng(0)
    for split, n in (("train", 8 * args.batch), ("test", args.batch)):
        np.save(os.path.join(data, split + "_x.npy"),
                rng.standard_normal((n, 3, args.size, args.size))
                .astype(np.float32))
        np.save(os.path.join(data, split + "_y.npy"),
                rng.integers(0, args.classes, n).astype(np.int64))
    modes = ["eager"] + (["compile"] if hasattr(torch, "compile") else [])
    times = {name: [] for name in builds}
    times.update({"torch " + m: [] for m in modes})
    print(f"load average: {open('/proc/loadavg').read().split()[:3]}; "
          f"torch {torch.__version__}; {args.model} {args.size}x{args.size}, "
          f"batch {args.batch}, {args.threads} threads")
    for _ in range(args.rounds):
        for name in builds:
            times[name].append(gpuc_step_ms(outs[name], data, args.steps, env))
        for m in modes:
            times["torch " + m].append(torch_step_ms(
                args.model, args.classes, onnx_path, args.batch, args.size,
                args.steps, m))
    best = {k: min(v) for k, v in times.items()}
    peer = min((v, k) for k, v in best.items() if k not in builds)
    for k, v in times.items():
        print(f"{k:14s} ms/step best {min(v):8.2f}  all "
              + " ".join(f"{t:.2f}" for t in v))
    print(f"gpuc / fastest peer ({peer[1]}): {best['gpuc'] / peer[0]:.2f}")
    if args.baseline_gpuc:
        print(f"gpuc / gpuc baseline: "
              f"{best['gpuc'] / best['gpuc baseline']:.2f}")
    print(f"load average: {open('/proc/loadavg').read().split()[:3]}")


if __name__ == "__main__":
    main()
