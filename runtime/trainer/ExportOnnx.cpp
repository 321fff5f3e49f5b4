//===- ExportOnnx.cpp - trained weights written into the ONNX model -------===//
#include "ExportOnnx.h"

#include "CompiledStep.h"
#include "gpuc/runtime/AtomicFile.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
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
  // The artifact's model.onnx keeps its weights in init.safetensors (or,
  // compiled with --no-weights, nowhere): every initializer is written
  // inline, the trained ones from the device, the rest from the artifact.
  int replaced = 0;
  // (Rank 0 alone exports: the parameters, whole on every rank.)
  std::vector<NamedTensor> trained = s.snapshot(/*gatherShards=*/false);
  std::map<std::string, const NamedTensor *> byName;
  for (const NamedTensor &t : trained)
    byName[t.name] = &t;
  std::vector<NamedTensor> initial;
  bool initialRead = false;
  auto setInline = [](onnx::TensorProto &init, const NamedTensor &t) {
    init.clear_float_data();
    init.clear_external_data();
    init.set_data_location(onnx::TensorProto::DEFAULT);
    init.set_raw_data(std::string(t.data.begin(), t.data.end()));
  };
  for (auto &init : *model.mutable_graph()->mutable_initializer()) {
    auto it = byName.find(init.name());
    if (it != byName.end() && init.data_type() == onnx::TensorProto::FLOAT &&
        it->second->dtype == "F32") {
      setInline(init, *it->second);
      ++replaced;
      continue;
    }
    if (init.data_location() != onnx::TensorProto::EXTERNAL)
      continue;
    std::string error;
    std::map<std::string, std::string> metadata;
    if (!initialRead &&
        !readSafetensors(dir + "/init.safetensors", initial, metadata, error))
      fail("--export-onnx: " + error);
    initialRead = true;
    auto found =
        std::find_if(initial.begin(), initial.end(), [&](const NamedTensor &t) {
          return t.name == init.name();
        });
    if (found == initial.end())
      fail("--export-onnx: " + source + " keeps initializer '" + init.name() +
           "' outside it, and " + dir +
           "/init.safetensors has no tensor of that name; recompile the "
           "model");
    setInline(init, *found);
  }
  std::string target = exportTarget(path);
  std::string error;
  if (!writeFileAtomically(
          target,
          [&](FILE *f) { return model.SerializeToFileDescriptor(fileno(f)); },
          error))
    fail("--export-onnx " + path + ": " + error);
  printf("exported %d trained tensors into %s\n", replaced, path.c_str());
}

} // namespace gpuc::trainer
