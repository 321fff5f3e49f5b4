"""`train --init` with a state_dict PyTorch saved: the first step's loss is
the one the ONNX model's own initializers give, and PyTorch's own for the
same weights; another seed's state_dict gives PyTorch's loss for those.

usage: init-from-pytorch.test.py GPUC SRC WORK"""
import os
import subprocess
import sys

import numpy as np
import torch
from torch.nn import functional as F

gpuc, src, work = sys.argv[1:4]
sys.path.insert(0, os.path.join(src, "examples"))
import export_models  # noqa: E402
import gpt  # noqa: E402

T, B = 32, 2


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("failed: %s\n%s%s" % (" ".join(cmd), r.stdout, r.stderr))
    return r


models, weights = {}, {}
for seed in (4, 5):
    models[seed] = gpt.build("tiny", T, seed)
    weights[seed] = os.path.join(work, "seed%d.safetensors" % seed)
    export_models.save_state_dict(models[seed], weights[seed])
onnx_path = os.path.join(work, "gpt.onnx")
gpt.export(models[4], T, onnx_path)

common = ["--batch", str(B), "--target", "cpu", "--optimizer", "adamw",
          "--class-axis", "-1"]
run([gpuc, "compile", onnx_path, "-o", work + "/full"] + common)
run([gpuc, "compile", onnx_path, "-o", work + "/apart", "--no-weights"] +
    common)

rng = np.random.default_rng(0)
tokens = rng.integers(0, 1000, size=(B, T)).astype(np.int64)
labels = rng.integers(0, 1000, size=(B, T)).astype(np.int64)
inputs = os.path.join(work, "inputs")
os.makedirs(inputs, exist_ok=True)
np.save(inputs + "/tokens.npy", tokens)
np.save(inputs + "/label.npy", labels)


def first_loss(artifact, *flags):
    out = os.path.join(work, "out-%s-%d" % (os.path.basename(artifact),
                                            len(os.listdir(work))))
    r = run([os.path.join(artifact, "train"), "--run-step", inputs,
             "--output-dir", out] + list(flags))
    return float(np.load(out + "/loss.npy")), r.stderr


def torch_loss(model):
    model.train()
    with torch.no_grad():
        logits = model(torch.from_numpy(tokens))
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                               torch.from_numpy(labels).reshape(-1)).item()


own, _ = first_loss(work + "/full")
given, said = first_loss(work + "/apart", "--init", weights[4])
other, _ = first_loss(work + "/apart", "--init", weights[5])
for line in said.splitlines():
    if line.startswith("initial weights"):
        print(line.replace(weights[4], "FILE"))
# The tied head's weight stored under the head's name, the embedding's
# recorded in the metadata (as safetensors.torch.save_model may save it).
tied_path = os.path.join(work, "tied-last.safetensors")
export_models.save_state_dict(models[4], tied_path, keep_last=True)
tied, said = first_loss(work + "/apart", "--init", tied_path)
for line in said.splitlines():
    if line.startswith("initial weights"):
        print(line.replace(tied_path, "TIED"))
assert tied == own, (tied, own)
print("seed 4: the ONNX's initializers %.7f, --init %.7f, PyTorch %.7f" %
      (own, given, torch_loss(models[4])))
print("seed 5: --init %.7f, PyTorch %.7f" % (other, torch_loss(models[5])))
assert given == own, (given, own)
for seed, loss in ((4, given), (5, other)):
    assert abs(loss - torch_loss(models[seed])) < 1e-5 * abs(loss), seed
assert other != given

# The causal mask buffer is frozen and the step computes it from the
# positions: a state_dict holding another mask is refused, not trained
# with the compiled one.
unmasked = gpt.build("tiny", T, 4)
with torch.no_grad():
    unmasked.h[0].attn.bias.fill_(1.0)
unmasked_path = os.path.join(work, "unmasked.safetensors")
export_models.save_state_dict(unmasked, unmasked_path)
refused = subprocess.run(
    [os.path.join(work, "apart", "train"), "--run-step", inputs,
     "--output-dir", os.path.join(work, "out-unmasked"), "--init",
     unmasked_path], capture_output=True, text=True)
print("another mask: exit %d: %s" % (refused.returncode,
                                     refused.stderr.strip().splitlines()[-1].replace(
                                         unmasked_path, "FILE")))
print("ok")
