# lit configuration for gpuc's regression tests.
import os

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "GPUC"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".onnxtxt", ".gdsl", ".test"]
config.excludes = ["CMakeLists.txt", "README.md", "lit.cfg.py", "lit.site.cfg.py",
                   "Inputs", "unittests"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.gpuc_obj_root, "test")

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%gpuc_src", config.gpuc_src_root))
config.environment["FILECHECK_OPTS"] = "-enable-var-scope --allow-unused-prefixes=false"

llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])
llvm_config.use_default_substitutions()

tool_dirs = [config.gpuc_tools_dir, config.llvm_tools_dir]
tools = ["gpuc", "gpuc-opt", "gpuc-conformance", "not", "count"]
llvm_config.add_tool_substitutions(tools, tool_dirs)

# ONNX's node tests ship with Debian's libonnx-testdata.
onnx_node_tests = "/usr/share/libonnx-testdata/data/node"
if os.path.isdir(onnx_node_tests):
    config.available_features.add("onnx-testdata")
    config.substitutions.append(("%onnx_node_tests", onnx_node_tests))
