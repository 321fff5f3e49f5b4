"""The stalls phase of gpu_check.py: where GPT-2 bf16's slowest kernels
(its fused attention's three launches and its head's cross-entropy rows)
wait, from Nsight Compute (ncu): throughput against the GPU's peaks,
occupancy, and each warp's stall reasons, one launch of each kernel, in
the replayed step (--graph-profiling node), and the forward of the
artifact whose warps own 32 rows. A step's profile (--profile)
says how long each kernel takes; this says why. Skipped, with a note, when
the machine has no ncu or ncu may not read the GPU's counters.

Weights are made here as the scale phase makes them (PyTorch, seed 0).
"""
import glob
import json
import os
import shutil
import subprocess
import sys

# What ncu collects for each kernel: the speed of light (achieved against
# peak compute and memory throughput), the launch and its occupancy, the
# schedulers' instruction rate and the warps' stall reasons, and the pipes and
# memory units at work.
SECTIONS = ("SpeedOfLight", "LaunchStats", "Occupancy", "SchedulerStats",
            "WarpStateStats", "ComputeWorkloadAnalysis",
            "MemoryWorkloadAnalysis")
ARTIFACT = "scale-gpt2-bf16"
# And the forward of the artifact whose attention warps own 32 rows.
FORWARD_ARTIFACT = "scale-gpt2-bf16-attention-32-rows"


def find_ncu():
    found = shutil.which("ncu")
    if found:
        return found
    for pattern in ("/usr/local/cuda/bin/ncu", "/usr/local/cuda*/bin/ncu",
                    "/usr/local/cuda*/nsight-compute*/ncu",
                    "/opt/nvidia/nsight-compute/*/ncu"):
        hits = sorted(glob.glob(pattern))
        if hits:
            return hits[-1]
    return None


def kernels_to_profile(plan, forward_only=False):
    """The kernels of a training step worth a look: those that run an
    attention or its gradient, and the first row kernel that stages its
    rows in shared memory (the head's cross-entropy, one kernel a chunk of
    rows, all alike); or the attention's forward alone."""
    wanted, staged = [], False
    for step in plan["functions"]["train_step"]["steps"]:
        if step.get("op") != "kernel" or step["kernel"] in wanted:
            continue
        ops = step.get("ops", [])
        if "attention" in ops or (not forward_only and
                                  "attention_grad" in ops):
            wanted.append(step["kernel"])
        elif (not forward_only and step.get("shared", 0) > 0 and
              not staged):
            wanted.append(step["kernel"])
            staged = True
    return wanted


def phase_stalls(args, results, trainer_command):
    ncu = find_ncu()
    artifact = os.path.join(args.bundle, "artifacts", ARTIFACT)
    if not ncu:
        print("stalls: no ncu on this machine (Nsight Compute): skipped")
        results["skipped"] = "no ncu"
        return True
    if not os.path.isdir(artifact):
        print("stalls: the bundle has no %s: skipped" % ARTIFACT)
        results["skipped"] = "no artifact"
        return True
    sys.path.insert(0, args.bundle)
    import export_models
    import scale_check
    runs = []
    for name, forward_only in ((ARTIFACT, False), (FORWARD_ARTIFACT, True)):
        plan = os.path.join(args.bundle, "artifacts", name, "plan.json")
        if os.path.exists(plan):
            with open(plan) as f:
                runs += [(name, kernel) for kernel in
                         kernels_to_profile(json.load(f), forward_only)]
    weights = os.path.join(args.work, "gpt2.safetensors")
    if not os.path.exists(weights):
        export_models.save_state_dict(scale_check.build(args.bundle, "gpt2"),
                                      weights)
    rows, ok = [], True
    for name, kernel in runs:
        report = os.path.join(args.results, "ncu-%s-%s.txt" % (name, kernel))
        # The entry point the step launches: the kernel's own, or the
        # alternative the trainer chose at load (kept beside the plan by
        # the scale phase's runs: <kernel>_b2, <kernel>_w4, ...).
        cmd = [ncu, "--graph-profiling", "node", "--kernel-name",
               "regex:^%s(_[a-z][0-9]+)?$" % kernel, "--launch-count", "1"]
        for section in SECTIONS:
            cmd += ["--section", section]
        cmd += trainer_command(args, name, "--bench-steps", 1, "--init",
                               weights)
        r = subprocess.run(cmd, capture_output=True, text=True)
        with open(report, "w") as f:
            f.write("$ %s\n%s%s" % (" ".join(cmd), r.stdout, r.stderr))
        text = r.stdout + r.stderr
        if "ERR_NVGPUCTRPERM" in text:
            print("stalls: ncu may not read this GPU's performance counters "
                  "(ERR_NVGPUCTRPERM): skipped")
            results["skipped"] = "ERR_NVGPUCTRPERM"
            return True
        profiled = "Section: " in text
        ok &= profiled
        print("== %s %s (exit %d)\n%s" % (
            name, kernel, r.returncode, "\n".join(text.splitlines()[-120:])))
        rows.append({"artifact": name, "kernel": kernel, "exit": r.returncode,
                     "profiled": profiled, "report": os.path.basename(report)})
    results["stalls"] = rows
    return ok
