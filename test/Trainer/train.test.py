"""Checks a trainer run: metrics JSON lines, accuracy, exported ONNX."""
import json
import sys

import numpy as np
import onnx
from onnx import numpy_helper

metrics, original, trained = sys.argv[1:4]
lines = [json.loads(l) for l in open(metrics)]
steps = [l for l in lines if "loss" in l]
evals = [l for l in lines if "test_accuracy" in l]
assert steps and evals, "no step or evaluation lines in %s" % metrics
for l in steps:
    assert {"epoch", "step", "loss", "samples_per_s"} <= l.keys(), l
assert steps[-1]["loss"] < steps[0]["loss"], "the loss did not fall: %s" % steps
accuracy = evals[-1]["test_accuracy"]
# 100 steps of Adam on 6400 images: well above chance (0.1).
assert accuracy > 0.70, "test accuracy %.4f after 100 steps" % accuracy

a, b = onnx.load(original), onnx.load(trained)
onnx.checker.check_model(b)
before = {t.name: numpy_helper.to_array(t) for t in a.graph.initializer}
after = {t.name: numpy_helper.to_array(t) for t in b.graph.initializer}
assert before.keys() == after.keys()
changed = [n for n in before if not np.array_equal(before[n], after[n])]
assert len(changed) == 6, "changed initializers: %s" % changed
print("metrics ok: %d step lines, accuracy %.4f; %d tensors trained in %s" %
      (len(steps), accuracy, len(changed), trained))
