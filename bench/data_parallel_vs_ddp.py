#!/usr/bin/env python3
"""Data-parallel training steps on the CPU: gpuc under mpirun against
PyTorch DistributedDataParallel, in interleaved rounds.

    python3 bench/data_parallel_vs_ddp.py --preset small --seq 256 --batch 4
    python3 bench/data_parallel_vs_ddp.py --preset tiny --seq 64 --batch 16

The model is examples/gpt.py's nanoGPT-style GPT, exported once. A global
batch of 2 x --batch sequences is trained six ways, each step being
forward, next-token cross-entropy, backward and AdamW:

  gpuc 1 process        one trainer, --threads threads, the whole batch
  gpuc 1 process, dp    the same, compiled with --data-parallel (what data
                        parallelism costs a single process: step time and
                        memory plan)
  gpuc 2 ranks          mpirun -np 2, --batch each, threads split between
                        the ranks, gradients all-reduced over MPI
  gpuc 2 ranks, ZeRO-1  the same with --shard-optimizer: gradients
                        reduce-scattered, each rank updating half of the
                        parameters and AdamW's moments, parameters
                        all-gathered
  torch 1 process       PyTorch eager, the whole batch
  torch DDP 2 ranks     DistributedDataParallel over gloo, --batch each,
                        threads split the same way

Rounds interleave the systems, so a drift of the machine's speed hits all of
them; the load average is printed. Best and median milliseconds per global
step, and gpuc's ratio to its peer, are reported.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
from torch.nn import functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
import gpt  # noqa: E402

MPIRUN = ["mpirun", "--oversubscribe", "--allow-run-as-root", "-np", "2"]


def load_average():
    return "%.2f %.2f %.2f" % os.getloadavg()


def gpuc_step_time(trainer, steps, threads, ranks):
    command = [trainer, "--bench-steps", str(steps)]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    if ranks > 1:
        command = MPIRUN + ["-x", "OMP_NUM_THREADS"] + command
    out = subprocess.run(command, env=env, check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def torch_worker(rank, ranks, args, store, result):
    """One rank of PyTorch's step: DDP over gloo when there are two."""
    torch.set_num_threads(max(1, args.threads // ranks))
    model = gpt.build(args.preset, args.seq, seed=0)
    if ranks > 1:
        torch.distributed.init_process_group(
            "gloo", init_method="file://" + store, rank=rank,
            world_size=ranks)
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
    vocab = gpt.PRESETS[args.preset]["vocab"]
    batch = args.batch * 2 // ranks
    x = torch.randint(0, vocab, (batch, args.seq))
    y = torch.randint(0, vocab, (batch, args.seq))

    def step():
        opt.zero_grad(set_to_none=True)
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, vocab), y.view(-1))
        loss.backward()
        opt.step()

    for _ in range(2):
        step()
    if ranks > 1:
        torch.distributed.barrier()
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    if ranks > 1:
        torch.distributed.barrier()
    ms = 1000.0 * (time.perf_counter() - start) / args.steps
    if rank == 0:
        with open(result, "w") as f:
            f.write(str(ms))
    if ranks > 1:
        torch.distributed.destroy_process_group()


def torch_step_time(args, ranks, work):
    store = os.path.join(work, "store-%f" % time.time())
    result = os.path.join(work, "torch-ms")
    if ranks == 1:
        torch_worker(0, 1, args, store, result)
    else:
        torch.multiprocessing.spawn(torch_worker,
                                    args=(ranks, args, store, result),
                                    nprocs=ranks)
    with open(result) as f:
        return float(f.read())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", choices=sorted(gpt.PRESETS),
                        default="small")
    parser.add_argument("--seq", type=int, default=256)
    parser.add_argument("--batch", type=int, default=4,
                        help="sequences per rank (the global batch is twice)")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2,
                        help="threads in all (split between two ranks)")
    built = os.path.join(HERE, "..", "build", "bin", "gpuc")
    parser.add_argument("--gpuc", default=built if os.path.exists(built)
                        else "gpuc")
    parser.add_argument("--work", default=None)
    args = parser.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="gpuc-dp-bench-")
    os.makedirs(work, exist_ok=True)
    model = gpt.build(args.preset, args.seq, seed=0)
    onnx_path = os.path.join(work, "gpt.onnx")
    gpt.export(model, args.seq, onnx_path)
    common = ["--class-axis", "-1", "--optimizer", "adamw", "--lr", "3e-4",
              "--weight-decay", "0.01", "--target", "cpu"]

    def compile_(name, batch, flags):
        out = os.path.join(work, name)
        subprocess.run([args.gpuc, "compile", onnx_path, "--batch",
                        str(batch), "-o", out] + common + flags, check=True,
                       stdout=subprocess.DEVNULL)
        return os.path.join(out, "train")

    whole = compile_("whole", 2 * args.batch, [])
    whole_dp = compile_("whole-dp", 2 * args.batch, ["--data-parallel"])
    half_dp = compile_("half-dp", args.batch, ["--data-parallel"])
    half_zero = compile_("half-zero", args.batch,
                         ["--data-parallel", "--shard-optimizer", "--ranks",
                          "2"])
    params = sum(p.numel() for p in model.parameters())
    print("%s preset: %.1fM parameters, T %d, global batch %d, %d threads; "
          "PyTorch %s" % (args.preset, params / 1e6, args.seq, 2 * args.batch,
                          args.threads, torch.__version__))
    systems = {
        "gpuc 1 process": lambda: gpuc_step_time(whole, args.steps,
                                                 args.threads, 1),
        "gpuc 1 process, dp": lambda: gpuc_step_time(whole_dp, args.steps,
                                                     args.threads, 1),
        "gpuc 2 ranks": lambda: gpuc_step_time(
            half_dp, args.steps, max(1, args.threads // 2), 2),
        "gpuc 2 ranks, ZeRO-1": lambda: gpuc_step_time(
            half_zero, args.steps, max(1, args.threads // 2), 2),
        "torch 1 process": lambda: torch_step_time(args, 1, work),
        "torch DDP 2 ranks": lambda: torch_step_time(args, 2, work),
    }
    times = {name: [] for name in systems}
    plans = {}
    for r in range(args.rounds):
        print("round %d, load average %s" % (r + 1, load_average()),
              flush=True)
        for name, run in systems.items():
            value = run()
            if isinstance(value, dict):
                plans[name] = value["plan_bytes"]
                value = value["ms_per_step"]
            times[name].append(value)
        print("  " + ", ".join("%s %.1f ms" % (k, v[-1])
                               for k, v in times.items()), flush=True)
    print("ms per global step, best / median over %d rounds (load average "
          "now %s):" % (args.rounds, load_average()))
    best = {k: min(v) for k, v in times.items()}
    peers = {"gpuc 1 process": "torch 1 process",
             "gpuc 2 ranks": "torch DDP 2 ranks",
             "gpuc 1 process, dp": "gpuc 1 process",
             "gpuc 2 ranks, ZeRO-1": "gpuc 2 ranks"}
    for name, values in times.items():
        ratio = ""
        if name in peers:
            ratio = "  %s / %s %.2f" % (name, peers[name],
                                        best[name] / best[peers[name]])
        print("  %-21s %9.1f / %9.1f%s" % (name, best[name],
                                           statistics.median(values), ratio))
    print("memory plan: gpuc 1 process %.2f MiB, with --data-parallel %.2f "
          "MiB; each of 2 ranks %.2f MiB, with ZeRO-1 %.2f MiB" %
          (plans["gpuc 1 process"] / 2**20, plans["gpuc 1 process, dp"] /
           2**20, plans["gpuc 2 ranks"] / 2**20,
           plans["gpuc 2 ranks, ZeRO-1"] / 2**20))


if __name__ == "__main__":
    main()
