"""Writes the hostile .npy and safetensors files of hostile-files.test."""
import json
import os
import struct
import sys

out = sys.argv[1]
for name, shape in [("neg", "(-4, 1, 28, 28)"), ("str", "('a',)"),
                    ("huge", "(99999999999999999999,)"),
                    ("many", "(2000000, 2000000)"),
                    ("big", "(1000000, 1000)")]:
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': %s, }" % shape
    header += " " * (64 - (10 + len(header)) % 64 - 1) + "\n"
    os.makedirs(os.path.join(out, "in-" + name), exist_ok=True)
    for input_name in ("image", "label"):
        with open(os.path.join(out, "in-" + name, input_name + ".npy"),
                  "wb") as f:
            f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) +
                    header.encode() + b"\0" * 16)
# A header whose last field has no value (scripts/fuzz.sh: read past the
# header's end).
os.makedirs(os.path.join(out, "in-novalue"), exist_ok=True)
for input_name in ("image", "label"):
    header = "{'descr': '<f4', 'fortran_order': False, 'shape':"
    with open(os.path.join(out, "in-novalue", input_name + ".npy"),
              "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) +
                header.encode())
# A header longer than the file (a v2 header length of 4 GB).
os.makedirs(os.path.join(out, "in-longheader"), exist_ok=True)
for input_name in ("image", "label"):
    with open(os.path.join(out, "in-longheader", input_name + ".npy"),
              "wb") as f:
        f.write(b"\x93NUMPY\x02\x00" + struct.pack("<I", 0xFFFFFFF0) +
                b"{'descr'")
for name, header in [
        ("st1", {"w": {"dtype": 5, "shape": [2], "data_offsets": [0, 8]}}),
        ("st2", {"w": {"dtype": "F32", "shape": "x", "data_offsets": [0, 8]}}),
        ("st3", {"w": {"dtype": "F32", "shape": [2],
                       "data_offsets": [0, "8"]}})]:
    text = json.dumps(header).encode()
    with open(os.path.join(out, name + ".safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"\0" * 8)
