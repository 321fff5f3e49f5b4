"""Compares the per-step losses (and the final test accuracy, when both
have one) of two runs' --metrics files: the relative difference of each
step's loss must be at most --rtol.

    data_parallel_losses.py A.jsonl B.jsonl --steps N [--rtol R]
"""
import argparse
import json
import sys

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("a")
parser.add_argument("b")
parser.add_argument("--steps", type=int, required=True)
parser.add_argument("--rtol", type=float, default=1e-5)
parser.add_argument("--accuracy-atol", type=float, default=1e-9,
                    help="how far the final test accuracies may differ")
args = parser.parse_args()


def read(path):
    lines = [json.loads(line) for line in open(path)]
    losses = {l["step"]: l["loss"] for l in lines if "loss" in l}
    accuracy = [l["test_accuracy"] for l in lines if "test_accuracy" in l]
    return losses, accuracy[-1] if accuracy else None


(a, accA), (b, accB) = read(args.a), read(args.b)
steps = range(1, args.steps + 1)
missing = [s for s in steps if s not in a or s not in b]
if missing:
    sys.exit(f"steps {missing} have no loss in both runs")
worst = max(abs(a[s] - b[s]) / abs(a[s]) for s in steps)
if worst > args.rtol:
    bad = [(s, a[s], b[s]) for s in steps
           if abs(a[s] - b[s]) / abs(a[s]) > args.rtol]
    sys.exit(f"losses differ by up to {worst:.2e} (> {args.rtol}): {bad[:5]}")
line = f"{args.steps} losses agree within {args.rtol}"
if accA is not None and accB is not None:
    line += f"; test accuracy {accA} = {accB}"
    if abs(accA - accB) > args.accuracy_atol:
        sys.exit(line + ": the test accuracies differ")
print(line)
