# lit configuration for gpuc's regression tests.
import os
import shutil

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "GPUC"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".onnxtxt", ".gdsl", ".test"]
config.excludes = ["CMakeLists.txt", "README.md", "lit.cfg.py", "lit.site.cfg.py",
                   "Inputs", "unittests"]
config.test_source_root = os.path.dirname(__file__)
# lit starts the longest tests first by the times it recorded in the build
# tree; a fresh build has none and reads .lit_test_times.txt beside this
# file instead (seconds on a 2-core machine; only the order matters), so
# that no long test starts last while the other core idles.
config.test_exec_root = os.path.join(config.gpuc_obj_root, "test")

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%gpuc_src", config.gpuc_src_root))
config.substitutions.append(("%gpuc_tooldir", config.gpuc_tools_dir))
config.substitutions.append(("%gpuc_bin", os.path.join(config.gpuc_tools_dir, "gpuc")))
config.environment["FILECHECK_OPTS"] = "-enable-var-scope --allow-unused-prefixes=false"
# Compiled kernels are cached in the build tree, not the user's cache home:
# the suite shares them between its tests and runs, and leaves $HOME alone.
config.environment["GPUC_CACHE_DIR"] = os.path.join(config.test_exec_root,
                                                    "gpuc-cache")

# lit runs a test per core, and most tests' trainers run OpenMP teams as
# wide as the machine: a thread that spins at a barrier while its team's
# serial part runs takes the core from the other test. The suite's threads
# sleep there at once (OpenMP's default spins a while first, which suits a
# trainer that has the machine to itself).
config.environment["OMP_WAIT_POLICY"] = "passive"

# The sanitizers' options (scripts/test.sh --sanitize) and the host
# compiler's extra flags reach every test.
llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP",
                                     "ASAN_OPTIONS", "UBSAN_OPTIONS",
                                     "LSAN_OPTIONS", "GPUC_CXXFLAGS"])
llvm_config.use_default_substitutions()

tool_dirs = [config.gpuc_tools_dir, config.llvm_tools_dir]
tools = ["gpuc", "gpuc-opt", "gpuc-conformance", "not", "count", "split-file"]
llvm_config.add_tool_substitutions(tools, tool_dirs)

# ONNX's node tests ship with Debian's libonnx-testdata.
onnx_node_tests = "/usr/share/libonnx-testdata/data/node"
if os.path.isdir(onnx_node_tests):
    config.available_features.add("onnx-testdata")
    config.substitutions.append(("%onnx_node_tests", onnx_node_tests))

# The emulated GPU (EmulatedGpu.h) and the host CUDA (runtime/cuda/host) run
# the GPU's kernel text on the CPU to test it, not for speed: -O1 (after
# gpuc's -O3 in the host compiler's flags, so it wins) compiles them in
# about half the time, which is most of those tests' time on a fresh
# build's empty cache.
config.substitutions.append(("%emulated_gpu_cxxflags",
                             "-DGPUC_EMULATE_GPU -O1"))
config.substitutions.append(("%host_cuda_cxxflags",
                             "-DGPUC_HOST_CUDA -rdynamic -O1"))

# Debian's python3-torch and python3-onnx are importable from /usr/bin/python3
# (the python3 first on PATH may be another interpreter).
import subprocess
system_python = "/usr/bin/python3"
config.substitutions.append(("%system_python", system_python))


def python_imports(modules):
    """Whether /usr/bin/python3 imports all of `modules`."""
    try:
        return subprocess.run(
            [system_python, "-c", "import " + ", ".join(modules)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL).returncode == 0
    except OSError:
        return False


for feature, modules, skipped in (
        ("torch", ["torch", "onnx", "numpy"],
         "python3-torch/python3-onnx not importable from /usr/bin/python3: "
         "the PyTorch parity tests are skipped"),
        ("torchvision", ["torch", "torchvision", "onnx", "numpy"],
         "python3-torchvision not importable from /usr/bin/python3: the "
         "model zoo test is skipped"),
        ("numpy", ["numpy"],
         "python3-numpy not importable from /usr/bin/python3: the "
         "generated-code parity tests are skipped"),
        ("onnx-python", ["onnx", "numpy"],
         "python3-onnx not importable from /usr/bin/python3: the tests that "
         "write ONNX models (external data) are skipped"),
        ("pil", ["PIL", "numpy"],
         "python3-pil not importable from /usr/bin/python3: the tests that "
         "write image folders are skipped")):
    if python_imports(modules):
        config.available_features.add(feature)
    else:
        lit_config.note(skipped + " (scripts/install-deps.sh installs them)")
# TensorBoard's own reader, from PyPI (Debian has no package): a virtual
# environment scripts/install-deps.sh makes, or $GPUC_TENSORBOARD_PYTHON.
tensorboard_python = os.environ.get("GPUC_TENSORBOARD_PYTHON",
                                    "/opt/gpuc-tensorboard/bin/python")
try:
    has_tensorboard = subprocess.run(
        [tensorboard_python, "-c", "import tensorboard"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0
except OSError:
    has_tensorboard = False
if has_tensorboard:
    config.available_features.add("tensorboard")
    config.substitutions.append(("%tensorboard_python", tensorboard_python))
else:
    lit_config.note(tensorboard_python + " cannot import tensorboard: the "
                    "--tensorboard test is skipped (scripts/install-deps.sh "
                    "installs it from PyPI)")
# PyTorch's current ONNX exporters (TorchScript up to opset 20, dynamo with
# onnxscript) and Hugging Face's transformers, in the virtual environment
# `scripts/torch-peer.sh --exporters` makes (install-deps.sh runs it), or
# $GPUC_EXPORTERS_PYTHON. Its CUDA build of PyTorch runs on the CPU here,
# with the NVIDIA libraries of its wheels on the library path.
exporters_python = os.environ.get("GPUC_EXPORTERS_PYTHON",
                                  "/opt/gpuc-exporters/bin/python")
exporters_env = dict(os.environ)
try:
    import glob as _glob
    exporters_libs = sorted({os.path.dirname(p) for p in _glob.glob(
        os.path.join(os.path.dirname(os.path.dirname(exporters_python)),
                     "lib", "python3*", "site-packages", "nvidia", "**",
                     "lib*.so*"), recursive=True)})
    exporters_env["LD_LIBRARY_PATH"] = ":".join(
        exporters_libs + ["/usr/local/cuda/lib64"])
    has_exporters = subprocess.run(
        [exporters_python, "-c",
         "import torch, onnxscript, transformers, torchvision"],
        env=exporters_env, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL).returncode == 0
except OSError:
    has_exporters = False
if has_exporters:
    config.available_features.add("torch-exporters")
    config.substitutions.append(
        ("%exporters_python", "env LD_LIBRARY_PATH=" +
         exporters_env["LD_LIBRARY_PATH"] + " " + exporters_python))
else:
    lit_config.note(exporters_python + " cannot import torch, onnxscript, "
                    "transformers and torchvision: the test of PyTorch's "
                    "current exporters is skipped (scripts/torch-peer.sh "
                    "--exporters installs them from PyPI)")
if os.path.isdir("/usr/share/datasets/fashion-mnist"):
    config.available_features.add("fashion-mnist")
else:
    lit_config.note("/usr/share/datasets/fashion-mnist missing: the trainer "
                    "tests are skipped (apt-get install dataset-fashion-mnist)")
if getattr(config, "gpuc_have_libmvec", False):
    config.available_features.add("libmvec")
# A sanitized build (-DGPUC_SANITIZE): tests that limit the address space
# (ASan reserves terabytes of shadow) or ship its binaries to a GPU machine
# are UNSUPPORTED there.
if getattr(config, "gpuc_sanitize", ""):
    config.available_features.add("sanitize")
if getattr(config, "gpuc_have_nvrtc", False):
    config.available_features.add("nvrtc")
if getattr(config, "gpuc_have_ptxas", False):
    config.available_features.add("ptxas")
else:
    lit_config.note("gpuc was built without NVRTC (CUDA toolkit not found): "
                    "the CUDA-target compile tests are skipped")
if getattr(config, "gpuc_have_cbc", False):
    config.available_features.add("cbc")
else:
    lit_config.note("gpuc was built without COIN-OR CBC: the tests of "
                    "gpuc-remat's exact mode (solver=milp) are skipped "
                    "(scripts/install-deps.sh installs coinor-libcbc-dev)")
if getattr(config, "gpuc_have_cuda_device", False):
    config.available_features.add("cuda-plugin")
    # The CUDA device against the driver, cuBLASLt and cuDNN on the host
    # (runtime/cuda/host): it runs where there is no GPU.
    config.substitutions.append(("%host_cuda_plugin", os.path.join(
        config.gpuc_obj_root, "runtime", "libgpuc_cuda_host.so")))
else:
    lit_config.note("gpuc was built without the CUDA device plugin (CUDA "
                    "toolkit or cuDNN not found): its tests are skipped")

# Data-parallel runs: two ranks under Open MPI's mpirun, on however many
# cores there are (--oversubscribe), as root in CI containers.
if getattr(config, "gpuc_have_mpi", False) and shutil.which("mpirun"):
    config.available_features.add("mpi")
    mpirun = ("mpirun --oversubscribe --allow-run-as-root "
              "-x OMP_NUM_THREADS=1")
    config.substitutions.append(("%mpirun2", mpirun + " -np 2"))
    config.substitutions.append(("%mpirun", mpirun))
else:
    lit_config.note("no MPI (gpuc built without libopenmpi-dev, or no "
                    "mpirun): the data-parallel tests are skipped "
                    "(scripts/install-deps.sh installs openmpi-bin and "
                    "libopenmpi-dev)")


def has_gpu():
    """Whether an NVIDIA GPU is usable here (nvidia-smi lists one)."""
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True,
                             text=True, timeout=30)
        return out.returncode == 0 and "GPU " in out.stdout
    except (OSError, subprocess.TimeoutExpired):
        return False


if has_gpu() and "cuda-plugin" in config.available_features:
    config.available_features.add("cuda-device")
else:
    lit_config.note("no NVIDIA GPU here: the tests that run the CUDA device "
                    "are skipped (REQUIRES: cuda-device); scripts/gpu-bundle.sh "
                    "builds what runs them on a GPU machine")
