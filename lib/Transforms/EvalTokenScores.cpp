//===- EvalTokenScores.cpp - a language model's @eval scores its tokens ---===//
//
// A language model's held-out loss and accuracy need each token's loss and
// whether its largest logit is the label's, not the logits themselves. As
// @eval's output, the [B, T, V] logits are the largest value of the whole
// program (GPT-2 at batch 240: 49 GB in f32, more than the training step
// keeps), and the trainer copies them to the host to score them. Scored
// inside @eval by one gpuc.linear_token_scores, which gpuc-decompose runs
// over row chunks, only two scalars are left.
//
//===----------------------------------------------------------------------===//
#include "gpuc/Dialect/Gpuc/ExprBuilder.h"
#include "gpuc/Dialect/Gpuc/GpucOps.h"
#include "gpuc/Dialect/Gpuc/Signature.h"
#include "gpuc/Dialect/Gpuc/TensorBuilder.h"
#include "gpuc/Transforms/LinearHead.h"
#include "gpuc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::gpuc {
#define GEN_PASS_DEF_GPUCEVALTOKENSCORES
#include "gpuc/Transforms/Passes.h.inc"
} // namespace mlir::gpuc

using namespace mlir;
using namespace mlir::gpuc;

namespace {
constexpr auto shapeOf = TensorBuilder::shapeOf;

struct EvalTokenScores : gpuc::impl::GpucEvalTokenScoresBase<EvalTokenScores> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto eval = module.lookupSymbol<func::FuncOp>("eval");
    if (!eval) {
      module.emitError() << "gpuc-eval-token-scores: the module has no @eval";
      return signalPassFailure();
    }
    MLIRContext *context = &getContext();
    std::optional<unsigned> index = findResult(
        eval, GpucDialect::kOutputAttrName, StringAttr::get(context, output));
    if (!index) {
      eval.emitError() << "gpuc-eval-token-scores: @eval has no output '"
                       << output << "'";
      return signalPassFailure();
    }
    auto ret = cast<func::ReturnOp>(eval.getBody().front().getTerminator());
    Value logits = ret.getOperand(*index);
    ArrayRef<int64_t> shape = shapeOf(logits);
    if (shape.size() < 2) {
      eval.emitError() << "gpuc-eval-token-scores: output '" << output << "' ("
                       << logits.getType()
                       << ") is not a class-last [..., classes] value";
      return signalPassFailure();
    }
    SmallVector<int64_t> labelShape(shape.drop_back());
    Type labelType = labelsType(module, labelShape);
    if (!labelType)
      return signalPassFailure();

    // Not a linear layer's logits: @eval returns them, for the host.
    std::optional<LinearHead> head = matchLinearHead(logits);
    if (!head)
      return;
    OpBuilder b(ret);
    Location loc = ret.getLoc();
    ExprBuilder B(b, loc);
    int64_t rows = 1;
    for (int64_t d : labelShape)
      rows *= d;
    Value labels = labelArgument(eval, labelType, loc);
    Value labelRows = B.reshape(loc, labels, {rows});
    Type element = getElementTypeOrSelf(logits.getType());
    auto statistic = RankedTensorType::get(
        {}, element.getIntOrFloatBitWidth() < 32 ? b.getF32Type() : element);
    // The trainer pads a short last batch with -1 labels.
    auto scores = LinearTokenScoresOp::create(
        b, loc, statistic, statistic, head->input, head->weightRows(b, loc),
        labelRows, head->bias, b.getI64IntegerAttr(-1));
    eraseResults(eval, {*index});
    appendResults(eval, {scores.getLossSum(), scores.getCorrect()},
                  {b.getNamedAttr(GpucDialect::kOutputAttrName,
                                  b.getStringAttr(output + ".loss_sum")),
                   b.getNamedAttr(GpucDialect::kOutputAttrName,
                                  b.getStringAttr(output + ".correct"))});
    // The logits' chain, unread now.
    eraseDeadOps(eval);
  }

  /// The labels' type: the training step's input `labels` (@forward's,
  /// when the loss is attached) if it has the logits' shape without their
  /// classes, else i64 of that shape; null after an error.
  Type labelsType(ModuleOp module, ArrayRef<int64_t> shape) {
    auto type =
        RankedTensorType::get(shape, IntegerType::get(&getContext(), 64));
    auto forward = module.lookupSymbol<func::FuncOp>("forward");
    if (!forward)
      return type;
    std::optional<unsigned> arg =
        findArgument(forward, GpucDialect::kInputAttrName,
                     StringAttr::get(&getContext(), labels));
    if (!arg)
      return type;
    Type given = forward.getArgument(*arg).getType();
    auto ranked = dyn_cast<RankedTensorType>(given);
    if (!ranked || ranked.getShape() != shape ||
        !isa<IntegerType>(ranked.getElementType())) {
      forward.emitError() << "gpuc-eval-token-scores: the labels '" << labels
                          << "' (" << given << ") are not integers shaped as "
                          << "the logits '" << output << "' without their "
                          << "classes (" << type << ")";
      return {};
    }
    return given;
  }

  /// @eval's argument `labels`, appended when it has none.
  Value labelArgument(func::FuncOp eval, Type type, Location loc) {
    StringAttr name = StringAttr::get(&getContext(), labels);
    if (std::optional<unsigned> arg =
            findArgument(eval, GpucDialect::kInputAttrName, name))
      return eval.getArgument(*arg);
    return appendArgument(
        eval, type,
        NamedAttribute(
            StringAttr::get(&getContext(), GpucDialect::kInputAttrName), name),
        loc);
  }
};
} // namespace
