#!/usr/bin/env python3
"""Where a training step's GPU time goes, by kind of work: a `train
--profile` trace (each launch timed on its own) read beside its artifact's
plan.json, whose steps say what each launch computes.

    out/train --device cuda --bench-steps 2 --init W.safetensors \\
        --profile trace.json
    bench/trace_breakdown.py out trace.json

prints milliseconds a step (each step's traced runs averaged) and GB/s
for each kind, then the launches that take the most: library GEMMs and
convolutions by op; the fused attention's forward and each launch of its
gradient; kernels with reductions (row and column kernels, split ones by
launch, or cuDNN's fused attention in their place); optimizer updates
(elementwise kernels that take a square root);
and the other elementwise kernels. The GPU bundle's scale phase writes
such traces (trace-ARTIFACT.json) beside its artifacts.

Usage: bench/trace_breakdown.py ARTIFACT_DIR TRACE_JSON [--top N]
"""
import argparse
import collections
import json
import os
import sys

REDUCTIONS = ("reduce_sum", "reduce_mean", "reduce_max")


def kind_of(step):
    """The kind of work a plan step does."""
    if step.get("op") != "kernel":
        return step.get("op", "?")
    ops = step.get("ops", [])
    launch = step.get("launch")
    phase = " (launch %d of %d)" % (launch[0], launch[1]) if launch else ""
    if "attention_grad" in ops:
        return "attention gradient" + phase
    if "attention" in ops:
        return "attention forward"
    if any(op in ops for op in REDUCTIONS):
        return "reductions (row and column kernels)"
    # (A tied embedding's update also sums each row's token positions.)
    if "sqrt" in ops:
        return "optimizer updates"
    if "segment_sum" in ops:
        return "reductions (row and column kernels)"
    return "elementwise"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("artifact", help="the artifact directory (its plan.json)")
    p.add_argument("trace", help="a train --profile trace")
    p.add_argument("--top", type=int, default=15,
                   help="launches to list, most time first")
    args = p.parse_args()
    with open(os.path.join(args.artifact, "plan.json")) as f:
        plan = json.load(f)
    with open(args.trace) as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    steps = {}
    for function, body in plan["functions"].items():
        steps[function] = body["steps"]
    launches = [e for e in events
                if e.get("ph") == "X" and isinstance(e.get("args"), dict)]
    if not launches:
        sys.exit("%s: no timed launches (record it with train --profile)" %
                 args.trace)
    # A training step's launches are each function's plan steps once; the
    # trace holds as many training steps as each step index recurs.
    recurs = collections.Counter(
        (e["args"].get("function"), e["args"].get("step")) for e in launches)
    step_count = max(recurs.values())
    by_kind = collections.defaultdict(lambda: [0.0, 0.0, 0])
    by_launch = collections.defaultdict(lambda: [0.0, 0.0, 0, ""])
    mismatched = 0
    for e in launches:
        function, index = e["args"].get("function"), e["args"].get("step")
        body = steps.get(function, [])
        step = body[index] if isinstance(index, int) and index < len(
            body) else None
        name = e["name"]
        # cuDNN's fused attention in a kernel's place: "cudnn attention
        # (k4)" on its first launch, "k23_p1 (in cudnn attention)" on the
        # others, which launch nothing.
        library = name.startswith("cudnn attention (")
        launch_name = name
        if library and step is not None:
            launch_name = step.get("kernel")
        elif name.endswith(" (in cudnn attention)"):
            continue
        if step is None or step.get("kernel", step.get("op")) != launch_name:
            # A trace of another build of the plan: the name alone says
            # whether it ran a library op.
            mismatched += 1
            step = {"op": name} if not name.startswith("k") else {"op": "?"}
        kind = kind_of(step)
        if library:
            kind = kind.split(" (launch")[0] + " (cuDNN)"
        ms = e["dur"] / 1000.0 / step_count
        gb = e["args"].get("bytes", 0) / 1e9 / step_count
        by_kind[kind][0] += ms
        by_kind[kind][1] += gb
        by_kind[kind][2] += 1
        row = by_launch[name]
        row[0] += ms
        row[1] += gb
        row[2] += 1
        row[3] = kind
    total = sum(v[0] for v in by_kind.values())
    print("%s: %.3f ms a step on the device (the average of %d traced "
          "runs of each step)" % (args.trace, total, step_count))
    if mismatched:
        print("(%d launches do not match %s's plan: an older build?)" % (
            mismatched, args.artifact))
    print("%-42s %9s %6s %9s %6s" % ("kind", "ms", "share", "GB/s",
                                      "runs"))
    for kind, (ms, gb, runs) in sorted(by_kind.items(),
                                       key=lambda kv: -kv[1][0]):
        print("%-42s %9.3f %5.1f%% %9.0f %6d" % (
            kind, ms, 100.0 * ms / total, gb / (ms / 1000.0) if ms else 0,
            runs // step_count))
    print("\n%-12s %9s %9s %6s  %s" % ("launch", "ms", "GB/s", "runs",
                                         "kind"))
    for name, (ms, gb, runs, kind) in sorted(
            by_launch.items(), key=lambda kv: -kv[1][0])[:args.top]:
        print("%-12s %9.3f %9.0f %6d  %s" % (
            name, ms, gb / (ms / 1000.0) if ms else 0, runs // step_count,
            kind))


if __name__ == "__main__":
    main()
