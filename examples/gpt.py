#!/usr/bin/env python3
"""A nanoGPT-style GPT as people write it, exported to ONNX for gpuc.

    /usr/bin/python3 examples/gpt.py --preset gpt2 --seq 1024 -o gpt2.onnx
    /usr/bin/python3 examples/gpt.py --preset small -o gpt-small.onnx
    /usr/bin/python3 examples/gpt.py --preset gpt2 --state-dict gpt2.safetensors

The model follows karpathy/nanoGPT's model.py in what matters to a compiler:
token and learned position embeddings, pre-LayerNorm blocks of causal
self-attention (q, k, v from one projection's split; the causal mask a
registered buffer `attn.bias` read with masked_fill, as nanoGPT's non-flash
path does) and a GELU MLP, a final LayerNorm and a head tied to the token
embedding. Presets: `gpt2` is GPT-2 124M (12 layers, 12 heads, width 768,
vocabulary 50257); `small` has GPT-2's vocabulary around a 4-layer, width
384 body; `tiny` is for tests. The weights come from --seed with GPT-2's
initialization (normal 0.02, residual projections scaled by 1/sqrt(2L)).
The .onnx holds the weights, so GPT-2 124M's file is about 500 MB: it is
written where --out says, never into the repository. --state-dict saves the
same weights as the model's state_dict in safetensors, what
`train --init` reads into an artifact compiled with `--no-weights`.
"""
import argparse
import math
import os
import sys

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_models  # noqa: E402

PRESETS = {
    "gpt2": dict(vocab=50257, layers=12, heads=12, width=768),
    "small": dict(vocab=50257, layers=4, heads=6, width=384),
    "tiny": dict(vocab=1000, layers=2, heads=4, width=64),
}


class CausalSelfAttention(nn.Module):
    def __init__(self, width, heads, seq):
        super().__init__()
        self.heads = heads
        # nanoGPT's flash path (PyTorch's fused attention), for PyTorch's
        # own timings; the export takes the masked path.
        self.sdpa = False
        self.c_attn = nn.Linear(width, 3 * width)
        self.c_proj = nn.Linear(width, width)
        self.register_buffer(
            "bias", torch.tril(torch.ones(seq, seq)).view(1, 1, seq, seq))

    def forward(self, x):
        b, t, c = x.size()
        q, k, v = self.c_attn(x).split(c, dim=2)
        h = self.heads
        q, k, v = (z.view(b, t, h, c // h).transpose(1, 2) for z in (q, k, v))
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.c_fc = nn.Linear(width, 4 * width)
        self.c_proj = nn.Linear(4 * width, width)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, width, heads, seq):
        super().__init__()
        self.ln_1 = nn.LayerNorm(width)
        self.attn = CausalSelfAttention(width, heads, seq)
        self.ln_2 = nn.LayerNorm(width)
        self.mlp = MLP(width)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab, layers, heads, width, seq):
        super().__init__()
        self.wte = nn.Embedding(vocab, width)
        self.wpe = nn.Embedding(seq, width)
        self.h = nn.ModuleList(Block(width, heads, seq) for _ in range(layers))
        self.ln_f = nn.LayerNorm(width)
        self.lm_head = nn.Linear(width, vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # tied, as GPT-2
        self.apply(self._init)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * layers))

    @staticmethod
    def _init(module):
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, 0.0, 0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, 0.0, 0.02)

    def forward(self, idx):
        t = idx.size(1)
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def build(preset, seq, seed, sdpa=False):
    torch.manual_seed(seed)
    model = GPT(seq=seq, **PRESETS[preset])
    for block in model.h:
        block.attn.sdpa = sdpa
    return model


def export(model, seq, path):
    export_models.export(
        model, torch.randint(0, model.wte.num_embeddings, (2, seq)), path,
        "tokens", 17, quiet=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", choices=sorted(PRESETS), default="small")
    parser.add_argument("--seq", type=int, default=256,
                        help="the context length T (the mask's size)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("-o", "--out", help="the ONNX model to write")
    parser.add_argument("--state-dict", metavar="FILE.safetensors",
                        help="the weights to write, for train --init")
    args = parser.parse_args()
    if not args.out and not args.state_dict:
        parser.error("give -o FILE.onnx, --state-dict FILE.safetensors, "
                     "or both")
    model = build(args.preset, args.seq, args.seed)
    params = sum(p.numel() for p in model.parameters())
    for path in filter(None, (args.out, args.state_dict)):
        if path == args.out:
            export(model, args.seq, path)
        else:
            export_models.save_state_dict(model, path)
        print("wrote %s: %s preset, T %d, %.1fM parameters" %
              (path, args.preset, args.seq, params / 1e6))


if __name__ == "__main__":
    main()
