#!/usr/bin/env python3
"""Trains gpuc's example models in gpuc (through the reference interpreter)
and in PyTorch from the same ONNX initializers and the same batches, and
compares the losses step by step and the final weights.

    /usr/bin/python3 test/Training/torch_parity.py --gpuc build/bin/gpuc \
        [--models mlp,cnn,transformer] [--optimizers sgd,adamw] [--steps 20]

PyTorch computes in float64 (the model's float32 initializers widened), gpuc
in float32 with double accumulation.
Exits non-zero if any relative difference exceeds --tolerance (1e-4). Loss
difference: |l_gpuc - l_torch| / |l_torch|. Weight difference, per tensor:
||w_gpuc - w_torch|| / ||w_torch||.

Elements whose gradient is zero in exact arithmetic (a conv bias followed by
batch norm, the key bias of attention) get gradients of pure rounding noise,
~1e-9, in both implementations; Adam divides that noise by its own magnitude
and takes full steps in random directions, so no two implementations agree on
them. Elements whose PyTorch gradient is nonzero but never exceeds 1e-7 in
magnitude are therefore left out of the weight comparison, and their count is
printed. (Exactly zero gradients, as of dead ReLU units, are compared.)
Where the PyTorch weight stays near zero (a batch-norm bias whose gradient
cancels exactly in float64 but leaves float32 noise, as in MobileNet's
projection layers), the difference is measured against 1e-3 per element
instead of the weight's norm: at the default tolerance, 1e-7 per element.
"""
import argparse
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
from export_models import CNN, MLP, TransformerBlock, export  # noqa: E402

BATCH = {"mlp": 8, "cnn": 4, "transformer": 4, "activations": 8,
         "decoder": 4, "lstm": 8, "gru": 8,
         "bigru": 8, "upsampler": 4, "sequence1d": 8,
         "vit": 4, "resnet18": 2, "mobilenet_v2": 2,
         "mobilenet_v3_small": 2, "efficientnet_b0": 2, "convnext_tiny": 2,
         "swin_t": 2}
# torchvision's classifiers (10 classes) on small RGB images: the model zoo.
ZOO = ("resnet18", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0",
       "convnext_tiny", "swin_t")


def image_shape(name):
    return (3, 64, 64) if name in ZOO else (1, 28, 28)
# Models of token sequences: a next token per position.
TOKEN_MODELS = ("transformer", "decoder")


class NewGELU(torch.nn.Module):
    """GPT-2's gelu_new as Hugging Face writes it."""

    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (
            x + 0.044715 * torch.pow(x, 3.0))))


class Activations(torch.nn.Module):
    """The activations MobileNets and other torchvision/timm models export
    (ReLU6 as Clip, Hardswish, Hardsigmoid, LeakyReLU, ELU, SELU, CELU,
    Softplus, Mish as Softplus + Tanh + Mul, Softsign, PReLU), and GELU
    three ways (erf, the tanh approximation, and GPT-2's gelu_new, each a
    chain of ops below opset 20 that import makes one gpuc.gelu) between
    linear layers, so each one's gradient reaches a weight."""

    def __init__(self):
        super().__init__()
        nn = torch.nn
        acts = [nn.ReLU6(), nn.Hardswish(), nn.Hardsigmoid(),
                nn.LeakyReLU(0.1), nn.ELU(0.7), nn.SELU(), nn.CELU(1.3),
                nn.Softplus(), nn.Mish(), nn.Softsign(), nn.PReLU(32),
                nn.GELU(), nn.GELU(approximate="tanh"), NewGELU()]
        layers = [nn.Flatten(), nn.Linear(784, 32)]
        for act in acts:
            layers += [act, nn.Linear(32, 32)]
        layers.append(nn.Linear(32, 10))
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


class Decoder(torch.nn.Module):
    """A GPT-style decoder block written as people write it: positions from
    torch.arange, the causal mask from torch.triu and masked_fill, q, k and
    v from one projection's split, GELU in the MLP."""

    def __init__(self, vocab=64, seq=16, dim=32, heads=4):
        super().__init__()
        nn = torch.nn
        self.heads = heads
        self.tok, self.pos = nn.Embedding(vocab, dim), nn.Embedding(seq, dim)
        self.ln1, self.ln2, self.ln_f = (nn.LayerNorm(dim), nn.LayerNorm(dim),
                                         nn.LayerNorm(dim))
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.fc, self.out = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, idx):
        b, t = idx.shape
        x = self.tok(idx) + self.pos(torch.arange(0, t, dtype=torch.long))
        c, h = x.shape[-1], self.heads
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, h, c // h).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / (c // h) ** 0.5)
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        att = torch.softmax(att.masked_fill(mask, float("-inf")), dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, c))
        x = x + self.out(torch.nn.functional.gelu(self.fc(self.ln2(x))))
        return self.head(self.ln_f(x))
class RowRNN(torch.nn.Module):
    """A sequence classifier: an image's 28 rows as 28 steps of an LSTM or
    GRU (batch first, optionally bidirectional), the last step's output
    into a linear layer."""

    def __init__(self, cell, bidirectional=False):
        super().__init__()
        self.rnn = getattr(torch.nn, cell)(28, 32, batch_first=True,
                                           bidirectional=bidirectional)
        self.fc = torch.nn.Linear(64 if bidirectional else 32, 10)

    def forward(self, x):
        y, _ = self.rnn(x.reshape(x.shape[0], 28, 28))
        return self.fc(y[:, -1])


class Upsampler(torch.nn.Module):
    """Image-to-image layers: reflect and replicate padding, instance and
    group norm, a strided transposed convolution with output padding,
    nearest and bilinear upsampling (ONNX Pad edge/reflect,
    InstanceNormalization, ConvTranspose, Resize)."""

    def __init__(self):
        super().__init__()
        nn = torch.nn
        self.net = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1, padding_mode="reflect"),
            nn.InstanceNorm2d(8, affine=True), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 8, 3, padding=1, padding_mode="replicate"),
            nn.GroupNorm(2, 8), nn.ReLU(),
            nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1,
                               output_padding=1),
            nn.Upsample(scale_factor=2, mode="nearest"), nn.AvgPool2d(4),
            nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False),
            nn.AvgPool2d(4), nn.Flatten(), nn.Linear(4 * 7 * 7, 10))

    def forward(self, x):
        return self.net(x)


class Sequence1d(torch.nn.Module):
    """An image's rows as 28 channels of a length-28 signal: 1-D
    convolutions (one reflect-padded) and pooling, then self-attention
    written with einsum."""

    def __init__(self):
        super().__init__()
        nn = torch.nn
        self.conv = nn.Sequential(
            nn.Conv1d(28, 16, 5, padding=2), nn.ReLU(), nn.MaxPool1d(2),
            nn.Conv1d(16, 16, 3, padding=1, padding_mode="reflect"),
            nn.AvgPool1d(2))
        self.qkv = nn.Linear(16, 48)
        self.fc = nn.Linear(7 * 16, 10)

    def forward(self, x):
        h = self.conv(x.reshape(x.shape[0], 28, 28)).transpose(1, 2)
        q, k, v = self.qkv(h).split(16, dim=2)
        att = torch.softmax(torch.einsum("bid,bjd->bij", q, k) * 0.25, dim=-1)
        y = torch.einsum("bij,bjd->bid", att, v)
        return self.fc(y.reshape(y.shape[0], -1))


class ViT(torch.nn.Module):
    """A ViT-like classifier: 7x7 patches embedded by a strided convolution,
    learned positions and a class token, two torch.nn.TransformerEncoder
    layers (pre-norm, GELU), the class token's output into a linear head."""

    def __init__(self, dim=32):
        super().__init__()
        nn = torch.nn
        self.patch = nn.Conv2d(1, dim, 7, stride=7)
        self.cls = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, 17, dim) * 0.02)
        layer = nn.TransformerEncoderLayer(dim, 4, 64, dropout=0.0,
                                           activation="gelu",
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2,
                                             enable_nested_tensor=False)
        self.head = nn.Linear(dim, 10)

    def forward(self, x):
        p = self.patch(x).flatten(2).transpose(1, 2)
        p = torch.cat([self.cls.expand(x.shape[0], -1, -1), p], dim=1)
        return self.head(self.encoder(p + self.pos)[:, 0])


OPTIMIZERS = {
    "sgd": (["--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9"],
            lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9)),
    "adamw": (["--optimizer", "adamw", "--lr", "0.001", "--weight-decay",
               "0.01"],
              lambda p: torch.optim.AdamW(p, lr=0.001, weight_decay=0.01)),
}


def make_model(name):
    torch.manual_seed(0)
    if name == "mlp":
        return MLP(dropout=0.0), "image", 17
    if name == "cnn":
        return CNN(), "image", 17
    if name == "activations":
        return Activations(), "image", 17
    if name in ("lstm", "gru", "bigru"):
        return (RowRNN("LSTM" if name == "lstm" else "GRU", name == "bigru"),
                "image", 17)
    if name == "vit":
        return ViT(), "image", 17
    if name == "upsampler":
        return Upsampler(), "image", 17
    if name == "sequence1d":
        return Sequence1d(), "image", 17
    if name == "decoder":
        return Decoder(), "tokens", 17
    if name in ZOO:
        # (Dropout off: its masks are random on each side.)
        import torchvision_model
        return torchvision_model.build(name, classes=10), "image", 17
    return TransformerBlock(), "tokens", 14


def batches(name, steps):
    rng = np.random.RandomState(1)
    for _ in range(steps):
        b = BATCH[name]
        if name in TOKEN_MODELS:
            yield (rng.randint(0, 64, (b, 16)).astype(np.int64),
                   rng.randint(0, 64, (b, 16)).astype(np.int64))
        else:
            yield (rng.randn(b, *image_shape(name)).astype(np.float32),
                   rng.randint(0, 10, b).astype(np.int64))


def load_initializers(model, path):
    """Starts `model` from exactly the ONNX file's initializers (tracing in
    training mode may have touched batch-norm statistics)."""
    inits = {t.name: torch.from_numpy(numpy_helper.to_array(t).copy())
             for t in onnx.load(path).graph.initializer}
    state = model.state_dict()
    for key in state:
        if key in inits:
            state[key] = inits[key]
    missing = [n for n, _ in model.named_parameters() if n not in inits]
    if missing:
        raise SystemExit(f"{path}: parameters missing from the ONNX file: "
                         f"{missing}")
    model.load_state_dict(state)


def weight_difference(model, state_dir, max_grad):
    """The largest per-tensor ||w_gpuc - w_torch|| / ||w_torch||, its
    tensor, and the elements left out (see the module's docstring)."""
    worst_weight, worst_name, excluded = 0.0, "", 0
    for pname, p in model.named_parameters():
        mine = np.load(os.path.join(state_dir, pname + ".npy"))
        ref = p.detach().numpy()
        g = max_grad[pname].numpy()
        live = (g > 1e-7) | (g == 0)
        excluded += int((~live).sum())
        mine, ref = mine[live], ref[live]
        if ref.size == 0:
            continue
        # A reference near zero (a bias whose gradient cancels: float64
        # PyTorch leaves it at ~0, float32 gpuc moves it by rounding noise)
        # is measured against 1e-3 per element instead.
        rel = np.linalg.norm(mine - ref) / max(np.linalg.norm(ref),
                                               1e-3 * np.sqrt(ref.size))
        if rel > worst_weight:
            worst_weight, worst_name = rel, pname
    return worst_weight, worst_name, excluded


def force_state(model, opt, state_dir):
    """Writes PyTorch's parameters, buffers and optimizer state over
    gpuc's, so that the next step starts both from the same values."""
    for pname, t in list(model.named_parameters()) + list(
            model.named_buffers()):
        path = os.path.join(state_dir, pname + ".npy")
        if os.path.exists(path):
            np.save(path, t.detach().float().numpy())
    names = {p: n for n, p in model.named_parameters()}
    for p, st in opt.state.items():
        for key, value in st.items():
            path = os.path.join(state_dir, "%s.%s.npy" % (names[p], key))
            if torch.is_tensor(value) and os.path.exists(path):
                np.save(path, value.detach().float().numpy())


def run_one(gpuc, name, opt_name, steps, workdir, precision, forced):
    model, input_name, opset = make_model(name)
    path = os.path.join(workdir, f"{name}.onnx")
    export(model, torch.zeros((2, 16), dtype=torch.int64)
           if name in TOKEN_MODELS else torch.randn(2, *image_shape(name)),
           path, input_name, opset)
    load_initializers(model, path)
    model.train()
    # PyTorch runs in float64, so the reference carries no float32
    # reduction error of its own: a batch-norm bias gradient is a sum of
    # 100k terms that nearly cancel, and float32 PyTorch's differs from
    # the interpreter's (double accumulation) by up to 1e-3 relative after
    # 20 momentum steps on some CPUs (seen on one machine, not another).
    # Mixed precision (bf16) compares with PyTorch's CPU autocast instead:
    # float32 master weights, bf16 GEMMs and convolutions.
    if precision == "fp32":
        model.double()

    flags, make_opt = OPTIMIZERS[opt_name]
    step_mlir = os.path.join(workdir, f"{name}.{opt_name}.mlir")
    cmd = [gpuc, "import", path, "--batch", str(BATCH[name]), "--train",
           "--loss", "cross_entropy", "--loss-output", "logits",
           "-o", step_mlir, "--precision", precision] + flags
    if name in TOKEN_MODELS:
        cmd += ["--class-axis", "-1"]
    subprocess.run(cmd, check=True)
    state_dir = os.path.join(workdir, f"{name}.{opt_name}.state")
    os.makedirs(state_dir, exist_ok=True)

    opt = make_opt(model.parameters())
    max_grad = {n: torch.zeros_like(p) for n, p in model.named_parameters()}
    loss_fn = torch.nn.CrossEntropyLoss()
    worst_loss, worst_weight, worst_name, excluded = 0.0, 0.0, "", 0
    for step, (x, y) in enumerate(batches(name, steps)):
        xp, yp = os.path.join(workdir, "x.npy"), os.path.join(workdir, "y.npy")
        np.save(xp, x)
        np.save(yp, y)
        subprocess.run([gpuc, "run", step_mlir, "--input",
                        f"{input_name}={xp}", "--input", f"label={yp}",
                        "--param-dir", state_dir, "--output-dir", state_dir,
                        "--step", str(step)], check=True)
        gpuc_loss = float(np.load(os.path.join(state_dir, "loss.npy")))
        opt.zero_grad()
        xt = torch.from_numpy(x)
        with torch.autocast("cpu", dtype=torch.bfloat16,
                            enabled=precision == "bf16"):
            out = model(xt.double() if xt.is_floating_point() and
                        precision == "fp32" else xt)
            if name in TOKEN_MODELS:
                out = out.permute(0, 2, 1)
            loss = loss_fn(out, torch.from_numpy(y))
        loss.backward()
        for n, p in model.named_parameters():
            max_grad[n] = torch.maximum(max_grad[n], p.grad.abs())
        opt.step()
        if forced:
            # This step's weights, each side from the same start.
            ww, wn, excluded = weight_difference(model, state_dir, max_grad)
            if ww >= worst_weight:
                worst_weight, worst_name = ww, wn
            force_state(model, opt, state_dir)
        rel = abs(gpuc_loss - loss.item()) / abs(loss.item())
        if os.environ.get("GPUC_VERBOSE"):
            print(f"  step {step}: gpuc {gpuc_loss:.6f} torch {loss.item():.6f} rel {rel:.2e}")
        worst_loss = max(worst_loss, rel)
    if not forced:
        worst_weight, worst_name, excluded = weight_difference(
            model, state_dir, max_grad)
    return worst_loss, worst_weight, worst_name, loss.item(), excluded


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpuc", required=True)
    parser.add_argument("--models", default="mlp,cnn,transformer")
    parser.add_argument("--optimizers", default="sgd,adamw")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--tolerance", type=float, default=1e-4)
    parser.add_argument("--weight-tolerance", type=float, default=None,
                        help="for the final weights (default: --tolerance)")
    parser.add_argument("--forced", action="store_true",
                        help="start every step of gpuc from PyTorch's "
                        "weights and optimizer state: compares each step, "
                        "without the drift of two trajectories")
    parser.add_argument("--precision", default="fp32",
                        choices=["fp32", "bf16"])
    args = parser.parse_args()
    failed = False
    with tempfile.TemporaryDirectory() as workdir:
        for name in args.models.split(","):
            for opt_name in args.optimizers.split(","):
                wl, ww, wn, final, excluded = run_one(
                    args.gpuc, name, opt_name, args.steps, workdir,
                    args.precision, args.forced)
                ok = wl <= args.tolerance and ww <= (
                    args.weight_tolerance if args.weight_tolerance is not None
                    else args.tolerance)
                failed |= not ok
                print(f"{'PASS' if ok else 'FAIL'} {name} {opt_name} "
                      f"{args.precision} "
                      f"{args.steps} steps: final loss {final:.6f}, max loss "
                      f"rel diff {wl:.2e}, max weight rel diff {ww:.2e} "
                      f"({wn}); {excluded} zero-gradient elements not "
                      f"compared", flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
