"""run.sh scale: GPT-2 124M (nanoGPT-style, T 1024, tied head) and
torchvision's ResNet-50 (224x224, 1000 classes) on the GPU, each compiled
with --no-weights in fp32 and bf16; with GPUC_SCALE_MODELS naming smollm,
Hugging Face's Llama at SmolLM-135M's sizes (grouped-query attention,
rotary positions; T 1024, tied head) in bf16. Here PyTorch makes the weights from the
carried definitions (seed 0) and saves them in safetensors; the trainer
takes them with --init.

parity  one AdamW step (lr 1e-3, weight decay 0.01) from the same weights
        and batch: fp32 no further from PyTorch's fp64 step than PyTorch's
        fp32 step (TF32 off) is, and bf16 no further from PyTorch's fp32
        step than its bf16 autocast step is (worst excess over stepcompare's
        tolerance for the precision, on the loss, every parameter, its first
        moment and batch norm's statistics; a factor of 2 allowed). At
        these depths and batches fp32 itself differs from fp64 by more than
        the tolerance (ResNet-50's first layers' gradients by a few %).
bench   tokens/s (GPT-2) and images/s (ResNet-50): gpuc (one graph launch
        per step) against PyTorch eager and torch.compile as people set
        them up (nanoGPT's scaled_dot_product_attention path, fused AdamW,
        bf16 autocast, channels_last for ResNet; TF32 off for fp32, as
        gpuc's fp32 GEMMs and convolutions), same batch, interleaved
        rounds, best of each; MFU from the step's FLOPs (report.json)
        against the GPU's dense peak.
"""
import gc
import json
import os
import re
import sys
import time

import numpy as np

# Dense peaks (TFLOP/s) by GPU and precision: fp32 without tensor cores,
# bf16 with them, as NVIDIA's datasheets give them.
PEAKS = {"H100 PCIe": {"fp32": 51.2, "bf16": 756.0},
         "H100": {"fp32": 66.9, "bf16": 989.4},
         "H200": {"fp32": 66.9, "bf16": 989.4},
         "A100": {"fp32": 19.5, "bf16": 312.0}}
# Per model: what a step's throughput counts, and a language model's
# vocabulary (its batches' tokens and labels).
ALL_MODELS = {"gpt2": {"unit": "tokens", "vocab": 50257},
              "resnet50": {"unit": "images"},
              "smollm": {"unit": "tokens", "vocab": 49152}}
# GPUC_SCALE_MODELS=gpt2,smollm (comma-separated) runs those; by default
# GPT-2 and ResNet-50.
MODELS = {m: ALL_MODELS[m] for m in
          (os.environ.get("GPUC_SCALE_MODELS") or "gpt2,resnet50").split(",")}
HYPER = {"lr": 1e-3, "weight_decay": 0.01, "betas": (0.9, 0.999),
         "eps": 1e-8}


def build(bundle, name, sdpa=False):
    sys.path.insert(0, bundle)
    if name == "gpt2":
        import gpt
        return gpt.build("gpt2", 1024, 0, sdpa=sdpa)
    if name == "smollm":
        # (Hugging Face's SDPA attention, with its key/value heads grouped.)
        import llama
        return llama.build("smollm-135m", 1024, 0)
    import torchvision_model
    return torchvision_model.build("resnet50", 1000, 0)


# Per model, its artifacts by label: the precision, for GPT-2 bf16 the
# other attention lowering too (batched GEMMs on tensor cores around a
# softmax row kernel, where the default is the fused kernel) and the
# largest batch that fits the GPU (the fused attention, no remat) and its
# kernels' loads in the order before batching (--gpu-bytes-in-flight 0)
# and, for both models, 64 and 128 bytes a thread in flight (the default
# is 32), and its head's logits in f32 (--head-logits f32) and its bias adds in
# the next kernels (--no-gemm-epilogues), and its fused attention's forward
# at two blocks an SM (--attention-blocks-per-sm 2) and with 32 rows a warp
# (--attention-rows-per-warp 32), and its backward from stored score
# gradients (--attention-score-gradients stored), and both at two blocks an
# SM and from stored score gradients, and by the generated kernels alone
# (--attention-library generated; by default the load times cuDNN's
# fused attention against them and runs the faster), and, for both models,
# column kernels of 16 columns a block (--gpu-column-lanes 16: 32 bytes of
# each row, the layout before whole rows), and for ResNet-50 bf16 the
# other convolution layout (NCHW, where the default on tensor cores is
# channels last), and GPT-2 bf16 under a memory budget (--memory-budget:
# forward values recomputed in backward), and GPT-2 fp32 with its
# attention's GEMMs whole (where the default cuts them into bands that
# skip the causal mask's triangle). (Whether a row kernel's staged row pays is timed per
# kernel at load: each comes with an entry point reading it from memory.)
VARIANTS = ("fp32", "bf16", "bf16-gemm-attention", "bf16-largest",
            "bf16-in-order", "bf16-in-flight-64", "bf16-in-flight-128",
            "bf16-head-f32", "bf16-no-epilogues", "bf16-attention-2-blocks",
            "bf16-attention-32-rows", "bf16-stored-score-gradients",
            "bf16-2-blocks-stored", "bf16-generated-attention",
            "bf16-column-lanes-16", "bf16-nchw", "bf16-remat",
            "fp32-whole-gemms")


def precision_of(label):
    return label.split("-")[0]


# GPUC_SCALE_VARIANTS=bf16,bf16-nchw (comma-separated) runs only those
# artifacts of each model.
if os.environ.get("GPUC_SCALE_VARIANTS"):
    VARIANTS = tuple(v for v in os.environ["GPUC_SCALE_VARIANTS"].split(",")
                     if v in VARIANTS)


def artifacts(bundle, name):
    root = os.path.join(bundle, "artifacts")
    return {p: "scale-%s-%s" % (name, p) for p in VARIANTS
            if os.path.isdir(os.path.join(root, "scale-%s-%s" % (name, p)))}


def plan_of(bundle, artifact):
    with open(os.path.join(bundle, "artifacts", artifact, "plan.json")) as f:
        return json.load(f)


def batch_of(bundle, artifact):
    """The data input's shape and the trainer's names for input and label."""
    plan = plan_of(bundle, artifact)
    t = plan["trainer"]
    shape = [b["shape"] for b in plan["buffers"]
             if b["name"] == "input." + t["data_input"]][0]
    return shape, t["data_input"], t["label_input"]


def make_batch(name, shape):
    import torch
    g = torch.Generator().manual_seed(1)
    if ALL_MODELS[name]["unit"] == "tokens":
        vocab = ALL_MODELS[name]["vocab"]
        x = torch.randint(0, vocab, shape, generator=g)
        y = torch.randint(0, vocab, shape, generator=g)
    else:
        x = torch.randn(shape, generator=g)
        y = torch.randint(0, 1000, (shape[0],), generator=g)
    return x, y


def torch_step_results(model, x, y, precision, out, device="cuda"):
    """One AdamW step of `model` in PyTorch (fp32, bf16 autocast, or fp64:
    the reference both fp32 steps are measured from); writes what the
    trainer's --run-step writes: loss, parameters, first moments, and the
    buffers the step updates."""
    import torch
    import torch.nn.functional as F
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dtype = torch.float64 if precision == "fp64" else torch.float32
    model = model.to(device=device, dtype=dtype).train()
    opt = torch.optim.AdamW(model.parameters(), **HYPER)
    x, y = x.to(device), y.to(device)
    if x.is_floating_point():
        x = x.to(dtype)
    with torch.autocast(torch.device(device).type, dtype=torch.bfloat16,
                        enabled=precision == "bf16"):
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).to(dtype),
                               y.reshape(-1))
    loss.backward()
    opt.step()
    os.makedirs(out, exist_ok=True)
    np.save(os.path.join(out, "loss.npy"),
            np.array(loss.item(), dtype=np.float64 if precision == "fp64"
                     else np.float32))
    for n, p in model.named_parameters():
        np.save(os.path.join(out, n + ".npy"), p.detach().cpu().numpy())
        np.save(os.path.join(out, n + ".exp_avg.npy"),
                opt.state[p]["exp_avg"].cpu().numpy())
    for n, b in model.named_buffers():
        if b.dtype == torch.float32 and "running" in n:
            np.save(os.path.join(out, n + ".npy"), b.cpu().numpy())
    del opt, model
    torch.cuda.empty_cache()
    return loss.item()


def tied_aliases(model):
    """Each tied parameter's other names (a tied head's), by the first
    name, the one named_parameters gives."""
    names = {}
    for n, p in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(p), []).append(n)
    return {group[0]: group[1:] for group in names.values() if len(group) > 1}


def align_tied_names(dirs, got, aliases):
    """Where the step under test wrote a tied parameter and its moment
    under another of its names (the exported graph's: Hugging Face's tied
    head is `lm_head` there), PyTorch's steps in `dirs` take that name."""
    for first, others in aliases.items():
        for alias in others:
            for suffix in (".npy", ".exp_avg.npy"):
                if (os.path.exists(os.path.join(got, first + suffix)) or
                        not os.path.exists(os.path.join(got, alias + suffix))):
                    continue
                for d in dirs:
                    if os.path.exists(os.path.join(d, first + suffix)):
                        os.replace(os.path.join(d, first + suffix),
                                   os.path.join(d, alias + suffix))


def phase_scale_parity(args, results, trainer):
    sys.path.insert(0, args.bundle)
    from stepcompare import TOLERANCE, compare_dirs
    import torch
    import export_models
    ok, rows = True, []
    for name in MODELS:
        arts = artifacts(args.bundle, name)
        if not arts:
            continue
        weights = os.path.join(args.work, name + ".safetensors")
        model = build(args.bundle, name)
        export_models.save_state_dict(model, weights)
        aliases = tied_aliases(model)
        del model
        # The variants' step at the smallest batch (all but the largest
        # that fits read the same one).
        shape, data_name, label_name = min(
            (batch_of(args.bundle, a) for a in arts.values()),
            key=lambda b: int(np.prod(b[0])))
        x, y = make_batch(name, shape)
        inputs = os.path.join(args.work, name + "-in")
        os.makedirs(inputs, exist_ok=True)
        np.save(os.path.join(inputs, data_name + ".npy"), x.numpy())
        np.save(os.path.join(inputs, label_name + ".npy"), y.numpy())
        ref = os.path.join(args.work, name + "-torch-fp32")
        # nanoGPT's fused-attention path: the same math as the exported
        # masked one, in less memory at T 1024.
        losses = {"torch_fp32": torch_step_results(
            build(args.bundle, name, sdpa=True), x, y, "fp32", ref)}
        torch_bf16 = os.path.join(args.work, name + "-torch-bf16")
        losses["torch_bf16"] = torch_step_results(
            build(args.bundle, name, sdpa=True), x, y, "bf16", torch_bf16)
        # fp64, the reference of the fp32 steps: a deep network from its
        # initial weights carries rounding far (ResNet-50's first layers'
        # fp32 gradients differ from fp64 by a few % in PyTorch too), so
        # gpuc's fp32 step is held to PyTorch fp32's distance from it.
        # Only an fp32 artifact reads it (GPUC_SCALE_VARIANTS may select
        # bf16 ones alone, and the device's minutes are few).
        ref64 = os.path.join(args.work, name + "-torch-fp64")
        if any(precision_of(p) == "fp32" for p in arts):
            try:
                losses["torch_fp64"] = torch_step_results(
                    build(args.bundle, name, sdpa=True), x, y, "fp64", ref64)
            except torch.cuda.OutOfMemoryError:
                torch.cuda.empty_cache()
                losses["torch_fp64"] = torch_step_results(
                    build(args.bundle, name, sdpa=True), x, y, "fp64", ref64,
                    device="cpu")
        for precision, artifact in sorted(arts.items()):
            if batch_of(args.bundle, artifact)[0] != shape:
                # The same step at another batch (the largest that fits):
                # timed by the bench, its parity is the smaller one's.
                print("%s %s: batch %s, not compared (the bench times it)" % (
                    name, precision, batch_of(args.bundle, artifact)[0]))
                continue
            got = os.path.join(args.work, artifact)
            try:
                trainer(args, artifact, "--run-step", inputs, "--output-dir",
                        got, "--init", weights, "--seed", 7)
            except RuntimeError as e:  # the next artifact still runs
                ok = False
                rows.append({"model": name, "precision": precision,
                             "ok": False, "error": str(e)[-2000:]})
                print("%s %s: FAILED: %s" % (name, precision, e))
                continue
            losses["gpuc_" + precision] = float(
                np.load(os.path.join(got, "loss.npy")))
            align_tied_names([ref, torch_bf16, ref64], got, aliases)
            tol = TOLERANCE[precision_of(precision)]
            fp32 = precision_of(precision) == "fp32"
            n, worst, worst_name, noisy, failures = compare_dirs(
                ref64 if fp32 else ref, got, **tol)
            row = {"model": name, "precision": precision, "tensors": n,
                   "worst": worst, "worst_tensor": worst_name,
                   "noisy": noisy, "failures": failures[:10]}
            if fp32:
                _, torch_worst, torch_worst_name, _, _ = compare_dirs(
                    ref64, ref, **tol)
                _, to_torch, _, _, _ = compare_dirs(ref, got, **tol)
                row["torch_fp32_worst"] = torch_worst
                row["torch_fp32_worst_tensor"] = torch_worst_name
                row["worst_against_torch_fp32"] = to_torch
                passed = worst <= max(1.0, 2.0 * torch_worst)
            else:
                # PyTorch's own bf16 step, measured the same way.
                _, torch_worst, _, _, _ = compare_dirs(ref, torch_bf16, **tol)
                row["torch_bf16_worst"] = torch_worst
                passed = worst <= max(1.0, 2.0 * torch_worst)
            row["ok"] = passed
            ok &= passed
            rows.append(row)
            print("%s %s: %d tensors, worst %.3f of the tolerance (%s)%s; "
                  "losses %s: %s" % (
                      name, precision, n, worst, worst_name,
                      " from fp64, PyTorch fp32 %.3f (%s), %.3f from PyTorch "
                      "fp32" % (row["torch_fp32_worst"],
                                row["torch_fp32_worst_tensor"],
                                row["worst_against_torch_fp32"]) if fp32 else
                      ", PyTorch bf16 %.3f" % row["torch_bf16_worst"],
                      json.dumps(losses), "ok" if passed else "FAILED"))
            for f in failures[:10] if not passed else []:
                print("  " + f)
        for row in rows:
            if row["model"] == name:
                row["losses"] = losses
        torch.cuda.empty_cache()
    results["scale_parity"] = rows
    return ok and bool(rows)


def kernel_choices(report):
    """The generated kernels' alternatives that a --profile report timed
    (its lines `train_step step N (kernel k4 DIGEST): #0 k4 412.3* #1 k4_b2
    380.1 ...`), one entry per launch name: each candidate's us per run and
    which the trainer launches (*)."""
    seen, choices = set(), []
    for m in re.finditer(r"\(kernel (\S+)(?: \w+)?\):((?: #\d+ \S+ (?:[\d.]+\*?|-))+)",
                         report):
        if m.group(1) in seen:
            continue
        seen.add(m.group(1))
        candidates = []
        for name, time in re.findall(r"#\d+ (\S+) ([\d.]+\*?|-)", m.group(2)):
            candidates.append({"name": name,
                               "us": None if time == "-" else
                               float(time.rstrip("*")),
                               "chosen": time.endswith("*")})
        choices.append({"launch": m.group(1), "candidates": candidates})
    return choices


def kept_kernel_choices(bundle, artifact):
    """The entry point each generated kernel's launch runs, as the trainer
    keeps it in the artifact's library-algorithms.json (per GPU, keyed
    `kernel <launch> <digest>`, the candidate's index: the launch itself,
    then plan.json's alternatives in order)."""
    directory = os.path.join(bundle, "artifacts", artifact)
    try:
        with open(os.path.join(directory, "library-algorithms.json")) as f:
            kept = json.load(f)
    except (OSError, ValueError):
        return {}
    alternatives = {k["name"]: [k["name"]] + [a["name"] for a in
                                              k.get("alternatives", [])]
                    for k in plan_of(bundle, artifact)["kernels"]}
    chosen = {}
    for gpu, choices in kept.items():
        for key, index in choices.items():
            parts = key.split()
            if parts[0] != "kernel" or len(parts) < 2:
                continue
            names = alternatives.get(parts[1], [])
            chosen["%s %s" % (gpu, parts[1])] = (
                names[index] if isinstance(index, int) and index < len(names)
                else index)
    return chosen


def phase_scale_profile(args, results, trainer):
    """Where each scale artifact's GPU time goes: two steps under --profile
    (kernel by kernel, timed with events), the report's head printed."""
    rows = []
    for name in MODELS:
        weights = os.path.join(args.work, name + ".safetensors")
        for precision, artifact in sorted(artifacts(args.bundle, name).items()):
            if not os.path.exists(weights):
                continue
            r = trainer(args, artifact, "--bench-steps", 2, "--init", weights,
                        "--profile", os.path.join(args.results,
                                                  "trace-%s.json" % artifact),
                        check=False)
            report = r.stderr[r.stderr.find("gpuc profile"):]
            # What the load said of cuDNN's fused attention (whether it
            # agreed with the kernels, which of the two ran and their
            # times, or why it did not take an attention).
            cudnn = [line for line in r.stderr.splitlines()
                     if "cuDNN's fused attention" in line
                     or "the generated kernels run" in line]
            print("== %s (exit %d)\n%s" % (
                artifact, r.returncode,
                "\n".join(cudnn + report.splitlines()[:40])))
            choices = kernel_choices(report)
            for c in choices:
                print("  %s: %s" % (c["launch"], ", ".join(
                    "%s %s us%s" % (e["name"], e["us"],
                                    " (chosen)" if e["chosen"] else "")
                    for e in c["candidates"])))
            rows.append({"artifact": artifact, "exit": r.returncode,
                         "report": report, "cudnn_attention": cudnn,
                         "kernel_choices": choices,
                         "kept_choices": kept_kernel_choices(args.bundle,
                                                             artifact)})
    results["scale_profile"] = rows
    try:
        results["sdpa_reference"] = sdpa_reference()
    except Exception as e:  # a reference only: the phase's figures stand
        print("torch SDPA reference failed: %s" % e)
        results["sdpa_reference"] = {"error": str(e)}
    return all(row["exit"] == 0 for row in rows)


def sdpa_reference(batch=16, heads=12, tokens=1024, width=64):
    """PyTorch's scaled_dot_product_attention at GPT-2's attention shape
    (causal, bf16), forward and forward + backward, in ms per layer: what
    the profile's fused attention kernels (--attention flash) compete
    with. Best of 5 timings of 20 calls each, first with the backend
    PyTorch picks, then with each backend alone (FlashAttention, cuDNN's
    fused attention, memory-efficient), on contiguous [B, H, T, D] heads
    and on nanoGPT's (views of the [B, T, 3C] projection, as gpuc's fused
    kernels read them); each backend's backward is also run once under
    torch.use_deterministic_algorithms, which says whether PyTorch counts
    it deterministic. Whether cuDNN's attention is worth taking beside
    gpuc's own kernels is read off these figures."""
    import torch
    import torch.nn.functional as F
    shape = (batch, heads, tokens, width)

    def contiguous():
        return [torch.randn(shape, device="cuda", dtype=torch.bfloat16,
                            requires_grad=True) for _ in range(3)]

    def projected():
        # One [B, T, 3C] tensor, split and viewed as nanoGPT does.
        qkv = torch.randn((batch, tokens, 3 * heads * width), device="cuda",
                          dtype=torch.bfloat16, requires_grad=True)
        return [t.view(batch, tokens, heads, width).transpose(1, 2)
                for t in qkv.split(heads * width, dim=2)]

    grad = torch.randn(shape, device="cuda", dtype=torch.bfloat16)

    def best(call):
        call()
        times = []
        for _ in range(5):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(20):
                call()
            torch.cuda.synchronize()
            times.append(1000.0 * (time.perf_counter() - t0) / 20)
        return min(times)

    def timed(layout, backend):
        q, k, v = layout()

        def forward():
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)

        def both():
            forward().backward(grad)
        row = {}
        try:
            row["forward_ms"] = best(forward)
            row["forward_backward_ms"] = best(both)
        except RuntimeError as e:
            row["error"] = str(e).splitlines()[0][:200]
            return row
        try:
            torch.use_deterministic_algorithms(True)
            both()
            torch.cuda.synchronize()
            row["deterministic"] = True
        except RuntimeError as e:
            row["deterministic"] = False
            row["deterministic_error"] = str(e).splitlines()[0][:200]
        finally:
            torch.use_deterministic_algorithms(False)
        return row

    rows = {"shape": list(shape), "dtype": "bf16", "causal": True,
            "torch": torch.__version__, "backends": []}
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        backends = [("default", None)] + [
            (name, getattr(SDPBackend, attr))
            for name, attr in (("flash", "FLASH_ATTENTION"),
                               ("cudnn", "CUDNN_ATTENTION"),
                               ("efficient", "EFFICIENT_ATTENTION"))
            if hasattr(SDPBackend, attr)]
    except ImportError:
        sdpa_kernel, backends = None, [("default", None)]
    import contextlib
    for layout_name, layout in (("bhtd", contiguous), ("nanogpt", projected)):
        for name, backend in backends:
            with (sdpa_kernel(backend) if backend is not None
                  else contextlib.nullcontext()):
                row = timed(layout, backend)
            row.update({"backend": name, "layout": layout_name})
            rows["backends"].append(row)
            if "error" in row:
                print("torch SDPA %s %s: %s" % (name, layout_name,
                                                row["error"]))
                continue
            print("torch SDPA %s bf16 causal, %s, %s: forward %.3f ms, "
                  "forward + backward %.3f ms per layer%s (compare the "
                  "profile's attention kernels)" % (
                      "x".join(map(str, shape)), name, layout_name,
                      row["forward_ms"], row["forward_backward_ms"],
                      "" if row.get("deterministic") else
                      ", not deterministic (%s)" % row.get(
                          "deterministic_error", "")))
    default = rows["backends"][0]
    rows["forward_ms"] = default.get("forward_ms")
    rows["forward_backward_ms"] = default.get("forward_backward_ms")
    return rows


def peak_tflops(precision):
    import torch
    name = torch.cuda.get_device_name()
    for gpu in sorted(PEAKS, key=len, reverse=True):
        if gpu in name:
            return PEAKS[gpu][precision]
    return None


def torch_peer(bundle, name, shape, precision, mode):
    """A timed PyTorch training step as people write it."""
    import torch
    import torch.nn.functional as F
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    model = build(bundle, name, sdpa=True).cuda().train()
    x, y = make_batch(name, shape)
    x, y = x.cuda(), y.cuda()
    if name == "resnet50":
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    opt = torch.optim.AdamW(model.parameters(), fused=True, **HYPER)
    forward = torch.compile(model) if mode == "compile" else model

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16,
                            enabled=precision == "bf16"):
            out = forward(x)
            loss = F.cross_entropy(out.reshape(-1, out.shape[-1]),
                                   y.reshape(-1))
        loss.backward()
        opt.step()

    def timed(steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
        return 1000.0 * (time.perf_counter() - t0) / steps
    timed(3)  # warm-up, compilation included
    return timed


def phase_scale_bench(args, results, trainer):
    import torch
    import export_models
    steps, rounds = args.scale_steps, args.rounds
    rows = []
    print("load average %s; %s; torch %s; best of %d rounds of %d steps" % (
        os.getloadavg(), torch.cuda.get_device_name(), torch.__version__,
        rounds, steps))
    print("| model | precision | batch | gpuc ms | eager ms | compile ms | "
          "gpuc tokens or images/s | x eager | x compile | MFU gpuc | "
          "MFU compile |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, facts in MODELS.items():
        arts = artifacts(args.bundle, name)
        if not arts:
            continue
        weights = os.path.join(args.work, name + ".safetensors")
        if not os.path.exists(weights):
            export_models.save_state_dict(build(args.bundle, name), weights)
        # PyTorch's steps per precision, built once (torch.compile's
        # compile is minutes) for every artifact of that precision.
        peers_of = {}
        for precision, artifact in sorted(arts.items()):
            shape, _, _ = batch_of(args.bundle, artifact)
            with open(os.path.join(args.bundle, "artifacts", artifact,
                                   "report.json")) as f:
                flops = json.load(f)["flops"]
            # Peers by precision and batch; another batch (the largest
            # that fits) first frees the others' memory.
            key = (precision_of(precision), tuple(shape))
            if key not in peers_of:
                peers_of.clear()
                gc.collect()
                torch.cuda.empty_cache()
            peers = peers_of.setdefault(key, {})
            for mode in ("eager", "compile"):
                if mode in peers:
                    continue
                try:
                    peers[mode] = torch_peer(args.bundle, name, shape,
                                             precision_of(precision), mode)
                except Exception as e:  # noqa: BLE001 - reported
                    print("torch %s %s %s failed: %s" % (mode, name,
                                                         precision, e))
            best = {}
            for _ in range(rounds):
                torch.cuda.empty_cache()
                r = trainer(args, artifact, "--bench-steps", steps,
                            "--init", weights, check=False)
                if r.returncode != 0:
                    print("gpuc %s failed (%d): %s" % (
                        artifact, r.returncode, r.stderr[-2000:]))
                    break
                ms = json.loads(r.stdout.strip().splitlines()[-1])[
                    "ms_per_step"]
                best["gpuc"] = min(best.get("gpuc", float("inf")), ms)
                for mode, timed in peers.items():
                    best[mode] = min(best.get(mode, float("inf")),
                                     timed(steps))
            del peers
            torch.cuda.empty_cache()
            if "gpuc" not in best:
                rows.append({"model": name, "precision": precision,
                             "gpuc_ms": None})
                continue
            units = shape[0] * (shape[1] if facts["unit"] == "tokens" else 1)
            peak = peak_tflops(precision_of(precision))

            def mfu(ms):
                return (flops / (ms / 1000.0) / (peak * 1e12)
                        if ms and peak else None)
            row = {"model": name, "precision": precision, "batch": shape,
                   "flops_per_step": flops, "peak_tflops": peak,
                   "gpuc_ms": best.get("gpuc"), "eager_ms": best.get("eager"),
                   "compile_ms": best.get("compile"),
                   facts["unit"] + "_per_s": units * 1000.0 / best["gpuc"],
                   "mfu_gpuc": mfu(best.get("gpuc")),
                   "mfu_compile": mfu(best.get("compile"))}
            rows.append(row)

            def f(v, fmt="%.2f"):
                return "-" if v is None else fmt % v
            g = best["gpuc"]
            print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                name, precision, "x".join(map(str, shape)), f(g, "%.1f"),
                f(best.get("eager"), "%.1f"), f(best.get("compile"), "%.1f"),
                f(units * 1000.0 / g, "%.0f"),
                f(best.get("eager") and best["eager"] / g),
                f(best.get("compile") and best["compile"] / g),
                f(row["mfu_gpuc"], "%.3f"), f(row["mfu_compile"], "%.3f")))
    results["scale_bench"] = {"rows": rows, "load_average": os.getloadavg(),
                              "gpu": torch.cuda.get_device_name(),
                              "torch": torch.__version__}
    return bool(rows) and all(r["gpuc_ms"] for r in rows)
