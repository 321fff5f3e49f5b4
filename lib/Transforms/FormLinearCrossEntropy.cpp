//===- FormLinearCrossEntropy.cpp - a language model's head and its loss --===//
//
// A language model's last linear layer feeds cross-entropy over a large
// vocabulary: as separate ops, the [N, V] logits, their probabilities and
// their gradient are each a value, and at V = 50k they are most of the
// step's memory. As one gpuc.linear_cross_entropy, the gradient op computes
// the loss too, and gpuc-decompose runs head, loss and gradients over row
// chunks, so the logits of one chunk at a time exist.
//
//===----------------------------------------------------------------------===//
#include "gpuc/Dialect/Gpuc/GpucOps.h"
#include "gpuc/Dialect/Gpuc/Signature.h"
#include "gpuc/Dialect/Gpuc/TensorBuilder.h"
#include "gpuc/Transforms/LinearHead.h"
#include "gpuc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::gpuc {
#define GEN_PASS_DEF_GPUCFORMLINEARCROSSENTROPY
#include "gpuc/Transforms/Passes.h.inc"
} // namespace mlir::gpuc

using namespace mlir;
using namespace mlir::gpuc;

namespace {
constexpr auto shapeOf = TensorBuilder::shapeOf;

struct FormLinearCrossEntropy
    : gpuc::impl::GpucFormLinearCrossEntropyBase<FormLinearCrossEntropy> {
  void runOnOperation() override {
    auto forward = getOperation().lookupSymbol<func::FuncOp>("forward");
    if (!forward)
      return;
    SmallVector<CrossEntropyOp> losses;
    forward.walk([&](CrossEntropyOp op) { losses.push_back(op); });
    for (CrossEntropyOp loss : losses)
      form(forward, loss);
  }

  void form(func::FuncOp forward, CrossEntropyOp loss) {
    Value logits = loss.getInput();
    if (shapeOf(logits).size() != 2 || loss.getReduction() == Reduction::none)
      return;
    std::optional<LinearHead> head = matchLinearHead(logits);
    // A head that widens the rows (a vocabulary wider than the model)
    // makes the logits the widest value of the step; a classifier's few
    // classes are not worth the op.
    if (!head || shapeOf(logits)[1] <= shapeOf(head->input)[1])
      return;
    // Every value of the chain is read by the chain, the loss, or the
    // function's return (the logits as an output, which the step then
    // no longer returns); anything else needs the logits themselves.
    Operation *ret = forward.getBody().front().getTerminator();
    DenseSet<Operation *> inChain(head->chain.begin(), head->chain.end());
    SmallVector<unsigned> returned;
    // The chain's values, and reshapes of them only returned (the logits
    // output in the model's own shape).
    SmallVector<Operation *> worklist(head->chain);
    SmallVector<Operation *> dead(head->chain);
    while (!worklist.empty()) {
      Operation *op = worklist.pop_back_val();
      for (OpOperand &use : op->getResult(0).getUses()) {
        Operation *user = use.getOwner();
        if (user == ret) {
          returned.push_back(use.getOperandNumber());
        } else if (isa<ReshapeOp>(user) && !inChain.contains(user)) {
          inChain.insert(user);
          worklist.push_back(user);
          dead.insert(dead.begin(), user);
        } else if (!inChain.contains(user) && user != loss) {
          return;
        }
      }
    }
    OpBuilder b(loss);
    Value weight = head->weightRows(b, loss.getLoc());
    Value fused = LinearCrossEntropyOp::create(
        b, loss.getLoc(), loss.getType(), head->input, weight, loss.getLabels(),
        head->bias, loss.getReductionAttr(), loss.getIgnoreIndexAttr());
    loss.replaceAllUsesWith(fused);
    loss.erase();
    llvm::sort(returned);
    returned.erase(llvm::unique(returned), returned.end());
    eraseResults(forward, returned);
    // Readers first: each op is erased once nothing reads it.
    for (bool erased = true; erased;) {
      erased = false;
      for (Operation *&op : dead)
        if (op && op->use_empty()) {
          op->erase();
          op = nullptr;
          erased = true;
        }
    }
  }
};
} // namespace
