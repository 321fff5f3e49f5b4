//===- OnnxModelLoader.cpp - read, bind, check and infer ONNX models ------===//
#include "OnnxModelLoader.h"
#include "gpuc/Frontend/Limits.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include "onnx/checker.h"
#include "onnx/defs/parser.h"
#include "onnx/defs/schema.h"
#include "onnx/shape_inference/implementation.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

namespace mlir::gpuc {
namespace {

bool endsWith(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool readModel(const std::string &path, onnx::ModelProto &model,
               std::string &error) {
  // Mapped, not streamed into a growing string: GPT-2's 548 MB took
  // seconds of copies per load, and --max-batch-for loads once per batch.
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                  /*RequiresNullTerminator=*/true);
  if (!file) {
    error = "cannot open the file";
    return false;
  }
  llvm::StringRef bytes = (*file)->getBuffer();
  if (bytes.empty()) {
    error = "the file is empty";
    return false;
  }
  size_t first = bytes.find_first_not_of(" \t\r\n");
  bool isText = endsWith(path, ".onnxtxt") ||
                (first != llvm::StringRef::npos && bytes[first] == '<');
  if (isText) {
    onnx::Common::Status status = onnx::OnnxParser::Parse(model, bytes.data());
    if (!status.IsOK()) {
      error = "not valid ONNX text syntax: " + status.ErrorMessage();
      return false;
    }
    return true;
  }
  if (bytes.size() > (size_t)std::numeric_limits<int>::max()) {
    error = "the file is over 2 GiB, more than one protobuf holds; export "
            "the model with its weights in external data files "
            "(torch.onnx.export(..., external_data=True))";
    return false;
  }
  if (!model.ParseFromArray(bytes.data(), (int)bytes.size())) {
    error = "not a valid ONNX protobuf (truncated or corrupt file?)";
    return false;
  }
  if (model.graph().node_size() == 0 && model.graph().output_size() == 0) {
    error = "the file parses as protobuf but holds no ONNX graph";
    return false;
  }
  return true;
}

/// Gives every input a static shape; symbolic dimensions are bound through
/// --batch (dimension 0) or --input-shape, and each bound symbol is replaced
/// wherever it appears in the graph's outputs.
/// What ONNX's checker and shape inference assume without checking (a zero
/// stride divides, a negative dimension indexes): every fixed dimension of
/// the graph's values and initializers is >= 0, and every node's window
/// attributes are in range (strides, dilations and kernel_shape >= 1, pads
/// >= 0). Nested graphs (If, Loop) are checked too.
/// How errors name node `n` of a graph.
static std::string describeNode(const onnx::NodeProto &node, int n) {
  return (node.name().empty() ? "node #" + std::to_string(n)
                              : "node '" + node.name() + "'") +
         " (" + node.op_type() + ")";
}

/// Ops whose shape inference in ONNX 1.12 indexes an operand's dimensions
/// without checking how many there are: a convolution's filter (a rank-1
/// ConvTranspose filter crashed it inside libonnx), a pooling input,
/// LayerNormalization's input at its axis (a scalar input, or axis -9).
/// Found by fuzzing and by test/Frontend/onnx/hostile_models.py. Their
/// declared ranks are checked before inference (checkTrustedRanks), the
/// ranks of operands other nodes compute during it (guardOnnxInference),
/// both by ranksFit.
static const char *const kRankTrustingOps[] = {
    "Conv",        "ConvTranspose", "ConvInteger",       "MaxPool",
    "AveragePool", "LpPool",        "LayerNormalization"};

static bool trustsOperandRanks(llvm::StringRef op) {
  return llvm::is_contained(kRankTrustingOps, op);
}

/// Whether ONNX's inference of `op` (one of kRankTrustingOps) can take an
/// input of rank `input`, a filter of rank `filter` (-1 when not known) and,
/// for LayerNormalization, `axis`. Else `rule` says what it needs.
static bool ranksFit(llvm::StringRef op, int input, int filter, int64_t axis,
                     std::string &rule) {
  if (op == "LayerNormalization") {
    rule = "layer normalization needs an input of rank at least 1 and an "
           "axis in [-rank, rank)";
    return input >= 1 && axis >= -input && axis < input;
  }
  if (op.ends_with("Pool")) {
    rule = "pooling needs rank at least 3 (N x C x spatial...)";
    return input >= 3;
  }
  rule = "a convolution needs both of one rank, at least 3 (N x C x "
         "spatial...)";
  return filter < 0 || (input >= 3 && filter == input);
}

/// LayerNormalization's axis attribute (default -1).
static int64_t axisOf(const onnx::NodeProto &node) {
  for (const onnx::AttributeProto &attr : node.attribute())
    if (attr.name() == "axis")
      return attr.i();
  return -1;
}

/// Checks, by ranksFit, each op of `graph` that trusts its operands' ranks,
/// as far as `rank` (by value name) knows them.
static bool checkTrustedRanks(const onnx::GraphProto &graph,
                              const std::map<std::string, int> &rank,
                              std::string &error) {
  for (int n = 0; n < graph.node_size(); ++n) {
    const onnx::NodeProto &node = graph.node(n);
    const std::string &op = node.op_type();
    if (!trustsOperandRanks(op) || node.input_size() < 1)
      continue;
    auto x = rank.find(node.input(0));
    if (x == rank.end())
      continue;
    bool convolution = op.rfind("Conv", 0) == 0;
    auto w = convolution && node.input_size() >= 2 ? rank.find(node.input(1))
                                                   : rank.end();
    int filter = w == rank.end() ? -1 : w->second;
    int64_t axis = axisOf(node);
    std::string rule;
    if (ranksFit(op, x->second, filter, axis, rule))
      continue;
    error = describeNode(node, n) + ": input '" + node.input(0) +
            "' has rank " + std::to_string(x->second);
    if (filter >= 0)
      error +=
          " and filter '" + node.input(1) + "' rank " + std::to_string(filter);
    if (op == "LayerNormalization")
      error += " and axis is " + std::to_string(axis);
    error += "; " + rule;
    return false;
  }
  return true;
}

// A checklist over every place a dimension can be declared, before ONNX's
// checker sees any of them: one rule after another, in one place.
bool validateDimensions(const onnx::GraphProto &graph, std::string &error) {
  auto checkShape = [&](const onnx::ValueInfoProto &value, const char *kind) {
    if (!value.type().has_tensor_type())
      return true;
    if (value.type().tensor_type().elem_type() ==
        onnx::TensorProto::UNDEFINED) {
      error = std::string(kind) + " '" + value.name() +
              "' declares no element type (UNDEFINED); the ONNX IR requires "
              "one (re-export the model, or set it to the tensor's type)";
      return false;
    }
    if (!value.type().tensor_type().has_shape())
      return true;
    const auto &shape = value.type().tensor_type().shape();
    for (int i = 0; i < shape.dim_size(); ++i)
      if (shape.dim(i).has_dim_value() && shape.dim(i).dim_value() < 0) {
        error = std::string(kind) + " '" + value.name() + "' dimension " +
                std::to_string(i) + " is " +
                std::to_string(shape.dim(i).dim_value()) +
                "; dimensions must be >= 0 (fix the model's declared shape)";
        return false;
      }
    return true;
  };
  for (const auto &v : graph.input())
    if (!checkShape(v, "graph input"))
      return false;
  for (const auto &v : graph.output())
    if (!checkShape(v, "graph output"))
      return false;
  for (const auto &v : graph.value_info())
    if (!checkShape(v, "value"))
      return false;
  for (const onnx::TensorProto &t : graph.initializer()) {
    for (int i = 0; i < t.dims_size(); ++i)
      if (t.dims(i) < 0) {
        error = "initializer '" + t.name() + "' dimension " +
                std::to_string(i) + " is " + std::to_string(t.dims(i)) +
                "; dimensions must be >= 0";
        return false;
      }
    if (!boundedElements(
            llvm::SmallVector<int64_t>(t.dims().begin(), t.dims().end()))) {
      error = "initializer '" + t.name() +
              "' holds more than gpuc's limit "
              "of " +
              std::to_string(kMaxElements) + " elements per tensor";
      return false;
    }
  }
  // Declared ranks (graph inputs, initializers, outputs, value_info): one
  // value declared with two ranks is refused (ONNX's inference takes the
  // last declaration, and the ops that trust ranks were handed a rank-2
  // declaration of a rank-4 filter: found by fuzzing); then the operands of
  // ops whose inference trusts their ranks are checked.
  std::map<std::string, std::pair<int, std::string>> declared;
  auto declare = [&](const std::string &name, int rank,
                     const std::string &where) {
    auto [it, inserted] = declared.try_emplace(name, rank, where);
    if (inserted || it->second.first == rank)
      return true;
    error = "value '" + name + "' is declared with rank " +
            std::to_string(it->second.first) + " (" + it->second.second +
            ") and rank " + std::to_string(rank) + " (" + where +
            "); a value has one type";
    return false;
  };
  for (const onnx::TensorProto &t : graph.initializer())
    if (!declare(t.name(), t.dims_size(), "initializer"))
      return false;
  for (auto [values, where] : {std::pair(&graph.input(), "graph input"),
                               std::pair(&graph.output(), "graph output"),
                               std::pair(&graph.value_info(), "value_info")})
    for (const onnx::ValueInfoProto &v : *values)
      if (v.type().has_tensor_type() && v.type().tensor_type().has_shape() &&
          !declare(v.name(), v.type().tensor_type().shape().dim_size(), where))
        return false;
  std::map<std::string, int> declaredRank;
  for (const auto &[name, rank] : declared)
    declaredRank[name] = rank.first;
  if (!checkTrustedRanks(graph, declaredRank, error))
    return false;
  for (int n = 0; n < graph.node_size(); ++n) {
    const onnx::NodeProto &node = graph.node(n);
    std::string where = describeNode(node, n);
    for (const onnx::AttributeProto &attr : node.attribute()) {
      int64_t least = -1;
      if (attr.name() == "strides" || attr.name() == "dilations" ||
          attr.name() == "kernel_shape")
        least = 1;
      else if (attr.name() == "pads")
        least = 0;
      if (least >= 0)
        for (int64_t v : attr.ints())
          if (v < least) {
            error = where + ": attribute '" + attr.name() + "' holds " +
                    std::to_string(v) + "; each entry must be at least " +
                    std::to_string(least);
            return false;
          }
      // A NaN or infinite attribute (Gemm's alpha, an epsilon, a slope)
      // imports as a constant that makes every result NaN or infinite.
      auto finite = [&](float v) {
        if (std::isfinite(v))
          return true;
        error = where + ": attribute '" + attr.name() + "' is " +
                (std::isnan(v) ? "nan"
                 : v > 0       ? "inf"
                               : "-inf") +
                "; gpuc needs finite attribute values (fix the exporter's "
                "argument)";
        return false;
      };
      // ONNX 1.12's GatherND inference indexes dimensions by batch_dims
      // unchecked (a negative one crashed it; found by hostile_models.py);
      // gpuc gathers with batch_dims 0 only.
      if (node.op_type() == "GatherND" && attr.name() == "batch_dims" &&
          attr.i() != 0) {
        error = where + ": batch_dims is " + std::to_string(attr.i()) +
                "; gpuc takes GatherND with batch_dims 0 only";
        return false;
      }
      if (attr.has_f() && !finite(attr.f()))
        return false;
      for (float v : attr.floats())
        if (!finite(v))
          return false;
      if (attr.has_g() && !validateDimensions(attr.g(), error))
        return false;
      for (const onnx::GraphProto &g : attr.graphs())
        if (!validateDimensions(g, error))
          return false;
    }
  }
  return true;
}

bool bindInputShapes(onnx::GraphProto &graph, const OnnxImportOptions &options,
                     std::string &error) {
  std::set<std::string> initializers;
  for (const auto &init : graph.initializer())
    initializers.insert(init.name());
  std::map<std::string, int64_t> symbols;
  std::set<std::string> seen;
  for (auto &input : *graph.mutable_input()) {
    if (initializers.count(input.name()))
      continue;
    seen.insert(input.name());
    if (!input.type().has_tensor_type()) {
      error = "graph input '" + input.name() +
              "' is not a tensor; gpuc only imports tensor inputs";
      return false;
    }
    auto *tensorType = input.mutable_type()->mutable_tensor_type();
    auto fixed = options.inputShapes.find(input.name());
    if (fixed != options.inputShapes.end()) {
      const std::vector<int64_t> &dims = fixed->second;
      if (tensorType->has_shape() &&
          tensorType->shape().dim_size() != static_cast<int>(dims.size())) {
        error = "--input-shape gives " + std::to_string(dims.size()) +
                " dimensions for input '" + input.name() + "' of rank " +
                std::to_string(tensorType->shape().dim_size());
        return false;
      }
      auto *shape = tensorType->mutable_shape();
      for (size_t i = 0; i < dims.size(); ++i) {
        if (static_cast<int>(i) < shape->dim_size()) {
          auto &dim = *shape->mutable_dim(i);
          if (dim.has_dim_param())
            symbols[dim.dim_param()] = dims[i];
          else if (dim.has_dim_value() && dim.dim_value() != dims[i]) {
            error = "--input-shape for '" + input.name() + "' sets dimension " +
                    std::to_string(i) + " to " + std::to_string(dims[i]) +
                    " but the model fixes it to " +
                    std::to_string(dim.dim_value());
            return false;
          }
          dim.set_dim_value(dims[i]);
        } else {
          shape->add_dim()->set_dim_value(dims[i]);
        }
      }
      continue;
    }
    if (!tensorType->has_shape()) {
      error = "graph input '" + input.name() +
              "' has no shape; give it with --input-shape " + input.name() +
              "=D0xD1x...";
      return false;
    }
    auto *shape = tensorType->mutable_shape();
    for (int i = 0; i < shape->dim_size(); ++i) {
      auto &dim = *shape->mutable_dim(i);
      if (dim.has_dim_value())
        continue;
      std::string symbol = dim.has_dim_param() ? dim.dim_param() : "";
      auto bound = symbols.find(symbol);
      if (!symbol.empty() && bound != symbols.end()) {
        dim.set_dim_value(bound->second);
      } else if (i == 0 && options.batch) {
        if (!symbol.empty())
          symbols[symbol] = *options.batch;
        dim.set_dim_value(*options.batch);
      } else {
        error = "graph input '" + input.name() + "' dimension " +
                std::to_string(i) +
                (symbol.empty() ? "" : " ('" + symbol + "')") +
                " is symbolic; bind it with --batch N (dimension 0) or "
                "--input-shape " +
                input.name() + "=D0xD1x...";
        return false;
      }
    }
  }
  for (const auto &entry : options.inputShapes) {
    if (!seen.count(entry.first)) {
      error = "--input-shape names '" + entry.first +
              "', which is not an input of the graph";
      return false;
    }
  }
  // Inner value_info shapes are only hints; shape inference recomputes them.
  graph.clear_value_info();
  for (auto &output : *graph.mutable_output()) {
    if (!output.type().has_tensor_type() ||
        !output.type().tensor_type().has_shape())
      continue;
    auto *shape = output.mutable_type()->mutable_tensor_type()->mutable_shape();
    for (auto &dim : *shape->mutable_dim()) {
      if (!dim.has_dim_param())
        continue;
      auto bound = symbols.find(dim.dim_param());
      if (bound != symbols.end())
        dim.set_dim_value(bound->second);
      else
        dim.clear_dim_param();
    }
  }
  return true;
}

/// Turns the named graph inputs into initializers holding the given values.
bool substituteConstantInputs(onnx::GraphProto &graph,
                              const OnnxImportOptions &options,
                              std::string &error) {
  for (const auto &[name, bytes] : options.constantInputs) {
    onnx::TensorProto tensor;
    if (!tensor.ParseFromString(bytes)) {
      error = "the value given for input '" + name +
              "' is not a serialized TensorProto";
      return false;
    }
    tensor.set_name(name);
    bool found = false;
    auto *inputs = graph.mutable_input();
    for (int i = 0; i < inputs->size(); ++i) {
      if (inputs->Get(i).name() == name) {
        inputs->DeleteSubrange(i, 1);
        found = true;
        break;
      }
    }
    if (!found) {
      error = "constant input '" + name + "' is not an input of the graph";
      return false;
    }
    // Float data as a Constant node, not an initializer: a float
    // initializer of rank >= 1 is a parameter, and the ops folded at import
    // take constants. (ONNX 1.12 infers no boolean Constant at the opsets
    // of the node tests: other data stays an initializer, which before IR
    // version 4 had to be a graph input too.)
    int type = tensor.data_type();
    if (type != onnx::TensorProto::FLOAT && type != onnx::TensorProto::DOUBLE &&
        type != onnx::TensorProto::FLOAT16 &&
        type != onnx::TensorProto::BFLOAT16) {
      *graph.add_initializer() = tensor;
      continue;
    }
    onnx::NodeProto node;
    node.set_op_type("Constant");
    node.set_name(name + "/given");
    node.add_output(name);
    onnx::AttributeProto *value = node.add_attribute();
    value->set_name("value");
    value->set_type(onnx::AttributeProto::TENSOR);
    *value->mutable_t() = tensor;
    auto *nodes = graph.mutable_node();
    *nodes->Add() = node;
    std::rotate(nodes->begin(), nodes->end() - 1, nodes->end());
  }
  return true;
}

} // namespace

bool resolveExternalData(const onnx::TensorProto &tensor,
                         const std::string &modelDir, ExternalData &data,
                         std::string &error) {
  std::string what = "external data of tensor '" + tensor.name() + "'";
  std::string location;
  bool hasLength = false;
  for (const auto &entry : tensor.external_data()) {
    llvm::StringRef value = entry.value();
    int64_t number = 0;
    bool isNumber = !value.getAsInteger(10, number) && number >= 0;
    if (entry.key() == "location") {
      location = entry.value();
    } else if (entry.key() == "offset" || entry.key() == "length") {
      if (!isNumber) {
        error = what + ": " + entry.key() + " '" + entry.value() +
                "' is not a non-negative whole number";
        return false;
      }
      (entry.key() == "offset" ? data.offset : data.length) = number;
      hasLength |= entry.key() == "length";
    }
  }
  if (location.empty()) {
    error = what + " names no location";
    return false;
  }
  llvm::SmallVector<llvm::StringRef> parts;
  llvm::StringRef(location).split(parts, '/');
  if (llvm::sys::path::is_absolute(location) ||
      llvm::is_contained(parts, "..") ||
      location.find('\\') != std::string::npos) {
    error = what + ": location '" + location +
            "' must be a path relative to the model's directory, without "
            "'..'";
    return false;
  }
  llvm::SmallString<256> dir, file(modelDir.empty() ? "." : modelDir);
  llvm::sys::path::append(file, location);
  llvm::SmallString<256> realFile;
  if (llvm::sys::fs::real_path(modelDir.empty() ? "." : modelDir, dir) ||
      llvm::sys::fs::real_path(file, realFile)) {
    error = what + ": cannot find '" + std::string(file) +
            "' (external data is read from the model's directory)";
    return false;
  }
  llvm::StringRef inside(realFile);
  if (!inside.starts_with(dir) || inside.size() <= dir.size() ||
      !llvm::sys::path::is_separator(inside[dir.size()])) {
    error = what + ": '" + location + "' leads outside the model's directory";
    return false;
  }
  llvm::sys::fs::file_status status;
  if (llvm::sys::fs::status(realFile, status) ||
      status.type() != llvm::sys::fs::file_type::regular_file) {
    error = what + ": '" + location + "' is not a regular file";
    return false;
  }
  int64_t size = (int64_t)status.getSize();
  if (!hasLength)
    data.length = size - std::min(data.offset, size);
  if (data.offset > size || data.length > size - data.offset) {
    error = what + ": offset " + std::to_string(data.offset) + " and length " +
            std::to_string(data.length) + " lie outside '" + location + "' (" +
            std::to_string(size) + " bytes)";
    return false;
  }
  data.file = std::string(realFile);
  return true;
}

/// The rank of input `n` when ONNX's inference knows its shape, else -1.
static int knownRank(onnx::InferenceContext &ctx, size_t n) {
  if (ctx.getNumInputs() <= n || !onnx::hasInputShape(ctx, n))
    return -1;
  return ctx.getInputType(n)->tensor_type().shape().dim_size();
}

/// ONNX's inference of the ops in kRankTrustingOps wrapped, once, so that
/// ranksFit refuses (as an inference error) what it would index out of
/// bounds on: an operand another node computes has a rank only inference
/// learns (a ConvTranspose filter or LayerNormalization input of a wrong
/// one crashed ONNX 1.12).
static void guardOnnxInference() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (std::string op : kRankTrustingOps) {
      // Every version of it: the newest, then each older one.
      for (const onnx::OpSchema *schema =
               onnx::OpSchemaRegistry::Schema(op, 1 << 20, "");
           schema; schema = schema->since_version() > 1
                                ? onnx::OpSchemaRegistry::Schema(
                                      op, schema->since_version() - 1, "")
                                : nullptr) {
        onnx::InferenceFunction original =
            schema->GetTypeAndShapeInferenceFunction();
        // The registry keeps its schemas as mutable objects and hands out
        // const pointers; nothing else changes them.
        const_cast<onnx::OpSchema *>(schema)->TypeAndShapeInferenceFunction(
            [op, original](onnx::InferenceContext &ctx) {
              int input = knownRank(ctx, 0);
              int filter = op.rfind("Conv", 0) == 0 ? knownRank(ctx, 1) : -1;
              const onnx::AttributeProto *axisAttr = ctx.getAttribute("axis");
              int64_t axis = axisAttr ? axisAttr->i() : -1;
              std::string rule, detail;
              if (filter >= 0)
                detail = " and filter of rank " + std::to_string(filter);
              if (op == "LayerNormalization")
                detail = " and axis " + std::to_string(axis);
              if (input >= 0 && !ranksFit(op, input, filter, axis, rule))
                fail_shape_inference(op, ": input of rank ", input, detail,
                                     "; ", rule);
              if (original)
                original(ctx);
            });
      }
    }
  });
}

/// Ops gpuc does not import are refused before ONNX's shape inference runs:
/// only the inference functions of the ops gpuc imports see a hostile model
/// (ONNX 1.12's ConvInteger inference crashed on mismatched ranks; found by
/// fuzzing). The message is the importer's.
bool checkSupportedOps(const onnx::ModelProto &model, std::string &error) {
  int64_t opset = 0;
  for (const auto &entry : model.opset_import())
    if (entry.domain().empty() || entry.domain() == "ai.onnx")
      opset = entry.version();
  std::vector<std::string> supported = getSupportedOnnxOps();
  const onnx::GraphProto &graph = model.graph();
  for (int n = 0; n < graph.node_size(); ++n) {
    const onnx::NodeProto &node = graph.node(n);
    if (!node.domain().empty() && node.domain() != "ai.onnx")
      continue; // the importer says which domains it takes
    if (std::binary_search(supported.begin(), supported.end(), node.op_type()))
      continue;
    std::string name = node.name().empty()
                           ? node.op_type() + "_" + std::to_string(n)
                           : node.name();
    error = "node '" + name + "' (" + node.op_type() + ", opset " +
            std::to_string(opset) + "): ONNX op '" + node.op_type() +
            "' is not supported by gpuc; supported ops: " +
            llvm::join(supported, ", ");
    return false;
  }
  return true;
}

bool loadOnnxModel(const std::string &path, const OnnxImportOptions &options,
                   onnx::ModelProto &model, std::string &error) {
  try {
    if (!readModel(path, model, error))
      return false;
    if (!lowerNewerOnnx(model, error))
      return false;
    if (!substituteConstantInputs(*model.mutable_graph(), options, error))
      return false;
    if (!options.constantInputs.empty() && model.ir_version() < 4)
      model.set_ir_version(4); // initializers apart from the graph's inputs
    if (!validateDimensions(model.graph(), error))
      return false;
    // External data is resolved against the model's directory before the
    // checker sees it, and the checker runs from that directory, so both
    // read the same files.
    std::string modelDir = llvm::sys::path::parent_path(path).str();
    for (const onnx::TensorProto &tensor : model.graph().initializer()) {
      ExternalData data;
      if (tensor.data_location() != onnx::TensorProto::EXTERNAL)
        continue;
      if (!resolveExternalData(tensor, modelDir, data, error))
        return false;
      if (options.externalFiles &&
          !llvm::is_contained(*options.externalFiles, data.file))
        options.externalFiles->push_back(data.file);
    }
    try {
      llvm::SmallString<256> cwd;
      bool moved = !modelDir.empty() && !llvm::sys::fs::current_path(cwd) &&
                   !llvm::sys::fs::set_current_path(modelDir);
      struct Restore {
        bool moved;
        llvm::SmallString<256> &cwd;
        ~Restore() {
          if (moved)
            (void)llvm::sys::fs::set_current_path(cwd);
        }
      } restore{moved, cwd};
      onnx::checker::check_model(model);
    } catch (const std::exception &e) {
      error = std::string("the ONNX checker rejects the model: ") + e.what();
      return false;
    }
    if (!bindInputShapes(*model.mutable_graph(), options, error))
      return false;
    if (!checkSupportedOps(model, error))
      return false;
    guardOnnxInference();
    try {
      onnx::ShapeInferenceOptions inference(/*check_type_val=*/true,
                                            /*strict_mode_val=*/1,
                                            /*data_prop_val=*/true);
      onnx::shape_inference::InferShapes(
          model, onnx::OpSchemaRegistry::Instance(), inference);
    } catch (const std::exception &e) {
      error = std::string("ONNX shape inference fails: ") + e.what();
      return false;
    }
    return true;
  } catch (const std::exception &e) {
    error = std::string("cannot read the model: ") + e.what();
    return false;
  }
}

int getOnnxSinceVersion(const std::string &opType, int opset) {
  const onnx::OpSchema *schema =
      onnx::OpSchemaRegistry::Schema(opType, opset, "");
  return schema ? schema->since_version() : -1;
}

} // namespace mlir::gpuc
