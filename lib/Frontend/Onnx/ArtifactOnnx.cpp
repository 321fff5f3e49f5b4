//===- ArtifactOnnx.cpp - the ONNX model an artifact carries --------------===//
#include "gpuc/Frontend/ArtifactOnnx.h"

#include "OnnxModelLoader.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cerrno>
#include <cstring>
#include <fstream>

namespace mlir::gpuc {

ArtifactOnnx::ArtifactOnnx() = default;
ArtifactOnnx::~ArtifactOnnx() = default;

bool ArtifactOnnx::load(const std::string &modelPath, std::string &error) {
  path = modelPath;
  model = std::make_unique<onnx::ModelProto>();
  std::ifstream in(path, std::ios::binary);
  if (!in || !model->ParseFromIstream(&in)) {
    error = "cannot read " + path + " as an ONNX model";
    return false;
  }
  return true;
}

std::set<std::string> ArtifactOnnx::floatInitializers() const {
  std::set<std::string> names;
  for (const onnx::TensorProto &t : model->graph().initializer())
    if (t.data_type() == onnx::TensorProto::FLOAT)
      names.insert(t.name());
  return names;
}

/// The tensor's bytes as the model holds them: raw_data, float_data
/// (FLOAT only) or its external data. False with `error` otherwise.
static bool tensorBytes(const onnx::TensorProto &tensor,
                        const std::string &modelDir, std::string &bytes,
                        std::string &error) {
  if (tensor.data_location() == onnx::TensorProto::EXTERNAL) {
    ExternalData data;
    if (!resolveExternalData(tensor, modelDir, data, error))
      return false;
    auto buffer =
        llvm::MemoryBuffer::getFileSlice(data.file, data.length, data.offset);
    if (!buffer) {
      error = "cannot read external data '" + data.file + "' of tensor '" +
              tensor.name() + "'";
      return false;
    }
    bytes = (*buffer)->getBuffer().str();
    return true;
  }
  if (tensor.has_raw_data()) {
    bytes = tensor.raw_data();
    return true;
  }
  if (tensor.data_type() == onnx::TensorProto::FLOAT) {
    bytes.assign(reinterpret_cast<const char *>(tensor.float_data().data()),
                 tensor.float_data_size() * sizeof(float));
    return true;
  }
  error = "tensor '" + tensor.name() + "' holds its values in a typed field";
  return false;
}

bool ArtifactOnnx::write(const std::string &outPath,
                         const std::map<std::string, StoredTensor> &stored,
                         const std::set<std::string> &withheld,
                         std::string &error) {
  std::string modelDir = llvm::sys::path::parent_path(path).str();
  for (onnx::TensorProto &tensor :
       *model->mutable_graph()->mutable_initializer()) {
    bool isFloat = tensor.data_type() == onnx::TensorProto::FLOAT;
    if (isFloat && withheld.count(tensor.name())) {
      tensor.clear_raw_data();
      tensor.clear_float_data();
      tensor.clear_external_data();
      tensor.set_data_location(onnx::TensorProto::DEFAULT);
      continue;
    }
    auto it = isFloat ? stored.find(tensor.name()) : stored.end();
    bool external = tensor.data_location() == onnx::TensorProto::EXTERNAL;
    if (it == stored.end() && !external)
      continue;
    std::string bytes;
    if (!tensorBytes(tensor, modelDir, bytes, error))
      return false;
    tensor.clear_raw_data();
    tensor.clear_float_data();
    tensor.clear_external_data();
    const std::vector<char> *kept =
        it == stored.end() ? nullptr : it->second.bytes;
    // Only the model's own values are pointed at: a tensor the compiler
    // changed stays inline.
    if (kept && kept->size() == bytes.size() &&
        std::equal(kept->begin(), kept->end(), bytes.begin())) {
      tensor.set_data_location(onnx::TensorProto::EXTERNAL);
      auto add = [&](const std::string &key, const std::string &value) {
        onnx::StringStringEntryProto *entry = tensor.add_external_data();
        entry->set_key(key);
        entry->set_value(value);
      };
      add("location", it->second.file);
      add("offset", std::to_string(it->second.offset));
      add("length", std::to_string(bytes.size()));
      continue;
    }
    tensor.set_data_location(onnx::TensorProto::DEFAULT);
    tensor.set_raw_data(std::move(bytes));
  }
  std::string tmp = outPath + ".tmp";
  bool written;
  {
    std::ofstream out(tmp, std::ios::binary);
    written = out && model->SerializeToOstream(&out) && out.flush();
  }
  if (!written || std::rename(tmp.c_str(), outPath.c_str()) != 0) {
    error = "cannot write " + outPath + " (" + std::strerror(errno) +
            "; a model over 2 GiB once its external data is read in?)";
    llvm::sys::fs::remove(tmp);
    return false;
  }
  return true;
}

} // namespace mlir::gpuc
