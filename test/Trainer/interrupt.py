"""Runs a trainer command and sends it a signal after the line of its 5th
step (`--log-every 1`); prints the exit status and what the trainer said on
stderr, for FileCheck.

    interrupt.py SIGINT|SIGTERM TRAIN ARGS...
"""
import signal
import subprocess
import sys

sig = getattr(signal, sys.argv[1])
trainer = subprocess.Popen(sys.argv[2:], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
for line in trainer.stdout:
    if line.startswith("epoch 1 step 5 "):
        trainer.send_signal(sig)
        break
_, err = trainer.communicate(timeout=120)
print("exit status %d" % trainer.returncode)
print(err.strip())
