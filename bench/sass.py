"""The SASS of an artifact's GPU kernels, for the bench/sass_*.py readers:
ptxas assembles the artifact's PTX (its registers and spills), nvdisasm
disassembles the cubin. Nothing runs; no GPU is needed.

ptxas comes with the CUDA toolkit; nvdisasm is found on PATH, in
/usr/local/cuda/bin, or in $GPUC_NVDISASM, or else downloaded as the
nvidia-cuda-nvdisasm wheel with pip into ~/.cache/gpuc/nvdisasm.
"""
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
        sys.exit("bench/sass.py: %s not found (install the CUDA toolkit)" % name)
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
            sys.exit("bench/sass.py: nvdisasm not found, and pip could not "
                     "download nvidia-cuda-nvdisasm:\n" + got.stderr[-2000:])
        with zipfile.ZipFile(wheels[0]) as wheel:
            wheel.extractall(cache)
        hits = glob.glob(os.path.join(cache, "**", "bin", "nvdisasm"),
                         recursive=True)
        if not hits:
            sys.exit("bench/sass.py: the nvdisasm wheel has no bin/nvdisasm")
    os.chmod(hits[0], 0o755)
    return hits[0]



def assemble(source, arch, tool):
    """(registers and spill bytes by kernel, SASS text) of an artifact
    directory's or a PTX file's kernels for `arch`."""
    ptx = source
    if os.path.isdir(ptx):
        ptx = os.path.join(ptx, "kernels.%s.ptx" % arch)
    if not os.path.isfile(ptx):
        sys.exit("%s: no PTX at %s (compile with --target cuda "
                 "--cuda-arch %s)" % (tool, ptx, arch))
    ptxas = find_tool("ptxas", "GPUC_PTXAS")
    nvdisasm = find_tool("nvdisasm", "GPUC_NVDISASM")
    with tempfile.TemporaryDirectory() as tmp:
        cubin = os.path.join(tmp, "k.cubin")
        built = subprocess.run([ptxas, "-arch=" + arch, "-v", ptx, "-o",
                                cubin], capture_output=True, text=True)
        if built.returncode:
            sys.exit("%s: ptxas failed:\n%s" % (tool, built.stderr[-2000:]))
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
    return usage, sass


def kernels(sass):
    """(kernel name, its SASS text) for each kernel of a disassembly."""
    for m in re.finditer(r"^\.text\.(\w+):\n(.*?)(?=^\s*\.size|\Z)", sass,
                         re.S | re.M):
        yield m.group(1), m.group(2)


def instructions(body):
    """A kernel's instructions in order, each as its opcode's first part
    (HMMA, LDSM, FFMA, ...), predicates dropped."""
    ops = []
    for line in body.splitlines():
        m = re.match(r"\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_]+)",
                     line)
        if m:
            ops.append(m.group(1))
    return ops
