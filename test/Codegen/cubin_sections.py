#!/usr/bin/env python3
"""Compares two cubins section by section: their code (.text.*), kernel
metadata (.nv.info.*), constants and relocations must be identical; the
notes naming the tool that built them and the PTX version it came from
(.note.nv.*) may differ.

    cubin_sections.py A.cubin B.cubin

Prints 'same code: N kernels' or the sections that differ (and fails)."""
import struct
import sys


def sections(path):
    data = open(path, "rb").read()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        sys.exit(f"{path}: not a 64-bit ELF cubin")
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    entsize, count, names = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", data, shoff + i * entsize)
               for i in range(count)]
    strings = headers[names][4]
    result = {}
    for name, kind, _, _, offset, size in headers:
        end = data.index(b"\0", strings + name)
        label = data[strings + name:end].decode()
        # SHT_NOBITS (8) occupies no bytes in the file.
        result[label] = b"" if kind == 8 else data[offset:offset + size]
    return result


a, b = sections(sys.argv[1]), sections(sys.argv[2])
differ = sorted(name for name in set(a) | set(b)
                if not name.startswith(".note.nv.") and a.get(name) != b.get(name))
if differ:
    print("sections differ:", ", ".join(differ))
    sys.exit(1)
kernels = sum(1 for name in a if name.startswith(".text."))
print(f"same code: {kernels} kernels")
