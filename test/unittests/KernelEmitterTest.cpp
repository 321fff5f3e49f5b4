//===- KernelEmitterTest.cpp - kernels that write over their inputs -------===//
//
// A kernel whose result overwrites an operand (gpuc.in_place) must read that
// operand at an index before storing anything there, and only the aliasing
// pointers lose __restrict__.
//
//===----------------------------------------------------------------------===//
#include "gpuc/Codegen/KernelEmitter.h"
#include "gpuc/Dialect/Gpuc/GpucOps.h"
#include "gpuc/InitAll.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::gpuc;

namespace {

// Result #0 (a + b) overwrites operand #1 (%b), which result #1 (b * 2)
// still reads: unless %b is loaded before out0 is stored, result #1 would
// read the new value.
constexpr const char *kKernel = R"mlir(
func.func @f(%a: tensor<16xf32>, %b: tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>) {
  %r:2 = gpuc.fusion(%a, %b) {gpuc.in_place = array<i64: 1, -1>} : (tensor<16xf32>, tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>) {
  ^bb0(%x: tensor<16xf32>, %y: tensor<16xf32>):
    %s = gpuc.add %x, %x : tensor<16xf32>
    %t = gpuc.mul %y, %y : tensor<16xf32>
    gpuc.yield %s, %t : tensor<16xf32>, tensor<16xf32>
  }
  return %r#0, %r#1 : tensor<16xf32>, tensor<16xf32>
}
)mlir";

TEST(KernelEmitterTest, InPlaceOperandIsLoadedBeforeTheFirstStore) {
  DialectRegistry registry;
  registerAllDialects(registry);
  MLIRContext context(registry);
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(kKernel, &context);
  ASSERT_TRUE(module);
  FusionOp fusion;
  module->walk([&](FusionOp op) { fusion = op; });
  FailureOr<EmittedKernel> kernel = emitKernel(fusion, "k");
  ASSERT_TRUE(succeeded(kernel));
  const std::string &src = kernel->source;
  size_t load = src.find("in1[i]"), store = src.find("out0[i] =");
  ASSERT_NE(load, std::string::npos) << src;
  ASSERT_NE(store, std::string::npos) << src;
  EXPECT_LT(load, store) << src;
  // Exactly the aliasing pair drops __restrict__.
  EXPECT_NE(src.find("const float *__restrict__ in0"), std::string::npos)
      << src;
  EXPECT_NE(src.find("const float *in1"), std::string::npos) << src;
  EXPECT_NE(src.find("float *out0"), std::string::npos) << src;
  EXPECT_EQ(src.find("float *__restrict__ out0"), std::string::npos) << src;
  EXPECT_NE(src.find("float *__restrict__ out1"), std::string::npos) << src;
}

} // namespace
