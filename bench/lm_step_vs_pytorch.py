#!/usr/bin/env python3
"""A GPT's CPU training step: gpuc against PyTorch, in interleaved rounds.

    /usr/bin/python3 bench/lm_step_vs_pytorch.py --preset small --seq 256 --batch 4
    /usr/bin/python3 bench/lm_step_vs_pytorch.py --preset gpt2 --seq 256 --batch 4 --steps 2
    /opt/gpuc-exporters/bin/python bench/lm_step_vs_pytorch.py --family hf --preset gpt2 --seq 1024 --batch 2 --steps 1
    ... --gpuc-variant 'whole-gemms=--attention-band-rows 0'

The model is examples/gpt.py's nanoGPT-style GPT (`tiny`, `small`: GPT-2's
vocabulary around a 4-layer width-384 body, `gpt2`: GPT-2 124M; its
attention nanoGPT's default, scaled_dot_product_attention with is_causal
(where PyTorch has it),
or with `--attention masked` its tril buffer and masked_fill), with
`--family hf` Hugging Face's GPT2LMHeadModel of the same sizes, or with
`--family llama` its LlamaForCausalLM (`--preset smollm-135m`: SmolLM's
135M sizes), or with `--family bert` its BertForMaskedLM (`--preset
bert-base`: BERT-base's sizes, 110M, attention both ways; the loss the
same cross-entropy at every position); each with SDPA attention, exported
by PyTorch's dynamo exporter without its optimizer:
run this with the Python of `scripts/torch-peer.sh --exporters`), exported
once; gpuc compiles that ONNX file (CPU target, AdamW) and PyTorch trains
the module it was exported from, with the same weights. One step is
forward, next-token cross-entropy over [batch, T, vocabulary], backward and
AdamW (lr 3e-4, weight decay 0.01 on both sides). gpuc's time is `train
--bench-steps`; PyTorch's the same step in eager mode and, where the
PyTorch has it, under torch.compile (with the fused AdamW). Both sides use
--threads threads. First, one step on the same batch checks that the two
agree: gpuc's loss (`train --run-step`) against PyTorch's in float64.
Rounds interleave the systems, so a drift of the
machine's speed hits all of them; the load average is printed. Best and
median milliseconds per step and the ratio of the bests are reported;
`--gpuc-variant` adds gpuc compiled with other flags to the same rounds.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
from torch.nn import functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
import gpt  # noqa: E402
import llama  # noqa: E402


def load_average():
    return "%.2f %.2f %.2f" % os.getloadavg()


# Hugging Face's models as tokens -> logits (examples/llama.py's wrapper).
HFLogits = llama.Logits
# Llama-family sizes (examples/llama.py): SmolLM-135M's, and a tiny one.
LLAMA_PRESETS = llama.PRESETS


# BertForMaskedLM sizes: BERT-base's, and a tiny one.
BERT_PRESETS = {
    "bert-base": dict(vocab=30522, width=768, mlp=3072, layers=12, heads=12),
    "bert-tiny": dict(vocab=1000, width=64, mlp=128, layers=2, heads=4),
}


def build(family, preset, seq, seed, attention="sdpa"):
    if family == "nanogpt":
        return gpt.build(preset, seq, seed=seed, sdpa=attention == "sdpa")
    if family == "llama":
        return llama.build(preset, seq, seed)
    if family == "bert":
        from transformers import BertConfig, BertForMaskedLM
        sizes = BERT_PRESETS[preset]
        config = BertConfig(
            vocab_size=sizes["vocab"], hidden_size=sizes["width"],
            intermediate_size=sizes["mlp"], num_hidden_layers=sizes["layers"],
            num_attention_heads=sizes["heads"],
            max_position_embeddings=max(seq, 512), hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0, attn_implementation="sdpa")
        torch.manual_seed(seed)
        return HFLogits(BertForMaskedLM(config)).train()
    from transformers import GPT2Config, GPT2LMHeadModel
    sizes = gpt.PRESETS[preset]
    config = GPT2Config(
        vocab_size=sizes["vocab"], n_positions=seq, n_embd=sizes["width"],
        n_layer=sizes["layers"], n_head=sizes["heads"], resid_pdrop=0.0,
        embd_pdrop=0.0, attn_pdrop=0.0, attn_implementation="sdpa")
    torch.manual_seed(seed)
    return HFLogits(GPT2LMHeadModel(config)).train()


def vocabulary(model):
    if isinstance(model, HFLogits):
        return model.model.config.vocab_size
    return model.wte.num_embeddings


def export(model, seq, path):
    if not isinstance(model, HFLogits):
        gpt.export(model, seq, path)
        return
    llama.export(model, seq, path)


def torch_step_time(model, batch, seq, steps, mode):
    """Milliseconds per training step of `model` (after two warm-up steps)."""
    compiled = mode == "compile"
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01,
                            **({"fused": True} if compiled else {}))
    run = torch.compile(model) if compiled else model
    vocab = vocabulary(model)
    x = torch.randint(0, vocab, (batch, seq))
    y = torch.randint(0, vocab, (batch, seq))

    def step():
        opt.zero_grad(set_to_none=True)
        logits = run(x)
        loss = F.cross_entropy(logits.view(-1, vocab), y.view(-1))
        loss.backward()
        opt.step()

    for _ in range(2):
        step()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return 1000.0 * (time.perf_counter() - start) / steps


def first_step_parity(model, trainer, batch, seq, work):
    """gpuc's loss on one batch (the step program, --run-step) against
    PyTorch's in float64 from the same weights: the relative difference."""
    vocab = vocabulary(model)
    rng = np.random.default_rng(0)
    x = rng.integers(0, vocab, (batch, seq)).astype(np.int64)
    y = rng.integers(0, vocab, (batch, seq)).astype(np.int64)
    inputs, outputs = os.path.join(work, "step-in"), os.path.join(work,
                                                                  "step-out")
    os.makedirs(inputs, exist_ok=True)
    np.save(os.path.join(inputs, "tokens.npy"), x)
    np.save(os.path.join(inputs, "label.npy"), y)
    run = subprocess.run([trainer, "--run-step", inputs, "--output-dir",
                          outputs], capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit("%s --run-step failed:\n%s" % (trainer, run.stderr))
    ours = float(np.load(os.path.join(outputs, "loss.npy")))
    with torch.no_grad():
        logits = model.double()(torch.from_numpy(x))
        theirs = F.cross_entropy(logits.view(-1, vocab),
                                 torch.from_numpy(y).view(-1)).item()
    return ours, theirs, abs(ours - theirs) / abs(theirs)


def gpuc_step_time(trainer, steps, threads):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    out = subprocess.run([trainer, "--bench-steps", str(steps)], env=env,
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["ms_per_step"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset",
                        choices=sorted(set(gpt.PRESETS) | set(LLAMA_PRESETS)
                                       | set(BERT_PRESETS)),
                        default="small")
    parser.add_argument("--family", choices=["nanogpt", "hf", "llama",
                                             "bert"],
                        default="nanogpt")
    has_sdpa = hasattr(F, "scaled_dot_product_attention")
    parser.add_argument("--attention", choices=["sdpa", "masked"],
                        default="sdpa" if has_sdpa else "masked",
                        help="nanoGPT's attention, exported and timed: its "
                        "flash path (scaled_dot_product_attention with "
                        "is_causal, PyTorch's fused kernel; the default "
                        "where PyTorch has it) or its masked path (the tril "
                        "buffer and masked_fill)")
    parser.add_argument("--seq", type=int, default=256)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--steps", type=int, default=3,
                        help="timed steps per system and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--torch-modes", default="eager,compile")
    built = os.path.join(HERE, "..", "build", "bin", "gpuc")
    parser.add_argument("--gpuc", default=built if os.path.exists(built)
                        else "gpuc", help="the gpuc to time (default: the "
                        "build's, else the one on PATH)")
    parser.add_argument("--gpuc-flags", default="",
                        help="more flags for gpuc compile")
    parser.add_argument("--gpuc-variant", action="append", default=[],
                        metavar="NAME=FLAGS",
                        help="also time gpuc compiled with these flags added "
                        "(repeatable), in the same rounds: e.g. "
                        "'whole-gemms=--attention-band-rows 0'")
    parser.add_argument("--work", default=None)
    args = parser.parse_args()
    if args.attention == "sdpa" and not has_sdpa:
        parser.error("--attention sdpa: PyTorch %s has no "
                     "scaled_dot_product_attention (scripts/torch-peer.sh "
                     "installs PyTorch 2.x)" % torch.__version__)
    if args.family == "nanogpt" and not has_sdpa:
        print("nanoGPT's attention: its masked path (PyTorch %s has no "
              "scaled_dot_product_attention)" % torch.__version__)
    presets = {"llama": LLAMA_PRESETS, "bert": BERT_PRESETS}.get(
        args.family, gpt.PRESETS)
    if args.preset not in presets:
        parser.error("--preset %s is not a %s size (%s)" % (
            args.preset, args.family, ", ".join(sorted(presets))))
    torch.set_num_threads(args.threads)
    modes = [m for m in args.torch_modes.split(",") if m]
    if "compile" in modes and not hasattr(torch, "compile"):
        print("torch.compile: not in PyTorch %s (scripts/torch-peer.sh "
              "installs PyTorch 2.x); left out" % torch.__version__)
        modes.remove("compile")
    work = args.work or tempfile.mkdtemp(prefix="gpuc-lm-bench-")
    os.makedirs(work, exist_ok=True)
    model = build(args.family, args.preset, args.seq, 0, args.attention)
    onnx_path = os.path.join(work, "gpt.onnx")
    export(model, args.seq, onnx_path)
    params = sum(p.numel() for p in model.parameters())
    variants = [("gpuc", args.gpuc_flags)]
    for spec in args.gpuc_variant:
        name, _, flags = spec.partition("=")
        if not name or not flags:
            parser.error("--gpuc-variant %r is not NAME=FLAGS" % spec)
        variants.append(("gpuc " + name, args.gpuc_flags + " " + flags))
    trainers = {}
    start = time.perf_counter()
    for i, (name, flags) in enumerate(variants):
        out = os.path.join(work, "gpuc" if i == 0 else "gpuc-%d" % i)
        subprocess.run([args.gpuc, "compile", onnx_path, "--batch",
                        str(args.batch), "--class-axis", "-1", "--optimizer",
                        "adamw", "--lr", "3e-4", "--weight-decay", "0.01",
                        "--target", "cpu", "-o", out] + flags.split(),
                       check=True, stdout=subprocess.DEVNULL)
        trainers[name] = os.path.join(out, "train")
    out = os.path.join(work, "gpuc")
    print("%s %s preset (%s attention): %.1fM parameters, T %d, batch %d, %d threads; gpuc "
          "compile %.1f s; PyTorch %s" %
          (args.family, args.preset, args.attention if args.family ==
           "nanogpt" else "sdpa", params / 1e6, args.seq, args.batch, args.threads,
           time.perf_counter() - start, torch.__version__))
    ours, theirs, rel = first_step_parity(
        build(args.family, args.preset, args.seq, 0, args.attention),
        os.path.join(out, "train"),
        args.batch, args.seq, work)
    print("first step's loss: gpuc %.7f, PyTorch (float64) %.7f, relative "
          "difference %.1e" % (ours, theirs, rel), flush=True)
    times = {name: [] for name in trainers}
    times.update({m: [] for m in modes})
    for r in range(args.rounds):
        print("round %d, load average %s" % (r + 1, load_average()),
              flush=True)
        for name, trainer in trainers.items():
            times[name].append(gpuc_step_time(trainer, args.steps,
                                              args.threads))
        for mode in modes:
            fresh = build(args.family, args.preset, args.seq, 0,
                          args.attention)
            times[mode].append(torch_step_time(fresh, args.batch, args.seq,
                                               args.steps, mode))
        print("  " + ", ".join("%s %.1f ms" % (k, v[-1])
                               for k, v in times.items()), flush=True)
    print("ms per step, best / median over %d rounds (load average now %s):"
          % (args.rounds, load_average()))
    best = {k: min(v) for k, v in times.items()}
    width = max(len(name) for name in times)
    for name, values in times.items():
        ratio = "" if name in trainers else "  " + ", ".join(
            "%s/%s %.2f" % (ours, name, best[ours] / best[name])
            for ours in trainers)
        print("  %-*s %9.1f / %9.1f%s" % (width, name, best[name],
                                          statistics.median(values), ratio))
    for name in list(trainers)[1:]:
        print("  gpuc/%s %.3f" % (name, best["gpuc"] / best[name]))


if __name__ == "__main__":
    main()
