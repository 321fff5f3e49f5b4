"""Writes models as PyTorch's dynamo exporter does (IR version 10, opset
18, the exported program's signature in the graph's metadata and each
node's FX node in its own) into the folder given, for newer-opsets.test.
ONNX 1.12 knows neither metadata field, so they are appended to the
messages' bytes as protobuf fields 16 (GraphProto) and 9 (NodeProto)."""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper


def field(number, payload):
    """A length-delimited protobuf field."""
    out = bytearray()
    for value in (number << 3 | 2, len(payload)):
        while value >= 0x80:
            out.append(value & 0x7F | 0x80)
            value >>= 7
        out.append(value)
    return bytes(out) + payload


def entry(key, value):
    return field(1, key.encode()) + field(2, value.encode())


def write(path, nodes, inputs, outputs, initializers, signature):
    """`nodes` pairs each NodeProto with its FX node text, and maybe the
    name scopes of the module that ran it."""
    graph = helper.make_graph([], "main_graph", inputs, outputs, initializers)
    data = graph.SerializeToString()
    for node, fx, *scopes in nodes:
        metadata = field(9, entry("pkg.torch.onnx.fx_node", fx))
        if scopes:
            metadata += field(9, entry("pkg.torch.onnx.name_scopes",
                                       repr(scopes[0])))
        data += field(1, node.SerializeToString() + metadata)
    data += field(16, entry(
        "pkg.torch.export.ExportedProgram.graph_signature", signature))
    model = helper.make_model(helper.make_graph([], "g", [], []),
                              opset_imports=[helper.make_opsetid("", 18)],
                              producer_name="pytorch")
    model.ClearField("graph")
    model.ir_version = 10
    with open(path, "wb") as f:
        f.write(model.SerializeToString() + field(7, data))


folder = sys.argv[1]
rng = np.random.default_rng(0)
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])

# A head tied to an embedding: the program lists both names and reads one,
# in the embedding's module too.
head = numpy_helper.from_array(rng.standard_normal((8, 4), np.float32),
                               "head.weight")
tokens = helper.make_tensor_value_info("tokens", TensorProto.INT64, [2])
write(os.path.join(folder, "tied.onnx"),
      [(helper.make_node("Gather", ["head.weight", "tokens"], ["e"]),
        "%embedding : call_function[target=torch.ops.aten.embedding.default]"
        "(args = (%p_head_weight, %tokens), kwargs = {})",
        ["", "embed", "embedding"]),
       (helper.make_node("Gemm", ["e", "head.weight"], ["y"], transB=1),
        "%linear : call_function[target=torch.ops.aten.linear.default]"
        "(args = (%embedding, %p_head_weight), kwargs = {})",
        ["", "head", "linear"])],
      [tokens], [y], [head],
      "\n# inputs\np_embed_weight: PARAMETER target='embed.weight'\n"
      "p_head_weight: PARAMETER target='head.weight'\n"
      "tokens: USER_INPUT\n")

# A checkpoint that stores the tied weight under the embedding's name only,
# as Hugging Face's save_pretrained does (safetensors: a JSON header after
# its length, then the bytes), and a batch for one step.
weights = (2 * numpy_helper.to_array(head)).astype("<f4").tobytes()
header = ('{"embed.weight": {"dtype": "F32", "shape": [8, 4], '
          '"data_offsets": [0, %d]}}' % len(weights)).encode()
with open(os.path.join(folder, "tied-checkpoint.safetensors"), "wb") as f:
    f.write(len(header).to_bytes(8, "little") + header + weights)
os.makedirs(os.path.join(folder, "tied-batch"), exist_ok=True)
np.save(os.path.join(folder, "tied-batch", "tokens.npy"), np.array([1, 3]))
np.save(os.path.join(folder, "tied-batch", "label.npy"), np.array([0, 5]))

# Two layer norms whose weights, all ones, the optimizer made one.
ones = numpy_helper.from_array(np.ones(4, np.float32), "a.weight")
z = helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 4])
write(os.path.join(folder, "merged.onnx"),
      [(helper.make_node("LayerNormalization", ["x", "a.weight"], ["h"]),
        "%a : call_function[target=torch.ops.aten.layer_norm.default]"
        "(args = (%x, [4], %p_a_weight), kwargs = {})"),
       (helper.make_node("LayerNormalization", ["h", "a.weight"], ["z"]),
        "%b : call_function[target=torch.ops.aten.layer_norm.default]"
        "(args = (%a, [4], %p_b_weight), kwargs = {})")],
      [x], [z], [ones],
      "\n# inputs\np_a_weight: PARAMETER target='a.weight'\n"
      "p_b_weight: PARAMETER target='b.weight'\nx: USER_INPUT\n")

# A training batch norm written with training_mode 0, as the exporter does.
image = helper.make_tensor_value_info("image", TensorProto.FLOAT, [2, 3, 4, 4])
out = helper.make_tensor_value_info("out", TensorProto.FLOAT, [2, 3, 4, 4])
stats = [numpy_helper.from_array(v, n) for v, n in (
    (np.ones(3, np.float32), "bn.weight"), (np.zeros(3, np.float32), "bn.bias"),
    (np.zeros(3, np.float32), "bn.running_mean"),
    (np.ones(3, np.float32), "bn.running_var"))]
write(os.path.join(folder, "batchnorm.onnx"),
      [(helper.make_node("BatchNormalization",
                         ["image", "bn.weight", "bn.bias", "bn.running_mean",
                          "bn.running_var"], ["out"], name="bn"),
        "%bn : call_function[target=torch.ops.aten."
        "_native_batch_norm_legit_functional.default](args = (%image, "
        "%p_bn_weight, %p_bn_bias, %b_bn_running_mean, %b_bn_running_var, "
        "True, 0.1, 1e-05), kwargs = {})")],
      [image], [out], stats,
      "\n# inputs\np_bn_weight: PARAMETER target='bn.weight'\n"
      "p_bn_bias: PARAMETER target='bn.bias'\nimage: USER_INPUT\n")
