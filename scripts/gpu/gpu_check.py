#!/usr/bin/env python3
"""The GPU checks of a gpu-bundle; run through run.sh (which sets the library
paths). Each phase writes summary-<phase>.json into --results and exits 1 when
a check fails.

checks  parity of one step with the CPU device (stepcompare.py tolerance);
        gradient accumulation (4 x 32 against 1 x 128, same samples);
        CUDA Graph replay against kernel-by-kernel launches over 20 steps
        (bit-identical losses); one graph launch per training step;
        the log lines' GPU utilization, memory and power (NVML);
        checkpoint and resume on the GPU (byte-identical); --export-onnx.
profile each bench artifact's step under --profile (kernel by kernel,
        timed with events): where the GPU time goes.
train   MLP 15 epochs and CNN 6 epochs on Fashion-MNIST (>= 0.89 / >= 0.92).
amp     mixed precision: MLP and CNN trained in fp16 and bf16 to the fp32
        targets; fp16/bf16 step time against gpuc's fp32 and PyTorch autocast
        (eager, torch.compile; GradScaler for fp16), interleaved.
scale   GPT-2 124M and ResNet-50 at real scale (scale_check.py): parity of
        one step with PyTorch from the same weights (--init), then
        tokens/s and images/s against PyTorch eager and torch.compile, MFU.
stalls  Nsight Compute on GPT-2 bf16's attention and head cross-entropy
        kernels (stall_check.py): throughput against the peaks, occupancy,
        instruction rate and stall reasons; skipped without ncu.
bench   gpuc (graph and --no-graph) against PyTorch eager, torch.compile and
        torch.compile(mode="reduce-overhead"): same model, batch, AdamW
        (lr 1e-3, weight decay 0.01; PyTorch's fused AdamW), FP32 on both
        sides (TF32 off in PyTorch, as gpuc's cuBLASLt/cuDNN calls use FP32
        math), resident batch, warm-up excluded; interleaved rounds, best of
        each, load average printed.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

BATCHES = {"mlp": (128, 1024), "cnn": (128, 1024), "transformer": (32, 256)}


def trainer_command(args, artifact, *flags):
    return [os.path.join(args.bundle, "bin", "train"), "--artifact",
            os.path.join(args.bundle, "artifacts", artifact),
            "--device", "cuda"] + [str(f) for f in flags]


def trainer(args, artifact, *flags, check=True, env=None):
    cmd = trainer_command(args, artifact, *flags)
    r = subprocess.run(cmd, capture_output=True, text=True,
                       env=dict(os.environ, **(env or {})))
    log = "$ %s\n%s%s\n" % (" ".join(cmd), r.stdout, r.stderr)
    with open(os.path.join(args.results, "commands.log"), "a") as f:
        f.write(log)
    if check and r.returncode != 0:
        raise RuntimeError("failed (%d): %s" % (r.returncode, log[-3000:]))
    return r


def data_dir(args):
    """Fashion-MNIST as the trainer reads it: the bundle carries it as xz
    (smaller than gzip), unpacked once into the work folder."""
    src = os.path.join(args.bundle, "data")
    packed = [f for f in os.listdir(src) if f.endswith(".xz")]
    if not packed:
        return src
    dst = os.path.join(args.work, "data")
    if not os.path.isdir(dst):
        import lzma
        os.makedirs(dst)
        for f in packed:
            with lzma.open(os.path.join(src, f)) as fin, \
                    open(os.path.join(dst, f[:-3]), "wb") as fout:
                fout.write(fin.read())
    return dst


def check_parity(args, results):
    sys.path.insert(0, args.bundle)
    from stepcompare import TOLERANCE, compare_dirs
    ok = True
    for name in sorted(os.listdir(os.path.join(args.bundle, "parity"))):
        folder = os.path.join(args.bundle, "parity", name)
        got = os.path.join(args.work, "parity-" + name)
        entry = {"model": name}
        try:
            trainer(args, "parity-" + name, "--run-step",
                    os.path.join(folder, "in"), "--output-dir", got,
                    "--seed", 7, "--step", 3)
            # parity/MODEL-OPTIMIZER[-fp16|-bf16]: mixed precision has the
            # storage type's tolerance.
            precision = name.rsplit("-", 1)[-1]
            compared, worst, worst_name, noisy, failures = compare_dirs(
                os.path.join(folder, "ref"), got,
                **TOLERANCE.get(precision, {}))
            entry.update(tensors=compared, worst_of_tolerance=worst,
                         worst_tensor=worst_name, noise_elements=noisy,
                         failures=failures[:10], ok=not failures)
        except RuntimeError as e:
            entry.update(ok=False, error=str(e))
        ok &= entry["ok"]
        print("parity %-18s %s" % (name, json.dumps(entry)))
        results.setdefault("parity", []).append(entry)
    return ok


def losses_of(metrics):
    out = []
    with open(metrics) as f:
        for line in f:
            m = re.search(r'"loss": ([^,}]+)', line)
            if m:
                out.append(m.group(1))
    return out


def gpu_monitor_figures(metrics):
    """What NVML reported at a GPU run's log points (its metrics lines):
    utilization in %, memory used in MiB and power in W, where present."""
    names = ("gpu_utilization", "gpu_memory_used_mib", "gpu_power_w")
    rows = []
    with open(metrics) as f:
        for line in f:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if any(n in record for n in names):
                rows.append({n: record.get(n) for n in names})
    return rows


def monitored(rows):
    """Whether some log point has all three NVML figures, each plausible."""
    return any(r["gpu_utilization"] is not None and
               0 <= r["gpu_utilization"] <= 100 and
               (r["gpu_memory_used_mib"] or 0) > 0 and
               (r["gpu_power_w"] or 0) > 0 for r in rows)


def check_graph_replay(args, results):
    ok = True
    for model in ("mlp", "cnn"):
        runs = {}
        for mode, flags in (("graph", []), ("no_graph", ["--no-graph"])):
            metrics = os.path.join(args.work, "%s-%s.jsonl" % (model, mode))
            r = trainer(args, "bench-%s-128" % model, "--data", data_dir(args),
                        "--limit-train", 20 * 128, "--epochs", 1,
                        "--log-every", 1, "--metrics", metrics, *flags)
            launches = re.search(
                r"launches: train_step (\d+) graph launches for (\d+) steps",
                r.stdout)
            runs[mode] = {"losses": losses_of(metrics),
                          "gpu_monitor": gpu_monitor_figures(metrics),
                          "graph_launches": int(launches.group(1))
                          if launches else None,
                          "steps": int(launches.group(2))
                          if launches else None,
                          "device": r.stdout.splitlines()[0]}
        same = runs["graph"]["losses"] == runs["no_graph"]["losses"] and \
            len(runs["graph"]["losses"]) == 20
        one_per_step = runs["graph"]["graph_launches"] == 20 == \
            runs["graph"]["steps"] and runs["no_graph"]["graph_launches"] == 0
        # The log lines carry NVML's utilization, memory and power.
        nvml = monitored(runs["graph"]["gpu_monitor"])
        entry = {"model": model, "bit_identical_20_steps": same,
                 "one_graph_launch_per_step": one_per_step,
                 "gpu_monitor_reported": nvml,
                 "graph": runs["graph"], "no_graph": runs["no_graph"]}
        ok &= same and one_per_step and nvml
        print("graph replay %s: losses identical %s, one launch per step %s, "
              "NVML figures in the log %s (last: %s)" % (
                  model, same, one_per_step, nvml,
                  (runs["graph"]["gpu_monitor"] or [None])[-1]))
        results.setdefault("graph_replay", []).append(entry)
    return ok


def check_resume_and_export(args, results):
    work = args.work
    common = ["--data", data_dir(args), "--limit-train", 10 * 128, "--quiet"]
    trainer(args, "bench-mlp-128", *common, "--epochs", 2,
            "--checkpoint-dir", os.path.join(work, "straight"))
    trainer(args, "bench-mlp-128", *common, "--epochs", 1,
            "--checkpoint-dir", os.path.join(work, "resumed"))
    trainer(args, "bench-mlp-128", *common, "--epochs", 2,
            "--checkpoint-dir", os.path.join(work, "resumed"), "--resume")
    a = open(os.path.join(work, "straight", "checkpoint.safetensors"),
             "rb").read()
    b = open(os.path.join(work, "resumed", "checkpoint.safetensors"),
             "rb").read()
    exported = os.path.join(work, "trained.onnx")
    trainer(args, "bench-mlp-128", *common, "--epochs", 1,
            "--export-onnx", exported)
    export_ok = os.path.getsize(exported) > 100000
    try:
        import onnx
        onnx.checker.check_model(onnx.load(exported))
    except ImportError:
        pass
    except Exception as e:  # noqa: BLE001 - report any checker failure
        export_ok = False
        print("export: %s" % e)
    results["resume_byte_identical"] = a == b
    results["export_onnx"] = export_ok
    print("resume byte-identical: %s; export-onnx: %s" % (a == b, export_ok))
    return a == b and export_ok


def check_accumulation(args, results):
    """4 accumulated steps of 32 against one step of 128 on the GPU, each
    update replayed from its own graph (apply_update)."""
    folders = {}
    for name in ("accumulate-4x32", "accumulate-1x128"):
        folders[name] = os.path.join(args.work, name)
        trainer(args, name, "--data", data_dir(args), "--limit-train", 1280,
                "--epochs", 1, "--checkpoint-dir", folders[name], "--quiet")
    r = subprocess.run(
        [sys.executable, os.path.join(args.bundle, "accumulate_compare.py"),
         os.path.join(folders["accumulate-4x32"], "checkpoint.safetensors"),
         os.path.join(folders["accumulate-1x128"], "checkpoint.safetensors"),
         "1e-5"], capture_output=True, text=True)
    ok = r.returncode == 0
    print("accumulation 4x32 vs 1x128: %s\n%s%s" % (ok, r.stdout, r.stderr))
    results["accumulation"] = {"ok": ok, "output": r.stdout + r.stderr}
    return ok


def check_data_parallel_alone(args, results):
    """The batch-128 MLP compiled --data-parallel, run as one NCCL rank
    (GPUC_NCCL_ALONE=1): its all-reduces inside the captured step (one
    graph launch per step), the same 20 losses as the artifact without
    them, and the step time against it (interleaved, best of the rounds;
    at most 2 % more)."""
    alone = {"GPUC_NCCL_ALONE": "1"}
    runs = {}
    for name, env in (("bench-mlp-128", None), ("dp-mlp-128", alone)):
        # The GEMM algorithms are timed and chosen per artifact: the
        # data-parallel one takes the plain one's choices (the same shapes),
        # so that only the all-reduces differ between them.
        choices = os.path.join(args.bundle, "artifacts", "bench-mlp-128",
                               "library-algorithms.json")
        if name == "dp-mlp-128" and os.path.exists(choices):
            shutil.copy(choices, os.path.join(args.bundle, "artifacts", name))
        metrics = os.path.join(args.work, "%s-dp.jsonl" % name)
        r = trainer(args, name, "--data", data_dir(args), "--limit-train",
                    20 * 128, "--epochs", 1, "--log-every", 1, "--metrics",
                    metrics, env=env)
        launches = re.search(
            r"launches: train_step (\d+) graph launches for (\d+) steps",
            r.stdout)
        runs[name] = {"losses": losses_of(metrics),
                      "device": r.stdout.splitlines()[0],
                      "one_graph_launch_per_step": bool(launches) and
                      launches.group(1) == launches.group(2) == "20"}
    times = {"bench-mlp-128": [], "dp-mlp-128": []}
    for _ in range(args.rounds):
        for name, env in (("bench-mlp-128", None), ("dp-mlp-128", alone)):
            r = trainer(args, name, "--bench-steps", args.bench_steps,
                        env=env)
            times[name].append(json.loads(r.stdout.strip().splitlines()[-1])
                               ["ms_per_step"])
    ratio = min(times["dp-mlp-128"]) / min(times["bench-mlp-128"])
    nccl = "NCCL" in runs["dp-mlp-128"]["device"]
    same = runs["dp-mlp-128"]["losses"] == runs["bench-mlp-128"]["losses"] \
        and len(runs["dp-mlp-128"]["losses"]) == 20
    inside = runs["dp-mlp-128"]["one_graph_launch_per_step"]
    ok = nccl and same and inside and ratio <= 1.02
    results["data_parallel_one_rank"] = {
        "ok": ok, "nccl": nccl, "losses_identical": same,
        "one_graph_launch_per_step": inside, "ms_per_step": times,
        "cost_ratio": ratio, "runs": runs}
    print("data parallel, one NCCL rank: NCCL %s, losses identical %s, one "
          "launch per step %s, step %.3fx the plain one" % (nccl, same, inside,
                                                            ratio))
    return ok


def phase_checks(args, results):
    ok = check_parity(args, results)
    ok &= check_graph_replay(args, results)
    ok &= check_resume_and_export(args, results)
    ok &= check_accumulation(args, results)
    ok &= check_data_parallel_alone(args, results)
    return ok


def phase_train(args, results):
    ok = True
    for model, epochs, target in (("mlp", 15, 0.89), ("cnn", 6, 0.92)):
        metrics = os.path.join(args.results, "train-%s.jsonl" % model)
        if os.path.exists(metrics):
            os.remove(metrics)
        t0 = time.time()
        r = trainer(args, "bench-%s-128" % model, "--data", data_dir(args),
                    "--epochs", epochs, "--metrics", metrics)
        seconds = time.time() - t0
        m = re.search(r"final test_accuracy ([0-9.]+)", r.stdout)
        accuracy = float(m.group(1)) if m else -1.0
        launches = re.search(r"launches: .*", r.stdout)
        entry = {"model": model, "epochs": epochs, "test_accuracy": accuracy,
                 "target": target, "wall_s": round(seconds, 1),
                 "launches": launches.group(0) if launches else None,
                 "ok": accuracy >= target}
        ok &= entry["ok"]
        print("train %s: %s" % (model, json.dumps(entry)))
        results.setdefault("train", []).append(entry)
    return ok


def phase_profile(args, results):
    rows = []
    for name in sorted(os.listdir(os.path.join(args.bundle, "artifacts"))):
        if not name.startswith("bench-"):
            continue
        r = trainer(args, name, "--bench-steps", 20, "--profile",
                    os.path.join(args.results, "trace-%s.json" % name))
        report = r.stderr[r.stderr.find("gpuc profile"):]
        print("== %s\n%s" % (name, report))
        # The GPU's peaks: a measured copy bandwidth and a datasheet FLOP
        # rate, so that each kernel's share of them is not 0.
        peaks = re.search(r"machine peaks: ([0-9.]+) GB/s, ([0-9.]+) TFLOP/s",
                          report)
        rows.append({"artifact": name, "report": report,
                     "peaks": bool(peaks) and float(peaks.group(1)) > 0 and
                     float(peaks.group(2)) > 0})
    results["profile"] = rows
    return all(row["peaks"] for row in rows)


def torch_step(model_name, batch, mode, precision="fp32"):
    import torch
    import torch.nn.functional as F
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import export_models
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    cls = {"mlp": export_models.MLP, "cnn": export_models.CNN,
           "transformer": export_models.TransformerBlock}[model_name]
    model = cls().cuda().train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01,
                            fused=True)
    if model_name == "transformer":
        x = torch.randint(0, 64, (batch, 16), device="cuda")
        y = torch.randint(0, 64, (batch, 16), device="cuda")
    else:
        x = torch.randn(batch, 1, 28, 28, device="cuda")
        y = torch.randint(0, 10, (batch,), device="cuda")
    # Mixed precision as a PyTorch user writes it: autocast around the
    # forward pass and the loss, and for fp16 a GradScaler (bf16 needs none).
    amp_dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision)
    scaler = torch.amp.GradScaler("cuda") if precision == "fp16" else None
    forward = model
    if mode == "compile":
        forward = torch.compile(model)
    elif mode == "reduce-overhead":
        forward = torch.compile(model, mode="reduce-overhead")

    def step():
        if mode == "reduce-overhead":
            torch.compiler.cudagraph_mark_step_begin()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=amp_dtype or torch.float32,
                            enabled=amp_dtype is not None):
            out = forward(x)
            loss = F.cross_entropy(out.reshape(-1, out.shape[-1]),
                                   y.reshape(-1))
        if scaler is None:
            loss.backward()
            opt.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()

    def timed(steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
        return 1000.0 * (time.perf_counter() - t0) / steps
    timed(25)  # warm-up, compilation included
    return timed


def phase_bench(args, results):
    import torch
    steps, rounds = args.bench_steps, args.rounds
    configs = [(m, b) for m, bs in BATCHES.items() for b in bs
               if os.path.isdir(os.path.join(args.bundle, "artifacts",
                                             "bench-%s-%d" % (m, b)))]
    peers = {}
    for model, batch in configs:
        for mode in ("eager", "compile", "reduce-overhead"):
            try:
                peers[(model, batch, mode)] = torch_step(model, batch, mode)
            except Exception as e:  # noqa: BLE001 - a peer that fails is reported
                print("torch %s %s %d failed: %s" % (mode, model, batch, e))
    best = {}

    def keep(key, ms):
        best[key] = min(best.get(key, float("inf")), ms)
    for _ in range(rounds):
        for model, batch in configs:
            for mode, flags in (("gpuc", []), ("gpuc_no_graph", ["--no-graph"])):
                r = trainer(args, "bench-%s-%d" % (model, batch),
                            "--bench-steps", steps, *flags)
                keep((model, batch, mode),
                     json.loads(r.stdout.strip().splitlines()[-1])["ms_per_step"])
            for mode in ("eager", "compile", "reduce-overhead"):
                if (model, batch, mode) in peers:
                    keep((model, batch, mode), peers[(model, batch, mode)](steps))
    rows = []
    print("\nload average %s; %s; torch %s; best of %d rounds of %d steps"
          % (os.getloadavg(), torch.cuda.get_device_name(), torch.__version__,
             rounds, steps))
    print("| model | batch | gpuc ms | gpuc --no-graph ms | eager ms | "
          "compile ms | reduce-overhead ms | gpuc/eager | gpuc/compile | "
          "gpuc/reduce-overhead |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for model, batch in configs:
        g = best.get((model, batch, "gpuc"))
        row = {"model": model, "batch": batch}
        for mode in ("gpuc", "gpuc_no_graph", "eager", "compile",
                     "reduce-overhead"):
            row[mode + "_ms"] = best.get((model, batch, mode))
        ratio = {m: (g / row[m + "_ms"] if g and row[m + "_ms"] else None)
                 for m in ("eager", "compile", "reduce-overhead")}
        row["ratios"] = ratio

        def f(v, p=3):
            return "-" if v is None else ("%.*f" % (p, v))
        print("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            model, batch, f(g), f(row["gpuc_no_graph_ms"]), f(row["eager_ms"]),
            f(row["compile_ms"]), f(row["reduce-overhead_ms"]),
            f(ratio["eager"], 2), f(ratio["compile"], 2),
            f(ratio["reduce-overhead"], 2)))
        rows.append(row)
    results["bench"] = {"rows": rows, "load_average": os.getloadavg(),
                        "gpu": torch.cuda.get_device_name(),
                        "torch": torch.__version__}
    return all(r["gpuc_ms"] for r in rows)


def phase_amp(args, results):
    """Mixed precision: training to the fp32 targets (batch 128), then the
    step time of fp16/bf16 against gpuc's fp32 and PyTorch autocast (eager
    and torch.compile; GradScaler for fp16) in one interleaved run."""
    import torch
    ok = True
    artifacts = os.listdir(os.path.join(args.bundle, "artifacts"))
    targets = {"mlp": (15, 0.89), "cnn": (6, 0.92)}
    for name in sorted(a for a in artifacts if re.match(r"amp-\w+-128-", a)):
        model, precision = name.split("-")[1], name.split("-")[3]
        epochs, target = targets[model]
        metrics = os.path.join(args.results, "train-%s.jsonl" % name)
        if os.path.exists(metrics):
            os.remove(metrics)
        t0 = time.time()
        r = trainer(args, name, "--data", data_dir(args), "--epochs", epochs,
                    "--metrics", metrics)
        m = re.search(r"final test_accuracy ([0-9.]+)", r.stdout)
        skipped = re.findall(r"loss_scale \S+ skipped_steps \d+", r.stdout)
        entry = {"model": model, "precision": precision, "epochs": epochs,
                 "test_accuracy": float(m.group(1)) if m else -1.0,
                 "target": target, "wall_s": round(time.time() - t0, 1),
                 "loss_scale_lines": skipped[-2:]}
        entry["ok"] = entry["test_accuracy"] >= target
        ok &= entry["ok"]
        print("amp train %s: %s" % (name, json.dumps(entry)))
        results.setdefault("train", []).append(entry)

    configs = []
    for name in sorted(artifacts):
        m = re.match(r"amp-(\w+)-(\d+)-(fp16|bf16)$", name)
        if m and int(m.group(2)) > 128:
            configs.append((m.group(1), int(m.group(2)), m.group(3)))
    peers = {}
    for model, batch, precision in configs:
        for mode in ("eager", "compile"):
            try:
                peers[(model, batch, precision, mode)] = torch_step(
                    model, batch, mode, precision)
            except Exception as e:  # noqa: BLE001 - a peer that fails is reported
                print("torch %s %s %s %d failed: %s" % (mode, precision, model,
                                                        batch, e))
    best = {}

    def keep(key, ms):
        best[key] = min(best.get(key, float("inf")), ms)

    def gpuc_ms(artifact):
        r = trainer(args, artifact, "--bench-steps", args.bench_steps)
        return json.loads(r.stdout.strip().splitlines()[-1])["ms_per_step"]
    for _ in range(args.rounds):
        for model, batch, precision in configs:
            keep((model, batch, precision, "gpuc"),
                 gpuc_ms("amp-%s-%d-%s" % (model, batch, precision)))
            fp32 = "bench-%s-%d" % (model, batch)
            if fp32 in artifacts:
                keep((model, batch, precision, "gpuc_fp32"), gpuc_ms(fp32))
            for mode in ("eager", "compile"):
                key = (model, batch, precision, mode)
                if key in peers:
                    keep(key, peers[key](args.bench_steps))
    print("\nload average %s; %s; torch %s; best of %d rounds of %d steps"
          % (os.getloadavg(), torch.cuda.get_device_name(), torch.__version__,
             args.rounds, args.bench_steps))
    print("| model | batch | precision | gpuc ms | gpuc fp32 ms | eager amp ms "
          "| compile amp ms | gpuc fp32/amp | gpuc/eager | gpuc/compile |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    rows = []

    def f(v, p=3):
        return "-" if v is None else ("%.*f" % (p, v))
    for model, batch, precision in configs:
        row = {mode: best.get((model, batch, precision, mode))
               for mode in ("gpuc", "gpuc_fp32", "eager", "compile")}
        g = row["gpuc"]

        def ratio(a, b):
            return a / b if a and b else None
        print("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            model, batch, precision, f(g), f(row["gpuc_fp32"]),
            f(row["eager"]), f(row["compile"]),
            f(ratio(row["gpuc_fp32"], g), 2), f(ratio(g, row["eager"]), 2),
            f(ratio(g, row["compile"]), 2)))
        row.update(model=model, batch=batch, precision=precision)
        rows.append(row)
    results["bench"] = {"rows": rows, "load_average": os.getloadavg(),
                        "gpu": torch.cuda.get_device_name(),
                        "torch": torch.__version__}
    return ok and all(r["gpuc"] for r in rows)


def phase_scale(args, results):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import scale_check

    def save_so_far():
        # A device command cut short by its time limit still brings back
        # what the finished parts found (main() writes the whole summary).
        with open(os.path.join(args.results, "summary-scale.json"), "w") as f:
            json.dump(dict(results, partial=True), f, indent=1)
    ok = scale_check.phase_scale_parity(args, results, trainer)
    save_so_far()
    ok &= scale_check.phase_scale_profile(args, results, trainer)
    save_so_far()
    return scale_check.phase_scale_bench(args, results, trainer) and ok


def phase_stalls(args, results):
    import stall_check
    return stall_check.phase_stalls(args, results, trainer_command)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bundle", required=True)
    p.add_argument("--results", required=True)
    p.add_argument("--phase", default="all",
                   choices=["checks", "train", "bench", "profile", "amp",
                            "scale", "stalls", "all"])
    p.add_argument("--bench-steps", type=int, default=200)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--scale-steps", type=int, default=10,
                   help="steps per timed round of the scale phase")
    args = p.parse_args()
    os.makedirs(args.results, exist_ok=True)
    # The bundle carries its artifacts and parity references packed (plans
    # and cubins pack well).
    packed = os.path.join(args.bundle, "artifacts.tar.xz")
    if os.path.exists(packed) and not os.path.isdir(
            os.path.join(args.bundle, "artifacts")):
        import tarfile
        with tarfile.open(packed) as tar:
            tar.extractall(args.bundle)
    phases = ["checks", "train", "amp", "bench", "scale", "stalls"] \
        if args.phase == "all" \
        else [args.phase]
    all_ok = True
    with tempfile.TemporaryDirectory() as work:
        args.work = work
        for phase in phases:
            results = {"phase": phase, "commit": open(os.path.join(
                args.bundle, "COMMIT")).read().strip()}
            try:
                ok = globals()["phase_" + phase](args, results)
            except Exception as e:  # noqa: BLE001 - recorded in the summary
                ok = False
                results["error"] = str(e)
                print("%s: %s" % (phase, e))
            results["ok"] = bool(ok)
            all_ok &= bool(ok)
            with open(os.path.join(args.results, "summary-%s.json" % phase),
                      "w") as f:
                json.dump(results, f, indent=1)
            print("phase %s: %s" % (phase, "ok" if ok else "FAILED"))
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
