"""Holds a checkpoint directory's lock, as a running trainer does, for
SECONDS while it runs a command; prints the command's exit status and what
it said on stderr, for FileCheck.

    hold_lock.py LOCK_FILE SECONDS COMMAND...
"""
import fcntl
import os
import subprocess
import sys
import threading

path, seconds = sys.argv[1], float(sys.argv[2])
os.makedirs(os.path.dirname(path), exist_ok=True)
lock = open(path, "w")
fcntl.flock(lock, fcntl.LOCK_EX)
lock.write("%d\n" % os.getpid())
lock.flush()
release = threading.Timer(seconds, lambda: fcntl.flock(lock, fcntl.LOCK_UN))
release.start()
done = subprocess.run(sys.argv[3:], stdout=subprocess.DEVNULL,
                      stderr=subprocess.PIPE, text=True)
release.cancel()
print("exit status %d" % done.returncode)
print(done.stderr.strip())
