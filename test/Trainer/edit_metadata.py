"""Copies a safetensors file with some of its metadata replaced: what a
damaged or hand-edited checkpoint looks like.

    edit_metadata.py IN OUT KEY=VALUE...
"""
import json
import struct
import sys

data = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
for item in sys.argv[3:]:
    key, value = item.split("=", 1)
    header["__metadata__"][key] = value
text = json.dumps(header).encode()
text += b" " * ((8 - len(text) % 8) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(text)) + text +
                              data[8 + n:])
