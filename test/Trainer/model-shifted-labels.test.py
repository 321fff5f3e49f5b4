"""A model that computes its own next-token loss, as Hugging Face's causal
LMs do (`model(input_ids=x, labels=x).loss`: the labels padded at the end
with the ignored index, then labels[:, 1:]), trains on a token file whose
windows are labelled with themselves; one that reads its labels as given
gets the tokens that follow. Each first step's loss is checked against
numpy's under both conventions. The held-out split is scored from the
logits, each against the token after it, whichever labels the model
trains on.

usage: model-shifted-labels.test.py GPUC WORK"""
import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

gpuc, work = sys.argv[1:3]
os.makedirs(work, exist_ok=True)
vocab, batch, window = 16, 4, 8
rng = np.random.default_rng(0)
table = rng.standard_normal((vocab, vocab)).astype(np.float32)
stream = rng.integers(0, vocab, batch * window + 1)
np.save(os.path.join(work, "tokens.npy"), stream)


def model(path, shifts, logits_out=False):
    """logits = table[tokens]; the loss over the labels, shifted or not
    (and the logits as an output too, to be evaluated)."""
    int64 = TensorProto.INT64
    nodes = [helper.make_node("Gather", ["table", "tokens"], ["logits"]),
             helper.make_node("Reshape", ["logits", "rows"], ["scores"])]
    labels = "labels"
    if shifts:
        nodes += [helper.make_node("Pad", ["labels", "pads", "ignored"],
                                   ["padded"]),
                  helper.make_node("Slice", ["padded", "one", "end", "axis"],
                                   ["shifted"])]
        labels = "shifted"
    nodes += [helper.make_node("Reshape", [labels, "flat"], ["targets"]),
              helper.make_node("SoftmaxCrossEntropyLoss",
                               ["scores", "targets"], ["loss"],
                               ignore_index=-100)]
    constants = [numpy_helper.from_array(table, "table"),
                 numpy_helper.from_array(np.array([-1, vocab]), "rows"),
                 numpy_helper.from_array(np.array([-1]), "flat"),
                 numpy_helper.from_array(np.array([0, 0, 0, 1]), "pads"),
                 numpy_helper.from_array(np.array(-100), "ignored"),
                 numpy_helper.from_array(np.array([1]), "one"),
                 numpy_helper.from_array(np.array([window + 1]), "end"),
                 numpy_helper.from_array(np.array([1]), "axis")]
    graph = helper.make_graph(
        nodes, "lm",
        [helper.make_tensor_value_info("tokens", int64, ["b", window]),
         helper.make_tensor_value_info("labels", int64, ["b", window])],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])] +
        ([helper.make_tensor_value_info("logits", TensorProto.FLOAT,
                                        ["b", window, vocab])]
         if logits_out else []),
        constants)
    onnx.save(helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def loss_of(tokens, labels):
    """Mean cross-entropy of table[tokens] against labels (-100 ignored)."""
    scores = table[tokens].astype(np.float64)
    logp = scores - np.log(np.exp(scores).sum(-1, keepdims=True))
    kept = labels != -100
    return -np.take_along_axis(logp, np.where(kept, labels, 0)[..., None],
                               -1)[..., 0][kept].mean()


windows = stream[:batch * window].reshape(batch, window)
following = stream[1:batch * window + 1].reshape(batch, window)
ignored = np.full((batch, 1), -100)
expected = {
    # The model shifts: labels[:, 1:] of the window itself, the last ignored.
    True: loss_of(windows, np.concatenate([windows[:, 1:], ignored], 1)),
    False: loss_of(windows, following)}
other = {True: loss_of(windows, np.concatenate([following[:, 1:], ignored],
                                               1)),
         False: expected[True]}
for shifts in (True, False):
    name = "shifts" if shifts else "as-given"
    path = os.path.join(work, name + ".onnx")
    model(path, shifts)
    out = os.path.join(work, name)
    subprocess.run([gpuc, "compile", path, "--batch", str(batch), "--labels",
                    "labels", "--target", "cpu", "-o", out], check=True,
                   stdout=subprocess.DEVNULL)
    with open(os.path.join(out, "plan.json")) as f:
        flag = json.load(f)["trainer"].get("labels_shifted_by_model", False)
    metrics = os.path.join(work, name + ".jsonl")
    run = subprocess.run([os.path.join(out, "train"), "--data",
                          os.path.join(work, "tokens.npy"), "--held-out", "0",
                          "--epochs", "1", "--metrics", metrics],
                         capture_output=True, text=True)
    said = [line for line in run.stdout.splitlines()
            if line.startswith("training on")]
    with open(metrics) as f:
        loss = json.loads(f.readline())["loss"]
    print("%s: plan says the model shifts: %s; %s; first loss %.6f, "
          "expected %.6f (the other convention %.6f): %s" %
          (name, flag, said[0].split("; ")[-1] if said else run.stderr,
           loss, expected[shifts], other[shifts],
           abs(loss - expected[shifts]) < 1e-5 and
           abs(loss - other[shifts]) > 1e-3))

# Evaluated from its logits (beside its own loss): the held-out windows
# against the tokens that follow, at a learning rate too small to move
# the weights.
path = os.path.join(work, "evaluated.onnx")
model(path, True, logits_out=True)
out = os.path.join(work, "evaluated")
subprocess.run([gpuc, "compile", path, "--batch", str(batch), "--labels",
                "labels", "--target", "cpu", "-o", out], check=True,
               stdout=subprocess.DEVNULL)
longer = rng.integers(0, vocab, 2 * batch * window + 1)
np.save(os.path.join(work, "longer.npy"), longer)
metrics = os.path.join(work, "evaluated.jsonl")
run = subprocess.run([os.path.join(out, "train"), "--data",
                      os.path.join(work, "longer.npy"), "--held-out", "0.5",
                      "--epochs", "1", "--lr", "1e-30", "--metrics", metrics],
                     capture_output=True, text=True)
held = None
with open(metrics) as f:
    for line in f:
        record = json.loads(line)
        held = record.get("val_loss", held)
begin = len(longer) - int(len(longer) * 0.5)
count = (int(len(longer) * 0.5) - 1) // window
test = longer[begin:begin + count * window].reshape(count, window)
after = longer[begin + 1:begin + count * window + 1].reshape(count, window)
expected = loss_of(test, after)
print("evaluated: held-out loss %s, the next tokens' %.6f, the windows' own "
      "%.6f: %s" % (held, expected, loss_of(test, test),
                    held is not None and abs(held - expected) < 1e-5))
