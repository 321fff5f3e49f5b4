#!/usr/bin/env python3
"""Generated code against the reference interpreter, one training step.

For each example model: `gpuc compile` (CPU target) and `gpuc import --train`
with the same loss and optimizer; the same random batch, seed and step go
through `out/train --run-step` and `gpuc run`; the loss, every updated
parameter and every optimizer-state tensor must agree within the tolerance
of stepcompare.py.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stepcompare import TOLERANCE, compare_dirs  # noqa: E402
MODELS = {
    # name: (input name, input shape, input kind, labels shape, classes, extra)
    "mlp": ("image", (4, 1, 28, 28), "float", (4,), 10, []),
    "cnn": ("image", (4, 1, 28, 28), "float", (4,), 10, []),
    "transformer": ("tokens", (4, 16), "tokens", (4, 16), 64,
                    ["--class-axis", "-1"]),
    # Grouped strided conv, overlapping padded max pool, average pools
    # counting and not counting their padding: the general window paths.
    "windows": ("image", (4, 2, 9, 9), "float", (4,), 5, []),
    # An LSTM with peepholes into a bidirectional GRU, unrolled at import;
    # the last step's outputs (a gather) into a linear layer.
    "recurrent": ("image", (4, 24), "float", (4,), 3, []),
    # Token and position embeddings: 64 tokens over 50 rows (repeats, rows
    # no token names) and constant slots with repeats and negative entries,
    # whose gradients are sums over each row's positions.
    "embedding": ("tokens", (4, 16), "tokens", (64,), 50, []),
    # Causal self-attention over 37 positions with dropout on the weights,
    # then cross-attention to 21 keys with a keeping padding mask and
    # values wider than the keys: gpuc.attention's odd shapes.
    "attention": ("image", (4, 37, 8), "float", (4,), 5, []),
    # Attention whose widths are multiples of 16 (written by
    # write_attention16): causal self-attention over 70 positions (a -inf
    # fill, dropout) with 2 heads of 32, then cross-attention to 37 keys of
    # a learned memory, keys 16 wide and values 80, with a keeping padding
    # mask and a finite fill. Under f16/bf16 the GPU's fused kernels run
    # these on tensor cores, in tiles of 64 and (values wider than 64) of
    # 32; 70 and 37 leave partial tiles and warps.
    "attention16": ("image", (4, 70, 32), "float", (4,), 5, []),
    # Causal self-attention as nanoGPT writes it (written by write_qkv16):
    # one projection with a bias makes the queries, keys and values, split
    # into 2 heads of 16 over 40 positions. The fused attention kernels read
    # them as row windows of the projection's output, in place.
    "qkv16": ("image", (4, 40, 32), "float", (4,), 5, []),
    # Grouped-query causal self-attention as Hugging Face's Llama exports
    # it (written by write_gqa16): 4 query heads of 16 over 2 key and value
    # heads, each repeated for its 2 query heads (`repeat_kv`: Unsqueeze,
    # Expand, Reshape) and the keys transposed after that, over 42
    # positions. The attention formed reads the 2 key heads; its keys'
    # gradients sum over each group. Learned gains on the split query and
    # key heads stand for rotary positions: elementwise work between the
    # head split and the attention, whose kernels write (and whose
    # gradients read) the fused kernels' [B, T, H, D] rows. The three
    # projections read a learned scaling of the input, whose gradient is
    # their input gradients' sum: GEMMs accumulating onto each other.
    "gqa16": ("image", (4, 42, 32), "float", (4,), 5, []),
    # examples/chargpt.onnx: its causal mask is Trilu's comparison of
    # iotas and its scale a reciprocal, both computed in the step as
    # exported; the attention formed from them reads no mask.
    "chargpt": ("tokens", (4, 64), "tokens", (4, 64), 256,
                ["--class-axis", "-1"]),
    # Cosines and sines of trainable angles (rotary embeddings' functions,
    # here on a path with gradients): the math library's cosf and sinf in
    # the kernels, their vector forms on the CPU.
    "periodic": ("image", (4, 24), "float", (4,), 3, []),
    # A linear layer to 3,001 classes, layer-normalized: rows longer than
    # the CPU's lane blocks (sums in float blocks of 1,024, then double),
    # ending in a partial block and a partial group of lanes. Written by
    # write_wide_head.
    "widehead": ("image", (4, 24), "float", (4,), 3001, []),
    # The same linear layer with a bias straight into the loss: a
    # gpuc.linear_cross_entropy over 3,001 classes (padded to 3,008 under
    # --pad-classes=64).
    "widelinear": ("image", (4, 24), "float", (4,), 3001, []),
    # Sums down columns of long rows (written by write_columns): a bias
    # and a layer norm's gain and shift over 4 x 8,192 positions of 64
    # features, a normalization over the 8,192 positions of each feature
    # (two levels of reductions), and their mean and maximum (a sum and a
    # maximum in one level); each runs in columns split into chunks, whose
    # partials a launch combines for the later ones.
    "columns": ("image", (4, 8192, 24), "float", (4,), 3, []),
    # PyTorch models of torch_parity.py, exported here (needs torch): the
    # LSTM and GRU classifiers, 2-D upsampling layers (padding modes,
    # instance/group norm, ConvTranspose, Resize), 1-D convolutions and
    # einsum attention.
    "lstm": ("image", (4, 1, 28, 28), "float", (4,), 10, []),
    "bigru": ("image", (4, 1, 28, 28), "float", (4,), 10, []),
    "upsampler": ("image", (4, 1, 28, 28), "float", (4,), 10, []),
    "sequence1d": ("image", (4, 1, 28, 28), "float", (4,), 10, []),
    "vit": ("image", (4, 1, 28, 28), "float", (4,), 10, []),
    # torchvision's ResNet-18 on 64x64 images: residual blocks, whose
    # batch norms' gradients (channels last) store the ReLU-masked
    # gradient for the skip connection in their first pass and read it
    # back in the last.
    "resnet18": ("image", (4, 3, 64, 64), "float", (4,), 10, []),
    # More of torchvision's classifiers people train: ConvNeXt-T (7x7
    # depthwise convolutions, layer norms over channels last, GELU, layer
    # scale) and Swin-T (shifted windows: rolls, a mask built by slice
    # assignment, relative position biases gathered from a table, patch
    # merging's strided slices). (EfficientNet-B0 is in the zoo's PyTorch
    # parity only: at these sizes its float32 gradients, PyTorch's too,
    # are up to 20 times this tolerance from float64's.)
    "convnext_tiny": ("image", (4, 3, 64, 64), "float", (4,), 10, []),
    "swin_t": ("image", (4, 3, 64, 64), "float", (4,), 10, []),
    # MobileNet-V3-small: 3x3 and 5x5 depthwise convolutions (oneDNN's
    # direct kernel and gpuc's own filter gradient), squeeze-excitation,
    # hard swish; channels last on the CPU (--conv-layout auto).
    "mobilenet_v3_small": ("image", (4, 3, 64, 64), "float", (4,), 10, []),
}
TORCH_MODELS = ("lstm", "bigru", "upsampler", "sequence1d", "vit", "resnet18",
                "convnext_tiny", "swin_t", "mobilenet_v3_small")
MODEL_FILES = {"windows": "test/Codegen/Inputs/windows.onnxtxt",
               "recurrent": "test/Codegen/Inputs/recurrent.onnxtxt",
               "embedding": "test/Codegen/Inputs/embedding.onnxtxt",
               "attention": "test/Codegen/Inputs/attention.onnxtxt",
               "periodic": "test/Codegen/Inputs/periodic.onnxtxt"}



ONNX_TEXT_HEADER = '<\n  ir_version: 8,\n  opset_import: ["" : 17]\n>\n'


def uniform_values(rng):
    """values(*shape, scale): uniform(-scale, scale) draws from `rng`, as an
    ONNX text initializer's list."""
    def values(*shape, scale):
        return ", ".join("%.4f" % v
                         for v in rng.uniform(-scale, scale, shape).ravel())
    return values


def causal_mask_text(T):
    """A [T, T] causal mask's values (1 where the key is not after the
    query) as ONNX text."""
    return ", ".join("1" if key <= query else "0"
                     for query in range(T) for key in range(T))


def save_parsed(path, minus_inf=None):
    """Parses the ONNX text at path + ".txt" and saves the model at `path`.
    ONNX's text has no infinity: the initializer named `minus_inf` is set to
    -inf in the parsed model."""
    import onnx
    from onnx import numpy_helper
    import onnx.parser
    with open(path + ".txt") as f:
        model = onnx.parser.parse_model(f.read())
    for i, init in enumerate(model.graph.initializer):
        if init.name == minus_inf:
            model.graph.initializer[i].CopyFrom(numpy_helper.from_array(
                np.array(-np.inf, dtype=np.float32), minus_inf))
    onnx.save(model, path)
    return path


def write_wide_head(path, name):
    """The widehead or widelinear model as ONNX text, its weights drawn here
    (3001 x 24 of them: too many to keep in a file of the tests)."""
    rng = np.random.default_rng(3)
    classes, features = MODELS[name][4], MODELS[name][1][1]

    values = uniform_values(rng)
    with open(path, "w") as f:
        f.write(ONNX_TEXT_HEADER)
        f.write("%s (float[N, %d] image) => (float[N, %d] logits)\n"
                % (name, features, classes))
        f.write("<float[%d, %d] w = {%s}, float[%d] gain = {%s}, "
                "float[%d] shift = {%s}>\n"
                % (features, classes, values(features, classes, scale=0.3),
                   classes, values(classes, scale=2.0), classes,
                   values(classes, scale=0.5)))
        f.write("{\n  z = MatMul(image, w)\n")
        if name == "widehead":
            f.write("  logits = LayerNormalization<axis = -1>(z, gain, "
                    "shift)\n}\n")
        else:
            f.write("  logits = Add(z, shift)\n}\n")
    return path


def write_columns(path):
    """The columns model as ONNX text, its weights drawn here."""
    rng = np.random.default_rng(5)

    values = uniform_values(rng)
    with open(path, "w") as f:
        f.write(ONNX_TEXT_HEADER)
        f.write("columns (float[N, 8192, 24] image) => (float[N, 3] logits)\n")
        f.write("<float[24, 64] w1 = {%s}, float[64] b1 = {%s}, "
                "float[64] gain = {%s}, float[64] shift = {%s}, "
                "float[64, 3] w2 = {%s}, float[3] b2 = {%s}>\n"
                % (values(24, 64, scale=0.3), values(64, scale=0.5),
                   values(64, scale=2.0), values(64, scale=0.5),
                   values(64, 3, scale=0.3), values(3, scale=0.1)))
        # The positions' normalization adds back to its input (a
        # normalization alone would leave the shift a gradient of zero:
        # a per-feature constant is what it removes).
        f.write("""{
  z = MatMul(image, w1)
  h = Add(z, b1)
  ln = LayerNormalization<axis = -1>(h, gain, shift)
  a = Relu(ln)
  m = ReduceMean<axes = [1], keepdims = 1>(a)
  c = Sub(a, m)
  sq = Mul(c, c)
  v = ReduceMean<axes = [1], keepdims = 1>(sq)
  eps = Constant<value = float[1] {0.00001}>()
  ve = Add(v, eps)
  sd = Sqrt(ve)
  n = Div(c, sd)
  both = Add(n, a)
  pm = ReduceMean<axes = [1], keepdims = 0>(both)
  pmax = ReduceMax<axes = [1], keepdims = 0>(both)
  p = Add(pm, pmax)
  logits = Gemm(p, w2, b2)
}
""")
    return path


def write_attention16(path):
    """The attention16 model as ONNX, its weights drawn here. ONNX's text
    has no infinity: the fill is set in the parsed model."""
    rng = np.random.default_rng(7)
    T, K = 70, 37

    values = uniform_values(rng)
    tril = causal_mask_text(T)
    pad = ", ".join("0" if key % 5 == 3 else "1" for key in range(K))
    with open(path + ".txt", "w") as f:
        f.write(ONNX_TEXT_HEADER)
        f.write("attention16 (float[N, %d, 32] image) => (float[N, 5] logits)\n"
                % T)
        f.write("<float[32, 64] wq = {%s}, float[32, 64] wk = {%s}, "
                "float[32, 64] wv = {%s}, bool[1, 1, %d, %d] tril = {%s}, "
                "float[%d, 24] memory = {%s}, float[64, 32] wq2 = {%s}, "
                "float[24, 32] wk2 = {%s}, float[24, 160] wv2 = {%s}, "
                "bool[1, 1, 1, %d] pad = {%s}, float[160, 5] head = {%s}, "
                "int64[4] heads = {0, %d, 2, 32}, "
                "int64[4] cheads = {0, %d, 2, 16}, "
                "int64[4] mheads = {1, %d, 2, 16}, "
                "int64[4] vheads = {1, %d, 2, 80}, "
                "int64[3] flat = {0, %d, 64}, int64[3] flat2 = {0, %d, 160}, "
                "float scale = {0.1767767}, float quarter = {0.25}, "
                "float minus_inf = {-1.0}, float minus_big = {-10000.0}, "
                "float ratio = {0.2}, bool training = {1}>\n"
                % (values(32, 64, scale=0.3), values(32, 64, scale=0.3),
                   values(32, 64, scale=0.3), T, T, tril, K,
                   values(K, 24, scale=1.0), values(64, 32, scale=0.3),
                   values(24, 32, scale=0.3), values(24, 160, scale=0.3),
                   K, pad, values(160, 5, scale=0.3), T, T, K, K, T, T))
        f.write("""{
  q2 = MatMul(image, wq)
  k2 = MatMul(image, wk)
  v2 = MatMul(image, wv)
  q4 = Reshape(q2, heads)
  q = Transpose<perm = [0, 2, 1, 3]>(q4)
  k4 = Reshape(k2, heads)
  kt = Transpose<perm = [0, 2, 3, 1]>(k4)
  v4 = Reshape(v2, heads)
  v = Transpose<perm = [0, 2, 1, 3]>(v4)
  s = MatMul(q, kt)
  ss = Mul(s, scale)
  masked = Where(tril, ss, minus_inf)
  p = Softmax<axis = -1>(masked)
  pd = Dropout(p, ratio, training)
  y = MatMul(pd, v)
  yt = Transpose<perm = [0, 2, 1, 3]>(y)
  y2 = Reshape(yt, flat)
  cq2 = MatMul(y2, wq2)
  cq4 = Reshape(cq2, cheads)
  cq = Transpose<perm = [0, 2, 1, 3]>(cq4)
  ck2 = MatMul(memory, wk2)
  ck4 = Reshape(ck2, mheads)
  ckt = Transpose<perm = [0, 2, 3, 1]>(ck4)
  cv2 = MatMul(memory, wv2)
  cv4 = Reshape(cv2, vheads)
  cv = Transpose<perm = [0, 2, 1, 3]>(cv4)
  cs = MatMul(cq, ckt)
  css = Mul(cs, quarter)
  cmasked = Where(pad, css, minus_big)
  cp = Softmax<axis = 3>(cmasked)
  cy = MatMul(cp, cv)
  cyt = Transpose<perm = [0, 2, 1, 3]>(cy)
  cy2 = Reshape(cyt, flat2)
  pooled = ReduceMean<axes = [1], keepdims = 0>(cy2)
  logits = MatMul(pooled, head)
}
""")
    return save_parsed(path, minus_inf="minus_inf")


def write_qkv16(path):
    """The qkv16 model as ONNX, its weights drawn here."""
    rng = np.random.default_rng(11)
    T = 40

    values = uniform_values(rng)
    tril = causal_mask_text(T)
    with open(path + ".txt", "w") as f:
        f.write(ONNX_TEXT_HEADER)
        f.write("qkv16 (float[N, %d, 32] image) => (float[N, 5] logits)\n" % T)
        f.write("<float[32, 96] wqkv = {%s}, float[96] bqkv = {%s}, "
                "int64[3] thirds = {32, 32, 32}, "
                "bool[1, 1, %d, %d] tril = {%s}, "
                "int64[4] heads = {0, %d, 2, 16}, int64[3] flat = {0, %d, 32}, "
                "float[32, 5] head = {%s}, float scale = {0.25}, "
                "float minus_big = {-10000.0}>\n"
                % (values(32, 96, scale=0.3), values(96, scale=0.5), T, T,
                   tril, T, T, values(32, 5, scale=0.3)))
        f.write("""{
  qkv0 = MatMul(image, wqkv)
  qkv = Add(qkv0, bqkv)
  q2, k2, v2 = Split<axis = 2>(qkv, thirds)
  q4 = Reshape(q2, heads)
  q = Transpose<perm = [0, 2, 1, 3]>(q4)
  k4 = Reshape(k2, heads)
  kt = Transpose<perm = [0, 2, 3, 1]>(k4)
  v4 = Reshape(v2, heads)
  v = Transpose<perm = [0, 2, 1, 3]>(v4)
  s = MatMul(q, kt)
  ss = Mul(s, scale)
  masked = Where(tril, ss, minus_big)
  p = Softmax<axis = -1>(masked)
  y = MatMul(p, v)
  yt = Transpose<perm = [0, 2, 1, 3]>(y)
  y2 = Reshape(yt, flat)
  pooled = ReduceMean<axes = [1], keepdims = 0>(y2)
  logits = MatMul(pooled, head)
}
""")
    return save_parsed(path)


def write_gqa16(path):
    """The gqa16 model as ONNX, its weights drawn here."""
    rng = np.random.default_rng(13)
    T = 42

    values = uniform_values(rng)
    tril = causal_mask_text(T)
    with open(path + ".txt", "w") as f:
        f.write(ONNX_TEXT_HEADER)
        f.write("gqa16 (float[N, %d, 32] image) => (float[N, 5] logits)\n" % T)
        f.write("<float[32, 64] wq = {%s}, float[32, 32] wk = {%s}, "
                "float[32, 32] wv = {%s}, bool[1, 1, %d, %d] tril = {%s}, "
                "int64[4] qheads = {0, %d, 4, 16}, "
                "int64[4] kvheads = {0, %d, 2, 16}, "
                "int64[1] group_axis = {2}, int64[5] repeat = {1, 1, 2, 1, 1}, "
                "int64[4] grouped = {0, 4, %d, 16}, "
                "int64[3] flat = {0, %d, 64}, float[64, 5] head = {%s}, "
                "float[1, 1, 1, 16] qgain = {%s}, "
                "float[1, 1, 1, 16] kgain = {%s}, float[1, 1, 32] xgain = {%s}, "
                "float scale = {0.25}, float minus_inf = {-1.0}>\n"
                % (values(32, 64, scale=0.3), values(32, 32, scale=0.3),
                   values(32, 32, scale=0.3), T, T, tril, T, T, T, T,
                   values(64, 5, scale=0.3), values(1, 1, 1, 16, scale=2.0),
                   values(1, 1, 1, 16, scale=2.0),
                   values(1, 1, 32, scale=2.0)))
        f.write("""{
  x = Mul(image, xgain)
  q2 = MatMul(x, wq)
  q4 = Reshape(q2, qheads)
  qs = Transpose<perm = [0, 2, 1, 3]>(q4)
  q = Mul(qs, qgain)
  k2 = MatMul(x, wk)
  k4 = Reshape(k2, kvheads)
  ks = Transpose<perm = [0, 2, 1, 3]>(k4)
  k = Mul(ks, kgain)
  k5 = Unsqueeze(k, group_axis)
  ke = Expand(k5, repeat)
  kr = Reshape(ke, grouped)
  kt = Transpose<perm = [0, 1, 3, 2]>(kr)
  v2 = MatMul(x, wv)
  v4 = Reshape(v2, kvheads)
  v = Transpose<perm = [0, 2, 1, 3]>(v4)
  v5 = Unsqueeze(v, group_axis)
  ve = Expand(v5, repeat)
  vr = Reshape(ve, grouped)
  s = MatMul(q, kt)
  ss = Mul(s, scale)
  masked = Where(tril, ss, minus_inf)
  p = Softmax<axis = -1>(masked)
  y = MatMul(p, vr)
  yt = Transpose<perm = [0, 2, 1, 3]>(y)
  y2 = Reshape(yt, flat)
  pooled = ReduceMean<axes = [1], keepdims = 0>(y2)
  logits = MatMul(pooled, head)
}
""")
    return save_parsed(path, minus_inf="minus_inf")


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("command failed: %s\n%s%s" % (" ".join(cmd), r.stdout,
                                                r.stderr))
    return r.stdout


def export_torch_model(args, name, work):
    sys.path.insert(0, os.path.join(args.src, "test", "Training"))
    import torch
    from torch_parity import export, image_shape, make_model
    path = os.path.join(work, name + ".onnx")
    if not os.path.exists(path):
        model, input_name, opset = make_model(name)
        export(model, torch.randn(2, *image_shape(name)), path, input_name,
               opset)
    return path


def check(args, name, optimizer, work):
    input_name, shape, kind, label_shape, classes, extra = MODELS[name]
    model = os.path.join(args.src, MODEL_FILES.get(
        name, os.path.join("examples", name + ".onnx")))
    if name in TORCH_MODELS:
        model = export_torch_model(args, name, work)
    if name in ("widehead", "widelinear"):
        model = write_wide_head(os.path.join(work, name + ".onnxtxt"), name)
    if name == "columns":
        model = write_columns(os.path.join(work, name + ".onnxtxt"))
    if name == "attention16":
        model = write_attention16(os.path.join(work, name + ".onnx"))
    if name == "qkv16":
        model = write_qkv16(os.path.join(work, name + ".onnx"))
    if name == "gqa16":
        model = write_gqa16(os.path.join(work, name + ".onnx"))
    out = os.path.join(work, name + "-" + optimizer)
    # The head's logits type changes the step itself: the reference's
    # (import) and the trainer's (compile) step use the same one.
    common = ["--batch", str(shape[0]), "--optimizer", optimizer,
              "--precision", args.precision,
              "--head-logits", args.head_logits] + extra
    run([args.gpuc, "compile", model, "-o", out, "--target", args.target] +
        common + args.compile_flag)
    step = os.path.join(work, name + "-" + optimizer + ".mlir")
    run([args.gpuc, "import", model, "--train", "--loss", "cross_entropy",
         "--loss-output", "logits", "-o", step] + common)

    rng = np.random.default_rng(1)
    inputs = os.path.join(work, name + "-inputs")
    os.makedirs(inputs, exist_ok=True)
    if kind == "float":
        x = rng.standard_normal(shape).astype(np.float32)
    else:
        x = rng.integers(0, classes, size=shape).astype(np.int64)
    y = rng.integers(0, classes, size=label_shape).astype(np.int64)
    np.save(os.path.join(inputs, input_name + ".npy"), x)
    np.save(os.path.join(inputs, "label.npy"), y)

    ref, got = out + "/ref", out + "/got"
    run([args.gpuc, "run", step, "--func", "train_step",
         "--input", "%s=%s/%s.npy" % (input_name, inputs, input_name),
         "--input", "label=%s/label.npy" % inputs,
         "--seed", "7", "--step", "3", "--output-dir", ref])
    run([os.path.join(out, "train"), "--run-step", inputs, "--output-dir", got,
         "--seed", "7", "--step", "3"] + args.train_flag)

    compared, worst, worst_name, noisy, failures = compare_dirs(
        ref, got, **TOLERANCE[args.precision])
    loss_ref = float(np.load(os.path.join(ref, "loss.npy")))
    loss_got = float(np.load(os.path.join(got, "loss.npy")))
    print("%-12s %-6s tensors %3d  loss %.7f vs %.7f  worst %.3f of the "
          "tolerance (%s)%s  %s" % (
              name, optimizer, compared, loss_got, loss_ref, worst,
              worst_name,
              "  [%d noise-gradient elements not compared]" % noisy
              if noisy else "", "FAIL" if failures else "ok"))
    for f in failures[:10]:
        print("  " + f)
    return not failures


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--gpuc", required=True)
    p.add_argument("--src", required=True)
    p.add_argument("--models",
                   default="mlp,cnn,transformer,windows,recurrent,attention,"
                   "attention16,embedding,widehead,widelinear,columns,"
                   "periodic")
    p.add_argument("--optimizers", default="sgd,adamw")
    p.add_argument("--precision", default="fp32", choices=sorted(TOLERANCE))
    p.add_argument("--compile-flag", action="append", default=[],
                   help="passed to gpuc compile only (the reference is the "
                   "interpreter either way), e.g. --memory-budget=1GiB")
    p.add_argument("--target", default="cpu", choices=["cpu", "all"],
                   help="gpuc compile's target: all adds the CUDA device's "
                   "kernels, for --train-flag=--device --train-flag=cuda")
    p.add_argument("--train-flag", action="append", default=[],
                   help="passed to the trainer, e.g. --device (then cuda)")
    p.add_argument("--head-logits", default="f32",
                   choices=["f32", "low"],
                   help="a language model head's logits under fp16/bf16 "
                   "(gpuc's --head-logits), in both the step and its "
                   "reference")
    args = p.parse_args()
    if args.precision == "fp32":
        args.head_logits = "f32"
    ok = True
    with tempfile.TemporaryDirectory() as work:
        for name in args.models.split(","):
            for optimizer in args.optimizers.split(","):
                ok &= check(args, name, optimizer, work)
    print("step parity: %s" % ("all agree" if ok else "MISMATCH"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
