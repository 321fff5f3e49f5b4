"""Writes NaN into the first float32 tensor of a trainer checkpoint and
re-signs it: the checksum metadata (FNV-1a over name, dtype, shape and bytes
of every tensor by name, as runtime/trainer/Trainer.cpp computes it) is
recomputed, so only the values are wrong, as in a checkpoint that a
diverged run wrote.

    poison_checkpoint.py CHECKPOINT
"""
import json
import struct
import sys


def fnv1a(parts):
    h = 0xcbf29ce484222325
    for part in parts:
        for byte in part:
            h = ((h ^ byte) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return "fnv1a64:%016x" % h


def main():
    path = sys.argv[1]
    blob = bytearray(open(path, "rb").read())
    (length,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + length])
    base = 8 + length
    tensors = {k: v for k, v in header.items() if k != "__metadata__"}
    name = next(k for k in sorted(tensors) if tensors[k]["dtype"] == "F32")
    start = base + tensors[name]["data_offsets"][0]
    blob[start:start + 4] = struct.pack("<f", float("nan"))
    parts = []
    for k in sorted(tensors):
        t = tensors[k]
        lo, hi = t["data_offsets"]
        parts += [k.encode() + b"\0", t["dtype"].encode() + b"\0",
                  struct.pack("<%dq" % len(t["shape"]), *t["shape"]),
                  bytes(blob[base + lo:base + hi])]
    header["__metadata__"]["checksum"] = fnv1a(parts)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    open(path, "wb").write(struct.pack("<Q", len(text)) + text +
                           bytes(blob[base:]))
    print("poisoned %s in %s" % (name, path))


if __name__ == "__main__":
    main()
