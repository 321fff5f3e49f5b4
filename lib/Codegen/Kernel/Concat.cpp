//===- Concat.cpp - concatenations read by one load -----------------------===//
#include "Emitter.h"

namespace mlir::gpuc::kernel_emitter {

/// A concatenation of the kernel's inputs read at `coords`: a chain of
/// comparisons picks the input that holds the coordinate along the axis
/// (selectConcatInput), and one load reads it. Only the axis's extent tells
/// the inputs' layouts apart, so the coordinates before and after the axis
/// ravel once for all of them. (The general form, a load per branch, would
/// repeat the index arithmetic for every input at every read: DenseNet's
/// concatenations of up to 32 inputs, fused into the batch norms that read
/// them, were a third of its kernel source.)
std::string Emitter::concatOfArguments(ConcatOp c, Value v,
                                       ArrayRef<std::string> coords) {
  int64_t axis = c.getAxis();
  ArrayRef<int64_t> shape = shapeOf(v);
  std::string outer =
                  index(ravel(coords.take_front(axis), shape.take_front(axis))),
              inner = index(ravel(coords.drop_front(axis + 1),
                                  shape.drop_front(axis + 1)));
  std::string from = selectConcatInput(c, coords[axis]);
  std::string at = index(llvm::formatv(
      "({0} * {1}Extent + {2} - {1}Start) * {3} + {4}", outer, from,
      coords[axis], getNumElements(shape.drop_front(axis + 1)), inner));
  return load(v, from, at);
}

std::string Emitter::selectConcatInput(ConcatOp c,
                                       const std::string &coordinate) {
  // Remembered like a value: a row kernel selects once per row, before its
  // loops, for a concatenation along an axis it keeps.
  std::string key = concatInputKey(coordinate);
  auto known = memo.find({c.getResult().getAsOpaquePointer(), key});
  if (known != memo.end())
    return known->second;
  int64_t axis = c.getAxis();
  std::string from = fresh("p");
  line(llvm::formatv("const {0} *{1}; gidx {1}Extent, {1}Start;",
                     storageCType(elementOf(c.getResult())), from));
  int64_t start = 0;
  for (auto [k, input] : llvm::enumerate(c.getInputs())) {
    int64_t extent = shapeOf(input)[axis];
    bool last = k + 1 == c.getInputs().size();
    std::string test =
        last ? (k == 0 ? "" : "else")
             : llvm::formatv("{0}if ({1} < {2})", k == 0 ? "" : "else ",
                             coordinate, start + extent)
                   .str();
    line(llvm::formatv("{0} {{ {1} = in{2}; {1}Extent = {3}; {1}Start = {4}; }",
                       test, from, cast<BlockArgument>(input).getArgNumber(),
                       extent, start));
    start += extent;
  }
  remember(c.getResult(), key, from);
  return from;
}

} // namespace mlir::gpuc::kernel_emitter
