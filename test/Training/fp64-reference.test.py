"""A deep network's fp32 step measured from fp64: torchvision's ResNet-50
(64x64 images, batch 2, 10 classes) from its initial weights, one AdamW
step. At this depth PyTorch's own fp32 step is far from its fp64 one (every
stage multiplies the rounding differences), so gpuc's fp32 step is held to
PyTorch fp32's distance from fp64 (twice it at most, by the step-parity
measure), as the GPU bundle's scale phase holds it.

usage: fp64-reference.test.py GPUC SRC WORK"""
import copy
import os
import subprocess
import sys

import numpy as np
import torch
import torchvision
from torch.nn import functional as F

gpuc, src, work = sys.argv[1:4]
sys.path[:0] = [os.path.join(src, "examples"), os.path.join(src, "test", "Codegen")]
import export_models  # noqa: E402
from stepcompare import TOLERANCE, compare_dirs  # noqa: E402

B, SIZE, CLASSES = 2, 64, 10
torch.manual_seed(0)
model = torchvision.models.resnet50(num_classes=CLASSES)
onnx_path = os.path.join(work, "resnet50.onnx")
export_models.export(model, torch.zeros(2, 3, SIZE, SIZE), onnx_path, "image",
                     17)
weights = os.path.join(work, "weights.safetensors")
export_models.save_state_dict(model, weights)
subprocess.run([gpuc, "compile", onnx_path, "--batch", str(B), "--optimizer",
                "adamw", "--lr", "0.001", "--target", "cpu", "--no-weights",
                "-o", os.path.join(work, "art")], check=True,
               stdout=subprocess.DEVNULL)
g = torch.Generator().manual_seed(1)
x = torch.randn((B, 3, SIZE, SIZE), generator=g)
y = torch.randint(0, CLASSES, (B,), generator=g)
inputs = os.path.join(work, "in")
os.makedirs(inputs, exist_ok=True)
np.save(os.path.join(inputs, "image.npy"), x.numpy())
np.save(os.path.join(inputs, "label.npy"), y.numpy())
got = os.path.join(work, "gpuc")
subprocess.run([os.path.join(work, "art", "train"), "--run-step", inputs,
                "--output-dir", got, "--init", weights, "--seed", "7"],
               check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def torch_step(dtype, out):
    m = copy.deepcopy(model).to(dtype).train()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=0.01)
    loss = F.cross_entropy(m(x.to(dtype)), y)
    loss.backward()
    opt.step()
    os.makedirs(out, exist_ok=True)
    np.save(os.path.join(out, "loss.npy"), np.array(loss.item()))
    for n, p in m.named_parameters():
        np.save(os.path.join(out, n + ".npy"), p.detach().numpy())
        np.save(os.path.join(out, n + ".exp_avg.npy"),
                opt.state[p]["exp_avg"].numpy())
    for n, b in m.named_buffers():
        if b.is_floating_point() and "running" in n:
            np.save(os.path.join(out, n + ".npy"), b.numpy())


ref64, ref32 = os.path.join(work, "fp64"), os.path.join(work, "fp32")
torch_step(torch.float64, ref64)
torch_step(torch.float32, ref32)
tol = TOLERANCE["fp32"]
n, ours, ours_at, _, failures = compare_dirs(ref64, got, **tol)
_, theirs, theirs_at, _, _ = compare_dirs(ref64, ref32, **tol)
print("%d tensors from fp64: gpuc %.1f (%s), PyTorch fp32 %.1f (%s) times "
      "the tolerance" % (n, ours, ours_at, theirs, theirs_at))
missing = [f for f in failures if "missing" in f or "shape" in f]
assert not missing, missing
assert theirs > 1.0, "PyTorch fp32 within the tolerance: the test lost its point"
assert ours <= 2.0 * theirs, (ours, theirs)
print("ok")
