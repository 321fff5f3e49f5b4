#!/usr/bin/env python3
"""Exports gpuc's example models to ONNX in training mode with a dynamic batch.

Run with Debian's interpreter, which sees python3-torch:
    /usr/bin/python3 examples/export_models.py [--out examples]

The weights come from a fixed seed, so the files are reproducible for a given
PyTorch version.
"""
import argparse
import inspect
import os

import torch
from torch import nn


class MLP(nn.Module):
    """784-256-128-10 with ReLU, dropout and GELU (exported as Erf)."""

    def __init__(self, dropout=0.1):
        super().__init__()
        self.net = nn.Sequential(
            nn.Flatten(),
            nn.Linear(784, 256), nn.ReLU(), nn.Dropout(dropout),
            nn.Linear(256, 128), nn.GELU(),
            nn.Linear(128, 10))

    def forward(self, x):
        return self.net(x)


class CNN(nn.Module):
    """Two conv/batch-norm blocks, max and average pooling, two linear layers."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
            nn.AvgPool2d(2))
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(),
            nn.Linear(128, 10))

    def forward(self, x):
        return self.classifier(self.features(x))


class TransformerBlock(nn.Module):
    """Token + position embedding, one pre-LayerNorm block, a vocabulary head."""

    def __init__(self, vocab=64, seq=16, dim=32, heads=4, hidden=64):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.randn(seq, dim) * 0.02)
        self.ln1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, dropout=0.0,
                                          batch_first=True)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(),
                                 nn.Linear(hidden, dim))
        self.ln_f = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens):
        x = self.tok(tokens) + self.pos
        h = self.ln1(x)
        a, _ = self.attn(h, h, h, need_weights=False)
        x = x + a
        x = x + self.mlp(self.ln2(x))
        return self.head(self.ln_f(x))


class CharGPT(nn.Module):
    """A character-level GPT: byte embeddings and learned positions, pre-
    LayerNorm blocks of causal self-attention (the mask from torch.triu) and
    a GELU MLP, a head over the 256 byte values at every position."""

    def __init__(self, vocab=256, seq=64, dim=64, heads=4, layers=2):
        super().__init__()
        self.heads = heads
        self.tok, self.pos = nn.Embedding(vocab, dim), nn.Embedding(seq, dim)
        self.blocks = nn.ModuleList(
            nn.ModuleDict(dict(
                ln1=nn.LayerNorm(dim), qkv=nn.Linear(dim, 3 * dim),
                proj=nn.Linear(dim, dim), ln2=nn.LayerNorm(dim),
                fc=nn.Linear(dim, 4 * dim), out=nn.Linear(4 * dim, dim)))
            for _ in range(layers))
        self.ln_f = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, idx):
        b, t = idx.shape
        x = self.tok(idx) + self.pos(torch.arange(0, t, dtype=torch.long))
        c, h = x.shape[-1], self.heads
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        for blk in self.blocks:
            q, k, v = blk["qkv"](blk["ln1"](x)).split(c, dim=2)
            q, k, v = (z.view(b, t, h, c // h).transpose(1, 2)
                       for z in (q, k, v))
            att = (q @ k.transpose(-2, -1)) * (1.0 / (c // h) ** 0.5)
            att = torch.softmax(att.masked_fill(mask, float("-inf")), dim=-1)
            y = (att @ v).transpose(1, 2).reshape(b, t, c)
            x = x + blk["proj"](y)
            x = x + blk["out"](nn.functional.gelu(blk["fc"](blk["ln2"](x))))
        return self.head(self.ln_f(x))


def export(model, example, path, input_name, opset, quiet=False):
    """`model` in training mode, one input (batch dimension dynamic) and its
    output `logits`. The TorchScript exporter on every PyTorch: 2.9 and later
    default to the dynamo one, which writes another graph for the same
    model and needs onnxscript."""
    model.train()
    legacy = {"dynamo": False} if "dynamo" in inspect.signature(
        torch.onnx.export).parameters else {}
    torch.onnx.export(
        model, (example,), path,
        input_names=[input_name], output_names=["logits"],
        dynamic_axes={input_name: {0: "batch"}, "logits": {0: "batch"}},
        opset_version=opset,
        training=torch.onnx.TrainingMode.TRAINING,
        do_constant_folding=False, **legacy)
    if not quiet:
        print(f"wrote {path} (opset {opset})")


def save_state_dict(model, path, keep_last=False):
    """The state_dict in safetensors (a JSON header, then the tensors'
    little-endian bytes), a tied weight once: under its first name, or its
    last with keep_last, as safetensors.torch.save_model may choose. The
    header's metadata names each dropped alias's kept tensor, as save_model
    records it."""
    import json
    import struct
    groups = {}
    for name, tensor in model.state_dict().items():
        groups.setdefault(tensor.data_ptr(), []).append((name, tensor))
    header, blobs, offset, aliases = {}, [], 0, {}
    for group in groups.values():
        name, tensor = group[-1] if keep_last else group[0]
        for alias, _ in group:
            if alias != name:
                aliases[alias] = name
        dtype = {torch.float32: "F32", torch.int64: "I64"}[tensor.dtype]
        blob = tensor.detach().cpu().contiguous().numpy().tobytes()
        header[name] = {"dtype": dtype, "shape": list(tensor.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    if aliases:
        header["__metadata__"] = aliases
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for blob in blobs:
            f.write(blob)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    args = parser.parse_args()
    torch.manual_seed(0)
    export(MLP(), torch.randn(2, 1, 28, 28),
           os.path.join(args.out, "mlp.onnx"), "image", 17)
    export(CNN(), torch.randn(2, 1, 28, 28),
           os.path.join(args.out, "cnn.onnx"), "image", 17)
    # Opset 14 keeps LayerNorm decomposed (ReduceMean/Sub/Pow/Sqrt/Div), the form
    # most PyTorch exports have.
    export(TransformerBlock(), torch.randint(0, 64, (2, 16)),
           os.path.join(args.out, "transformer.onnx"), "tokens", 14)
    torch.manual_seed(0)
    export(CharGPT(), torch.randint(0, 256, (2, 64)),
           os.path.join(args.out, "chargpt.onnx"), "tokens", 17)


if __name__ == "__main__":
    main()
