"""Runs a trainer command and sends it a signal after the line of its 5th
step (`--log-every 1`), or after the first line starting with LINE; prints
the exit status and what the trainer said on stderr, for FileCheck.

    interrupt.py SIGINT|SIGTERM|SIGKILL [--after LINE] TRAIN ARGS...
"""
import signal
import subprocess
import sys

sig = getattr(signal, sys.argv[1])
command, after = sys.argv[2:], "epoch 1 step 5 "
if command[0] == "--after":
    after, command = command[1], command[2:]
trainer = subprocess.Popen(command, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
for line in trainer.stdout:
    if line.startswith(after):
        trainer.send_signal(sig)
        break
_, err = trainer.communicate(timeout=120)
print("exit status %d" % trainer.returncode)
print(err.strip())
