"""Every ONNX op gpuc imports, given operands of the wrong ranks and
attributes out of range, imports or is refused with an error: never a crash
(a signal, or with a sanitized gpuc, a sanitizer report).

    hostile_models.py GPUC WORKDIR [--full]

The op list is gpuc's own (the error for an op it does not support names
them). Each op gets its first two operands at every pair of a few ranks
(scalar, rank 1, rank 4, and an empty dimension; --full adds ranks 2, 3
and 5), declared (graph inputs and initializers) and again computed by an
Identity node, whose rank only ONNX's inference learns (scalar, rank 1 and
rank 4; --full: every rank), then each of its integer, float and string
attributes at values out of range on rank-4 operands. Prints one line per
crash and a summary.
"""
import itertools
import os
import re
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, defs, helper, numpy_helper

gpuc, work = sys.argv[1:3]
full = "--full" in sys.argv
os.makedirs(work, exist_ok=True)
rng = np.random.RandomState(0)


def save(nodes, inputs, outputs, initializers, name):
    graph = helper.make_graph(nodes, "hostile", inputs, outputs, initializers)
    model = helper.make_model(graph,
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = os.path.join(work, re.sub(r"[^A-Za-z0-9_.-]", "_", name) + ".onnx")
    onnx.save(model, path)
    return path


# The ops gpuc imports, from its error for one it does not (Acos).
probe = save([helper.make_node("Acos", ["x"], ["y"])],
             [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
             [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])], [],
             "probe")
message = subprocess.run([gpuc, "import", probe], capture_output=True,
                         text=True).stderr
ops = re.search(r"supported ops: (.*)", message).group(1).split(", ")
assert len(ops) > 50, message

# Operands whose values the op reads as integers (shapes, axes, indices).
INTEGER_OPERANDS = ("shape", "axes", "indices", "repeats", "pads", "split",
                    "starts", "ends", "steps", "limit", "delta", "start",
                    "sizes", "scales", "roi", "K", "sequence_lens")
# Ops that need an attribute to mean anything, and ops with no operands.
REQUIRED = {"Cast": {"to": TensorProto.FLOAT},
            "Einsum": {"equation": "ij,jk->ik"}}
SKIP = {"Constant", "ConstantOfShape"}

shapes = [[], [3], [2, 3, 4, 5], [0, 3]]
if full:
    shapes += [[2, 3], [2, 3, 4], [1, 2, 3, 4, 5]]
models = crashes = 0


def check(path):
    global models, crashes
    run = subprocess.run([gpuc, "import", path, "-o", os.devnull],
                         capture_output=True, text=True)
    models += 1
    if (run.returncode not in (0, 1) or "Sanitizer" in run.stderr or
            "runtime error:" in run.stderr):
        crashes += 1
        lines = run.stderr.strip().splitlines()
        print("CRASH (exit %d) %s: %s" %
              (run.returncode, path, lines[0] if lines else ""))


def operands(schema, shape_of, computed=0):
    """The op's operands, the first `computed` of them through Identity
    nodes (returned last)."""
    names, inputs, initializers, nodes = [], [], [], []
    for k, formal in enumerate(schema.inputs):
        name = "in%d" % k
        names.append(name)
        shape = shape_of(k)
        if k == 0:
            inputs.append(helper.make_tensor_value_info(
                name, TensorProto.FLOAT, shape))
        elif formal.name in INTEGER_OPERANDS:
            initializers.append(numpy_helper.from_array(
                rng.randint(-3, 4, shape).astype(np.int64), name))
        else:
            initializers.append(numpy_helper.from_array(
                np.asarray(rng.randn(*shape), dtype=np.float32), name))
        if k < computed:
            names[-1] = name + "_computed"
            nodes.append(helper.make_node("Identity", [name], [names[-1]]))
    return names, inputs, initializers, nodes


for op in ops:
    if op in SKIP:
        continue
    try:
        schema = defs.get_schema(op, 17)
    except Exception:
        continue
    # Outputs declared as scalars: ONNX's checker wants a shape, and shape
    # inference then runs on the node (a mismatch is an error, not a crash).
    outputs = [helper.make_tensor_value_info("out%d" % j, TensorProto.FLOAT,
                                             [])
               for j in range(len(schema.outputs))]
    out_names = [o.name for o in outputs]
    arity = min(len(schema.inputs), 2)
    for computed in (0, arity):
        sweep = shapes if not computed or full else shapes[:3]
        for combo in itertools.product(range(len(sweep)), repeat=arity):
            names, inputs, initializers, identities = operands(
                schema, lambda k: sweep[combo[k]] if k < len(combo) else [2],
                computed)
            node = helper.make_node(op, names, out_names,
                                    **REQUIRED.get(op, {}))
            check(save(identities + [node], inputs, outputs, initializers,
                       "%s-%sranks-%s" % (op, "computed-" if computed else "",
                                          "-".join(map(str, combo)))))
    for name, attr in schema.attributes.items():
        values = {onnx.AttributeProto.INT: [-9, 7, 0, 2**40],
                  onnx.AttributeProto.INTS: [[], [7], [-1] * 7, [0, 0],
                                             [2**40, 1]],
                  onnx.AttributeProto.FLOAT: [-1e30, 0.0],
                  onnx.AttributeProto.STRING: ["", "bogus"]}.get(attr.type,
                                                                 [])
        for i, value in enumerate(values):
            names, inputs, initializers, _ = operands(schema,
                                                      lambda k: [2, 3, 4, 5])
            attrs = dict(REQUIRED.get(op, {}))
            attrs[name] = value
            node = helper.make_node(op, names, out_names, **attrs)
            check(save([node], inputs, outputs, initializers,
                       "%s-%s-%d" % (op, name, i)))

print("hostile models: %d ops, %d models, %d crashes" %
      (len(ops), models, crashes))
sys.exit(1 if crashes else 0)
