//===- LinearHead.cpp - a language model's head: a linear layer's logits --===//
#include "gpuc/Transforms/LinearHead.h"

#include "gpuc/Dialect/Gpuc/TensorBuilder.h"

using namespace mlir;
using namespace mlir::gpuc;

namespace {
constexpr auto shapeOf = TensorBuilder::shapeOf;

Value skipReshapes(Value v, SmallVectorImpl<Operation *> &chain) {
  while (auto reshape = v.getDefiningOp<ReshapeOp>()) {
    chain.push_back(reshape);
    v = reshape.getInput();
  }
  return v;
}
} // namespace

std::optional<LinearHead> mlir::gpuc::matchLinearHead(Value logits) {
  LinearHead head;
  int64_t vocabulary = shapeOf(logits).back();
  Value v = skipReshapes(logits, head.chain);
  if (auto add = v.getDefiningOp<AddOp>()) {
    // A bias: a [V] vector broadcast along the rows.
    for (unsigned side = 0; side < 2 && !head.bias; ++side) {
      auto broadcast = add->getOperand(side).getDefiningOp<BroadcastOp>();
      if (!broadcast ||
          shapeOf(broadcast.getInput()) != ArrayRef<int64_t>{vocabulary})
        continue;
      head.chain.push_back(add);
      head.chain.push_back(broadcast);
      head.bias = broadcast.getInput();
      v = skipReshapes(add->getOperand(1 - side), head.chain);
    }
    if (!head.bias)
      return std::nullopt;
  }
  auto matmul = v.getDefiningOp<MatmulOp>();
  if (!matmul || matmul.getTransposeLhs() || matmul.hasLayouts() ||
      shapeOf(matmul.getLhs()).size() != 2)
    return std::nullopt;
  head.chain.push_back(matmul);
  head.input = matmul.getLhs();
  head.weight = matmul.getRhs();
  head.weightTransposed = !matmul.getTransposeRhs();
  ArrayRef<int64_t> w = shapeOf(head.weight);
  if (w[head.weightTransposed ? 1 : 0] != vocabulary)
    return std::nullopt;
  return head;
}

Value LinearHead::weightRows(OpBuilder &b, Location loc) const {
  if (!weightTransposed)
    return weight;
  ArrayRef<int64_t> w = shapeOf(weight);
  return TransposeOp::create(
      b, loc, RankedTensorType::get({w[1], w[0]}, getElementTypeOrSelf(weight)),
      weight, ArrayRef<int64_t>{1, 0});
}
