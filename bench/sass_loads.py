#!/usr/bin/env python3
"""How many global loads each generated GPU kernel has in flight, read from
its SASS (nothing runs; no GPU needed).

A warp issues its instructions in order, and the CUDA compiler does not
move a load above a store written before it: loads separated by a store, a
special-function op (MUFU: exp, reciprocal, square root) or a branch wait
for one another. For each kernel of an artifact (or of the PTX file given)
this prints the registers and spill bytes ptxas reports, its global loads
(LDG, and LDGSTS: cp.async's copies to shared memory), those under a
predicate (a masked load: no memory transaction where a warp's lanes all
skip it), those before its first store, the longest run of loads with
nothing of that kind between them, and how many runs the loads fall in: a
memory-bound kernel wants long runs and few of them.

Usage: bench/sass_loads.py ARTIFACT_DIR_OR_PTX [--arch sm_90] [--top N]

It needs ptxas (the CUDA toolkit) and nvdisasm (bench/sass.py says where
it looks, and downloads it when it finds none).
"""
import argparse
import re

import sass as sass_tools


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("source", help="an artifact directory or a .ptx file")
    p.add_argument("--arch", default="sm_90")
    p.add_argument("--top", type=int, default=0,
                   help="only the N kernels with the most loads")
    args = p.parse_args()
    usage, sass = sass_tools.assemble(args.source, args.arch, "sass_loads.py")
    rows = []
    for kernel, body in sass_tools.kernels(sass):
        ops = ["LDG" if op == "LDGSTS" else op for op in re.findall(
            r"\b(LDGSTS|LDG|STG|MUFU|BRA|BAR|SHFL|EXIT)\b", body)]
        loads = ops.count("LDG")
        predicated = len(re.findall(r"@!?P\d\s+LDG", body))
        before_store = 0
        for op in ops:
            if op == "STG":
                break
            before_store += op == "LDG"
        runs, run = [], 0
        for op in ops:
            if op == "LDG":
                run += 1
            elif run:
                runs.append(run)
                run = 0
        if run:
            runs.append(run)
        u = usage.get(kernel, {})
        rows.append((loads, kernel, u.get("regs", "?"), u.get("spill", "?"),
                     predicated, before_store, max(runs or [0]), len(runs)))
    rows.sort(key=lambda r: (-r[0], r[1]))
    if args.top:
        rows = rows[:args.top]
    print("%-12s %5s %6s %6s %10s %13s %12s %7s" %
          ("kernel", "regs", "spill", "loads", "predicated", "before store",
           "longest run", "groups"))
    for loads, kernel, regs, spill, masked, before, longest, groups in rows:
        print("%-12s %5s %6s %6d %10d %13d %12d %7d" %
              (kernel, regs, spill, loads, masked, before, longest, groups))


if __name__ == "__main__":
    main()
