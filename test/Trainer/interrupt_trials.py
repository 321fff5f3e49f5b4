#!/usr/bin/env python3
"""Interrupts a 2-epoch training run at random points, resumes it until it
completes, and checks that the result is the uninterrupted run's.

    interrupt_trials.py --trials N [--signals SIGKILL,SIGINT] [--seed S]
                        TRAIN ARGS...

TRAIN ARGS is a trainer command without --checkpoint-dir, --metrics and
--resume (the script adds them, --resume to every run). For each signal, N trials: the run is
started, sent the signal after a random delay within the uninterrupted
run's duration, then resumed with --resume (again and again, each resume
also interrupted with probability 1/2) until it exits 0. A trial passes
when its final checkpoint is byte-identical to the uninterrupted run's and
its metrics file holds the same lines, each once (timing fields aside).
Prints one line per signal and exits non-zero on any failed trial.
"""
import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time


def metrics_lines(path):
    """The metrics file's records without their timing fields."""
    lines = []
    if os.path.exists(path):
        for line in open(path):
            record = json.loads(line)
            for key in ("samples_per_s", "tokens_per_s", "elapsed_s",
                        "data_wait_ms", "data_wait_share"):
                record.pop(key, None)
            lines.append(json.dumps(record, sort_keys=True))
    return lines


def run(cmd, directory, delay, sig):
    """Runs `cmd` writing into `directory`; with a delay, sends `sig` then."""
    # --resume every time, as a job script would: before the first
    # checkpoint it starts the run afresh.
    args = cmd + ["--checkpoint-dir", directory, "--metrics",
                  os.path.join(directory, "metrics.jsonl"), "--quiet",
                  "--resume"]
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    if delay is not None:
        try:
            p.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            p.send_signal(sig)
    _, err = p.communicate(timeout=600)
    return p.returncode, err


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--signals", default="SIGKILL,SIGINT")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    work = tempfile.mkdtemp(prefix="gpuc-interrupt-")
    failed = False
    try:
        reference = os.path.join(work, "reference")
        os.makedirs(reference)
        start = time.time()
        rc, err = run(args.command, reference, None, None)
        duration = time.time() - start
        if rc != 0:
            sys.exit("the uninterrupted run failed (%d): %s" % (rc, err))
        want = open(os.path.join(reference, "checkpoint.safetensors"),
                    "rb").read()
        want_metrics = metrics_lines(os.path.join(reference, "metrics.jsonl"))
        for name in args.signals.split(","):
            sig = getattr(signal, name)
            identical = interruptions = 0
            for trial in range(args.trials):
                directory = os.path.join(work, "%s-%d" % (name, trial))
                os.makedirs(directory)
                delay = rng.uniform(0.05, duration)
                for attempt in range(50):
                    rc, err = run(args.command, directory, delay, sig)
                    if rc == 0:
                        break
                    interruptions += 1
                    expected = 128 + sig if sig != signal.SIGKILL else -sig
                    if rc != expected:
                        print("  %s trial %d: exit status %d: %s" %
                              (name, trial, rc, err.strip()[-300:]))
                        failed = True
                        break
                    delay = rng.uniform(0.05, duration) \
                        if rng.random() < 0.5 else None
                got = open(os.path.join(directory,
                                        "checkpoint.safetensors"), "rb").read()
                lines = metrics_lines(os.path.join(directory,
                                                   "metrics.jsonl"))
                if got == want and lines == want_metrics:
                    identical += 1
                else:
                    failed = True
                    print("  %s trial %d: %s" % (
                        name, trial, "checkpoint differs" if got != want
                        else "metrics differ: %d lines, %d expected, %d "
                        "repeated" % (len(lines), len(want_metrics),
                                      len(lines) - len(set(lines)))))
            print("%s: %d trials, %d interruptions, %d ended identical to "
                  "the uninterrupted run" % (name, args.trials, interruptions,
                                             identical), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
