#!/usr/bin/env python3
"""Hugging Face's LlamaForCausalLM at SmolLM's sizes, exported to ONNX for
gpuc (the layout of Llama, SmolLM, Qwen and Mistral decoders: grouped-query
attention, rotary positions, RMSNorm, SwiGLU, a tied head).

    /opt/gpuc-exporters/bin/python examples/llama.py --preset smollm-135m --seq 1024 -o smollm.onnx

Presets: `smollm-135m` has SmolLM-135M's sizes (30 layers, width 576, 9
query heads over 3 key/value heads, MLP 1,536, vocabulary 49,152); `tiny`
is for tests. The weights come from --seed with transformers' own
initialization. The model is `Logits` (tokens in, logits out) around
LlamaForCausalLM with SDPA attention, exported by PyTorch's dynamo
exporter without its optimizer: this needs PyTorch 2.x with onnxscript and
transformers (`scripts/torch-peer.sh --exporters` makes such a Python).
The .onnx holds the weights (SmolLM-135M's is about 540 MB): it is written
where --out says, never into the repository.
"""
import argparse

import torch

PRESETS = {
    "smollm-135m": dict(vocab=49152, width=576, mlp=1536, layers=30,
                        heads=9, kv_heads=3),
    "tiny": dict(vocab=1000, width=64, mlp=172, layers=2, heads=4,
                 kv_heads=2),
}


class Logits(torch.nn.Module):
    """A Hugging Face causal language model as tokens -> logits."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, tokens):
        return self.model(input_ids=tokens, use_cache=False).logits


def build(preset, seq, seed):
    """The model in training mode, its weights drawn from `seed`."""
    from transformers import LlamaConfig, LlamaForCausalLM
    sizes = PRESETS[preset]
    config = LlamaConfig(
        vocab_size=sizes["vocab"], hidden_size=sizes["width"],
        intermediate_size=sizes["mlp"], num_hidden_layers=sizes["layers"],
        num_attention_heads=sizes["heads"],
        num_key_value_heads=sizes["kv_heads"], max_position_embeddings=seq,
        tie_word_embeddings=True, attention_dropout=0.0,
        attn_implementation="sdpa")
    torch.manual_seed(seed)
    return Logits(LlamaForCausalLM(config)).train()


def vocabulary(model):
    return model.model.config.vocab_size


def export(model, seq, path):
    """`model` to ONNX at `path` for a batch of any size at `seq` tokens."""
    tokens = torch.randint(0, vocabulary(model), (2, seq))
    torch.onnx.export(model, (tokens,), path, input_names=["tokens"],
                      output_names=["logits"],
                      dynamic_shapes=({0: torch.export.Dim("batch")},),
                      dynamo=True, optimize=False, verbose=False)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", choices=sorted(PRESETS),
                        default="smollm-135m")
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("-o", "--out", required=True)
    args = parser.parse_args()
    export(build(args.preset, args.seq, args.seed), args.seq, args.out)


if __name__ == "__main__":
    main()
