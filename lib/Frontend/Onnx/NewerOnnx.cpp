//===- NewerOnnx.cpp - models written for a newer ONNX than gpuc reads ----===//
//
// gpuc checks and infers models with the ONNX library it links (Debian's
// 1.12: IR version 8, opsets up to 17). PyTorch's exporters write newer
// ones: the TorchScript exporter up to opset 20, the dynamo exporter (the
// default since PyTorch 2.9) opset 18 and IR version 10. Between opset 17
// and the newest opset this file knows, the ops gpuc imports changed in
// few ways: most versions only admit new element types; Reduce* took their
// axes as an input, Split gained num_outputs, Pad an axes input, Resize,
// AveragePool and Cast new attributes, and Gelu became an op. Each such
// node is rewritten into its opset-17 form where that form means the same,
// and refused with its name and the reason where it does not; the model is
// then opset 17 for the rest of the import.
//
// The dynamo exporter writes a graph for inference: a training-mode batch
// norm is written as an inference one, which its FX record (node metadata)
// corrects; and its optimizer (on by default) merges initializers of equal
// value (a transformer's layer-norm weights, all ones, become one tensor)
// and folds batch norms into convolutions. Trained as it stands, such a
// model would silently train something else, so it is refused with the way
// to export it for training.
//
//===----------------------------------------------------------------------===//
#include "OnnxModelLoader.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"

#include "onnx/defs/schema.h"

#include <google/protobuf/unknown_field_set.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <set>

namespace mlir::gpuc {
namespace {

/// The newest opset whose changes to the ops gpuc imports are known here
/// (from ONNX's operator changelog; every version after 17 not handled
/// below only admits element types).
constexpr int64_t kNewestKnownOpset = 28;

/// The element types ONNX 1.12 knows end at BFLOAT16; IR 9 and later add
/// 8-, 6-, 4- and 2-bit types.
constexpr int kLastKnownElementType = onnx::TensorProto::BFLOAT16;

/// Field numbers of what IR version 10 added to the messages ONNX 1.12's
/// protobuf parses: they arrive there as unknown fields.
constexpr int kGraphMetadataField = 16;
constexpr int kNodeMetadataField = 9;

std::string describe(const onnx::NodeProto &node, int index) {
  return (node.name().empty() ? "node #" + std::to_string(index)
                              : "node '" + node.name() + "'") +
         " (" + node.op_type() + ")";
}

const onnx::AttributeProto *findAttribute(const onnx::NodeProto &node,
                                          llvm::StringRef name) {
  for (const onnx::AttributeProto &attr : node.attribute())
    if (attr.name() == name)
      return &attr;
  return nullptr;
}

void removeAttribute(onnx::NodeProto &node, llvm::StringRef name) {
  auto *attrs = node.mutable_attribute();
  for (int i = attrs->size() - 1; i >= 0; --i)
    if (attrs->Get(i).name() == name)
      attrs->DeleteSubrange(i, 1);
}

/// The key-value pairs of an IR 10 `metadata_props` field that ONNX 1.12
/// kept as unknown field `number`.
std::vector<std::pair<std::string, std::string>>
unknownMetadata(const google::protobuf::Message &message, int number) {
  std::vector<std::pair<std::string, std::string>> entries;
  const google::protobuf::UnknownFieldSet &fields =
      message.GetReflection()->GetUnknownFields(message);
  for (int i = 0; i < fields.field_count(); ++i) {
    const google::protobuf::UnknownField &field = fields.field(i);
    if (field.number() != number ||
        field.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED)
      continue;
    onnx::StringStringEntryProto entry;
    if (entry.ParseFromString(field.length_delimited()))
      entries.emplace_back(entry.key(), entry.value());
  }
  return entries;
}

/// The integers of a constant tensor (initializer or Constant node), or
/// false when it is not one whose values are in the model.
bool readIntegers(const onnx::TensorProto &tensor,
                  std::vector<int64_t> &values) {
  if (tensor.data_location() == onnx::TensorProto::EXTERNAL)
    return false;
  if (tensor.data_type() == onnx::TensorProto::INT64) {
    if (tensor.has_raw_data()) {
      const std::string &raw = tensor.raw_data();
      if (raw.size() % 8)
        return false;
      values.resize(raw.size() / 8);
      std::memcpy(values.data(), raw.data(), raw.size());
      return true;
    }
    values.assign(tensor.int64_data().begin(), tensor.int64_data().end());
    return true;
  }
  if (tensor.data_type() == onnx::TensorProto::INT32) {
    if (tensor.has_raw_data()) {
      const std::string &raw = tensor.raw_data();
      if (raw.size() % 4)
        return false;
      std::vector<int32_t> narrow(raw.size() / 4);
      std::memcpy(narrow.data(), raw.data(), raw.size());
      values.assign(narrow.begin(), narrow.end());
      return true;
    }
    values.assign(tensor.int32_data().begin(), tensor.int32_data().end());
    return true;
  }
  return false;
}

/// The small integer constants of the graph by name, their elements in
/// order, copied (rewriting nodes moves them): initializers, Constant
/// nodes, and what the exporters compute from them for an axes input
/// (PyTorch's dynamo exporter reshapes a Constant; concatenating them,
/// squeezing or casting them to integers keeps their elements in order).
class Constants {
public:
  explicit Constants(const onnx::GraphProto &graph) {
    for (const onnx::TensorProto &tensor : graph.initializer())
      keep(tensor.name(), tensor);
    for (const onnx::NodeProto &node : graph.node()) {
      if (node.output_size() != 1 ||
          (!node.domain().empty() && node.domain() != "ai.onnx"))
        continue;
      llvm::StringRef op = node.op_type();
      if (op == "Constant") {
        if (const onnx::AttributeProto *value = findAttribute(node, "value"))
          keep(node.output(0), value->t());
        else if (const onnx::AttributeProto *ints =
                     findAttribute(node, "value_ints"))
          values[node.output(0)].assign(ints->ints().begin(),
                                        ints->ints().end());
        continue;
      }
      bool keepsElements =
          llvm::is_contained(
              {"Reshape", "Identity", "Squeeze", "Unsqueeze", "Flatten"}, op) ||
          (op == "Cast" && findAttribute(node, "to") &&
           (findAttribute(node, "to")->i() == onnx::TensorProto::INT64 ||
            findAttribute(node, "to")->i() == onnx::TensorProto::INT32));
      if (keepsElements && node.input_size() >= 1) {
        auto it = values.find(node.input(0));
        if (it != values.end())
          values[node.output(0)] = std::vector<int64_t>(it->second);
        continue;
      }
      if (op == "Concat") {
        std::vector<int64_t> joined;
        bool known = true;
        for (const std::string &input : node.input()) {
          auto it = values.find(input);
          if (!(known = it != values.end()))
            break;
          joined.insert(joined.end(), it->second.begin(), it->second.end());
        }
        if (known && joined.size() <= kMaxElements)
          values[node.output(0)] = std::move(joined);
      }
    }
  }

  bool integers(const std::string &name, std::vector<int64_t> &result) const {
    auto it = values.find(name);
    if (it == values.end())
      return false;
    result = it->second;
    return true;
  }

private:
  /// Axes and the like: a weight is never read here.
  static constexpr int64_t kMaxElements = 1024;

  void keep(const std::string &name, const onnx::TensorProto &tensor) {
    // (Dimensions are not validated yet: no product past the bound.)
    int64_t elements = 1;
    for (int64_t d : tensor.dims()) {
      if (d < 0 || (d > 0 && elements > kMaxElements / d))
        return;
      elements *= d;
    }
    std::vector<int64_t> integers;
    if (readIntegers(tensor, integers))
      values[name] = std::move(integers);
  }

  llvm::StringMap<std::vector<int64_t>> values;
};

/// Whether `op` is one of the reductions that took their axes as an input
/// at opset 18 (ReduceSum did at 13).
bool reducesWithAxesInput(llvm::StringRef op) {
  return llvm::is_contained(
      {"ReduceMax", "ReduceMin", "ReduceMean", "ReduceProd", "ReduceL1",
       "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"},
      op);
}

/// Rewrites GELU (opset 20) as ONNX defines it, in opset-17 ops:
/// x * 0.5 * (1 + erf(x / sqrt 2)), or with `approximate = "tanh"`
/// x * 0.5 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3))); each constant
/// takes x's type through CastLike. gpuc's gpuc-form-gelu makes either
/// chain one gelu again.
bool expandGelu(const onnx::NodeProto &gelu, int index,
                google::protobuf::RepeatedPtrField<onnx::NodeProto> &lowered,
                std::string &error) {
  std::string approximate = "none";
  if (const onnx::AttributeProto *attr = findAttribute(gelu, "approximate"))
    approximate = attr->s();
  if (approximate != "none" && approximate != "tanh") {
    error = describe(gelu, index) + ": approximate is '" + approximate +
            "'; ONNX defines 'none' and 'tanh'";
    return false;
  }
  if (gelu.input_size() != 1 || gelu.output_size() != 1) {
    error = describe(gelu, index) + ": Gelu takes one input and one output";
    return false;
  }
  std::string prefix =
      (gelu.name().empty() ? "gelu" + std::to_string(index) : gelu.name()) +
      "/";
  const std::string &x = gelu.input(0);
  std::vector<onnx::NodeProto> nodes;
  auto add = [&](const std::string &op, std::vector<std::string> inputs,
                 const std::string &output) {
    onnx::NodeProto node;
    node.set_op_type(op);
    node.set_name(prefix + output);
    for (const std::string &input : inputs)
      node.add_input(input);
    node.add_output(output);
    nodes.push_back(node);
    return output;
  };
  auto constant = [&](const std::string &name, float value) {
    onnx::NodeProto node;
    node.set_op_type("Constant");
    node.set_name(prefix + name + ".f32");
    node.add_output(prefix + name + ".f32");
    onnx::AttributeProto *attr = node.add_attribute();
    attr->set_name("value");
    attr->set_type(onnx::AttributeProto::TENSOR);
    attr->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
    attr->mutable_t()->add_float_data(value);
    nodes.push_back(node);
    return add("CastLike", {prefix + name + ".f32", x}, prefix + name);
  };
  std::string inner;
  if (approximate == "none") {
    std::string invSqrt2 = constant("inv_sqrt2", (float)M_SQRT1_2);
    inner = add("Erf", {add("Mul", {x, invSqrt2}, prefix + "scaled")},
                prefix + "erf");
  } else {
    std::string cube =
        add("Mul", {add("Mul", {x, x}, prefix + "square"), x}, prefix + "cube");
    std::string cubic =
        add("Mul", {cube, constant("cubic", 0.044715f)}, prefix + "cubic_term");
    std::string sum = add("Add", {x, cubic}, prefix + "inner_sum");
    std::string scaled =
        add("Mul",
            {sum, constant("sqrt_2_over_pi", (float)(M_2_SQRTPI * M_SQRT1_2))},
            prefix + "scaled");
    inner = add("Tanh", {scaled}, prefix + "tanh");
  }
  std::string onePlus =
      add("Add", {inner, constant("one", 1.0f)}, prefix + "one_plus");
  std::string halfX =
      add("Mul", {x, constant("half", 0.5f)}, prefix + "half_x");
  add("Mul", {halfX, onePlus}, gelu.output(0));
  nodes.back().set_name(gelu.name().empty() ? prefix + "result" : gelu.name());
  for (onnx::NodeProto &node : nodes)
    *lowered.Add() = std::move(node);
  return true;
}

/// Rewrites `node` (node `index`, of opset `opset`) in place into its
/// opset-17 form, for every op whose form is one node.
bool lowerInPlace(onnx::NodeProto &node, int index, const Constants &constants,
                  int64_t opset, std::string &error) {
  if (!node.domain().empty() && node.domain() != "ai.onnx")
    return true;
  llvm::StringRef op = node.op_type();
  auto refuse = [&](const std::string &why) {
    error = describe(node, index) + " at opset " + std::to_string(opset) +
            ": " + why;
    return false;
  };

  if (reducesWithAxesInput(op)) {
    bool noop = false;
    if (const onnx::AttributeProto *attr =
            findAttribute(node, "noop_with_empty_axes"))
      noop = attr->i() != 0;
    removeAttribute(node, "noop_with_empty_axes");
    bool hasAxes = node.input_size() >= 2 && !node.input(1).empty();
    if (!hasAxes) {
      if (noop) // no axes, and told to reduce none: the input as it is
        node.set_op_type("Identity");
      node.mutable_input()->DeleteSubrange(1, node.input_size() - 1);
      return true;
    }
    std::vector<int64_t> axes;
    if (!constants.integers(node.input(1), axes))
      return refuse("its axes ('" + node.input(1) +
                    "') must be a constant: gpuc compiles static shapes");
    if (axes.empty()) {
      if (noop)
        node.set_op_type("Identity");
      node.mutable_input()->DeleteSubrange(1, node.input_size() - 1);
      return true;
    }
    node.mutable_input()->DeleteSubrange(1, node.input_size() - 1);
    onnx::AttributeProto *attr = node.add_attribute();
    attr->set_name("axes");
    attr->set_type(onnx::AttributeProto::INTS);
    for (int64_t axis : axes)
      attr->add_ints(axis);
    return true;
  }
  if (op == "Split") {
    const onnx::AttributeProto *count = findAttribute(node, "num_outputs");
    if (!count)
      return true;
    if (node.input_size() >= 2 && !node.input(1).empty())
      return refuse("it has both a split input and num_outputs");
    if (count->i() != node.output_size())
      return refuse("num_outputs is " + std::to_string(count->i()) +
                    " but it has " + std::to_string(node.output_size()) +
                    " outputs");
    // Opset 13's Split without sizes makes equal parts, as num_outputs
    // does when the axis divides; when it does not, ONNX's inference says
    // so.
    removeAttribute(node, "num_outputs");
    return true;
  }
  if (op == "Pad") {
    if (node.input_size() >= 4 && !node.input(3).empty())
      return refuse("its axes input (opset 18) is not supported; give pads "
                    "for every axis");
    if (const onnx::AttributeProto *mode = findAttribute(node, "mode"))
      if (mode->s() == "wrap")
        return refuse("mode 'wrap' (opset 19) is not supported");
    return true;
  }
  if (op == "Resize") {
    if (const onnx::AttributeProto *attr = findAttribute(node, "antialias"))
      if (attr->i() != 0)
        return refuse("antialias (opset 18) is not supported");
    if (const onnx::AttributeProto *attr =
            findAttribute(node, "keep_aspect_ratio_policy"))
      if (attr->s() != "stretch")
        return refuse("keep_aspect_ratio_policy '" + attr->s() +
                      "' (opset 18) is not supported");
    if (findAttribute(node, "axes"))
      return refuse("its axes attribute (opset 18) is not supported; give "
                    "scales or sizes for every axis");
    if (const onnx::AttributeProto *attr =
            findAttribute(node, "coordinate_transformation_mode"))
      if (attr->s() == "half_pixel_symmetric")
        return refuse(
            "coordinate_transformation_mode 'half_pixel_symmetric' (opset "
            "19) is not supported");
    removeAttribute(node, "antialias");
    removeAttribute(node, "keep_aspect_ratio_policy");
    return true;
  }
  if (op == "AveragePool") {
    if (const onnx::AttributeProto *attr = findAttribute(node, "dilations"))
      for (int64_t d : attr->ints())
        if (d != 1)
          return refuse("dilations (opset 19) other than 1 are not supported");
    removeAttribute(node, "dilations");
    return true;
  }
  if (op == "Cast" || op == "CastLike") {
    // Both concern only the 8-bit and 4-bit float types, refused above.
    removeAttribute(node, "saturate");
    removeAttribute(node, "round_mode");
    return true;
  }
  if (op == "Constant") {
    // An empty list of integers: newer checkers take `value_ints` with no
    // elements, ONNX 1.12's wants them as a tensor of none.
    const onnx::AttributeProto *ints = findAttribute(node, "value_ints");
    if (ints && ints->ints_size() == 0) {
      removeAttribute(node, "value_ints");
      onnx::AttributeProto *attr = node.add_attribute();
      attr->set_name("value");
      attr->set_type(onnx::AttributeProto::TENSOR);
      attr->mutable_t()->set_data_type(onnx::TensorProto::INT64);
      attr->mutable_t()->add_dims(0);
    }
    return true;
  }
  if (op == "Range") {
    // The precision of a floating-point range's arithmetic (opset 27);
    // gpuc folds ranges of constants exactly.
    removeAttribute(node, "stash_type");
    return true;
  }
  return true;
}

/// Rewrites `node` (node `index`, of opset `opset`) into its opset-17 form,
/// in place; `lowered` then takes it, or the nodes that stand for it.
bool lowerNode(onnx::NodeProto &node, int index, const Constants &constants,
               int64_t opset,
               google::protobuf::RepeatedPtrField<onnx::NodeProto> &lowered,
               std::string &error) {
  if (node.op_type() == "Gelu" &&
      (node.domain().empty() || node.domain() == "ai.onnx"))
    return expandGelu(node, index, lowered, error);
  if (!lowerInPlace(node, index, constants, opset, error))
    return false;
  *lowered.Add() = std::move(node);
  return true;
}

/// Refuses element types ONNX 1.12 does not know, naming where one is.
bool checkElementTypes(const onnx::GraphProto &graph, std::string &error) {
  auto known = [](int type) { return type <= kLastKnownElementType; };
  auto refuse = [&](const std::string &what, int type) {
    error = what + " has element type " + std::to_string(type) +
            " (an 8-, 6-, 4- or 2-bit type of IR version 9 or later), "
            "which gpuc does not train; export the model in float32";
    return false;
  };
  for (const auto *values :
       {&graph.input(), &graph.output(), &graph.value_info()})
    for (const onnx::ValueInfoProto &value : *values)
      if (value.type().has_tensor_type() &&
          !known(value.type().tensor_type().elem_type()))
        return refuse("value '" + value.name() + "'",
                      value.type().tensor_type().elem_type());
  for (const onnx::TensorProto &tensor : graph.initializer())
    if (!known(tensor.data_type()))
      return refuse("initializer '" + tensor.name() + "'", tensor.data_type());
  for (int n = 0; n < graph.node_size(); ++n)
    for (const onnx::AttributeProto &attr : graph.node(n).attribute()) {
      if (attr.has_t() && !known(attr.t().data_type()))
        return refuse(describe(graph.node(n), n), attr.t().data_type());
      if (attr.name() == "to" && attr.has_i() && !known((int)attr.i()))
        return refuse(describe(graph.node(n), n), (int)attr.i());
    }
  return true;
}

/// Undoes what PyTorch's dynamo exporter wrote for inference where its
/// records say what it was, and refuses the model where they do not (see
/// the file comment). Its models carry the exported program's signature in
/// the graph's metadata, and each node its FX node.
bool readDynamoExport(onnx::ModelProto &model, std::string &error) {
  onnx::GraphProto &graph = *model.mutable_graph();
  std::string signature;
  for (auto &[key, value] : unknownMetadata(graph, kGraphMetadataField))
    if (key == "pkg.torch.export.ExportedProgram.graph_signature")
      signature = value;
  if (signature.empty())
    return true;
  const char *const howToExport =
      "; torch.onnx.export(..., dynamo=True) optimizes the graph for "
      "inference. Export for training without that: "
      "torch.onnx.export(model.train(), args, path, dynamo=True, "
      "optimize=False), or with the TorchScript exporter (dynamo=False, "
      "training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False, "
      "as examples/export_models.py does)";

  // Each parameter the exported program lists and its graph reads must be
  // an initializer of its own: "p_h_0_ln_1_weight: PARAMETER
  // target='h.0.ln_1.weight'". (Of tied parameters the program lists
  // every name and reads one: "%p_lm_head_weight" in its nodes'
  // "pkg.torch.onnx.fx_node".)
  std::set<std::string> initializers, read;
  for (const onnx::TensorProto &tensor : graph.initializer())
    initializers.insert(tensor.name());
  // Per module (a name scope: "model.transformer.wte"), the placeholders
  // its nodes read.
  std::map<std::string, std::set<std::string>> readInScope;
  for (const onnx::NodeProto &node : graph.node()) {
    std::set<std::string> readHere;
    std::vector<std::string> scopes;
    for (auto &[key, value] : unknownMetadata(node, kNodeMetadataField)) {
      llvm::StringRef rest = value;
      if (key == "pkg.torch.onnx.fx_node") {
        for (size_t at = rest.find('%'); at != llvm::StringRef::npos;
             at = rest.find('%')) {
          rest = rest.drop_front(at + 1);
          readHere.insert(rest.take_while([](char c) {
                                return llvm::isAlnum(c) || c == '_';
                              })
                              .str());
        }
      } else if (key == "pkg.torch.onnx.name_scopes") {
        // A Python list of strings: ['', 'model', 'model.lm_head', ...].
        for (size_t at = rest.find('\''); at != llvm::StringRef::npos;
             at = rest.find('\'')) {
          rest = rest.drop_front(at + 1);
          scopes.push_back(
              rest.take_until([](char c) { return c == '\''; }).str());
          rest =
              rest.drop_front(std::min(scopes.back().size() + 1, rest.size()));
        }
      }
    }
    read.insert(readHere.begin(), readHere.end());
    for (const std::string &scope : scopes)
      readInScope[scope].insert(readHere.begin(), readHere.end());
  }
  std::vector<std::string> missing;
  std::map<std::string, std::string> targetOf; // placeholder -> target
  std::vector<std::pair<std::string, std::string>> parameters;
  llvm::SmallVector<llvm::StringRef> lines;
  llvm::StringRef(signature).split(lines, '\n');
  for (llvm::StringRef line : lines) {
    size_t kind = line.find(": PARAMETER target='");
    if (kind == llvm::StringRef::npos)
      continue;
    std::string placeholder = line.take_front(kind).trim().str();
    llvm::StringRef target =
        line.drop_front(kind + strlen(": PARAMETER target='"));
    target = target.take_until([](char c) { return c == '\''; });
    targetOf[placeholder] = target.str();
    parameters.emplace_back(placeholder, target.str());
    if (!initializers.count(target.str()) && read.count(placeholder))
      missing.push_back(target.str());
  }
  if (!missing.empty()) {
    size_t shown = std::min<size_t>(missing.size(), 6);
    error = std::to_string(missing.size()) +
            " of the exported program's parameters are not in the graph (" +
            llvm::join(llvm::ArrayRef(missing).take_front(shown), ", ") +
            (shown < missing.size() ? ", ..." : "") +
            "): the exporter's optimizer merged parameters of equal value "
            "into one, or folded them into others, which trains something "
            "else" +
            howToExport;
    return false;
  }
  // A tied parameter (GPT-2's wte.weight, which is also lm_head.weight)
  // is listed under each name and read under one. Its module's nodes read
  // the kept one: "model.transformer.wte"'s embedding reads
  // p_model_lm_head_weight. The other names are recorded for the
  // importer (a checkpoint may store the weight under either).
  std::string tied;
  for (const auto &[placeholder, target] : parameters) {
    if (read.count(placeholder) || initializers.count(target))
      continue;
    llvm::StringRef module, attribute;
    std::tie(module, attribute) = llvm::StringRef(target).rsplit('.');
    std::set<std::string> kept;
    for (const std::string &other : readInScope[module.str()]) {
      auto it = targetOf.find(other);
      if (it != targetOf.end() && initializers.count(it->second) &&
          llvm::StringRef(it->second).rsplit('.').second == attribute)
        kept.insert(it->second);
    }
    if (kept.size() == 1)
      tied += target + " " + *kept.begin() + "\n";
  }
  if (!tied.empty()) {
    onnx::StringStringEntryProto *entry = model.add_metadata_props();
    entry->set_key(kTiedParametersKey);
    entry->set_value(tied);
  }

  // The module's buffers ("b_rotary_emb_inv_freq: BUFFER
  // target='rotary_emb.inv_freq' persistent=False"): PyTorch never trains
  // them, even where a gradient would reach them (a rotary embedding's
  // frequencies times the positions). Recorded for the importer.
  std::string buffers;
  for (llvm::StringRef line : lines) {
    size_t kind = line.find(": BUFFER target='");
    if (kind == llvm::StringRef::npos)
      continue;
    llvm::StringRef rest = line.drop_front(kind + strlen(": BUFFER target='"));
    llvm::StringRef target = rest.take_until([](char c) { return c == '\''; });
    if (!initializers.count(target.str()))
      continue;
    bool saved = !rest.contains("persistent=False");
    buffers += target.str() + (saved ? " saved\n" : " unsaved\n");
  }
  if (!buffers.empty()) {
    onnx::StringStringEntryProto *entry = model.add_metadata_props();
    entry->set_key(kBuffersKey);
    entry->set_value(buffers);
  }

  // A batch norm that trains is PyTorch's
  // _native_batch_norm_legit_functional (one in eval mode is
  // _native_batch_norm_legit_no_training), but the exporter writes it with
  // training_mode 0: the node's own FX record says how it runs.
  for (onnx::NodeProto &node : *graph.mutable_node()) {
    if (node.op_type() != "BatchNormalization")
      continue;
    const onnx::AttributeProto *mode = findAttribute(node, "training_mode");
    if (mode && mode->i() != 0)
      continue;
    for (auto &[key, value] : unknownMetadata(node, kNodeMetadataField))
      if (key == "pkg.torch.onnx.fx_node" &&
          llvm::StringRef(value).contains(
              "_native_batch_norm_legit_functional")) {
        removeAttribute(node, "training_mode");
        onnx::AttributeProto *attr = node.add_attribute();
        attr->set_name("training_mode");
        attr->set_type(onnx::AttributeProto::INT);
        attr->set_i(1);
        // A training batch norm has the running statistics' new values
        // as outputs (gpuc keeps them as the step's state, read or not).
        for (const char *stat : {"/running_mean", "/running_var"})
          if (node.output_size() < 3)
            node.add_output(node.output(0) + stat);
      }
  }
  return true;
}

/// A 1-D int64 initializer named `name` holding `values`.
void addIntegers(onnx::GraphProto &graph, const std::string &name,
                 const std::vector<int64_t> &values) {
  onnx::TensorProto *tensor = graph.add_initializer();
  tensor->set_name(name);
  tensor->set_data_type(onnx::TensorProto::INT64);
  tensor->add_dims((int64_t)values.size());
  for (int64_t v : values)
    tensor->add_int64_data(v);
}

/// PyTorch's dynamo exporter writes `torch.split` and `chunk` as a
/// SplitToSequence whose pieces SequenceAt picks by constant index. Each
/// pick becomes a Slice of the input (and a Squeeze where the pieces drop
/// their axis), and the sequence goes: what gpuc imports for Split.
bool sliceSequenceSplits(onnx::GraphProto &graph, std::string &error) {
  std::set<std::string> graphOutputs;
  for (const onnx::ValueInfoProto &output : graph.output())
    graphOutputs.insert(output.name());
  Constants constants(graph);
  // Sequences every reader of which picks a piece by a constant index.
  llvm::StringMap<int> splitOf;
  for (int n = 0; n < graph.node_size(); ++n) {
    const onnx::NodeProto &node = graph.node(n);
    if (node.op_type() == "SplitToSequence" && node.input_size() >= 1 &&
        node.output_size() == 1 && !graphOutputs.count(node.output(0)))
      splitOf[node.output(0)] = n;
  }
  for (const onnx::NodeProto &node : graph.node())
    for (int i = 0; i < node.input_size(); ++i) {
      auto it = splitOf.find(node.input(i));
      std::vector<int64_t> index;
      if (it != splitOf.end() &&
          !(node.op_type() == "SequenceAt" && i == 0 &&
            node.input_size() == 2 &&
            constants.integers(node.input(1), index) && index.size() == 1))
        splitOf.erase(it);
    }
  if (splitOf.empty())
    return true;

  google::protobuf::RepeatedPtrField<onnx::NodeProto> rebuilt;
  for (int n = 0; n < graph.node_size(); ++n) {
    const onnx::NodeProto &node = graph.node(n);
    if (node.op_type() == "SplitToSequence" && splitOf.count(node.output(0)))
      continue;
    auto it = node.op_type() == "SequenceAt" && node.input_size() == 2
                  ? splitOf.find(node.input(0))
                  : splitOf.end();
    if (it == splitOf.end()) {
      *rebuilt.Add() = node;
      continue;
    }
    const onnx::NodeProto &split = graph.node(it->second);
    auto refuse = [&](const std::string &why) {
      error =
          describe(node, n) + " of " + describe(split, it->second) + ": " + why;
      return false;
    };
    int64_t axis = 0, keepdims = 1;
    if (const onnx::AttributeProto *attr = findAttribute(split, "axis"))
      axis = attr->i();
    if (const onnx::AttributeProto *attr = findAttribute(split, "keepdims"))
      keepdims = attr->i();
    std::vector<int64_t> index, sizes;
    constants.integers(node.input(1), index);
    int64_t piece = index[0];
    bool hasSplit = split.input_size() >= 2 && !split.input(1).empty();
    if (hasSplit && !constants.integers(split.input(1), sizes))
      return refuse("the split sizes ('" + split.input(1) +
                    "') must be a constant: gpuc compiles static shapes");
    // A scalar split: pieces of that size (the last one shorter when the
    // axis is not a multiple); 1-D: the sizes; none: pieces of 1.
    bool scalar = !hasSplit || (sizes.size() == 1 && [&] {
      for (const onnx::TensorProto &t : graph.initializer())
        if (t.name() == split.input(1))
          return t.dims_size() == 0;
      return true; // a Constant's scalar or a one-element list: the same
    }());
    int64_t size = hasSplit && scalar ? sizes[0] : 1;
    int64_t begin, end;
    if (scalar) {
      if (piece < 0)
        return refuse("a negative index into pieces of a fixed size needs "
                      "the axis's length; pick pieces from the front");
      if (size <= 0)
        return refuse("the split size must be positive");
      if (piece > std::numeric_limits<int64_t>::max() / size - 1)
        return refuse("index " + std::to_string(piece) + " is past any axis");
      begin = piece * size;
      end = begin + size;
    } else {
      int64_t count = (int64_t)sizes.size();
      if (piece < -count || piece >= count)
        return refuse("index " + std::to_string(piece) + " past the " +
                      std::to_string(count) + " pieces");
      if (piece < 0)
        piece += count;
      begin = 0;
      for (int64_t k = 0; k <= piece; ++k) {
        if (sizes[k] < 0 ||
            begin > std::numeric_limits<int64_t>::max() - sizes[k])
          return refuse("the split sizes must be non-negative and fit an "
                        "axis");
        if (k < piece)
          begin += sizes[k];
      }
      end = begin + sizes[piece];
    }
    if (keepdims == 0 && hasSplit)
      return refuse("keepdims 0 takes pieces of one element (no split "
                    "input)");
    std::string out = node.output(0);
    std::string sliced = keepdims == 0 ? out + "/slice" : out;
    addIntegers(graph, out + "/starts", {begin});
    addIntegers(graph, out + "/ends", {end});
    addIntegers(graph, out + "/axes", {axis});
    onnx::NodeProto *slice = rebuilt.Add();
    slice->set_op_type("Slice");
    slice->set_name(node.name().empty() ? out + "/Slice" : node.name());
    for (const std::string &input :
         {split.input(0), out + "/starts", out + "/ends", out + "/axes"})
      slice->add_input(input);
    slice->add_output(sliced);
    if (keepdims == 0) {
      onnx::NodeProto *squeeze = rebuilt.Add();
      squeeze->set_op_type("Squeeze");
      squeeze->set_name(out + "/Squeeze");
      squeeze->add_input(sliced);
      squeeze->add_input(out + "/axes");
      squeeze->add_output(out);
    }
  }
  graph.mutable_node()->Swap(&rebuilt);
  return true;
}

} // namespace

bool lowerNewerOnnx(onnx::ModelProto &model, std::string &error) {
  onnx::GraphProto &graph = *model.mutable_graph();
  if (!readDynamoExport(model, error) || !sliceSequenceSplits(graph, error))
    return false;
  int64_t readableIr = onnx::IR_VERSION;
  if (model.ir_version() > readableIr) {
    if (!checkElementTypes(graph, error))
      return false;
    // What IR 9 and 10 added beyond element types (metadata on nodes and
    // values, overloaded functions) does not change what a graph computes.
    model.set_ir_version(readableIr);
  }
  int64_t readableOpset =
      onnx::OpSchemaRegistry::DomainToVersionRange::Instance()
          .Map()
          .at(onnx::ONNX_DOMAIN)
          .second;
  onnx::OperatorSetIdProto *defaultSet = nullptr;
  for (onnx::OperatorSetIdProto &entry : *model.mutable_opset_import())
    if (entry.domain().empty() || entry.domain() == "ai.onnx")
      defaultSet = &entry;
  if (!defaultSet || defaultSet->version() <= readableOpset)
    return true;
  int64_t opset = defaultSet->version();
  if (opset > kNewestKnownOpset) {
    error = "the model imports ONNX opset " + std::to_string(opset) +
            ", newer than gpuc reads (up to " +
            std::to_string(kNewestKnownOpset) +
            "); export it at opset 17 (torch.onnx.export(..., "
            "opset_version=17))";
    return false;
  }
  for (const onnx::FunctionProto &function : model.functions())
    for (const onnx::OperatorSetIdProto &entry : function.opset_import())
      if ((entry.domain().empty() || entry.domain() == "ai.onnx") &&
          entry.version() > readableOpset) {
        error = "model-local function '" + function.name() +
                "' imports ONNX opset " + std::to_string(entry.version()) +
                "; gpuc reads functions up to opset " +
                std::to_string(readableOpset);
        return false;
      }
  Constants constants(graph);
  google::protobuf::RepeatedPtrField<onnx::NodeProto> lowered;
  for (int n = 0; n < graph.node_size(); ++n)
    if (!lowerNode(*graph.mutable_node(n), n, constants, opset, lowered, error))
      return false;
  graph.mutable_node()->Swap(&lowered);
  // Now, before the checker, which knows no op younger than the linked
  // ONNX (RMSNormalization, opset 23) and would say only that.
  if (!checkSupportedOps(model, error))
    return false;
  defaultSet->set_version(readableOpset);
  return true;
}

} // namespace mlir::gpuc
