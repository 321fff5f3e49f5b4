"""Checks of loss-scale.test: the metrics' loss_scale/skipped_steps per
step, and checkpoints against the initial values."""
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_read import read  # noqa: E402


def steps(path):
    with open(path) as f:
        lines = [json.loads(line) for line in f]
    return [line for line in lines if "loss_scale" in line]


def power(x):
    e = math.log2(x)
    assert e == int(e), x
    return "2^%d" % e


def skipped(init_path, ckpt_path, metrics):
    lines = steps(metrics)
    assert [line["skipped_steps"] for line in lines] == [1, 2, 3], lines
    print("%d steps skipped, loss scale %s" % (
        len(lines), " ".join(power(line["loss_scale"]) for line in lines)))
    init, ckpt = read(init_path), read(ckpt_path)
    same = 0
    for name, value in ckpt.items():
        if name.startswith("amp."):
            continue
        # Parameters keep their initial bits; optimizer state (absent from
        # init.safetensors) stays zero, the step counter too.
        expected = init.get(name, np.zeros_like(value))
        assert value.tobytes() == expected.astype(value.dtype).tobytes(), name
        same += 1
    assert float(ckpt["amp.loss_scale"]) == 2.0 ** 37
    assert float(ckpt["amp.skipped_steps"]) == 3
    print("parameters and optimizer state bit-identical to the initial "
          "values: %d tensors" % same)


def recovers(init_path, ckpt_path, metrics):
    lines = steps(metrics)
    skips = [line["skipped_steps"] for line in lines]
    scales = [line["loss_scale"] for line in lines]
    # Every step: a skip halves the scale, a clean step keeps it (the growth
    # interval, 2000, is not reached).
    previous_skips, previous_scale = 0, 2.0 ** 40
    for skip, scale in zip(skips, scales):
        assert skip in (previous_skips, previous_skips + 1), skips
        expected = previous_scale * (0.5 if skip > previous_skips else 1.0)
        assert scale == expected, (scales, skips)
        previous_skips, previous_scale = skip, scale
    first_clean = next(i for i in range(len(skips)) if skips[i] == i)
    clean = len(skips) - skips[-1]
    assert clean >= 10 and skips[-1] - first_clean <= 3, skips
    print("the scale halved on each of the first %d steps, then %d of %d "
          "steps were clean (final scale %s)" % (
              first_clean, clean, len(skips) - first_clean, power(scales[-1])))
    init, ckpt = read(init_path), read(ckpt_path)
    moved = [n for n in init if not np.array_equal(init[n], ckpt[n])]
    assert len(moved) == len(init), (moved, list(init))
    losses = [line["loss"] for line in lines]
    first, last = np.mean(losses[:5]), np.mean(losses[-5:])
    assert last < first, (first, last)
    print("the parameters moved; the loss fell from %.3f to %.3f" % (first,
                                                                     last))


def grows(metrics):
    lines = steps(metrics)
    assert all(line["skipped_steps"] == 0 for line in lines), lines
    print("loss scale per step: %s, no step skipped" % " ".join(
        power(line["loss_scale"]) for line in lines))


if __name__ == "__main__":
    {"skipped": skipped, "recovers": recovers, "grows": grows}[sys.argv[1]](
        *sys.argv[2:])
