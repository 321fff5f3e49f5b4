#!/usr/bin/env python3
"""Compares two cubins section by section: their code (.text.*), kernel
metadata (.nv.info.*), constants and relocations must be identical; the
notes naming the tool that built them and the PTX version it came from
(.note.nv.*) may differ. Symbols compare as what they are (name, binding,
section, value, size), in any order, and relocations and kernel metadata
by the symbols they name: ptxas assembling on several threads (-split-compile) orders the
section symbols differently, and the string tables with them.

    cubin_sections.py A.cubin B.cubin

Prints 'same code: N kernels' or the sections that differ (and fails)."""
import struct
import sys

SHT_SYMTAB, SHT_STRTAB, SHT_RELA, SHT_NOBITS, SHT_REL = 2, 3, 4, 8, 9


def cstring(data, offset):
    return data[offset:data.index(b"\0", offset)].decode()


def info_records(info, table):
    """The attributes of a .nv.info section, (format, attribute, value). A
    value of the size format (4) names a function or a section by its symbol
    index in its first 4 bytes where it has 8 (a function's register count,
    frame and stack sizes; a kernel's parameter bank): those compare by the
    symbol named (unchanged bytes else)."""
    records, at = [], 0
    while at + 4 <= len(info):
        form, attribute, half = struct.unpack_from("<BBH", info, at)
        if form != 4:
            records.append((form, attribute, half))
            at += 4
            continue
        value = info[at + 4:at + 4 + half]
        if half == 8:
            (index,) = struct.unpack_from("<I", value)
            if index < len(table):
                value = (table[index], value[4:])
        records.append((form, attribute, value))
        at += 4 + half
    return records


def sections(path):
    data = open(path, "rb").read()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        sys.exit(f"{path}: not a 64-bit ELF cubin")
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    entsize, count, names = struct.unpack_from("<HHH", data, 0x3A)
    # name, type, flags, address, offset, size, link, info, align, entsize
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * entsize)
               for i in range(count)]
    labels = [cstring(data, headers[names][4] + h[0]) for h in headers]

    def symbols(index):
        _, _, _, _, offset, size, link, _, _, _ = headers[index]
        strings = headers[link][4]
        table = []
        for at in range(offset, offset + size, 24):
            name, info, other, shndx, value, length = struct.unpack_from(
                "<IBBHQQ", data, at)
            table.append((cstring(data, strings + name), info, other,
                          labels[shndx] if 0 < shndx < count else shndx,
                          value, length))
        return table

    table = next((symbols(i) for i, h in enumerate(headers)
                  if h[1] == SHT_SYMTAB), [])
    result = {}
    for i, (_, kind, _, _, offset, size, link, _, _, _) in enumerate(headers):
        if kind == SHT_STRTAB:
            continue  # names are compared where they are used
        if kind == SHT_SYMTAB:
            result[labels[i]] = sorted(symbols(i))
        elif labels[i].startswith(".nv.info"):
            result[labels[i]] = info_records(data[offset:offset + size], table)
        elif kind in (SHT_REL, SHT_RELA):
            table = symbols(link)
            step = 24 if kind == SHT_RELA else 16
            entries = []
            for at in range(offset, offset + size, step):
                where, info = struct.unpack_from("<QQ", data, at)
                addend = (struct.unpack_from("<q", data, at + 16)[0]
                          if kind == SHT_RELA else 0)
                entries.append((where, table[info >> 32], info & 0xFFFFFFFF,
                                addend))
            result[labels[i]] = entries
        else:
            # SHT_NOBITS occupies no bytes in the file.
            result[labels[i]] = (b"" if kind == SHT_NOBITS
                                 else data[offset:offset + size])
    return result


a, b = sections(sys.argv[1]), sections(sys.argv[2])
differ = sorted(name for name in set(a) | set(b)
                if not name.startswith(".note.nv.") and a.get(name) != b.get(name))
if differ:
    print("sections differ:", ", ".join(differ))
    sys.exit(1)
kernels = sum(1 for name in a if name.startswith(".text."))
print(f"same code: {kernels} kernels")
