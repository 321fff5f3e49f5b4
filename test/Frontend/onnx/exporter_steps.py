"""What the tests of PyTorch's exports share: running gpuc, one AdamW step
of a compiled export, PyTorch's own step and gradients of the same module,
and the distances between them.

Each check prints one line for FileCheck, `FAILED ` before it when it
fails; the caller exits non-zero when `failed` is not empty."""
import os
import subprocess

import numpy as np
import torch

failed = []


def check(ok, line):
    print(("" if ok else "FAILED ") + line, flush=True)
    if not ok:
        failed.append(line)


def run(*args, **kwargs):
    return subprocess.run([str(a) for a in args], capture_output=True,
                          text=True, **kwargs)


class Padded(torch.nn.Module):
    """A Hugging Face model as (tokens, attention mask) -> logits: its
    padding read from the mask."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, tokens, mask):
        return self.model(input_ids=tokens, attention_mask=mask,
                          use_cache=False).logits


def dynamo_export(model, example, name, path, optimize):
    """Exports `model` in training mode with the dynamo exporter, its
    batch dynamic. `example` and `name` are one input's, or tuples of
    several inputs' that share the batch."""
    if not isinstance(example, tuple):
        example = (example,)
    if isinstance(name, str):
        name = (name,)
    model.train()
    batch = torch.export.Dim("batch")
    torch.onnx.export(model, example, path, input_names=list(name),
                      output_names=["logits"],
                      dynamic_shapes=tuple({0: batch} for _ in example),
                      dynamo=True, optimize=optimize)


def step(gpuc, path, flags, folder, data):
    """One AdamW step (lr 1e-3, weight decay 0.01) of the export at `path`
    compiled for the CPU at batch 4: {file: array} of what `train
    --run-step` writes (the loss, each parameter and its moments)."""
    out = folder + "/artifact"
    result = run(gpuc, "compile", path, "--batch", 4, "--optimizer", "adamw",
                 "--lr", "0.001", "--weight-decay", "0.01", "--target",
                 "cpu", "-o", out, *flags)
    if result.returncode:
        raise RuntimeError(result.stderr)
    result = run(out + "/train", "--device", "cpu", "--run-step", data,
                 "--output-dir", folder + "/step", "--seed", 7, "--step", 1)
    if result.returncode:
        raise RuntimeError(result.stderr)
    return {f: np.load(os.path.join(folder, "step", f))
            for f in os.listdir(folder + "/step") if f.endswith(".npy")}


def step_gradients(ours):
    """The gradients of a `step` result: its first moments over 1 - beta1
    (AdamW's first moment after one step is (1 - beta1) * gradient, and
    beta1 is 0.9), by parameter name, in float64."""
    return {f[:-len(".exp_avg.npy")]: ours[f].astype(np.float64) / 0.1
            for f in ours if f.endswith(".exp_avg.npy")}


def _loss(model, inputs, labels):
    logits = model(*inputs)
    return torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


def reference_step(build, dtype, inputs, labels):
    """PyTorch's own AdamW step (lr 1e-3, weight decay 0.01, as step()'s)
    of the module `build()` makes, seeded, in `dtype`: the loss and
    every parameter after the step, in float64."""
    torch.manual_seed(0)
    reference = build().train().to(dtype)
    optimizer = torch.optim.AdamW(reference.parameters(), lr=1e-3,
                                  weight_decay=0.01)
    loss = _loss(reference, inputs, labels)
    loss.backward()
    optimizer.step()
    return loss.item(), {n: p.detach().double().numpy()
                         for n, p in reference.named_parameters()}


def reference_gradients(build, dtype, inputs, labels):
    """The loss and every trained parameter's gradient (zero where the
    loss does not reach it), in float64, of the module `build()` makes,
    seeded, in `dtype`."""
    torch.manual_seed(0)
    reference = build().train().to(dtype)
    loss = _loss(reference, inputs, labels)
    loss.backward()
    return loss.item(), {
        n: (p.grad if p.grad is not None else torch.zeros_like(p))
        .double().numpy()
        for n, p in reference.named_parameters() if p.requires_grad}


def relative_distance(params, exact):
    """The largest distance of a parameter from `exact`'s, relative to the
    largest magnitude of `exact`'s."""
    return max(np.max(np.abs(params[n] - exact[n])) /
               (np.max(np.abs(exact[n])) + 1e-30) for n in exact)
