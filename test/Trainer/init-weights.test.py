"""Weights apart from the artifact: model.onnx points into
init.safetensors, `gpuc compile --no-weights` leaves the weights out, and
`train --init FILE` gives them back by name, from another dtype and under
a longer name, to the same step bit for bit; bad weight files are refused
with the reason.

usage: init-weights.test.py GPUC MODEL WORK"""
import json
import os
import shutil
import struct
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_read  # noqa: E402

gpuc, model_path, work = sys.argv[1:4]
os.makedirs(work, exist_ok=True)

NP_DTYPE = {"F64": np.float64, "F32": np.float32, "F16": np.float16,
            "I64": np.int64, "I32": np.int32, "BOOL": np.bool_}


def write_safetensors(path, tensors, dtypes=None):
    """A safetensors file as PyTorch's `safetensors.torch.save_file` writes
    one: a JSON header, then each tensor's little-endian bytes."""
    dtypes = dtypes or {}
    header, blobs, offset = {}, [], 0
    for name, value in tensors.items():
        dtype = dtypes.get(name, "F32")
        blob = np.ascontiguousarray(value, dtype=NP_DTYPE[dtype]).tobytes()
        header[name] = {"dtype": dtype, "shape": list(np.shape(value)),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def run(cmd, expect_ok=True):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if expect_ok and r.returncode != 0:
        sys.exit("failed: %s\n%s%s" % (" ".join(cmd), r.stdout, r.stderr))
    return r


def compile_model(out, *flags, model=model_path):
    run([gpuc, "compile", model, "--batch", "4", "--target", "cpu",
         "--optimizer", "adamw", "--class-axis", "-1", "-o", out] +
        list(flags))
    with open(os.path.join(out, "plan.json")) as f:
        return json.load(f)


full = os.path.join(work, "full")
apart = os.path.join(work, "apart")
plan = compile_model(full)
plan_apart = compile_model(apart, "--no-weights")

# model.onnx holds the weights once: its initializers point into
# init.safetensors, and read through that they are the model's own.
size = os.path.getsize
print("model.onnx %d bytes (the model %d), init.safetensors %d bytes" % (
    size(full + "/model.onnx"), size(model_path),
    size(full + "/init.safetensors")))
assert size(full + "/model.onnx") < size(model_path) / 10
source = {t.name: numpy_helper.to_array(t)
          for t in onnx.load(model_path).graph.initializer}
external = sum(t.data_location == onnx.TensorProto.EXTERNAL
               for t in onnx.load(full + "/model.onnx",
                                  load_external_data=False).graph.initializer)
copy = onnx.load(full + "/model.onnx")  # its external data read in
same = all(np.array_equal(numpy_helper.to_array(t), source[t.name])
           for t in copy.graph.initializer)
print("model.onnx: %d of %d initializers in init.safetensors, all equal "
      "to the model's: %s" % (external, len(source), same))
assert external > 0 and same

# --no-weights: the weights are in neither file.
withheld = plan_apart["trainer"]["weights_withheld"]
params = [b["name"] for b in plan["buffers"] if b["kind"] == "param"]
states = [b["name"] for b in plan["buffers"] if b["kind"] == "state" and
          b["name"] in source]
print("--no-weights: %d withheld (%d parameters, %d buffers), "
      "init.safetensors %d bytes, model.onnx %d bytes" % (
          len(withheld), len(params), len(states),
          size(apart + "/init.safetensors"), size(apart + "/model.onnx")))
assert sorted(withheld) == sorted(params + states)
assert size(apart + "/init.safetensors") < 4096

# One step's inputs.
trainer = plan["trainer"]
data_input = [b for b in plan["buffers"]
              if b["name"] == "input." + trainer["data_input"]][0]
rng = np.random.default_rng(3)
inputs = os.path.join(work, "inputs")
os.makedirs(inputs, exist_ok=True)
tokens = rng.integers(0, 256, size=data_input["shape"]).astype(np.int64)
np.save(os.path.join(inputs, trainer["data_input"] + ".npy"), tokens)
np.save(os.path.join(inputs, trainer["label_input"] + ".npy"),
        np.roll(tokens, -1, axis=1))


def step(artifact, out, *flags, expect_ok=True):
    r = run([os.path.join(artifact, "train"), "--run-step", inputs,
             "--output-dir", out, "--seed", "5"] + list(flags),
            expect_ok=expect_ok)
    return r


def first_error(r):
    return [line for line in r.stderr.splitlines()
            if line.startswith("train:")][0]


print(first_error(step(apart, work + "/none", expect_ok=False)))

# The weights as a state_dict of the module that wraps the exported one:
# every name one component longer, every other tensor F64, an extra tensor.
initial = safetensors_read.read(full + "/init.safetensors")
weights = {"model." + n: initial.get(n, np.zeros(
    [b["shape"] for b in plan["buffers"] if b["name"] == n][0], np.float32))
    for n in withheld}
dtypes = {n: "F64" for i, n in enumerate(sorted(weights)) if i % 2}
weights["model.rotary.inv_freq"] = np.arange(4, dtype=np.float32)
given = os.path.join(work, "weights.safetensors")
write_safetensors(given, weights, dtypes)

step(full, work + "/ref")
r = step(apart, work + "/got", "--init", given)
print([l for l in r.stderr.splitlines() if l.startswith("initial")])
ref = sorted(os.listdir(work + "/ref"))
assert ref == sorted(os.listdir(work + "/got"))
differ = [f for f in ref if not np.array_equal(
    np.load(os.path.join(work, "ref", f)), np.load(os.path.join(work, "got", f)))]
print("--init: %d outputs and state tensors, %d differ from the artifact "
      "with weights" % (len(ref), len(differ)))
assert not differ

# Mixed precision: the weights' bf16 copies are withheld too, and rounded
# from what --init gives.
compile_model(full + "-bf16", "--precision", "bf16")
bf16 = compile_model(apart + "-bf16", "--precision", "bf16", "--no-weights")
copies = [n for n in bf16["trainer"]["weights_withheld"]
          if n.endswith(".bf16")]
step(full + "-bf16", work + "/ref-bf16")
step(apart + "-bf16", work + "/got-bf16", "--init", given)
differ = [f for f in os.listdir(work + "/ref-bf16") if not np.array_equal(
    np.load(os.path.join(work, "ref-bf16", f)),
    np.load(os.path.join(work, "got-bf16", f)))]
print("bf16: %d weight copies withheld, init.safetensors %d bytes; --init: "
      "%d of %d outputs and state tensors differ" % (
          len(copies), size(apart + "-bf16/init.safetensors"), len(differ),
          len(os.listdir(work + "/ref-bf16"))))
assert copies and not differ

# F16 weights convert, and round as F16 does.
write_safetensors(work + "/half.safetensors", weights,
                  {n: "F16" for n in weights})
step(apart, work + "/half", "--init", work + "/half.safetensors")
loss_ref = float(np.load(work + "/ref/loss.npy"))
loss_half = float(np.load(work + "/half/loss.npy"))
print("F16 weights: loss %.6f vs %.6f" % (loss_half, loss_ref))
assert abs(loss_half - loss_ref) < 1e-2 * abs(loss_ref)

# What is refused.
victim = sorted(n for n in weights if n.endswith(".weight"))[0]


def refused(label, tensors, dtypes=None, raw=None):
    path = os.path.join(work, label + ".safetensors")
    if raw is not None:
        with open(path, "wb") as f:
            f.write(raw)
    else:
        write_safetensors(path, tensors, dtypes)
    r = step(apart, work + "/" + label, "--init", path, expect_ok=False)
    assert r.returncode == 1, r
    print(label + ": " + first_error(r).replace(path, "FILE"))


refused("missing", {n: v for n, v in weights.items() if n != victim})
refused("shape", dict(weights, **{victim: weights[victim].T.copy()}))
nan = dict(weights)
nan[victim] = weights[victim].copy()
nan[victim].flat[3] = np.nan
refused("nan", nan)
ambiguous = dict(weights)
ambiguous["other." + victim[len("model."):]] = weights[victim]
refused("ambiguous", ambiguous)
refused("truncated", None, raw=open(given, "rb").read()[:1000])

# Training from --init, then --export-onnx: the same model as the artifact
# with weights trains and exports, initializer for initializer.
corpus = os.path.join(work, "corpus.txt")
with open(corpus, "wb") as f:
    f.write(bytes(rng.integers(32, 127, size=20000).astype(np.uint8)))
common = ["--data", corpus, "--epochs", "1", "--limit-train", "40",
          "--quiet", "--seed", "2"]
run([full + "/train"] + common + ["--export-onnx", work + "/full.onnx"])
r = run([apart + "/train"] + common + ["--init", given, "--export-onnx",
                                       work + "/apart.onnx"])
exported = {}
for name in ("full", "apart"):
    m = onnx.load(os.path.join(work, name + ".onnx"))
    assert all(t.data_location != onnx.TensorProto.EXTERNAL
               for t in m.graph.initializer)
    exported[name] = {t.name: numpy_helper.to_array(t)
                      for t in m.graph.initializer}
equal = all(np.array_equal(exported["full"][n], exported["apart"][n])
            for n in exported["full"])
print("--export-onnx: %d initializers inline, trained from --init equal to "
      "trained from the artifact's own: %s" % (len(exported["full"]), equal))
assert equal and exported["full"].keys() == exported["apart"].keys()

# The artifact's model.onnx is a model gpuc compiles again, reading its
# weights from init.safetensors.
again = compile_model(work + "/again", model=full + "/model.onnx")
print("the artifact's model.onnx compiles again: %s" % (
    json.dumps(again["buffers"]) == json.dumps(plan["buffers"])))
