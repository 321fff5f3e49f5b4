#!/usr/bin/env python3
"""The loops of an artifact's GPU kernels, read from their SASS (nothing
runs; no GPU needed): for each KERNEL, every innermost loop (a backward
branch whose body holds no other), its length in instructions and the mix
of its opcodes.

A memory-bound kernel that runs many instructions an element is bound by
the schedulers instead: a row kernel's pass over a batch of 8 elements a thread
is one loop, so its length over 8 is what each element costs. GPT-2's head
cross-entropy (three passes over 50,304 bf16 logits a row):

    gpuc compile gpt2.onnx --precision bf16 --target cuda --cuda-arch sm_90 \\
        --no-weights ... -o A
    bench/sass_loops.py A k11

(kernel names from the artifact's plan.json; a split kernel's launches
are KERNEL_p0, KERNEL_p1, ...).

Usage: bench/sass_loops.py ARTIFACT_DIR_OR_PTX KERNEL... [--arch sm_90]
       [--mix N]
"""
import argparse
import collections
import re
import sys

import sass as sass_tools

ADDRESS = re.compile(r"\s*/\*([0-9a-f]+)\*/\s")
LABEL = re.compile(r"^\.(L_x_\d+):")
BRANCH = re.compile(r"\bBRA\b.*`\(\.(L_x_\d+)\)")


def loops(body):
    """(first, last, opcodes) of each innermost loop of a kernel's SASS:
    a branch back to a label, with no such loop inside it."""
    ops, at_label, pending = [], {}, []
    for line in body.splitlines():
        m = LABEL.match(line)
        if m:
            pending.append(m.group(1))
            continue
        m = ADDRESS.match(line)
        if not m:
            continue
        index = len(ops)
        for label in pending:
            at_label[label] = index
        pending = []
        ops.append(line)
    found = []
    for index, line in enumerate(ops):
        m = BRANCH.search(line)
        if m and at_label.get(m.group(1), index + 1) <= index:
            found.append((at_label[m.group(1)], index))
    innermost = [(a, b) for a, b in found
                 if not any(a <= c and d <= b and (c, d) != (a, b)
                            for c, d in found)]
    opcodes = sass_tools.instructions("\n".join(ops))
    return [(a, b, opcodes[a:b + 1]) for a, b in innermost]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("source", help="an artifact directory or a .ptx file")
    p.add_argument("kernels", nargs="+", metavar="KERNEL")
    p.add_argument("--arch", default="sm_90")
    p.add_argument("--mix", type=int, default=10,
                   help="opcodes of the mix to print, most frequent first")
    args = p.parse_args()
    usage, sass = sass_tools.assemble(args.source, args.arch, "sass_loops.py")
    found = dict(sass_tools.kernels(sass))
    missing = [name for name in args.kernels if name not in found]
    if missing:
        sys.exit("sass_loops.py: no kernel %s (kernels: %s)" %
                 (" ".join(missing), " ".join(sorted(found))))
    for name in args.kernels:
        u = usage.get(name, {})
        whole = sass_tools.instructions(found[name])
        print("%s: %d instructions, %s registers, %s bytes spilled" %
              (name, len(whole), u.get("regs", "?"), u.get("spill", "?")))
        for first, last, ops in loops(found[name]):
            mix = collections.Counter(ops).most_common(args.mix)
            print("  loop at %5d: %4d  %s" %
                  (first, len(ops), " ".join("%s %d" % kv for kv in mix)))


if __name__ == "__main__":
    main()
