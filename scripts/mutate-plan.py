#!/usr/bin/env python3
"""Single-value edits of a CPU artifact's plan.json, each run through the
artifact's trainer (one short epoch): counts the runs that crash (a signal,
an abort, or a failure without the trainer's one-line error) and prints
them. A damaged plan must be an error naming plan.json.

    scripts/mutate-plan.py ARTIFACT [--runs 150] [--seed 0]
        [--data /usr/share/datasets/fashion-mnist]

ARTIFACT: a `gpuc compile ... --target cpu` output (small: the MLP at
--batch 8). The edits go to a copy; the artifact is not touched.
"""
import argparse
import json
import os
import random
import shutil
import subprocess
import tempfile

VALUES = [-1, 0, 2**40, 2**63 - 1, -2**31, 1.5, "x", None, True, [], {}]


def leaves(value, path, out):
    if isinstance(value, dict):
        for k, v in value.items():
            leaves(v, path + [k], out)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            leaves(v, path + [i], out)
    else:
        out.append(path)
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("artifact")
    p.add_argument("--runs", type=int, default=150)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    args = p.parse_args()
    base = json.load(open(os.path.join(args.artifact, "plan.json")))
    paths = leaves(base, [], [])
    rng = random.Random(args.seed)
    crashes, refused = [], 0
    with tempfile.TemporaryDirectory() as work:
        copy = os.path.join(work, "artifact")
        shutil.copytree(args.artifact, copy)
        for _ in range(args.runs):
            path, value = rng.choice(paths), rng.choice(VALUES)
            plan = json.loads(json.dumps(base))
            node = plan
            for key in path[:-1]:
                node = node[key]
            node[path[-1]] = value
            json.dump(plan, open(os.path.join(copy, "plan.json"), "w"))
            try:
                r = subprocess.run(
                    [os.path.join(copy, "train"), "--data", args.data,
                     "--limit-train", "16", "--epochs", "1", "--quiet"],
                    capture_output=True, text=True, timeout=120)
                rc, err = r.returncode, r.stderr
            except subprocess.TimeoutExpired:
                rc, err = "timeout", ""
            if rc == 0:
                continue
            if rc == 1 and "train: " in err:
                refused += 1
                continue
            crashes.append((path, value, rc, err.strip()[-200:]))
    print("%d runs: %d refused with an error, %d accepted, %d crashed"
          % (args.runs, refused, args.runs - refused - len(crashes),
             len(crashes)))
    for c in crashes:
        print("crash: %s = %r: exit %s: %s" % c)
    return 1 if crashes else 0


if __name__ == "__main__":
    raise SystemExit(main())
