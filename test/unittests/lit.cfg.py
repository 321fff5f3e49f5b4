# lit configuration that runs gpuc's GoogleTest binaries.
import os

import lit.formats

config.name = "GPUC-Unit"
config.suffixes = []
config.test_exec_root = os.path.join(config.gpuc_obj_root, "test", "unittests")
config.test_source_root = config.test_exec_root
config.test_format = lit.formats.GoogleTest(".", "Tests")
