"""Checks a `train --profile` trace against the plan it ran.

    profile_trace.py TRACE.json PLAN.json [--loader]

The trace is Chrome's trace-event JSON: every step of train_step in the plan
(kernels by name, library calls and copies by op) appears as a complete
event ("ph": "X") on the device track, with the plan's bytes and FLOPs and a
non-negative duration, in the order of the plan within each run; the host's
training steps are on their own track; with --loader, so are the loader's
waits.
"""
import json
import math
import sys


def step_bytes(step):
    """The plan's bytes; for a library call, its operands and result once."""
    moved = step.get("bytes_read", 0) + step.get("bytes_written", 0)
    if moved or step["op"] == "kernel":
        return moved
    element = 4 if step.get("dtype", "F32") == "F32" else 2
    if "m" in step:
        m, n, k = step["m"], step["n"], step["k"]
        return element * step.get("batch", 1) * (m * k + k * n + m * n)
    if "x_shape" in step:
        return element * sum(math.prod(step[key])
                             for key in ("x_shape", "w_shape", "y_shape"))
    return 0


def main():
    trace = json.load(open(sys.argv[1]))
    plan = json.load(open(sys.argv[2]))
    loader = "--loader" in sys.argv[3:]
    events = trace["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in events
             if e.get("ph") == "M" and e["name"] == "thread_name"}
    assert names == {1: "device steps", 2: "training steps (host)",
                     3: "loader wait (host)"}, names
    device = [e for e in events if e.get("ph") == "X" and e["tid"] == 1]
    for e in events:
        if e.get("ph") == "X":
            assert e["dur"] >= 0 and e["ts"] > 0, e
    steps = plan["functions"]["train_step"]["steps"]
    expected = [s["kernel"] if s["op"] == "kernel" else s["op"] for s in steps]
    ran = {}
    for e in device:
        if e["args"]["function"] == "train_step":
            ran.setdefault(e["args"]["step"], []).append(e)
    assert sorted(ran) == list(range(len(steps))), (sorted(ran), len(steps))
    for index, runs in ran.items():
        step = steps[index]
        for e in runs:
            assert e["name"] == expected[index], (e["name"], expected[index])
            assert e["cat"] == ("kernel" if step["op"] == "kernel" else
                                "copy" if step["op"] == "copy" else "library")
            assert e["args"]["flops"] == step.get("flops", 0), e
            assert e["args"]["bytes"] == step_bytes(step), (e, step)
    # Within one run, the steps follow the plan's order in time.
    first = [min(ran[i], key=lambda e: e["ts"]) for i in sorted(ran)]
    assert all(a["ts"] <= b["ts"] for a, b in zip(first, first[1:]))
    host = [e for e in events if e.get("ph") == "X" and e["tid"] == 2]
    assert host and all(e["name"].startswith("step ") for e in host), host
    waits = [e for e in events if e.get("ph") == "X" and e["tid"] == 3]
    assert bool(waits) == loader, (len(waits), loader)
    assert all(e["name"] == "loader wait" for e in waits)
    print("trace ok: %d device events over %d steps, %d host steps, "
          "%d loader waits" % (len(device), len(ran), len(host), len(waits)))


if __name__ == "__main__":
    main()
