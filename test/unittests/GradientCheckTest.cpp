//===- GradientCheckTest.cpp - every gradient rule against finite differences//
//
// Each test is a tiny @forward whose output `y` is projected to a scalar loss
// with fixed random weights (so every element of y matters differently).
// gpuc-autodiff builds the gradients; the interpreter, in exact (double)
// mode, evaluates them and central finite differences of the loss.
//
//===----------------------------------------------------------------------===//
#include "gpuc/Dialect/Gpuc/GpucOps.h"
#include "gpuc/Dialect/Gpuc/Signature.h"
#include "gpuc/Dialect/Gpuc/TensorBuilder.h"
#include "gpuc/InitAll.h"
#include "gpuc/Interpreter/Interpreter.h"
#include "gpuc/Transforms/Passes.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace mlir;
using namespace mlir::gpuc;

namespace {

class GradientCheck : public ::testing::Test {
protected:
  GradientCheck() {
    DialectRegistry registry;
    registerAllDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
  }

  /// Parses `source`, projects the output `y` of @forward to a loss, and
  /// compares autodiff gradients with finite differences for every trainable
  /// parameter. Integer arguments are filled with (7 i + 3) mod `indexBound`.
  void check(StringRef source, int64_t indexBound = 1,
             double tolerance = 1e-6) {
    OwningOpRef<ModuleOp> module =
        parseSourceString<ModuleOp>(source, &context);
    ASSERT_TRUE(module);
    auto forward = module->lookupSymbol<func::FuncOp>("forward");
    ASSERT_TRUE(forward);
    addProjectedLoss(forward);

    PassManager pm(&context);
    pm.addPass(createGpucAutodiff());
    ASSERT_TRUE(succeeded(pm.run(*module)));
    auto step = module->lookupSymbol<func::FuncOp>("train_step");
    ASSERT_TRUE(step);

    std::mt19937 rng(42);
    std::normal_distribution<double> normal(0.0, 1.0);
    std::vector<HostTensor> args;
    for (BlockArgument arg : forward.getArguments()) {
      auto type = cast<RankedTensorType>(arg.getType());
      HostTensor t(type.getShape(), type.getElementType());
      for (int64_t i = 0; i < t.numElements(); ++i)
        t.data[i] = isa<FloatType>(type.getElementType())
                        ? normal(rng)
                        : (double)((7 * i + 3) % indexBound);
      if (forward.getArgAttr(arg.getArgNumber(), GpucDialect::kRngAttrName))
        t.data = {5.0, 1.0};
      args.push_back(std::move(t));
    }
    InterpreterOptions exact;
    exact.roundToElementType = false;
    FailureOr<std::vector<HostTensor>> results = interpret(step, args, exact);
    ASSERT_TRUE(succeeded(results));
    unsigned lossIndex = *findResult(step, GpucDialect::kOutputAttrName,
                                     StringAttr::get(&context, "loss"));
    auto lossAt = [&](const std::vector<HostTensor> &a) {
      FailureOr<std::vector<HostTensor>> r = interpret(forward, a, exact);
      EXPECT_TRUE(succeeded(r));
      return succeeded(r) ? (*r)[lossIndex].data[0] : 0.0;
    };
    int checkedParams = 0;
    for (unsigned res = 0; res < step.getNumResults(); ++res) {
      auto ref = step.getResultAttrOfType<FlatSymbolRefAttr>(
          res, GpucDialect::kGradAttrName);
      if (!ref)
        continue;
      unsigned argIndex =
          *findArgument(forward, GpucDialect::kParamAttrName, ref);
      const HostTensor &grad = (*results)[res];
      for (int64_t i = 0; i < grad.numElements(); ++i) {
        const double h = 1e-5;
        std::vector<HostTensor> plus = args, minus = args;
        plus[argIndex].data[i] += h;
        minus[argIndex].data[i] -= h;
        double fd = (lossAt(plus) - lossAt(minus)) / (2 * h);
        EXPECT_NEAR(grad.data[i], fd, tolerance * std::max(1.0, std::fabs(fd)))
            << "d loss / d " << ref.getValue().str() << "[" << i << "]";
      }
      ++checkedParams;
    }
    EXPECT_GT(checkedParams, 0);
  }

  /// loss = sum(y * w) with w fixed and random, as output "loss".
  void addProjectedLoss(func::FuncOp func) {
    unsigned yIndex = *findResult(func, GpucDialect::kOutputAttrName,
                                  StringAttr::get(&context, "y"));
    Operation *ret = func.getBody().front().getTerminator();
    OpBuilder builder(ret);
    Location loc = func.getLoc();
    Value y = ret->getOperand(yIndex);
    auto type = cast<RankedTensorType>(y.getType());
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    SmallVector<float> weights(type.getNumElements());
    for (float &w : weights)
      w = uniform(rng);
    Value w = ConstantOp::create(
        builder, loc, DenseElementsAttr::get(type, ArrayRef<float>(weights)));
    Value prod = MulOp::create(builder, loc, type, y, w);
    SmallVector<int64_t> axes;
    for (int64_t i = 0; i < type.getRank(); ++i)
      axes.push_back(i);
    Value loss = type.getRank() == 0
                     ? prod
                     : ReduceSumOp::create(
                           builder, loc,
                           RankedTensorType::get({}, type.getElementType()),
                           prod, axes, false)
                           .getResult();
    appendResults(func, {loss},
                  {builder.getNamedAttr(GpucDialect::kOutputAttrName,
                                        builder.getStringAttr("loss"))});
  }

  MLIRContext context;
};

TEST_F(GradientCheck, Unary) {
  check(R"mlir(
gpuc.parameter @a trainable : tensor<2x3xf32> = dense<0.0> : tensor<2x3xf32>
func.func @forward(%a: tensor<2x3xf32> {gpuc.param = @a}) -> (tensor<2x3xf32> {gpuc.output = "y"}) {
  %0 = gpuc.neg %a : tensor<2x3xf32>
  %1 = gpuc.abs %a : tensor<2x3xf32>
  %2 = gpuc.tanh %a : tensor<2x3xf32>
  %3 = gpuc.erf %a : tensor<2x3xf32>
  %4 = gpuc.sigmoid %a : tensor<2x3xf32>
  %5 = gpuc.relu %a : tensor<2x3xf32>
  %6 = gpuc.gelu %a : tensor<2x3xf32>
  %7 = gpuc.gelu %a tanh : tensor<2x3xf32>
  %e = gpuc.exp %a : tensor<2x3xf32>
  %8 = gpuc.log %e : tensor<2x3xf32>
  %9 = gpuc.sqrt %e : tensor<2x3xf32>
  %10 = gpuc.rsqrt %e : tensor<2x3xf32>
  %11 = gpuc.reciprocal %e : tensor<2x3xf32>
  %12 = gpuc.cos %a : tensor<2x3xf32>
  %13 = gpuc.sin %a : tensor<2x3xf32>
  %s0 = gpuc.add %0, %1 : tensor<2x3xf32>
  %s1 = gpuc.add %s0, %2 : tensor<2x3xf32>
  %s2 = gpuc.add %s1, %3 : tensor<2x3xf32>
  %s3 = gpuc.add %s2, %4 : tensor<2x3xf32>
  %s4 = gpuc.add %s3, %5 : tensor<2x3xf32>
  %s5 = gpuc.add %s4, %6 : tensor<2x3xf32>
  %s6 = gpuc.add %s5, %7 : tensor<2x3xf32>
  %s7 = gpuc.add %s6, %8 : tensor<2x3xf32>
  %s8 = gpuc.add %s7, %9 : tensor<2x3xf32>
  %s9 = gpuc.add %s8, %10 : tensor<2x3xf32>
  %s10 = gpuc.add %s9, %12 : tensor<2x3xf32>
  %s11 = gpuc.mul %s10, %13 : tensor<2x3xf32>
  %y = gpuc.mul %s11, %11 : tensor<2x3xf32>
  return %y : tensor<2x3xf32>
})mlir");
}

TEST_F(GradientCheck, BinaryWithBroadcasting) {
  check(R"mlir(
gpuc.parameter @a trainable : tensor<2x3xf32> = dense<0.0> : tensor<2x3xf32>
gpuc.parameter @b trainable : tensor<3xf32> = dense<0.0> : tensor<3xf32>
gpuc.parameter @c trainable : tensor<2x1xf32> = dense<0.0> : tensor<2x1xf32>
func.func @forward(%a: tensor<2x3xf32> {gpuc.param = @a}, %b: tensor<3xf32> {gpuc.param = @b}, %c: tensor<2x1xf32> {gpuc.param = @c}) -> (tensor<2x3xf32> {gpuc.output = "y"}) {
  %bb = gpuc.broadcast %b : tensor<3xf32> -> tensor<2x3xf32>
  %cb = gpuc.broadcast %c : tensor<2x1xf32> -> tensor<2x3xf32>
  %0 = gpuc.add %a, %bb : tensor<2x3xf32>
  %1 = gpuc.sub %0, %cb : tensor<2x3xf32>
  %2 = gpuc.mul %1, %bb : tensor<2x3xf32>
  %e = gpuc.exp %cb : tensor<2x3xf32>
  %3 = gpuc.div %2, %e : tensor<2x3xf32>
  %ea = gpuc.exp %a : tensor<2x3xf32>
  %4 = gpuc.pow %ea, %bb : tensor<2x3xf32>
  %5 = gpuc.max %3, %a : tensor<2x3xf32>
  %6 = gpuc.min %4, %cb : tensor<2x3xf32>
  %y = gpuc.add %5, %6 : tensor<2x3xf32>
  return %y : tensor<2x3xf32>
})mlir");
}

TEST_F(GradientCheck, SelectAndReductions) {
  check(R"mlir(
gpuc.parameter @a trainable : tensor<2x3x4xf32> = dense<0.0> : tensor<2x3x4xf32>
func.func @forward(%a: tensor<2x3x4xf32> {gpuc.param = @a}) -> (tensor<2x4xf32> {gpuc.output = "y"}) {
  %z = gpuc.constant dense<0.0> : tensor<2x3x4xf32>
  %p = gpuc.compare gt, %a, %z : tensor<2x3x4xf32>
  %sq = gpuc.mul %a, %a : tensor<2x3x4xf32>
  %s = gpuc.select %p, %sq, %a : tensor<2x3x4xi1>, tensor<2x3x4xf32>
  %0 = gpuc.reduce_sum %s axes = [1] : tensor<2x3x4xf32> -> tensor<2x4xf32>
  %1 = gpuc.reduce_mean %a axes = [1] keep_dims : tensor<2x3x4xf32> -> tensor<2x1x4xf32>
  %r1 = gpuc.reshape %1 : tensor<2x1x4xf32> -> tensor<2x4xf32>
  %2 = gpuc.reduce_max %a axes = [1] : tensor<2x3x4xf32> -> tensor<2x4xf32>
  %3 = gpuc.add %0, %r1 : tensor<2x4xf32>
  %y = gpuc.mul %3, %2 : tensor<2x4xf32>
  return %y : tensor<2x4xf32>
})mlir");
}

TEST_F(GradientCheck, DataMovement) {
  check(R"mlir(
gpuc.parameter @a trainable : tensor<2x3x4xf32> = dense<0.0> : tensor<2x3x4xf32>
gpuc.parameter @b trainable : tensor<2x2x4xf32> = dense<0.0> : tensor<2x2x4xf32>
func.func @forward(%a: tensor<2x3x4xf32> {gpuc.param = @a}, %b: tensor<2x2x4xf32> {gpuc.param = @b}) -> (tensor<4x5x2xf32> {gpuc.output = "y"}) {
  %c = gpuc.concat %a, %b axis = 1 : (tensor<2x3x4xf32>, tensor<2x2x4xf32>) -> tensor<2x5x4xf32>
  %t = gpuc.transpose %c perm = [2, 1, 0] : tensor<2x5x4xf32> -> tensor<4x5x2xf32>
  %s = gpuc.slice %t starts = [1, 0, 0] limits = [3, 5, 2] strides = [1, 1, 1] : tensor<4x5x2xf32> -> tensor<2x5x2xf32>
  %p = gpuc.pad %s low = [1, 0, 0] high = [1, 0, 0] value = 0.0 : tensor<2x5x2xf32> -> tensor<4x5x2xf32>
  %r = gpuc.reshape %t : tensor<4x5x2xf32> -> tensor<20x2xf32>
  %rr = gpuc.reshape %r : tensor<20x2xf32> -> tensor<4x5x2xf32>
  %y = gpuc.mul %p, %rr : tensor<4x5x2xf32>
  return %y : tensor<4x5x2xf32>
})mlir");
}

TEST_F(GradientCheck, GatherAndScatterAdd) {
  check(R"mlir(
gpuc.parameter @e trainable : tensor<5x3xf32> = dense<0.0> : tensor<5x3xf32>
gpuc.parameter @u trainable : tensor<2x4x3xf32> = dense<0.0> : tensor<2x4x3xf32>
func.func @forward(%e: tensor<5x3xf32> {gpuc.param = @e}, %u: tensor<2x4x3xf32> {gpuc.param = @u}, %ids: tensor<2x4xi64> {gpuc.input = "ids"}) -> (tensor<2x4x3xf32> {gpuc.output = "y"}) {
  %g = gpuc.gather %e[%ids] axis = 0 : (tensor<5x3xf32>, tensor<2x4xi64>) -> tensor<2x4x3xf32>
  %s = gpuc.scatter_add %u, %ids axis = 0 : (tensor<2x4x3xf32>, tensor<2x4xi64>) -> tensor<5x3xf32>
  %sg = gpuc.gather %s[%ids] axis = 0 : (tensor<5x3xf32>, tensor<2x4xi64>) -> tensor<2x4x3xf32>
  %y = gpuc.mul %g, %sg : tensor<2x4x3xf32>
  return %y : tensor<2x4x3xf32>
})mlir",
        /*indexBound=*/5);
}

TEST_F(GradientCheck, MatmulAllTransposes) {
  check(R"mlir(
gpuc.parameter @a trainable : tensor<2x3x4xf32> = dense<0.0> : tensor<2x3x4xf32>
gpuc.parameter @b trainable : tensor<2x4x5xf32> = dense<0.0> : tensor<2x4x5xf32>
gpuc.parameter @c trainable : tensor<2x5x4xf32> = dense<0.0> : tensor<2x5x4xf32>
gpuc.parameter @d trainable : tensor<2x4x3xf32> = dense<0.0> : tensor<2x4x3xf32>
func.func @forward(%a: tensor<2x3x4xf32> {gpuc.param = @a}, %b: tensor<2x4x5xf32> {gpuc.param = @b}, %c: tensor<2x5x4xf32> {gpuc.param = @c}, %d: tensor<2x4x3xf32> {gpuc.param = @d}) -> (tensor<2x3x5xf32> {gpuc.output = "y"}) {
  %0 = gpuc.matmul %a, %b : (tensor<2x3x4xf32>, tensor<2x4x5xf32>) -> tensor<2x3x5xf32>
  %1 = gpuc.matmul %a, %c transpose_rhs : (tensor<2x3x4xf32>, tensor<2x5x4xf32>) -> tensor<2x3x5xf32>
  %2 = gpuc.matmul %d, %b transpose_lhs : (tensor<2x4x3xf32>, tensor<2x4x5xf32>) -> tensor<2x3x5xf32>
  %3 = gpuc.matmul %d, %c transpose_lhs transpose_rhs : (tensor<2x4x3xf32>, tensor<2x5x4xf32>) -> tensor<2x3x5xf32>
  %4 = gpuc.add %0, %1 : tensor<2x3x5xf32>
  %5 = gpuc.mul %2, %3 : tensor<2x3x5xf32>
  %y = gpuc.add %4, %5 : tensor<2x3x5xf32>
  return %y : tensor<2x3x5xf32>
})mlir");
}

TEST_F(GradientCheck, Conv2DStridedGroupedDilated) {
  check(R"mlir(
gpuc.parameter @x trainable : tensor<2x4x7x6xf32> = dense<0.0> : tensor<2x4x7x6xf32>
gpuc.parameter @w trainable : tensor<6x2x3x2xf32> = dense<0.0> : tensor<6x2x3x2xf32>
func.func @forward(%x: tensor<2x4x7x6xf32> {gpuc.param = @x}, %w: tensor<6x2x3x2xf32> {gpuc.param = @w}) -> (tensor<2x6x3x4xf32> {gpuc.output = "y"}) {
  %y = gpuc.conv2d %x, %w strides = [2, 2] pads = [1, 1, 0, 2] dilations = [1, 2] groups = 2 : (tensor<2x4x7x6xf32>, tensor<6x2x3x2xf32>) -> tensor<2x6x3x4xf32>
  return %y : tensor<2x6x3x4xf32>
})mlir");
}

TEST_F(GradientCheck, Pooling) {
  check(R"mlir(
gpuc.parameter @x trainable : tensor<2x2x5x5xf32> = dense<0.0> : tensor<2x2x5x5xf32>
func.func @forward(%x: tensor<2x2x5x5xf32> {gpuc.param = @x}) -> (tensor<2x2x3x3xf32> {gpuc.output = "y"}) {
  %0 = gpuc.max_pool2d %x kernel = [3, 3] strides = [2, 2] pads = [1, 1, 1, 1] : tensor<2x2x5x5xf32> -> tensor<2x2x3x3xf32>
  %1 = gpuc.avg_pool2d %x kernel = [3, 3] strides = [2, 2] pads = [1, 1, 1, 1] : tensor<2x2x5x5xf32> -> tensor<2x2x3x3xf32>
  %2 = gpuc.avg_pool2d %x kernel = [3, 3] strides = [2, 2] pads = [1, 1, 1, 1] count_include_pad : tensor<2x2x5x5xf32> -> tensor<2x2x3x3xf32>
  %3 = gpuc.add %0, %1 : tensor<2x2x3x3xf32>
  %y = gpuc.mul %3, %2 : tensor<2x2x3x3xf32>
  return %y : tensor<2x2x3x3xf32>
})mlir");
}

TEST_F(GradientCheck, SoftmaxAndLogSoftmax) {
  check(R"mlir(
gpuc.parameter @a trainable : tensor<2x4x3xf32> = dense<0.0> : tensor<2x4x3xf32>
func.func @forward(%a: tensor<2x4x3xf32> {gpuc.param = @a}) -> (tensor<2x4x3xf32> {gpuc.output = "y"}) {
  %0 = gpuc.softmax %a axis = 1 : tensor<2x4x3xf32>
  %1 = gpuc.log_softmax %a axis = 2 : tensor<2x4x3xf32>
  %y = gpuc.add %0, %1 : tensor<2x4x3xf32>
  return %y : tensor<2x4x3xf32>
})mlir");
}

TEST_F(GradientCheck, LayerNormAndBatchNorm) {
  check(R"mlir(
gpuc.parameter @x trainable : tensor<3x2x4xf32> = dense<0.0> : tensor<3x2x4xf32>
gpuc.parameter @g trainable : tensor<2x4xf32> = dense<0.0> : tensor<2x4xf32>
gpuc.parameter @b trainable : tensor<2x4xf32> = dense<0.0> : tensor<2x4xf32>
gpuc.parameter @s trainable : tensor<2xf32> = dense<0.0> : tensor<2xf32>
gpuc.parameter @t trainable : tensor<2xf32> = dense<0.0> : tensor<2xf32>
gpuc.parameter @rm : tensor<2xf32> = dense<0.0> : tensor<2xf32>
func.func @forward(%x: tensor<3x2x4xf32> {gpuc.param = @x}, %g: tensor<2x4xf32> {gpuc.param = @g}, %b: tensor<2x4xf32> {gpuc.param = @b}, %s: tensor<2xf32> {gpuc.param = @s}, %t: tensor<2xf32> {gpuc.param = @t}, %rm: tensor<2xf32> {gpuc.param = @rm}) -> (tensor<3x2x4xf32> {gpuc.output = "y"}) {
  %0 = gpuc.layer_norm %x, %g, %b axis = 1 epsilon = 1.0e-5 : tensor<3x2x4xf32>, tensor<2x4xf32>
  %1, %m, %v = gpuc.batch_norm_train %x, %s, %t, %rm, %rm epsilon = 1.0e-5 momentum = 0.9 : tensor<3x2x4xf32>, tensor<2xf32>
  %y = gpuc.mul %0, %1 : tensor<3x2x4xf32>
  return %y : tensor<3x2x4xf32>
})mlir");
}

TEST_F(GradientCheck, ClassLosses) {
  check(R"mlir(
gpuc.parameter @a trainable : tensor<4x5x2xf32> = dense<0.0> : tensor<4x5x2xf32>
func.func @forward(%a: tensor<4x5x2xf32> {gpuc.param = @a}, %l: tensor<4x2xi64> {gpuc.input = "l"}) -> (tensor<3xf32> {gpuc.output = "y"}) {
  %0 = gpuc.cross_entropy %a, %l reduction = mean ignore_index = 3 : (tensor<4x5x2xf32>, tensor<4x2xi64>) -> tensor<f32>
  %ls = gpuc.log_softmax %a axis = 1 : tensor<4x5x2xf32>
  %1 = gpuc.nll_loss %ls, %l reduction = sum : (tensor<4x5x2xf32>, tensor<4x2xi64>) -> tensor<f32>
  %n = gpuc.cross_entropy %a, %l reduction = none : (tensor<4x5x2xf32>, tensor<4x2xi64>) -> tensor<4x2xf32>
  %2 = gpuc.reduce_sum %n axes = [0, 1] : tensor<4x2xf32> -> tensor<f32>
  %r0 = gpuc.reshape %0 : tensor<f32> -> tensor<1xf32>
  %r1 = gpuc.reshape %1 : tensor<f32> -> tensor<1xf32>
  %r2 = gpuc.reshape %2 : tensor<f32> -> tensor<1xf32>
  %y = gpuc.concat %r0, %r1, %r2 axis = 0 : (tensor<1xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<3xf32>
  return %y : tensor<3xf32>
})mlir",
        /*indexBound=*/5);
}

// A language model's head and loss as one op: its gradient op (which also
// computes the loss) against finite differences of its forward; with a
// bias and ignored labels (mean over the rest), and without a bias (sum).
TEST_F(GradientCheck, LinearCrossEntropy) {
  check(R"mlir(
gpuc.parameter @x trainable : tensor<5x3xf32> = dense<0.0> : tensor<5x3xf32>
gpuc.parameter @w trainable : tensor<4x3xf32> = dense<0.0> : tensor<4x3xf32>
gpuc.parameter @b trainable : tensor<4xf32> = dense<0.0> : tensor<4xf32>
func.func @forward(%x: tensor<5x3xf32> {gpuc.param = @x}, %w: tensor<4x3xf32> {gpuc.param = @w}, %b: tensor<4xf32> {gpuc.param = @b}, %l: tensor<5xi64> {gpuc.input = "l"}) -> (tensor<2xf32> {gpuc.output = "y"}) {
  %0 = gpuc.linear_cross_entropy %x, %w, %l bias %b : tensor<4xf32> reduction = mean ignore_index = 3 : (tensor<5x3xf32>, tensor<4x3xf32>, tensor<5xi64>) -> tensor<f32>
  %1 = gpuc.linear_cross_entropy %x, %w, %l reduction = sum : (tensor<5x3xf32>, tensor<4x3xf32>, tensor<5xi64>) -> tensor<f32>
  %r0 = gpuc.reshape %0 : tensor<f32> -> tensor<1xf32>
  %r1 = gpuc.reshape %1 : tensor<f32> -> tensor<1xf32>
  %y = gpuc.concat %r0, %r1 axis = 0 : (tensor<1xf32>, tensor<1xf32>) -> tensor<2xf32>
  return %y : tensor<2xf32>
})mlir",
        /*indexBound=*/4);
}

TEST_F(GradientCheck, MseBothOperands) {
  check(R"mlir(
gpuc.parameter @a trainable : tensor<3x4xf32> = dense<0.0> : tensor<3x4xf32>
gpuc.parameter @b trainable : tensor<3x4xf32> = dense<0.0> : tensor<3x4xf32>
func.func @forward(%a: tensor<3x4xf32> {gpuc.param = @a}, %b: tensor<3x4xf32> {gpuc.param = @b}) -> (tensor<2xf32> {gpuc.output = "y"}) {
  %0 = gpuc.mse_loss %a, %b reduction = mean : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<f32>
  %1 = gpuc.mse_loss %a, %b reduction = sum : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<f32>
  %r0 = gpuc.reshape %0 : tensor<f32> -> tensor<1xf32>
  %r1 = gpuc.reshape %1 : tensor<f32> -> tensor<1xf32>
  %y = gpuc.concat %r0, %r1 axis = 0 : (tensor<1xf32>, tensor<1xf32>) -> tensor<2xf32>
  return %y : tensor<2xf32>
})mlir");
}

TEST_F(GradientCheck, DropoutReusesTheMask) {
  check(R"mlir(
gpuc.parameter @a trainable : tensor<4x8xf32> = dense<0.0> : tensor<4x8xf32>
func.func @forward(%a: tensor<4x8xf32> {gpuc.param = @a}, %key: tensor<2xi64> {gpuc.rng}) -> (tensor<4x8xf32> {gpuc.output = "y"}) {
  %d = gpuc.dropout %a, %key stream = 2 ratio = 0.5 : tensor<4x8xf32>
  %y = gpuc.mul %d, %a : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
})mlir");
}

// The attention's own rule (gpuc.attention_grad, the weights recomputed
// from the logsumexp) against finite differences of its forward: keys
// unlike queries in number, values wider than keys, an excluding mask with
// -inf and a keeping one with a finite fill, dropout on the weights.
TEST_F(GradientCheck, AttentionMasksAndDropout) {
  check(R"mlir(
gpuc.parameter @q trainable : tensor<2x2x3x4xf32> = dense<0.0> : tensor<2x2x3x4xf32>
gpuc.parameter @k trainable : tensor<2x2x5x4xf32> = dense<0.0> : tensor<2x2x5x4xf32>
gpuc.parameter @v trainable : tensor<2x2x5x6xf32> = dense<0.0> : tensor<2x2x5x6xf32>
func.func @forward(%q: tensor<2x2x3x4xf32> {gpuc.param = @q}, %k: tensor<2x2x5x4xf32> {gpuc.param = @k}, %v: tensor<2x2x5x6xf32> {gpuc.param = @v}, %key: tensor<2xi64> {gpuc.rng}) -> (tensor<2x2x3x6xf32> {gpuc.output = "y"}) {
  %excluded = gpuc.constant dense<[[[[false, false, true, true, true], [false, false, false, true, true], [false, false, false, false, true]]]]> : tensor<1x1x3x5xi1>
  %keeps = gpuc.constant dense<[[[[true, false, true, true, false]]], [[[true, true, true, false, true]]]]> : tensor<2x1x1x5xi1>
  %o, %l = gpuc.attention %q, %k, %v mask %excluded : tensor<1x1x3x5xi1> key %key scale = 5.000000e-01 fill = 0xFFF0000000000000 {dropout = 2.500000e-01 : f64, stream = 1 : i64} : tensor<2x2x3x4xf32>, tensor<2x2x5x4xf32>, tensor<2x2x5x6xf32> -> tensor<2x2x3x6xf32>, tensor<2x2x3xf32>
  %o2, %l2 = gpuc.attention %q, %k, %v mask %keeps : tensor<2x1x1x5xi1> scale = 7.000000e-01 fill = -3.000000e+00 {mask_keeps} : tensor<2x2x3x4xf32>, tensor<2x2x5x4xf32>, tensor<2x2x5x6xf32> -> tensor<2x2x3x6xf32>, tensor<2x2x3xf32>
  %y = gpuc.add %o, %o2 : tensor<2x2x3x6xf32>
  return %y : tensor<2x2x3x6xf32>
})mlir");
}

} // namespace
