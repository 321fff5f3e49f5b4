//===- TriangularMaskTest.cpp - masks recognised as index comparisons -----===//
//
// matchTriangularMask against the definition: a mask is `key p query` for
// the first p of gt, ge, lt, le whose mask it is element for element, and
// no triangle otherwise. Checked for every predicate, for masks one element
// away from a triangle, as i1 constants (read through DenseElementsAttr)
// and as frozen f32 buffers in resource blobs compared with a splat
// (nanoGPT's tril buffer, read where it is stored). Masks computed in the
// step from indices (Trilu's iotas, PyTorch's is_causal export, aranges)
// are checked against the interpreter's values of the same expression.
//
//===----------------------------------------------------------------------===//
#include "gpuc/Transforms/TriangularMask.h"
#include "gpuc/InitAll.h"
#include "gpuc/Interpreter/Interpreter.h"

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

/// Index expressions of a [t, t] mask, as MLIR, the mask last. Each is
/// given `p` and `c`, the predicate and the integer it compares with.
std::vector<std::string> indexExpressions(int64_t t, StringRef p, int64_t c) {
  std::string i64 = llvm::formatv("tensor<{0}x{0}xi64>", t).str();
  std::string f32 = llvm::formatv("tensor<{0}x{0}xf32>", t).str();
  std::string iotas = llvm::formatv(
      "  %q = gpuc.iota dim = 0 : {0}\n  %k = gpuc.iota dim = 1 : {0}\n"
      "  %c = gpuc.constant dense<{1}> : {0}\n",
      i64, c);
  std::string arange;
  for (int64_t i = 0; i < t; ++i)
    arange += (i ? ", " : "") + std::to_string(2 * i + 3);
  return {
      // Trilu: key - query p c.
      iotas + llvm::formatv("  %d = gpuc.sub %k, %q : {0}\n"
                            "  %m = gpuc.compare {1}, %d, %c : {0}\n",
                            i64, p)
                  .str(),
      // query - key p c, then as select(m, true, false).
      iotas + llvm::formatv(
                  "  %d = gpuc.sub %q, %k : {0}\n"
                  "  %b = gpuc.compare {1}, %d, %c : {0}\n"
                  "  %t = gpuc.constant dense<true> : tensor<{2}x{2}xi1>\n"
                  "  %f = gpuc.constant dense<false> : tensor<{2}x{2}xi1>\n"
                  "  %m = gpuc.select %b, %t, %f : tensor<{2}x{2}xi1>, "
                  "tensor<{2}x{2}xi1>\n",
                  i64, p, t)
                  .str(),
      // PyTorch's is_causal: ones through Trilu, compared with 0.
      iotas + llvm::formatv(
                  "  %d = gpuc.sub %k, %q : {0}\n"
                  "  %b = gpuc.compare le, %d, %c : {0}\n"
                  "  %one = gpuc.constant dense<1.0> : {1}\n"
                  "  %zero = gpuc.constant dense<0.0> : {1}\n"
                  "  %w = gpuc.select %b, %one, %zero : tensor<{2}x{2}xi1>, "
                  "{1}\n"
                  "  %m = gpuc.compare {3}, %w, %zero : {1}\n",
                  i64, f32, t, p)
                  .str(),
      // 2 * key + c p 2 * query, in f32 after a cast.
      iotas + llvm::formatv("  %two = gpuc.constant dense<2> : {0}\n"
                            "  %k2 = gpuc.mul %k, %two : {0}\n"
                            "  %q2 = gpuc.mul %two, %q : {0}\n"
                            "  %kc = gpuc.add %k2, %c : {0}\n"
                            "  %kf = gpuc.cast %kc : {0} to {1}\n"
                            "  %qf = gpuc.cast %q2 : {0} to {1}\n"
                            "  %m = gpuc.compare {2}, %kf, %qf : {1}\n",
                            i64, f32, p)
                  .str(),
      // Aranges (2 i + 3) along the keys and the queries, broadcast:
      // 2 query p 2 key + c, through a negation.
      llvm::formatv(
          "  %a = gpuc.constant dense<[{0}]> : tensor<{1}xi64>\n"
          "  %col = gpuc.reshape %a : tensor<{1}xi64> -> tensor<{1}x1xi64>\n"
          "  %rows = gpuc.broadcast %col : tensor<{1}x1xi64> -> {2}\n"
          "  %keys = gpuc.broadcast %a : tensor<{1}xi64> -> {2}\n"
          "  %c = gpuc.constant dense<{3}> : {2}\n"
          "  %nk = gpuc.neg %keys : {2}\n"
          "  %d = gpuc.sub %rows, %c : {2}\n"
          "  %e = gpuc.add %d, %nk : {2}\n"
          "  %zero = gpuc.constant dense<0> : {2}\n"
          "  %m = gpuc.compare {4}, %e, %zero : {2}\n",
          arange, t, i64, c, p)
          .str(),
  };
}

TEST_F(TriangularMaskTest, IndexExpressions) {
  int64_t matched = 0;
  for (int64_t t : {1, 2, 5, 8}) {
    std::string mask = llvm::formatv("tensor<{0}x{0}xi1>", t).str();
    std::string wide = llvm::formatv("tensor<1x1x{0}x{0}xi1>", t).str();
    for (StringRef p : {"eq", "ne", "lt", "le", "gt", "ge"}) {
      for (int64_t c = -3; c <= 3; ++c) {
        for (const std::string &body : indexExpressions(t, p, c)) {
          // The mask reshaped to rank 4, as an attention reads it.
          std::string source =
              llvm::formatv("func.func @f() -> {0} {{\n{1}"
                            "  %r = gpuc.reshape %m : {2} -> {0}\n"
                            "  return %r : {0}\n}\n",
                            wide, body, mask);
          std::optional<TriangularMask> match = matchIn(source);
          ASSERT_TRUE(module);
          auto f = module->lookupSymbol<func::FuncOp>("f");
          FailureOr<std::vector<HostTensor>> values = interpret(f, {});
          ASSERT_TRUE(succeeded(values)) << source;
          std::vector<bool> bits;
          for (double v : values->front().data)
            bits.push_back(v != 0.0);
          std::optional<ComparePredicate> want = expected(bits, t);
          // At T 1 several triangles are one mask: the match must be one.
          if (t > 1) {
            ASSERT_EQ(match.has_value(), want.has_value()) << source;
          }
          if (match) {
            EXPECT_EQ(triangle(t, match->keyVsQuery), bits) << source;
            EXPECT_FALSE(match->parameter);
            ++matched;
          }
        }
      }
    }
  }
  // Every form above is a triangle for some predicate and integer.
  EXPECT_GE(matched, 4 * 5 * 4);
}

/// Index expressions that are not read as triangles: a batch's iota, a
/// float's inexact indices, a reshape that moves the keys.
TEST_F(TriangularMaskTest, IndexExpressionsNotRead) {
  for (const char *source : {
           // The mask varies along the batch.
           "func.func @f() -> tensor<2x1x4x4xi1> {\n"
           "  %b = gpuc.iota dim = 0 : tensor<2x1x4x4xi64>\n"
           "  %k = gpuc.iota dim = 3 : tensor<2x1x4x4xi64>\n"
           "  %m = gpuc.compare gt, %k, %b : tensor<2x1x4x4xi64>\n"
           "  return %m : tensor<2x1x4x4xi1>\n}\n",
           // bf16 holds the indices of 300 keys inexactly.
           "func.func @f() -> tensor<1x1x300x300xi1> {\n"
           "  %q = gpuc.iota dim = 2 : tensor<1x1x300x300xbf16>\n"
           "  %k = gpuc.iota dim = 3 : tensor<1x1x300x300xbf16>\n"
           "  %m = gpuc.compare gt, %k, %q : tensor<1x1x300x300xbf16>\n"
           "  return %m : tensor<1x1x300x300xi1>\n}\n",
           // A reshape that makes keys of queries.
           "func.func @f() -> tensor<1x1x4x4xi1> {\n"
           "  %q = gpuc.iota dim = 0 : tensor<4x4xi64>\n"
           "  %k = gpuc.iota dim = 1 : tensor<4x4xi64>\n"
           "  %m = gpuc.compare gt, %k, %q : tensor<4x4xi64>\n"
           "  %f = gpuc.reshape %m : tensor<4x4xi1> -> tensor<16xi1>\n"
           "  %r = gpuc.reshape %f : tensor<16xi1> -> tensor<1x1x4x4xi1>\n"
           "  return %r : tensor<1x1x4x4xi1>\n}\n",
       }) {
    std::optional<TriangularMask> match = matchIn(source);
    EXPECT_FALSE(match.has_value()) << source;
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
