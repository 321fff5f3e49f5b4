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

It needs ptxas (the CUDA toolkit) and nvdisasm: found on PATH, in
/usr/local/cuda/bin, or in $GPUC_NVDISASM; otherwise it downloads the
nvidia-cuda-nvdisasm wheel with pip into ~/.cache/gpuc/nvdisasm.
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile


def find_tool(name, env):
    if os.environ.get(env):
        return os.environ[env]
    found = shutil.which(name) or shutil.which(name, path="/usr/local/cuda/bin")
    if found:
        return found
    if name != "nvdisasm":
        sys.exit("sass_loads.py: %s not found (install the CUDA toolkit)" % name)
    cache = os.path.expanduser("~/.cache/gpuc/nvdisasm")
    hits = glob.glob(os.path.join(cache, "**", "bin", "nvdisasm"),
                     recursive=True)
    if not hits:
        os.makedirs(cache, exist_ok=True)
        got = subprocess.run([sys.executable, "-m", "pip", "download",
                              "--no-deps", "-d", cache,
                              "nvidia-cuda-nvdisasm"],
                             capture_output=True, text=True)
        wheels = glob.glob(os.path.join(cache, "*.whl"))
        if got.returncode or not wheels:
            sys.exit("sass_loads.py: nvdisasm not found, and pip could not "
                     "download nvidia-cuda-nvdisasm:\n" + got.stderr[-2000:])
        with zipfile.ZipFile(wheels[0]) as wheel:
            wheel.extractall(cache)
        hits = glob.glob(os.path.join(cache, "**", "bin", "nvdisasm"),
                         recursive=True)
        if not hits:
            sys.exit("sass_loads.py: the nvdisasm wheel has no bin/nvdisasm")
    os.chmod(hits[0], 0o755)
    return hits[0]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("source", help="an artifact directory or a .ptx file")
    p.add_argument("--arch", default="sm_90")
    p.add_argument("--top", type=int, default=0,
                   help="only the N kernels with the most loads")
    args = p.parse_args()
    ptx = args.source
    if os.path.isdir(ptx):
        ptx = os.path.join(ptx, "kernels.%s.ptx" % args.arch)
    if not os.path.isfile(ptx):
        sys.exit("sass_loads.py: no PTX at %s (compile with --target cuda "
                 "--cuda-arch %s)" % (ptx, args.arch))
    ptxas = find_tool("ptxas", "GPUC_PTXAS")
    nvdisasm = find_tool("nvdisasm", "GPUC_NVDISASM")
    with tempfile.TemporaryDirectory() as tmp:
        cubin = os.path.join(tmp, "k.cubin")
        built = subprocess.run([ptxas, "-arch=" + args.arch, "-v", ptx, "-o",
                                cubin], capture_output=True, text=True)
        if built.returncode:
            sys.exit("sass_loads.py: ptxas failed:\n" + built.stderr[-2000:])
        sass = subprocess.run([nvdisasm, "-c", cubin], capture_output=True,
                              text=True, check=True).stdout
    usage, name = {}, None
    for line in built.stderr.splitlines():
        m = re.search(r"Compiling entry function '(\w+)'", line)
        if m:
            name = m.group(1)
        m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads",
                      line)
        if m and name:
            usage.setdefault(name, {})["spill"] = int(m.group(1)) + int(
                m.group(2))
        m = re.search(r"Used (\d+) registers", line)
        if m and name:
            usage.setdefault(name, {})["regs"] = int(m.group(1))
    rows = []
    for m in re.finditer(r"^\.text\.(\w+):\n(.*?)(?=^\s*\.size|\Z)", sass,
                         re.S | re.M):
        kernel, body = m.group(1), m.group(2)
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
