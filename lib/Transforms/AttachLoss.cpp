//===- AttachLoss.cpp - add a loss on a named output of @forward ----------===//
#include "gpuc/Dialect/Gpuc/GpucOps.h"
#include "gpuc/Dialect/Gpuc/Signature.h"
#include "gpuc/Dialect/Gpuc/TensorBuilder.h"
#include "gpuc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#define DEBUG_TYPE "gpuc-attach-loss"

namespace mlir::gpuc {
#define GEN_PASS_DEF_GPUCATTACHLOSS
#include "gpuc/Transforms/Passes.h.inc"
} // namespace mlir::gpuc

using namespace mlir;
using namespace mlir::gpuc;

namespace {
struct AttachLoss : gpuc::impl::GpucAttachLossBase<AttachLoss> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto func = module.lookupSymbol<func::FuncOp>("forward");
    if (!func) {
      module.emitError() << "gpuc-attach-loss: the module has no @forward";
      return signalPassFailure();
    }
    MLIRContext *ctx = &getContext();
    auto named = [&](StringRef s) { return StringAttr::get(ctx, s); };
    if (findResult(func, GpucDialect::kOutputAttrName, named("loss"))) {
      func.emitError() << "the model already returns an output named 'loss'; "
                          "train it without --loss";
      return signalPassFailure();
    }
    if (target.empty()) {
      func.emitError() << "no --target given: name the output the loss is "
                          "computed on (outputs: "
                       << outputNames(func) << ")";
      return signalPassFailure();
    }
    std::optional<unsigned> index =
        findResult(func, GpucDialect::kOutputAttrName, named(target));
    if (!index) {
      func.emitError() << "the model has no output named '" << target
                       << "' (outputs: " << outputNames(func) << ")";
      return signalPassFailure();
    }
    if (findArgument(func, GpucDialect::kInputAttrName, named(labels))) {
      func.emitError() << "the model already has an input named '" << labels
                       << "'; choose another name for the labels";
      return signalPassFailure();
    }
    Value output = func.getBody().front().getTerminator()->getOperand(*index);
    auto type = cast<RankedTensorType>(output.getType());
    OpBuilder builder(func.getBody().front().getTerminator());
    Location loc = NameLoc::get(named("loss"), func.getLoc());
    Value lossValue;
    if (loss == "cross_entropy") {
      if (type.getRank() < 2) {
        func.emitError() << "cross_entropy needs an output of rank >= 2 "
                            "(batch x classes), but '"
                         << target << "' is " << type;
        return signalPassFailure();
      }
      int64_t rank = type.getRank();
      int64_t axis = classAxis == 0  ? inferClassAxis(func, type)
                     : classAxis < 0 ? classAxis + rank
                                     : classAxis;
      if (axis < 1 || axis >= rank) {
        func.emitError() << "class axis " << classAxis << " of '" << target
                         << "' (" << type << ") must be a non-batch axis (1.."
                         << rank - 1 << " or negative)";
        return signalPassFailure();
      }
      SmallVector<int64_t> labelShape(type.getShape());
      labelShape.erase(labelShape.begin() + axis);
      Value labelArg = appendArgument(
          func, RankedTensorType::get(labelShape, builder.getI64Type()),
          builder.getNamedAttr(GpucDialect::kInputAttrName, named(labels)),
          loc);
      Value labelValue = labelArg;
      if (axis == rank - 1 && rank > 2) {
        // Classes last (a language model's [batch, T, vocabulary]): rows of
        // [batch * T, vocabulary], a view of the same buffer, so the loss
        // and its gradient read contiguous rows. The mean over all rows is
        // the mean over [batch, T].
        int64_t rows = getNumElements(labelShape);
        TensorBuilder T(builder);
        output = T.reshape(loc, output, {rows, type.getDimSize(axis)});
        labelValue = T.reshape(loc, labelArg, {rows});
      } else if (axis != 1) {
        // Move the classes to axis 1, where cross_entropy expects them.
        SmallVector<int64_t> perm = {0, axis};
        for (int64_t i = 1; i < rank; ++i)
          if (i != axis)
            perm.push_back(i);
        SmallVector<int64_t> shape;
        for (int64_t p : perm)
          shape.push_back(type.getDimSize(p));
        output = TransposeOp::create(
            builder, loc, RankedTensorType::get(shape, type.getElementType()),
            output, perm);
      }
      lossValue = CrossEntropyOp::create(
          builder, loc, RankedTensorType::get({}, type.getElementType()),
          output, labelValue, Reduction::mean, IntegerAttr());
    } else if (loss == "mse") {
      Value targetArg = appendArgument(
          func, type,
          builder.getNamedAttr(GpucDialect::kInputAttrName, named(labels)),
          loc);
      lossValue = MseLossOp::create(
          builder, loc, RankedTensorType::get({}, type.getElementType()),
          output, targetArg, Reduction::mean);
    } else {
      func.emitError() << "unknown loss '" << loss
                       << "'; the losses are cross_entropy and mse";
      return signalPassFailure();
    }
    appendResults(
        func, {lossValue},
        {builder.getNamedAttr(GpucDialect::kOutputAttrName, named("loss"))});
  }

  /// The class axis when none is given: the last one when an integer input
  /// has the output's shape without it (a language model's tokens [B, T]
  /// and logits [B, T, V]: one distribution per token), else 1 (ONNX's and
  /// PyTorch's [N, C, d...]).
  static int64_t inferClassAxis(func::FuncOp func, RankedTensorType output) {
    int64_t rank = output.getRank();
    if (rank < 3)
      return 1;
    ArrayRef<int64_t> perToken = output.getShape().drop_back();
    for (Type input : func.getArgumentTypes()) {
      auto tensor = dyn_cast<RankedTensorType>(input);
      if (tensor && isa<IntegerType>(tensor.getElementType()) &&
          tensor.getShape() == perToken)
        return rank - 1;
    }
    return 1;
  }

  static std::string outputNames(func::FuncOp func) {
    std::string names;
    for (unsigned i = 0; i < func.getNumResults(); ++i)
      if (auto s = func.getResultAttrOfType<StringAttr>(
              i, GpucDialect::kOutputAttrName))
        names += (names.empty() ? "" : ", ") + s.str();
    return names.empty() ? "none" : names;
  }
};
} // namespace
