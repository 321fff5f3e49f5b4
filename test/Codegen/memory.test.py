"""Checks report.json's memory against plan.json and the SVG's shape."""
import json
import sys
import xml.etree.ElementTree as ET

out = sys.argv[1]
report = json.load(open(out + "/report.json"))
plan = json.load(open(out + "/plan.json"))
memory = report["memory"]

# Bytes by kind are the plan's buffers summed.
params = sum(b["bytes"] for b in plan["buffers"] if b["kind"] == "param")
assert params == memory["parameters"], (params, memory)
print("parameters", memory["parameters"], "optimizer_state",
      memory["optimizer_state"], "model_state", memory["model_state"])

step = plan["functions"]["train_step"]
assert memory["arena_peak"] == step["arena_peak"]
assert memory["lower_bound"] <= memory["arena_peak"] <= 1.05 * memory["lower_bound"], memory
print("peak within 1.05 of the lower bound")
assert 0 < memory["kept_for_backward"] < memory["arena_peak"]
print("kept for backward: yes")

# No two transients of the step share bytes while both are live (the
# plan's own check, repeated on the serialized plan).
buffers = plan["buffers"]
live = {}
# The launches of a row kernel split across blocks ("launch": [k, n]) are
# one step of the plan.
s = -1
for st in step["steps"]:
    if st.get("launch", [0])[0] == 0:
        s += 1
    ids = list(st.get("args", [])) + [st[k] for k in ("a", "b", "c", "x", "w", "y") if k in st]
    for i in ids:
        if "offset" in buffers[i]:
            first, _ = live.get(i, (s, s))
            live[i] = (first, s)
for i, (a0, a1) in live.items():
    for j, (b0, b1) in live.items():
        if i >= j or a1 < b0 or b1 < a0:
            continue
        lo = max(buffers[i]["offset"], buffers[j]["offset"])
        hi = min(buffers[i]["offset"] + buffers[i]["bytes"], buffers[j]["offset"] + buffers[j]["bytes"])
        # An in-place write shares its operand's bytes at the one step where
        # the operand dies and the result is born.
        if lo < hi:
            assert (a1 == b0 or b1 == a0) and buffers[i]["offset"] == buffers[j]["offset"], (i, j)

svg = ET.parse(out + "/../cnn.svg").getroot()
ns = "{http://www.w3.org/2000/svg}"
titled = [r for r in svg.iter(ns + "rect") if r.find(ns + "title") is not None]
assert len(titled) == len(live), (len(titled), len(live))
assert any("end of forward" in (t.text or "") for t in svg.iter(ns + "text"))
print("svg: one rectangle per arena buffer, forward end marked")
