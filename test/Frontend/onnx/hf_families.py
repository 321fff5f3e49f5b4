"""Hugging Face's model families, small, through PyTorch's dynamo
exporter, against PyTorch's own gradients.

  hf_families.py GPUC WORK_DIR

Run by hf-families.test with the Python of `scripts/torch-peer.sh
--exporters`. Each family is built from its config (2 layers, width 64,
4 heads, vocabulary 1,000, no dropout), exported as tokens -> logits,
compiled for the CPU at batch 4, and stepped once with AdamW on 4 rows of
32 tokens. A family passes when
- the loss is PyTorch float64's within 1e-6;
- every gradient (the step's first moment over 1 - beta1) is within 2x
  PyTorch float32's distance from float64's, relative to the largest of
  the parameter's gradient, and a gradient that is zero in exact
  arithmetic (a key bias without rotary positions, which adds the same
  amount to a row's scores) is within 1e-6 of the model's largest;
- a decoder's attentions are fused, one a layer.
What each family brings is in FAMILIES. Then Qwen2 and DistilBERT (a causal
mask and one both ways) take a padded batch, the padding read from an
`attention_mask` input, and BART, an encoder-decoder, takes source and
target tokens, the same way.
"""
import os
import sys

import numpy as np
import torch
import transformers

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..",
                                "examples"))
from exporter_steps import (Padded, check, dynamo_export,  # noqa: E402
                            failed, reference_gradients, step,
                            step_gradients)
from llama import Logits  # noqa: E402

gpuc, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)

SMALL = dict(vocab_size=1000, hidden_size=64, intermediate_size=128,
             num_hidden_layers=2, num_attention_heads=4,
             max_position_embeddings=64, attn_implementation="sdpa")

# name: (model type, config, decoder?, {PyTorch name: the export's name of
# a tied weight}).
FAMILIES = {
    # Biases on the query, key and value projections; grouped-query
    # attention (4 query heads over 2 key/value heads); rotary positions.
    "qwen2": (transformers.Qwen2ForCausalLM,
              transformers.Qwen2Config(**SMALL, num_key_value_heads=2),
              True, {}),
    "mistral": (transformers.MistralForCausalLM,
                transformers.MistralConfig(**SMALL, num_key_value_heads=2,
                                           sliding_window=None),
                True, {}),
    # One projection for query, key and value, one for gate and up, split
    # in the graph.
    "phi3": (transformers.Phi3ForCausalLM,
             transformers.Phi3Config(**SMALL, num_key_value_heads=2,
                                     pad_token_id=0, eos_token_id=0,
                                     bos_token_id=0),
             True, {}),
    # Query, key and value interleaved per head in one projection; rotary
    # positions on a quarter of each head; attention and MLP in parallel.
    "gpt_neox": (transformers.GPTNeoXForCausalLM,
                 transformers.GPTNeoXConfig(**SMALL), True, {}),
    # GeGLU with tanh's GELU, embeddings scaled by the width's square root,
    # RMSNorm of 1 + weight, heads of 16 wider than width / heads, a tied
    # head.
    "gemma": (transformers.GemmaForCausalLM,
              transformers.GemmaConfig(**SMALL, num_key_value_heads=2,
                                       head_dim=16),
              True, {"model.model.embed_tokens.weight":
                     "model.lm_head.weight"}),
    # Attention both ways with key biases; a masked-language-model head
    # through a transform of its own, tied to the embedding.
    "distilbert": (transformers.DistilBertForMaskedLM,
                   transformers.DistilBertConfig(
                       vocab_size=1000, dim=64, hidden_dim=128, n_layers=2,
                       n_heads=4, max_position_embeddings=64, dropout=0.0,
                       attention_dropout=0.0, attn_implementation="sdpa"),
                   False,
                   {"model.distilbert.embeddings.word_embeddings.weight":
                    "model.vocab_projector.weight"}),
    # Norms of each query and key head before the rotary positions.
    "qwen3": (transformers.Qwen3ForCausalLM,
              transformers.Qwen3Config(**SMALL, num_key_value_heads=2,
                                       head_dim=16),
              True, {}),
    # Multi-query attention: one key/value head for 4 query heads.
    "gpt_bigcode": (transformers.GPTBigCodeForCausalLM,
                    transformers.GPTBigCodeConfig(
                        vocab_size=1000, n_embd=64, n_layer=2, n_head=4,
                        n_positions=64, resid_pdrop=0.0, embd_pdrop=0.0,
                        attn_pdrop=0.0, bos_token_id=0, eos_token_id=0,
                        attn_implementation="sdpa"),
                    True, {"model.transformer.wte.weight":
                           "model.lm_head.weight"}),
    # Disentangled attention: scores of content and of relative positions,
    # the relative ones gathered from a table at each pair's distance.
    "deberta_v2": (transformers.DebertaV2ForMaskedLM,
                   transformers.DebertaV2Config(
                       vocab_size=1000, hidden_size=64,
                       intermediate_size=128, num_hidden_layers=2,
                       num_attention_heads=4, hidden_dropout_prob=0.0,
                       attention_probs_dropout_prob=0.0),
                   False,
                   {"model.deberta.embeddings.word_embeddings.weight":
                    "model.cls.predictions.decoder.weight",
                    "model.cls.predictions.bias":
                    "model.cls.predictions.decoder.bias"}),
    # Learned positions, offset by 2, counted from the attention mask
    # (CumSum of the inputs); key biases; ReLU; a tied head.
    "opt": (transformers.OPTForCausalLM,
            transformers.OPTConfig(
                vocab_size=1000, hidden_size=64, ffn_dim=128,
                num_hidden_layers=2, num_attention_heads=4,
                max_position_embeddings=64, word_embed_proj_dim=64,
                dropout=0.0, attention_dropout=0.0,
                attn_implementation="sdpa"),
            True, {"model.model.decoder.embed_tokens.weight":
                   "model.lm_head.weight"}),
}


def distances(gradients, exact):
    """{name: the distance of `gradients[name]` from `exact[name]`,
    relative to the largest of `exact[name]`} over the gradients that are
    not zero in exact arithmetic, and the largest distance of the others
    relative to the model's largest gradient."""
    largest = max(np.max(np.abs(g)) for g in exact.values())
    relative, zero = {}, 0.0
    for name, g in exact.items():
        scale = np.max(np.abs(g))
        error = np.max(np.abs(gradients[name] - g))
        if scale < 1e-12 * largest:
            zero = max(zero, error / largest)
        else:
            relative[name] = error / scale
    return relative, zero


class Seq2Seq(torch.nn.Module):
    """An encoder-decoder as (source tokens, target tokens) -> logits."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, tokens, target):
        return self.model(input_ids=tokens, decoder_input_ids=target,
                          use_cache=False).logits


def save(folder, **arrays):
    """The batch `train --run-step` reads: one .npy file an input."""
    os.makedirs(folder, exist_ok=True)
    for name, array in arrays.items():
        np.save(f"{folder}/{name}.npy", array.numpy())
    return folder


rng = np.random.default_rng(1)
tokens = torch.from_numpy(rng.integers(0, 1000, (4, 32)))
labels = torch.from_numpy(rng.integers(0, 1000, (4, 32)))
# Right-padded rows, as a tokenizer pads a batch.
mask = torch.ones(4, 32, dtype=torch.int64)
mask[1, 20:] = 0
mask[3, 7:] = 0
# A decoder's 24 target tokens for the 32 source tokens.
target = torch.from_numpy(rng.integers(0, 1000, (4, 24)))
target_labels = torch.from_numpy(rng.integers(0, 1000, (4, 24)))

# (label, wrapper, {input: batch}, labels, family, compared loss); the
# compared loss, where there is one, is PyTorch's on a batch the step
# must not give the loss of (the padded batch without its padding).
runs = [(name, Logits, {"tokens": tokens}, labels, family, None)
        for name, family in FAMILIES.items()]
runs += [(name + ", padded batch", Padded, {"tokens": tokens, "mask": mask},
          labels, FAMILIES[name], {"tokens": tokens,
                                   "mask": torch.ones_like(mask)})
         for name in ("qwen2", "distilbert")]
# BART: an encoder, a causal decoder, and the decoder's attention to the
# encoder's output; one embedding for both and the head.
runs.append(("bart", Seq2Seq, {"tokens": tokens, "target": target},
             target_labels,
             (transformers.BartForConditionalGeneration,
              transformers.BartConfig(
                  vocab_size=1000, d_model=64, encoder_layers=2,
                  decoder_layers=2, encoder_attention_heads=4,
                  decoder_attention_heads=4, encoder_ffn_dim=128,
                  decoder_ffn_dim=128, max_position_embeddings=64,
                  dropout=0.0, attention_dropout=0.0,
                  activation_dropout=0.0, attn_implementation="sdpa"),
              True, {"model.model.shared.weight": "model.lm_head.weight"}),
             None))

for label, wrapper, batch, run_labels, family, other in runs:
    model_type, config, decoder, tied = family

    def build():
        return wrapper(model_type(config))

    folder = f"{work}/{label.replace(', ', '-').replace(' ', '-')}"
    data = save(folder + "-in", label=run_labels, **batch)
    inputs = tuple(batch.values())
    torch.manual_seed(0)
    dynamo_export(build(), tuple(t[:2] for t in inputs), tuple(batch),
                  folder + ".onnx", optimize=False)
    loss64, exact = reference_gradients(build, torch.float64, inputs,
                                        run_labels)
    _, single = reference_gradients(build, torch.float32, inputs, run_labels)
    # The padding matters: without it the loss is another.
    unlike = reference_gradients(build, torch.float64,
                                 tuple(other.values()), run_labels)[0] \
        if other else float("nan")
    try:
        ours = step(gpuc, folder + ".onnx",
                    ["--class-axis", "-1", "--dump-dir", folder + "-dump"],
                    folder, data)
    except RuntimeError as error:
        check(False, f"hf {label}: {str(error)[-300:]}")
        continue
    loss = float(ours["loss.npy"])
    gradients = step_gradients(ours)
    mine = {n: gradients.get(tied.get(n, n)) for n in exact}
    missing = [n for n, g in mine.items() if g is None]
    if missing:
        check(False, f"hf {label}: no gradient of {', '.join(missing)}")
        continue
    fused = sum(open(os.path.join(folder + "-dump", f)).read().count(
        "gpuc.attention ") for f in os.listdir(folder + "-dump")
        if f.endswith("-gpuc-form-attention.mlir"))
    relative, zero = distances(mine, exact)
    reference, _ = distances(single, exact)
    worst = max(relative, key=relative.get)
    layers = 2 * (1 + 2 * (wrapper is Seq2Seq))
    check(abs(loss - loss64) / loss64 < 1e-6 and
          (not other or abs(loss - unlike) / unlike > 1e-5) and
          relative[worst] <= 2 * max(reference.values()) and zero < 1e-6 and
          (fused == layers or not decoder),
          f"hf {label}: {fused} fused attentions; loss {loss:.7f} (PyTorch "
          f"float64 {loss64:.7f}"
          f"{f', unpadded {unlike:.7f}' if other else ''}); "
          f"gradients within "
          f"{relative[worst] / max(reference.values()):.1f}x PyTorch "
          f"float32's distance (worst {worst}), zero ones within "
          f"{zero:.0e}")

sys.exit(1 if failed else 0)
