"""Copies a CPU artifact, sets one value of its plan.json (a path of keys
and list indices, then a JSON value), runs one short epoch of its trainer
and prints the exit status and the trainer's last line on stderr: a
damaged plan must give an error naming plan.json, never a crash.

    damage_plan.py ARTIFACT WORKDIR DATA KEY... VALUE
"""
import json
import os
import shutil
import subprocess
import sys

artifact, work, data = sys.argv[1:4]
keys, value = sys.argv[4:-1], json.loads(sys.argv[-1])
shutil.rmtree(work, ignore_errors=True)
shutil.copytree(artifact, work)
plan = json.load(open(os.path.join(work, "plan.json")))
node = plan
for key in keys[:-1]:
    node = node[int(key)] if isinstance(node, list) else node[key]
last = keys[-1]
node[int(last) if isinstance(node, list) else last] = value
json.dump(plan, open(os.path.join(work, "plan.json"), "w"))
r = subprocess.run([os.path.join(work, "train"), "--data", data,
                    "--limit-train", "16", "--epochs", "1", "--quiet"],
                   capture_output=True, text=True, timeout=300)
print("exit status %d" % r.returncode)
print((r.stderr.strip().splitlines() or [""])[-1])
