//===- Reductions.cpp - ONNX ReduceSum, ReduceMean, ReduceMax and kin -----===//
#include "Importer.h"

namespace mlir::gpuc::onnx_import {

LogicalResult
OnnxImporter::importReduce(Node &node, Value input, std::optional<Shape> axes,
                           bool keepDims, bool noopWithEmptyAxes,
                           function_ref<Value(Type, Value, Shape, bool)> make) {
  int64_t rank = shapeOf(input).size();
  if (!axes || axes->empty()) {
    if (noopWithEmptyAxes) {
      setOutput(node, 0, input);
      return success();
    }
    axes = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  }
  FailureOr<Shape> normalized = normalizeAxes(node, *axes, rank);
  if (failed(normalized))
    return failure();
  Shape shape = inferReduceShape(shapeOf(input), *normalized, keepDims);
  setOutput(node, 0,
            make(withShape(input, shape), input, *normalized, keepDims));
  return success();
}

LogicalResult OnnxImporter::importReduceSum(Node &node) {
  if (node.sinceVersion < 13)
    return importReduceAttrAxes<ReduceSumOp>(node);
  std::optional<Shape> axes;
  if (node.in(1)) {
    FailureOr<Shape> given = requireConstantInts(node, 1, "the axes");
    if (failed(given))
      return failure();
    axes = *given;
  }
  return importReduce(node, node.in(0), axes, node.getInt("keepdims", 1),
                      node.getInt("noop_with_empty_axes", 0),
                      [&](Type t, Value in, Shape axes, bool keep) {
                        return builder.createOrFold<ReduceSumOp>(
                            node.loc, t, in, axes, keep);
                      });
}

} // namespace mlir::gpuc::onnx_import
