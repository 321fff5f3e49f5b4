//===- TriangularMaskTest.cpp - masks recognised as index comparisons -----===//
//
// matchTriangularMask against the definition: a mask is `key p query` for
// the first p of gt, ge, lt, le whose mask it is element for element, and
// no triangle otherwise. Checked for every predicate, for masks one element
// away from a triangle, as i1 constants (read through DenseElementsAttr)
// and as frozen f32 buffers in resource blobs compared with a splat
// (nanoGPT's tril buffer, read where it is stored).
//
//===----------------------------------------------------------------------===//
#include "gpuc/Transforms/TriangularMask.h"
#include "gpuc/InitAll.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/FormatVariadic.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace mlir;
using namespace mlir::gpuc;

namespace {

constexpr ComparePredicate kOrder[] = {
    ComparePredicate::gt, ComparePredicate::ge, ComparePredicate::lt,
    ComparePredicate::le};

std::vector<bool> triangle(int64_t t, ComparePredicate p) {
  std::vector<bool> bits(t * t);
  for (int64_t q = 0; q < t; ++q)
    for (int64_t k = 0; k < t; ++k)
      bits[q * t + k] = holdsComparison<int64_t>(p, k, q);
  return bits;
}

/// What the match must say of `bits`: the first predicate of kOrder whose
/// triangle it is.
std::optional<ComparePredicate> expected(const std::vector<bool> &bits,
                                         int64_t t) {
  for (ComparePredicate p : kOrder)
    if (triangle(t, p) == bits)
      return p;
  return std::nullopt;
}

/// The masks to try at size t: each triangle, and each with one element
/// flipped in its first row, its last row, on and off its diagonal.
std::vector<std::vector<bool>> masks(int64_t t) {
  std::vector<std::vector<bool>> all;
  for (ComparePredicate p : kOrder) {
    std::vector<bool> bits = triangle(t, p);
    all.push_back(bits);
    for (int64_t at : {int64_t(0), t - 1, t * t - 1, t * t - t, (t / 2) * t,
                       (t / 2) * (t + 1), (t / 2) * (t + 1) + 1}) {
      if (at < 0 || at >= t * t)
        continue;
      std::vector<bool> flipped = bits;
      flipped[at] = !flipped[at];
      all.push_back(flipped);
    }
  }
  return all;
}

class TriangularMaskTest : public ::testing::Test {
protected:
  TriangularMaskTest() {
    DialectRegistry registry;
    registerAllDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
  }

  /// The match of the mask the function @f's first op defines.
  std::optional<TriangularMask> matchIn(const std::string &source) {
    module = parseSourceString<ModuleOp>(source, &context);
    EXPECT_TRUE(module) << source;
    if (!module)
      return std::nullopt;
    auto f = module->lookupSymbol<func::FuncOp>("f");
    Operation &maskOp = f.getBody().front().back();
    Value mask = maskOp.getOperand(0);
    return matchTriangularMask(mask);
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
};

TEST_F(TriangularMaskTest, ConstantMasks) {
  for (int64_t t : {1, 2, 5, 64}) {
    for (const std::vector<bool> &bits : masks(t)) {
      std::string type = llvm::formatv("tensor<1x1x{0}x{0}xi1>", t).str();
      std::optional<TriangularMask> match =
          matchIn(llvm::formatv("func.func @f() -> {0} {{\n"
                                "  %m = gpuc.constant dense<[[[{1}]]]> : {0}\n"
                                "  return %m : {0}\n}\n",
                                type,
                                // Rows of t.
                                [&] {
                                  std::string rows;
                                  for (int64_t q = 0; q < t; ++q) {
                                    std::string row;
                                    for (int64_t k = 0; k < t; ++k)
                                      row +=
                                          std::string(k ? ", " : "") +
                                          (bits[q * t + k] ? "true" : "false");
                                    rows += (q ? ", [" : "[") + row + "]";
                                  }
                                  return rows;
                                }()));
      std::optional<ComparePredicate> want = expected(bits, t);
      ASSERT_EQ(match.has_value(), want.has_value()) << "T " << t;
      if (want) {
        EXPECT_EQ(match->keyVsQuery, *want) << "T " << t;
        EXPECT_FALSE(match->parameter);
      }
    }
  }
}

/// A resource blob's hex text of `values` as f32, 4-byte aligned.
std::string blobHex(const std::vector<float> &values) {
  std::string hex = "0x04000000";
  for (float v : values) {
    unsigned char bytes[4];
    std::memcpy(bytes, &v, 4);
    for (unsigned char b : bytes)
      hex += llvm::formatv("{0:X-2}", (unsigned)b).str();
  }
  return hex;
}

TEST_F(TriangularMaskTest, FrozenBufferComparedWithSplat) {
  for (int64_t t : {1, 3, 64}) {
    for (const std::vector<bool> &bits : masks(t)) {
      // The buffer holds 1 where bits hold and 0 elsewhere; compared eq
      // with 1 it is the mask, ne with 1 its complement, and eq with 0
      // (nanoGPT's) its complement too.
      std::vector<float> buffer(bits.size());
      for (size_t i = 0; i < bits.size(); ++i)
        buffer[i] = bits[i] ? 1.0f : 0.0f;
      std::string type = llvm::formatv("tensor<1x1x{0}x{0}xf32>", t).str();
      std::string maskType = llvm::formatv("tensor<1x1x{0}x{0}xi1>", t).str();
      for (auto [predicate, with, complement] :
           {std::tuple{"eq", 1.0, false}, std::tuple{"ne", 1.0, true},
            std::tuple{"eq", 0.0, true}}) {
        std::optional<TriangularMask> match = matchIn(llvm::formatv(
            "gpuc.parameter @bias : {0} = dense_resource<bias> : {0} "
            "{{gpuc.frozen = \"no gradient reaches it\"}\n"
            "func.func @f(%b: {0} {{gpuc.param = @bias}) -> {1} {{\n"
            "  %c = gpuc.constant dense<{2:f1}> : {0}\n"
            "  %m = gpuc.compare {3}, %b, %c : {0}\n"
            "  return %m : {1}\n}\n"
            "{{-#\n  dialect_resources: {{\n    builtin: {{\n"
            "      bias: \"{4}\"\n    }\n  }\n#-}\n",
            type, maskType, with, predicate, blobHex(buffer)));
        std::vector<bool> mask = bits;
        if (complement)
          mask.flip();
        std::optional<ComparePredicate> want = expected(mask, t);
        ASSERT_EQ(match.has_value(), want.has_value())
            << "T " << t << " " << predicate << " " << with;
        if (want) {
          EXPECT_EQ(match->keyVsQuery, *want);
          EXPECT_TRUE(match->parameter);
          EXPECT_EQ(stringifyComparePredicate(match->compare),
                    StringRef(predicate));
          EXPECT_EQ(match->with, with);
        }
      }
    }
  }
}

TEST_F(TriangularMaskTest, ElidedBufferIsNoTriangle) {
  // A --dump-dir file's buffer has no values to judge.
  std::optional<TriangularMask> match =
      matchIn("gpuc.parameter @bias : tensor<1x1x2x2xf32> = "
              "dense_resource<__elided__> : tensor<1x1x2x2xf32> "
              "{gpuc.frozen = \"no gradient reaches it\"}\n"
              "func.func @f(%b: tensor<1x1x2x2xf32> {gpuc.param = @bias}) -> "
              "tensor<1x1x2x2xi1> {\n"
              "  %c = gpuc.constant dense<0.0> : tensor<1x1x2x2xf32>\n"
              "  %m = gpuc.compare eq, %b, %c : tensor<1x1x2x2xf32>\n"
              "  return %m : tensor<1x1x2x2xi1>\n}\n");
  EXPECT_FALSE(match.has_value());
}

} // namespace
