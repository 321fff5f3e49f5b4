#!/usr/bin/env python3
"""How far gpuc's float32 gradients are from a float64 reference, against
PyTorch float32's distance, on models whose gradients are long sums: a
DenseNet-like network (torchvision's DenseNet class: batch norms of growing
concatenations) and a VGG-like stack of 3x3 convolutions.

    /usr/bin/python3 test/Training/gradient_accuracy.py --gpuc build/bin/gpuc

The gradient is the compiled trainer's (CPU target): one SGD step with
momentum from zero state leaves the momentum buffer equal to it. The
distance is ||g - g64|| / ||g64|| over all parameters together, g64 from
PyTorch in float64 on the same batch and weights. Prints one line per model
and fails when gpuc's distance exceeds --max-ratio (2) times PyTorch
float32's.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from torch_parity import export, load_initializers  # noqa: E402


def make(name):
    torch.manual_seed(0)
    import torchvision
    if name == "densenet":
        return (torchvision.models.densenet.DenseNet(
            growth_rate=8, block_config=(6, 6), num_init_features=16,
            bn_size=2, num_classes=10), (3, 32, 32), 4)
    nn = torch.nn
    layers, channels = [], 3
    for width in (16, "M", 32, "M", 64, 64, "M"):
        if width == "M":
            layers.append(nn.MaxPool2d(2))
        else:
            layers += [nn.Conv2d(channels, width, 3, padding=1), nn.ReLU()]
            channels = width
    layers += [nn.Flatten(), nn.Linear(64 * 8 * 8, 10)]
    return nn.Sequential(*layers), (3, 64, 64), 4


def distance(gpuc, name, work):
    model, shape, batch = make(name)
    path = os.path.join(work, name + ".onnx")
    export(model, torch.randn(2, *shape), path, "image", 17)
    load_initializers(model, path)
    model.train()
    rng = np.random.RandomState(1)
    x = rng.randn(batch, *shape).astype(np.float32)
    y = rng.randint(0, 10, batch).astype(np.int64)

    def torch_grads(dtype):
        import copy
        m = copy.deepcopy(model).to(dtype)
        loss = torch.nn.functional.cross_entropy(
            m(torch.from_numpy(x).to(dtype)), torch.from_numpy(y))
        loss.backward()
        return {n: p.grad.double().numpy() for n, p in m.named_parameters()}

    inputs, out = os.path.join(work, name + "-in"), os.path.join(work, name)
    os.makedirs(inputs)
    np.save(os.path.join(inputs, "image.npy"), x)
    np.save(os.path.join(inputs, "label.npy"), y)
    subprocess.run([gpuc, "compile", path, "--batch", str(batch),
                    "--optimizer", "sgd", "--momentum", "0.9", "--lr", "1",
                    "--target", "cpu", "-o", out], check=True,
                   stdout=subprocess.DEVNULL)
    subprocess.run([os.path.join(out, "train"), "--run-step", inputs,
                    "--output-dir", out + "-step"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    g64, g32 = torch_grads(torch.float64), torch_grads(torch.float32)
    mine = {n: np.load(os.path.join(out + "-step", n + ".momentum_buffer.npy"))
            for n in g64}
    norm = np.sqrt(sum(np.sum(g ** 2) for g in g64.values()))
    ours = np.sqrt(sum(np.sum((mine[n] - g64[n]) ** 2) for n in g64)) / norm
    theirs = np.sqrt(sum(np.sum((g32[n] - g64[n]) ** 2) for n in g64)) / norm
    return ours, theirs


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpuc", required=True)
    parser.add_argument("--models", default="densenet,vgg")
    parser.add_argument("--max-ratio", type=float, default=2.0)
    args = parser.parse_args()
    failed = False
    with tempfile.TemporaryDirectory() as work:
        for name in args.models.split(","):
            ours, theirs = distance(args.gpuc, name, work)
            ok = ours <= args.max_ratio * theirs
            failed |= not ok
            print(f"{'PASS' if ok else 'FAIL'} {name}: gradient distance to "
                  f"float64 {ours:.3e}, PyTorch float32's {theirs:.3e}, "
                  f"ratio {ours / theirs:.2f}", flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
