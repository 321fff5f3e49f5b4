"""A model whose images are UINT8 (it casts and scales them itself) trains as
the same model taking float images does.

Exports two PyTorch models with the same weights: one reads float images
(the trainer feeds them normalized), the other uint8 images (the trainer
feeds the bytes; the model casts them to float). Both start with a
training-mode batch norm, which makes their outputs the same for any
positive affine change of the input (up to its epsilon), so the two compiled
trainers' losses agree step by step when, and only when, the bytes arrive
as bytes.

    byte-input.test.py GPUC WORKDIR DATA
"""
import json
import os
import subprocess
import sys

import numpy as np
import torch

gpuc, work, data = sys.argv[1:4]
os.makedirs(work, exist_ok=True)


class Classifier(torch.nn.Module):
    def __init__(self, bytes_in):
        super().__init__()
        self.bytes_in = bytes_in
        self.norm = torch.nn.BatchNorm2d(1)
        self.net = torch.nn.Sequential(torch.nn.Flatten(),
                                       torch.nn.Linear(784, 64),
                                       torch.nn.ReLU(),
                                       torch.nn.Linear(64, 10))

    def forward(self, x):
        if self.bytes_in:
            x = x.float()
        return self.net(self.norm(x))


def export(bytes_in, path):
    torch.manual_seed(0)
    model = Classifier(bytes_in).train()
    dtype = torch.uint8 if bytes_in else torch.float32
    torch.onnx.export(model, (torch.zeros(2, 1, 28, 28, dtype=dtype),), path,
                      input_names=["image"], output_names=["logits"],
                      dynamic_axes={"image": {0: "batch"},
                                    "logits": {0: "batch"}},
                      opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False)


def train(name):
    out = os.path.join(work, name)
    subprocess.run([gpuc, "compile", os.path.join(work, name + ".onnx"),
                    "--batch", "32", "--target", "cpu", "--optimizer", "sgd",
                    "--lr", "0.05", "-o", out],
                   check=True, stdout=subprocess.DEVNULL)
    metrics = os.path.join(work, name + ".jsonl")
    run = subprocess.run([os.path.join(out, "train"), "--data", data,
                          "--limit-train", "640", "--epochs", "1",
                          "--log-every", "1", "--eval-every", "20",
                          "--metrics", metrics],
                         check=True, capture_output=True, text=True)
    print([l for l in run.stdout.splitlines() if l.startswith("training")][0])
    lines = [json.loads(l) for l in open(metrics)]
    return ([l["loss"] for l in lines if "loss" in l],
            [l["test_accuracy"] for l in lines if "test_accuracy" in l])


export(False, os.path.join(work, "float.onnx"))
export(True, os.path.join(work, "bytes.onnx"))
float_losses, float_accuracy = train("float")
byte_losses, byte_accuracy = train("bytes")
assert len(float_losses) == len(byte_losses) == 20, (float_losses, byte_losses)
worst = max(abs(a - b) / abs(a) for a, b in zip(float_losses, byte_losses))
assert worst < 1e-4, "losses differ by %.2e relative:\n%s\n%s" % (
    worst, float_losses, byte_losses)
assert byte_losses[-1] < byte_losses[0], byte_losses
assert abs(float_accuracy[-1] - byte_accuracy[-1]) < 0.01, (
    float_accuracy, byte_accuracy)
print("uint8 input: 20 losses within %.1e of the float model's "
      "(%.4f -> %.4f), test accuracy %.4f and %.4f" %
      (worst, byte_losses[0], byte_losses[-1], float_accuracy[-1],
       byte_accuracy[-1]))

# Float data that is not integral is refused for the byte model.
npy = os.path.join(work, "fractional")
os.makedirs(npy, exist_ok=True)
rng = np.random.RandomState(0)
for split in ("train", "test"):
    np.save(os.path.join(npy, split + "_x.npy"),
            rng.rand(64, 1, 28, 28).astype(np.float32))
    np.save(os.path.join(npy, split + "_y.npy"),
            rng.randint(0, 10, 64).astype(np.int64))
run = subprocess.run([os.path.join(work, "bytes", "train"), "--data", npy,
                      "--epochs", "1"], capture_output=True, text=True)
assert run.returncode != 0, run.stdout
print(run.stderr.strip())
