//===- ExportOnnx.cpp - trained weights written into the ONNX model
//---------===//
#include "ExportOnnx.h"

#include "CompiledStep.h"

#include <onnx/onnx_pb.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

namespace gpuc::trainer {

std::string exportTarget(const std::string &path) {
  std::string target = path;
  struct stat info;
  if (lstat(path.c_str(), &info) == 0 && S_ISLNK(info.st_mode)) {
    char *real = realpath(path.c_str(), nullptr);
    if (!real)
      fail("--export-onnx " + path +
           " is a symbolic link to a missing file; name a file");
    target = real;
    free(real);
  }
  if (stat(target.c_str(), &info) == 0 && !S_ISREG(info.st_mode))
    fail("--export-onnx " + path +
         " exists and is not a regular file; name a .onnx file to write");
  return target;
}

void exportOnnx(CompiledStep &s, const std::string &dir,
                const std::string &path) {
  std::string source = dir + "/model.onnx";
  std::ifstream in(source, std::ios::binary);
  if (!in)
    fail("--export-onnx needs the ONNX model the trainer was compiled from, "
         "but " +
         source + " is missing (models from the DSL have none)");
  onnx::ModelProto model;
  if (!model.ParseFromIstream(&in))
    fail(source + ": not a valid ONNX model");
  int replaced = 0;
  for (const NamedTensor &t : s.snapshot()) {
    for (auto &init : *model.mutable_graph()->mutable_initializer()) {
      if (init.name() != t.name)
        continue;
      if (init.data_type() != onnx::TensorProto::FLOAT || t.dtype != "F32")
        continue;
      init.clear_float_data();
      init.set_raw_data(std::string(t.data.begin(), t.data.end()));
      ++replaced;
    }
  }
  std::string target = exportTarget(path);
  std::string tmp = target + ".tmp";
  bool written;
  {
    std::ofstream out(tmp, std::ios::binary);
    written = out && model.SerializeToOstream(&out) && out.flush();
  }
  if (!written || rename(tmp.c_str(), target.c_str()) != 0) {
    std::string reason = strerror(errno);
    unlink(tmp.c_str());
    fail("cannot write --export-onnx " + path + ": " + reason);
  }
  printf("exported %d trained tensors into %s\n", replaced, path.c_str());
}

} // namespace gpuc::trainer
