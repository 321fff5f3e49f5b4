"""Models as PyTorch's current exporters write them, against gpuc.

  pytorch_exporters.py GPUC WORK_DIR

Run by pytorch-exporters.test with the Python of `scripts/torch-peer.sh
--exporters` (PyTorch 2.15, onnxscript, transformers). Prints one line per
check for FileCheck, and exits non-zero on a failed one:
- the TorchScript exporter at opsets 18 and 20 gives the IR of opset 17
  (a GPT, a CNN with batch norms, ResNet-18, nn.MultiheadAttention);
- the dynamo exporter without its optimizer gives the TorchScript export's
  training step, bit for bit (a CNN with batch norms, ResNet-18, a GPT);
- with its optimizer (which merges equal parameters) it is refused;
- Hugging Face's GPT-2 (eager and SDPA attention, contexts of 32 and 1,024)
  through the dynamo exporter steps as PyTorch does, its attention fused,
  takes the weights of a checkpoint save_pretrained writes, and computing
  its own loss trains on a token file as PyTorch's labels=input_ids does;
- nanoGPT's scaled_dot_product_attention(is_causal=True) export steps as
  its masked export does, its mask of indices read as the triangle;
- Hugging Face's Llama (grouped-query attention, rotary positions) steps
  as PyTorch does, its attention fused and its causal mask a triangle.
"""
import json
import os
import re
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..",
                                "examples"))
import export_models  # noqa: E402
import gpt  # noqa: E402
from exporter_steps import (Padded, check, dynamo_export,  # noqa: E402
                            failed, reference_step, relative_distance, run)
from exporter_steps import step as step_of  # noqa: E402

gpuc, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)


def step(path, flags, folder, data):
    return step_of(gpuc, path, flags, folder, data)


def build(name):
    """(model, example input, input name, compile flags), seeded."""
    torch.manual_seed(0)
    if name == "gpt":
        model = gpt.build("tiny", 32, 0)
        return model, torch.randint(0, 1000, (2, 32)), "tokens", \
            ["--class-axis", "-1"]
    if name == "transformer":
        return export_models.TransformerBlock(), torch.randint(0, 64, (2, 16)), \
            "tokens", ["--class-axis", "-1"]
    if name == "resnet18":
        import torchvision
        return torchvision.models.resnet18(num_classes=10), \
            torch.randn(2, 3, 32, 32), "image", []
    return export_models.CNN(), torch.randn(2, 1, 28, 28), "image", []


def inputs(name, folder, context=32):
    rng = np.random.default_rng(1)
    os.makedirs(folder, exist_ok=True)
    if name == "gpt":
        np.save(folder + "/tokens.npy", rng.integers(0, 1000, (4, context)))
        np.save(folder + "/label.npy", rng.integers(0, 1000, (4, context)))
        return
    shape = (4, 3, 32, 32) if name == "resnet18" else (4, 1, 28, 28)
    np.save(folder + "/image.npy",
            rng.standard_normal(shape).astype(np.float32))
    np.save(folder + "/label.npy", rng.integers(0, 10, 4))


def imported_ir(path, flags):
    result = run(gpuc, "import", path, "--batch", 2, *flags)
    if result.returncode:
        return "error: " + result.stderr
    return "\n".join(re.sub(r" loc\([^)]*\)", "", line)
                     for line in result.stdout.splitlines()
                     if not line.startswith("#loc"))


# The TorchScript exporter at newer opsets: the same IR. (Its export of
# nn.MultiheadAttention takes a remainder of sizes, Mod.)
for name in ("gpt", "cnn", "resnet18", "transformer"):
    irs = {}
    for opset in (17, 18, 20):
        # Afresh each time: exporting in training mode runs the model,
        # which moves its batch norms' running statistics.
        model, example, input_name, flags = build(name)
        path = f"{work}/{name}-torchscript-{opset}.onnx"
        export_models.export(model, example, path, input_name, opset,
                             quiet=True)
        irs[opset] = imported_ir(path, flags)
    check(irs[18] == irs[17] and irs[20] == irs[17] and
          not irs[17].startswith("error"),
          f"torchscript {name}: opsets 18 and 20 import as opset 17 does")

# The dynamo exporter without its optimizer: the same step, bit for bit.
for name in ("gpt", "cnn", "resnet18"):
    data = f"{work}/{name}-in"
    inputs(name, data)
    # One model for both: the TorchScript exporter runs it in training
    # mode, moving its running statistics, and the dynamo export then
    # writes the same ones.
    model, example, input_name, flags = build(name)
    export_models.export(model, example, f"{work}/{name}-ts.onnx", input_name,
                         17, quiet=True)
    dynamo_export(model, example, input_name, f"{work}/{name}-dynamo.onnx",
                  optimize=False)
    ts = step(f"{work}/{name}-ts.onnx", flags, f"{work}/{name}-ts", data)
    dyn = step(f"{work}/{name}-dynamo.onnx", flags, f"{work}/{name}-dyn", data)
    # The tied embedding is wte.weight in one and lm_head.weight in the
    # other: the same tensor, by its values.
    left = sorted(ts.values(), key=lambda a: (a.shape, a.tobytes()))
    right = sorted(dyn.values(), key=lambda a: (a.shape, a.tobytes()))
    same = len(left) == len(right) and all(
        a.shape == b.shape and np.array_equal(a, b)
        for a, b in zip(left, right))
    check(same, f"dynamo {name}: one AdamW step identical to the "
          f"TorchScript export's ({len(ts)} tensors)")

# With the optimizer (the default): equal parameters merged, refused.
model, example, input_name, flags = build("gpt")
dynamo_export(model, example, input_name, f"{work}/gpt-optimized.onnx",
              optimize=True)
result = run(gpuc, "import", f"{work}/gpt-optimized.onnx", "--batch", 2)
message = result.stderr.strip().splitlines()[-1] if result.stderr else ""
check(result.returncode != 0 and "merged parameters of equal value" in
      message, "dynamo gpt, optimized: refused: " +
      message[message.find("error:"):][:90])

# Hugging Face's GPT-2, as transformers 5 exports it (tokens -> logits
# through examples/llama.py's wrapper).
from transformers import GPT2Config, GPT2LMHeadModel  # noqa: E402
from llama import Logits  # noqa: E402


# At GPT-2's context of 1,024 the mask is [4, 1, 1024, 1024]: 4M booleans,
# folded from index vectors through broadcasts that stay ops (4M integers
# each).
for attention, context in (("eager", 32), ("sdpa", 32), ("sdpa", 1024)):
    config = GPT2Config(attn_implementation=attention, vocab_size=1000,
                        n_positions=context, n_embd=64, n_layer=2, n_head=4,
                        bos_token_id=0, eos_token_id=0, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    torch.manual_seed(0)
    model = Logits(GPT2LMHeadModel(config)).train()
    folder = f"{work}/hf-{attention}-{context}"
    data = folder + "-in"
    inputs("gpt", data, context)
    tokens = torch.from_numpy(np.load(data + "/tokens.npy"))
    labels = torch.from_numpy(np.load(data + "/label.npy"))
    dynamo_export(model, tokens[:2], "tokens", folder + ".onnx",
                  optimize=False)
    flags = ["--class-axis", "-1"]
    result = run(gpuc, "compile", folder + ".onnx", "--batch", 4,
                 "--target", "cpu", "--attention", "flash", *flags,
                 "--dump-dir", folder + "-dump", "-o", folder + "-flash")
    fused = sum(open(os.path.join(folder + "-dump", f)).read().count(
        "gpuc.attention ") for f in os.listdir(folder + "-dump")
        if f.endswith("-gpuc-form-attention.mlir"))
    ours = step(folder + ".onnx", flags, folder, data)

    def build_gpt2():
        return Logits(GPT2LMHeadModel(config))

    loss64, exact = reference_step(build_gpt2, torch.float64, (tokens,),
                                   labels)
    _, single = reference_step(build_gpt2, torch.float32, (tokens,), labels)

    def distance(params):
        return relative_distance(params, exact)

    # gpuc names the tied embedding after the head, as the export does.
    mine = {n: ours.get(n + ".npy", ours.get(
        n.replace("transformer.wte", "lm_head") + ".npy"))
        for n in exact}
    ours_distance = distance(
        {n: v.astype(np.float64) for n, v in mine.items()})
    loss_error = abs(float(ours["loss.npy"]) - loss64) / loss64
    check(fused == 2 and loss_error < 1e-6 and
          ours_distance <= 2 * distance(single),
          f"hf gpt-2 {attention}, T {context}: {fused} fused attentions; "
          f"one AdamW step "
          f"as PyTorch's (loss within {loss_error:.0e} of float64, "
          f"parameters within 2x PyTorch float32's distance)")

    if attention != "sdpa" or context != 32:
        continue
    # Hugging Face's own checkpoint (save_pretrained stores the tied head
    # once, as transformer.wte.weight, where the export keeps
    # lm_head.weight) gives the compiled model its weights.
    torch.manual_seed(1)
    pretrained = GPT2LMHeadModel(config)
    pretrained.save_pretrained(folder + "-checkpoint")
    result = run(folder + "/artifact/train", "--device", "cpu", "--init",
                 folder + "-checkpoint/model.safetensors", "--run-step", data,
                 "--output-dir", folder + "/init-step")
    with torch.no_grad():
        expected = torch.nn.functional.cross_entropy(
            Logits(pretrained.double())(tokens).reshape(-1, 1000),
            labels.reshape(-1)).item()
    loss = float(np.load(folder + "/init-step/loss.npy")) \
        if result.returncode == 0 else float("nan")
    check(abs(loss - expected) / expected < 1e-6 and
          "1 by another name the model gives a tied weight" in result.stderr +
          result.stdout,
          f"hf gpt-2 checkpoint: --init takes save_pretrained's weights, "
          f"the tied head by the embedding's name (loss {loss:.7f}, "
          f"PyTorch float64 {expected:.7f})")

    # The model's own loss (labels=input_ids: it shifts them itself)
    # trains on a token file's windows labelled with themselves.
    class OwnLoss(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, tokens, labels):
            return self.model(input_ids=tokens, labels=labels,
                              use_cache=False).loss

    torch.manual_seed(0)
    own = OwnLoss(GPT2LMHeadModel(config)).train()
    batch = torch.export.Dim("batch")
    torch.onnx.export(own, (tokens[:2], tokens[:2]), folder + "-loss.onnx",
                      input_names=["tokens", "labels"], output_names=["loss"],
                      dynamic_shapes=({0: batch}, {0: batch}), dynamo=True,
                      optimize=False)
    stream = np.random.default_rng(2).integers(0, 1000, 4 * 32 + 1)
    np.save(folder + "-stream.npy", stream)
    result = run(gpuc, "compile", folder + "-loss.onnx", "--batch", 4,
                 "--labels", "labels", "--target", "cpu", "-o",
                 folder + "-loss")
    if result.returncode == 0:
        result = run(folder + "-loss/train", "--data", folder + "-stream.npy",
                     "--held-out", "0", "--epochs", "1", "--metrics",
                     folder + "-loss.jsonl")
    loss = float("nan")
    if result.returncode == 0:
        with open(folder + "-loss.jsonl") as f:
            loss = json.loads(f.readline())["loss"]
    windows = torch.from_numpy(stream[:128].reshape(4, 32))
    with torch.no_grad():
        expected = own.double()(windows, windows).item()
    check(abs(loss - expected) / expected < 1e-6,
          f"hf gpt-2 own loss: a token file's windows are its labels "
          f"(first loss {loss:.7f}, PyTorch float64 {expected:.7f})")

# A padded batch: Hugging Face's mask from an `attention_mask` input (the
# padding read at each (batch, key) pair, and'ed with the causal mask) is
# computed at run time, and each lowering of the attention reads it.
config = GPT2Config(attn_implementation="sdpa", vocab_size=1000,
                    n_positions=32, n_embd=64, n_layer=2, n_head=4,
                    bos_token_id=0, eos_token_id=0, resid_pdrop=0.0,
                    embd_pdrop=0.0, attn_pdrop=0.0)
folder = f"{work}/hf-padded"
data = folder + "-in"
inputs("gpt", data)
tokens = torch.from_numpy(np.load(data + "/tokens.npy"))
labels = torch.from_numpy(np.load(data + "/label.npy"))
# Right-padded rows (a row that masks every key takes no gradient rule
# both sides agree on).
mask = torch.ones(4, 32, dtype=torch.int64)
mask[1, 20:] = 0
mask[3, 7:] = 0
np.save(data + "/mask.npy", mask.numpy())
torch.manual_seed(0)
dynamo_export(Padded(GPT2LMHeadModel(config)), (tokens[:2], mask[:2]),
              ("tokens", "mask"), folder + ".onnx", optimize=False)


def build_padded():
    return Padded(GPT2LMHeadModel(config))


loss64, exact = reference_step(build_padded, torch.float64, (tokens, mask),
                               labels)
unpadded, _ = reference_step(build_padded, torch.float64,
                             (tokens, torch.ones_like(mask)), labels)
_, single = reference_step(build_padded, torch.float32, (tokens, mask),
                           labels)


def padded_distance(params):
    return relative_distance(params, exact)


for attention in ("gemm", "flash"):
    ours = step(folder + ".onnx", ["--class-axis", "-1", "--attention",
                                   attention], folder + "-" + attention, data)
    mine = {n: ours.get(n + ".npy", ours.get(
        n.replace("model.transformer.wte", "model.lm_head") + ".npy"))
        for n in exact}
    ours_distance = padded_distance(
        {n: v.astype(np.float64) for n, v in mine.items()})
    loss = float(ours["loss.npy"])
    check(abs(loss - loss64) / loss64 < 1e-6 and
          abs(loss - unpadded) / unpadded > 1e-5 and
          ours_distance <= 2 * padded_distance(single),
          f"hf gpt-2 padded batch, {attention}: one AdamW step as PyTorch's "
          f"(loss {loss:.7f}, PyTorch float64 {loss64:.7f}, unpadded "
          f"{unpadded:.7f}; parameters within 2x PyTorch float32's distance)")


# nanoGPT's default attention, scaled_dot_product_attention(is_causal=True),
# as the TorchScript exporter writes it: ones through Trilu, compared with
# 0, computed in the step. Read as the causal triangle, it compiles to the
# step of the masked export (its tril buffer and masked_fill), bit for bit.
data = f"{work}/gpt-in"
steps = {}
for attention in ("masked", "sdpa"):
    model = gpt.build("tiny", 32, 0, sdpa=attention == "sdpa")
    path = f"{work}/gpt-{attention}.onnx"
    export_models.export(model, torch.randint(0, 1000, (2, 32)), path,
                         "tokens", 17, quiet=True)
    steps[attention] = step(path, ["--class-axis", "-1"],
                            f"{work}/gpt-{attention}", data)
result = run(gpuc, "compile", f"{work}/gpt-sdpa.onnx", "--batch", 4,
             "--class-axis", "-1", "--target", "cpu", "--attention", "flash",
             "--dump-dir", f"{work}/gpt-sdpa-dump", "-o",
             f"{work}/gpt-sdpa-flash")
dumps = [open(os.path.join(f"{work}/gpt-sdpa-dump", f)).read()
         for f in os.listdir(f"{work}/gpt-sdpa-dump")
         if f.endswith("-gpuc-decompose.mlir")]


def marked(dumps):
    """Attention ops (forward, gradient) after gpuc-decompose, and how many
    of them are marked `triangle gt` (a causal mask computed from indices,
    no mask read)."""
    ops = sum(len(re.findall(r"gpuc\.attention(_grad)? ", d)) for d in dumps)
    return ops, sum(d.count("triangle gt :") for d in dumps)


ops, triangles = marked(dumps)
masked, sdpa = steps["masked"], steps["sdpa"]
same = set(sdpa) <= set(masked) and all(
    np.array_equal(sdpa[f], masked[f]) for f in sdpa)
check(same and ops > 0 and triangles == ops,
      f"torchscript gpt sdpa: {triangles} of {ops} attention ops marked "
      f"triangle gt; one AdamW step identical to the masked export's "
      f"({len(sdpa)} tensors{'' if same else ', NOT identical'})")

# Hugging Face's Llama (SmolLM's layout, small): grouped-query attention
# (4 query heads over 2 key/value heads), rotary positions (the cosine and
# sine of positions, constants), RMSNorm, SwiGLU, a tied head.
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

llama = LlamaConfig(vocab_size=1000, hidden_size=64, intermediate_size=172,
                    num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=2, max_position_embeddings=32,
                    tie_word_embeddings=True, attn_implementation="sdpa")
folder = f"{work}/llama"
data = folder + "-in"
inputs("gpt", data)
tokens = torch.from_numpy(np.load(data + "/tokens.npy"))
labels = torch.from_numpy(np.load(data + "/label.npy"))
torch.manual_seed(0)
dynamo_export(Logits(LlamaForCausalLM(llama)).train(), tokens[:2], "tokens",
              folder + ".onnx", optimize=False)
flags = ["--class-axis", "-1"]
result = run(gpuc, "compile", folder + ".onnx", "--batch", 4, "--target",
             "cpu", "--attention", "flash", *flags, "--dump-dir",
             folder + "-dump", "-o", folder + "-flash")
dumps = {f: open(os.path.join(folder + "-dump", f)).read()
         for f in os.listdir(folder + "-dump")}
fused = sum(d.count("gpuc.attention ") for f, d in dumps.items()
            if f.endswith("-gpuc-form-attention.mlir"))
# Grouped-query attention reads the 2 key/value heads as they are: an
# attention whose query is [B, 4, T, D] and key [B, 2, T, D].
grouped = sum(len(re.findall(
    r"gpuc\.attention .*: tensor<\d+x4x\d+x\d+xf32>, tensor<\d+x2x", d))
    for f, d in dumps.items() if f.endswith("-gpuc-form-attention.mlir"))
ops, triangles = marked([d for f, d in dumps.items()
                         if f.endswith("-gpuc-decompose.mlir")])


def build_llama():
    return Logits(LlamaForCausalLM(llama))


loss64, exact = reference_step(build_llama, torch.float64, (tokens,), labels)
_, single = reference_step(build_llama, torch.float32, (tokens,), labels)


def llama_distance(params):
    return relative_distance(params, exact)


inv_freq = dict(Logits(LlamaForCausalLM(llama)).named_buffers())[
    "model.model.rotary_emb.inv_freq"].numpy()
for attention in ("gemm", "flash"):
    ours = step(folder + ".onnx", flags + ["--attention", attention],
                folder + "-" + attention, data)
    # The rotary frequencies, a buffer a gradient would reach, stay as
    # they were.
    kept = ours.get("model.model.rotary_emb.inv_freq.npy")
    check(kept is not None and np.array_equal(kept, inv_freq),
          f"hf llama sdpa, {attention}: its rotary frequencies (a buffer) "
          f"are not trained")
    # The tied embedding is named after the head, as the export names it.
    mine = {n: ours.get(n + ".npy", ours.get(
        n.replace("model.model.embed_tokens", "model.lm_head") + ".npy"))
        for n in exact}
    missing = [n for n, v in mine.items() if v is None]
    ours_distance = llama_distance(
        {n: v.astype(np.float64) for n, v in mine.items()}) \
        if not missing else float("inf")
    loss = float(ours["loss.npy"])
    check(fused == 2 and grouped == 2 and ops > 0 and triangles == ops and
          not missing and abs(loss - loss64) / loss64 < 1e-6 and
          ours_distance <= 2 * llama_distance(single),
          f"hf llama sdpa, {attention}: {fused} fused attentions, "
          f"{grouped} reading 2 key heads for 4 query heads, "
          f"{triangles} of {ops} ops marked triangle gt; one AdamW step "
          f"as PyTorch's "
          f"(loss {loss:.7f}, PyTorch float64 {loss64:.7f}; parameters "
          f"within 2x PyTorch float32's distance{'; missing ' + ', '.join(missing) if missing else ''})")

# Its save_pretrained checkpoint into an artifact without weights: the
# frequencies, in no state_dict (persistent=False), stay in the artifact.
torch.manual_seed(1)
pretrained = LlamaForCausalLM(llama)
pretrained.save_pretrained(folder + "-checkpoint")
result = run(gpuc, "compile", folder + ".onnx", "--batch", 4, "--target",
             "cpu", "--no-weights", *flags, "-o", folder + "-noweights")
if result.returncode == 0:
    result = run(folder + "-noweights/train", "--device", "cpu", "--init",
                 folder + "-checkpoint/model.safetensors", "--run-step",
                 data, "--output-dir", folder + "-init-step")
with torch.no_grad():
    expected = torch.nn.functional.cross_entropy(
        Logits(pretrained.double())(tokens).reshape(-1, 1000),
        labels.reshape(-1)).item()
loss = float(np.load(folder + "-init-step/loss.npy")) \
    if result.returncode == 0 else float("nan")
check(abs(loss - expected) / expected < 1e-6,
      f"hf llama checkpoint: --init into --no-weights takes save_pretrained's "
      f"weights (loss {loss:.7f}, PyTorch float64 {expected:.7f})"
      f"{'' if result.returncode == 0 else ': ' + result.stderr[-300:]}")

# Hugging Face's BERT and RoBERTa (masked language models, small):
# attention in both directions, token types picked from a buffer at the
# positions (GatherElements: at indices known at import for BERT; for
# RoBERTa, whose positions count the tokens that are not padding (CumSum of
# the inputs, a scan), from a buffer of one value), a head tied to the
# embedding through a transform of its own. The batch holds padding tokens
# (RoBERTa's is 1) at a few places.
from transformers import (BertConfig, BertForMaskedLM,  # noqa: E402
                          RobertaConfig, RobertaForMaskedLM)

padded = tokens.clone()
padded[0, 5] = padded[1, 0] = padded[3, 31] = 1
data = f"{work}/masked-lm-in"
os.makedirs(data, exist_ok=True)
np.save(data + "/tokens.npy", padded.numpy())
np.save(data + "/label.npy", labels.numpy())
for name, config_type, model_type in (("bert", BertConfig, BertForMaskedLM),
                                      ("roberta", RobertaConfig,
                                       RobertaForMaskedLM)):
    config = config_type(vocab_size=1000, hidden_size=64,
                         intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, max_position_embeddings=40,
                         hidden_dropout_prob=0.0,
                         attention_probs_dropout_prob=0.0,
                         attn_implementation="sdpa")
    folder = f"{work}/{name}"
    prefix = "model." + name

    def build_masked_lm():
        return Logits(model_type(config))

    torch.manual_seed(0)
    dynamo_export(build_masked_lm().train(), padded[:2], "tokens",
                  folder + ".onnx", optimize=False)
    loss64, exact = reference_step(build_masked_lm, torch.float64, (padded,),
                                   labels)
    _, single = reference_step(build_masked_lm, torch.float32, (padded,),
                               labels)
    # The export names the tied weight and bias after the decoder.
    head = "model.lm_head" if name == "roberta" else "model.cls.predictions"
    tied = {prefix + ".embeddings.word_embeddings.weight":
            head + ".decoder.weight", head + ".bias": head + ".decoder.bias"}
    try:
        ours = step(folder + ".onnx", ["--class-axis", "-1"], folder, data)
        mine = {n: ours.get(n + ".npy", ours.get(tied.get(n, n) + ".npy"))
                for n in exact}
        missing = [n for n, v in mine.items() if v is None]
        loss = float(ours["loss.npy"])
        distance = relative_distance(
            {n: v.astype(np.float64) for n, v in mine.items()}, exact) \
            if not missing else float("inf")
    except RuntimeError as error:
        loss, distance = float("nan"), float("inf")
        missing = [str(error)[-300:]]
    check(not missing and abs(loss - loss64) / loss64 < 1e-6 and
          distance <= 2 * relative_distance(single, exact),
          f"hf {name} sdpa: one AdamW step as PyTorch's (loss {loss:.7f}, "
          f"PyTorch float64 {loss64:.7f}; parameters within 2x PyTorch "
          f"float32's distance"
          f"{'; missing ' + ', '.join(missing) if missing else ''})")

sys.exit(1 if failed else 0)
