#!/usr/bin/env python3
"""What a tensor-core kernel issues per tile, read from its SASS (nothing
runs; no GPU needed).

A warp issues in order, one instruction a cycle, and its tensor-core
products (HMMA) wait for every instruction before them: a fused
attention's tile is as fast as its instruction stream is short. For each
KERNEL:PRODUCTS given, this finds the span of the kernel's SASS that holds
its last PRODUCTS tensor-core products (KERNEL:PRODUCTS:first, its first
ones), from the 12 instructions that load their first operands, and
prints its length, its instructions per product and the mix of its
opcodes, with the kernel's registers, spill bytes and whole length.

The fused attention's kernels (docs/cuda.md) compile a tile's body twice,
for a kept tile (no flags) and for the others. GPT-2's forward (D 64,
tiles of 64 keys) has 64 products a tile (32 for the scores, 32 for the
values) and the queries' gradient 96, and ptxas lays their kept body last;
the keys' gradient has 128, its kept tiles' loop first. So

    gpuc compile gpt2.onnx --precision bf16 --target cuda --cuda-arch sm_90 \\
        --no-weights ... -o A
    bench/sass_tiles.py A k4:64 k23_p0:96 k23_p1:128:first

(kernel names from the artifact's plan.json) prints a kept tile of each.

Usage: bench/sass_tiles.py ARTIFACT_DIR_OR_PTX KERNEL:PRODUCTS[:first]...
       [--arch sm_90] [--mix N]
"""
import argparse
import collections
import sys

import sass as sass_tools

# Instructions before a span's first product that load its operands.
LEAD = 12


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("source", help="an artifact directory or a .ptx file")
    p.add_argument("spans", nargs="+", metavar="KERNEL:PRODUCTS[:first]")
    p.add_argument("--arch", default="sm_90")
    p.add_argument("--mix", type=int, default=12,
                   help="opcodes of the mix to print, most frequent first")
    args = p.parse_args()
    wanted = []
    for spec in args.spans:
        fields = spec.split(":")
        if (len(fields) not in (2, 3) or not fields[1].isdigit() or
                int(fields[1]) < 1 or fields[2:] not in ([], ["first"])):
            sys.exit("sass_tiles.py: '%s' is not KERNEL:PRODUCTS[:first] (a "
                     "kernel name, a count of tensor-core products, and "
                     "'first' for the kernel's first ones)" % spec)
        wanted.append((fields[0], int(fields[1]), fields[2:] == ["first"]))
    usage, sass = sass_tools.assemble(args.source, args.arch, "sass_tiles.py")
    found = dict(sass_tools.kernels(sass))
    missing = [name for name, _, _ in wanted if name not in found]
    if missing:
        sys.exit("sass_tiles.py: no kernel %s (kernels: %s)" %
                 (" ".join(missing), " ".join(sorted(found))))
    print("%-10s %5s %6s %7s %8s %6s %11s  %s" %
          ("kernel", "regs", "spill", "whole", "products", "span",
           "per product", "mix of the span"))
    for name, count, leading in wanted:
        ops = sass_tools.instructions(found[name])
        products = [i for i, op in enumerate(ops) if op == "HMMA"]
        if len(products) < count:
            sys.exit("sass_tiles.py: %s has %d tensor-core products, fewer "
                     "than %d" % (name, len(products), count))
        chosen = products[:count] if leading else products[-count:]
        first, last = chosen[0], chosen[-1]
        span = ops[max(0, first - LEAD):last + 1]
        mix = collections.Counter(span).most_common(args.mix)
        u = usage.get(name, {})
        print("%-10s %5s %6s %7d %8s %6d %11.2f  %s" %
              (name, u.get("regs", "?"), u.get("spill", "?"), len(ops),
               "%d%s" % (count, " first" if leading else ""),
               len(span), len(span) / count,
               " ".join("%s %d" % kv for kv in mix)))


if __name__ == "__main__":
    main()
