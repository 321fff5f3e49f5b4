"""Reads a --tensorboard directory with TensorBoard's own reader and checks
its scalars against the run's --metrics file: every metrics value appears
under its tag at its step, once (a resumed run's repeated steps included).

    read_events.py LOGDIR METRICS.jsonl

Prints each tag with its steps, for FileCheck.
"""
import json
import math
import sys

from tensorboard.backend.event_processing.event_accumulator import \
    EventAccumulator

events = EventAccumulator(sys.argv[1], size_guidance={"scalars": 0})
events.Reload()
tags = sorted(events.Tags()["scalars"])
scalars = {tag: events.Scalars(tag) for tag in tags}
for tag in tags:
    print(tag, "steps", " ".join(str(e.step) for e in scalars[tag]))

# The metrics file's names for the event tags.
names = {"loss": "train/loss", "samples_per_s": "train/samples_per_s",
         "data_wait_ms": "train/data_wait_ms",
         "data_wait_share": "train/data_wait_share",
         "test_accuracy": "test/accuracy"}
checked = 0
for line in open(sys.argv[2]):
    record = json.loads(line)
    for name, tag in names.items():
        if name not in record:
            continue
        found = [e.value for e in scalars.get(tag, [])
                 if e.step == record["step"]]
        if len(found) != 1:
            sys.exit("%s at step %d: %d events, not 1" %
                     (tag, record["step"], len(found)))
        # Events hold float32; the metrics file rounds some values.
        if not math.isclose(found[0], record[name], rel_tol=1e-3,
                            abs_tol=1e-3):
            sys.exit("%s at step %d: %r in the events, %r in the metrics" %
                     (tag, record["step"], found[0], record[name]))
        checked += 1
print("%d metrics values match the events" % checked)
