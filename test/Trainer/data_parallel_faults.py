"""Stops one rank of a two-rank training run and checks that the run ends
with an error naming what happened, within a time limit, instead of
hanging.

    data_parallel_faults.py kill|stop|term [--after FILE] MPIRUN... -- TRAIN ARGS...

kill: rank 1 gets SIGKILL (a crashed or killed process); mpirun must end the
job. stop: rank 1 gets SIGSTOP (a hung process); rank 0's collective
timeout must end it. term: mpirun gets SIGTERM (as from Ctrl-C or a
scheduler), which it passes on to the ranks; they stop at one step. With --after, the signal waits
until FILE (the run's --metrics) has a line: training has begun. Prints the
run's exit status, the seconds it took after the signal and its error
output, for FileCheck.
"""
import os
import signal
import subprocess
import sys
import time

mode = sys.argv[1]
first = 2
after = None
if sys.argv[2] == "--after":
    after, first = sys.argv[3], 4
split = sys.argv.index("--")
command = sys.argv[first:split] + sys.argv[split + 1:]
run = subprocess.Popen(command, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True,
                       start_new_session=True)


def rank_process(rank):
    """The pid of the trainer process of `rank` (from its environment)."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv0 = f.read().split(b"\0")[0]
        except OSError:
            continue
        if (f"OMPI_COMM_WORLD_RANK={rank}".encode() in env
                and argv0.endswith(b"/train")
                and os.getsid(int(pid)) == run.pid):
            return int(pid)
    return None


# Wait until rank 1 is training (its process exists and has run a while).
deadline = time.time() + 60
victim = None
while time.time() < deadline and run.poll() is None:
    victim = rank_process(1)
    if victim:
        break
    time.sleep(0.1)
if not victim:
    run.kill()
    sys.exit("rank 1 never started")
time.sleep(2.0)
while after and run.poll() is None and time.time() < deadline + 60:
    if os.path.exists(after) and open(after).read().strip():
        break
    time.sleep(0.1)
if mode == "term":
    os.kill(run.pid, signal.SIGTERM)
else:
    os.kill(victim, signal.SIGKILL if mode == "kill" else signal.SIGSTOP)
signalled = time.time()
try:
    _, err = run.communicate(timeout=120)
except subprocess.TimeoutExpired:
    os.killpg(run.pid, signal.SIGKILL)
    sys.exit("the run still hangs 120 s after rank 1 was stopped")
seconds = time.time() - signalled
print(f"exit status {run.returncode}")
print(f"ended {'within' if seconds < 60 else 'after'} 60 s ({seconds:.1f} s)")
print(err)
