"""Writes models whose initializer 'w' (4 floats) lives in external data,
one per case of external-data.test, into the folder given."""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

folder = sys.argv[1]
np.arange(1, 5, dtype=np.float32).tofile(os.path.join(folder, "weights.bin"))
with open(os.path.join(folder, "..", "secret.bin"), "wb") as f:
    f.write(b"secret" * 4)
os.symlink("../secret.bin", os.path.join(folder, "link.bin"))
os.symlink("/dev/zero", os.path.join(folder, "zero.bin"))
os.mkfifo(os.path.join(folder, "fifo.bin"))


def model(name, **fields):
    w = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4])
    w.data_location = TensorProto.EXTERNAL
    for key, value in fields.items():
        entry = w.external_data.add()
        entry.key, entry.value = key, value
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])], [w])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    with open(os.path.join(folder, name + ".onnx"), "wb") as f:
        f.write(m.SerializeToString())


model("ok", location="weights.bin")
model("dotdot", location="../secret.bin")
model("absolute", location="/etc/passwd")
model("link", location="link.bin")
model("zero", location="zero.bin")
model("fifo", location="fifo.bin")
model("badoffset", location="weights.bin", offset="x12")
model("beyond", location="weights.bin", length="99999999999")
model("short", location="weights.bin", offset="8")
