//===- TriangularMask.cpp - masks that are a comparison of indices --------===//
#include "gpuc/Transforms/TriangularMask.h"
#include "gpuc/Dialect/Gpuc/StoredElements.h"
#include "gpuc/Transforms/Constants.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"

#include <algorithm>
#include <cstring>

using namespace mlir;
using namespace mlir::gpuc;

namespace {

/// The elements of `attr` as doubles, or none for a kind not read here.
std::optional<SmallVector<double>> valuesOf(ElementsAttr attr) {
  auto type = cast<ShapedType>(attr.getType());
  Type element = type.getElementType();
  int64_t count = type.getNumElements();
  SmallVector<double> values;
  std::optional<ArrayRef<char>> stored = storedElementBytes(attr);
  if (stored && element.isF32()) {
    values.resize(count);
    for (int64_t i = 0; i < count; ++i) {
      float v;
      std::memcpy(&v, stored->data() + 4 * i, 4);
      values[i] = v;
    }
    return values;
  }
  auto dense = dyn_cast<DenseElementsAttr>(attr);
  if (!dense)
    return std::nullopt;
  values.reserve(count);
  if (isa<FloatType>(element)) {
    for (const APFloat &v : dense.getValues<APFloat>()) {
      APFloat d = v;
      bool losesInfo;
      d.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven,
                &losesInfo);
      values.push_back(d.convertToDouble());
    }
  } else if (isa<IntegerType>(element)) {
    for (const APInt &v : dense.getValues<APInt>())
      values.push_back(element.isInteger(1) ? (double)v.getZExtValue()
                                            : (double)v.getSExtValue());
  } else {
    return std::nullopt;
  }
  return values;
}

/// `keep(v)` (0 or 1) of every element `v` of `attr`, or none for a kind not
/// read here. Floats stored as such are read where they lie: a T x T mask at
/// T 1024 is a million elements, read for every attention and its gradient
/// of every layer, and of every batch --max-batch-for plans.
template <typename Keep>
std::optional<std::vector<uint8_t>> maskOf(ElementsAttr attr, Keep keep) {
  std::vector<uint8_t> bits;
  if (std::optional<ArrayRef<float>> floats = storedFloats(attr)) {
    bits.resize(floats->size());
    llvm::transform(*floats, bits.begin(),
                    [&](float v) { return (uint8_t)keep((double)v); });
    return bits;
  }
  std::optional<SmallVector<double>> values = valuesOf(attr);
  if (!values)
    return std::nullopt;
  bits.resize(values->size());
  llvm::transform(*values, bits.begin(),
                  [&](double v) { return (uint8_t)keep(v); });
  return bits;
}

/// Whether `bits`, rows of `keys`, is (key p query) at every place.
bool isTriangle(ArrayRef<uint8_t> bits, int64_t keys, ComparePredicate p) {
  // Row q holds `before` below its boundary and the other value from it on.
  bool before = p == ComparePredicate::lt || p == ComparePredicate::le;
  int64_t shift = p == ComparePredicate::le || p == ComparePredicate::gt;
  int64_t queries = bits.size() / keys;
  for (int64_t q = 0; q < queries; ++q) {
    const uint8_t *row = bits.data() + q * keys;
    int64_t boundary = std::min(q + shift, keys);
    if (std::memchr(row, !before, boundary) ||
        std::memchr(row + boundary, before, keys - boundary))
      return false;
  }
  return true;
}

/// The frozen parameter a function argument holds, or null.
ParameterOp frozenParameter(Value v) {
  auto arg = dyn_cast<BlockArgument>(v);
  auto func =
      arg ? dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp()) : nullptr;
  if (!func || arg.getOwner() != &func.getBody().front())
    return nullptr;
  auto name = func.getArgAttrOfType<FlatSymbolRefAttr>(
      arg.getArgNumber(), GpucDialect::kParamAttrName);
  auto module = func->getParentOfType<ModuleOp>();
  auto param = name && module ? module.lookupSymbol<ParameterOp>(name.getAttr())
                              : nullptr;
  if (!param || param.getTrainable() ||
      !param->hasAttr(GpucDialect::kFrozenAttrName))
    return nullptr;
  return param;
}

ComparePredicate swapped(ComparePredicate p) {
  switch (p) {
  case ComparePredicate::lt:
    return ComparePredicate::gt;
  case ComparePredicate::le:
    return ComparePredicate::ge;
  case ComparePredicate::gt:
    return ComparePredicate::lt;
  case ComparePredicate::ge:
    return ComparePredicate::le;
  default:
    return p;
  }
}

} // namespace

void TriangularMask::recordOn() {
  if (!parameter)
    return;
  MLIRContext *ctx = parameter.getContext();
  Builder b(ctx);
  parameter->setAttr(
      GpucDialect::kCompiledMaskAttrName,
      b.getDictionaryAttr(
          {b.getNamedAttr("compare",
                          b.getStringAttr(stringifyComparePredicate(compare))),
           b.getNamedAttr("with", b.getF64FloatAttr(with)),
           b.getNamedAttr(
               "key_vs_query",
               b.getStringAttr(stringifyComparePredicate(keyVsQuery)))}));
}

std::optional<TriangularMask> mlir::gpuc::matchTriangularMask(Value mask) {
  auto type = dyn_cast<RankedTensorType>(mask.getType());
  if (!type || type.getRank() < 2 || !type.getElementType().isInteger(1))
    return std::nullopt;
  ArrayRef<int64_t> shape = type.getShape();
  int64_t queries = shape[shape.size() - 2], keys = shape.back();
  auto constant = mask.getDefiningOp<ConstantOp>();
  // A constant may repeat its triangle over leading dimensions (a causal
  // mask broadcast over the batch, folded): each copy is checked.
  if (!constant)
    for (int64_t d : shape.drop_back(2))
      if (d != 1)
        return std::nullopt;

  TriangularMask match{ComparePredicate::eq, nullptr};
  std::optional<std::vector<uint8_t>> bits;
  if (constant) {
    bits = maskOf(constant.getValue(), [](double v) { return v != 0.0; });
    int64_t plane = queries * keys;
    if (bits && plane > 0 && (int64_t)bits->size() > plane) {
      for (int64_t at = plane; at < (int64_t)bits->size(); at += plane)
        if (std::memcmp(bits->data(), bits->data() + at, plane) != 0)
          return std::nullopt;
      bits->resize(plane);
    }
  } else if (auto compare = mask.getDefiningOp<CompareOp>()) {
    ParameterOp param = frozenParameter(compare.getLhs());
    std::optional<double> with = splatOf(compare.getRhs());
    ComparePredicate p = compare.getPredicate();
    if (!param) {
      param = frozenParameter(compare.getRhs());
      with = splatOf(compare.getLhs());
      p = swapped(p);
    }
    if (!param || !with || param.getTensorType() != compare.getLhs().getType())
      return std::nullopt;
    bits = maskOf(param.getInitialValue(),
                  [&](double v) { return holdsComparison(p, v, *with); });
    match.parameter = param;
    match.compare = p;
    match.with = *with;
  } else {
    return std::nullopt;
  }
  if (!bits || (int64_t)bits->size() != queries * keys || keys == 0)
    return std::nullopt;
  for (ComparePredicate p : {ComparePredicate::gt, ComparePredicate::ge,
                             ComparePredicate::lt, ComparePredicate::le}) {
    if (isTriangle(*bits, keys, p)) {
      match.keyVsQuery = p;
      return match;
    }
  }
  return std::nullopt;
}

std::optional<TriangleAndMask> mlir::gpuc::matchTriangleAndMask(Value mask,
                                                                bool keeps) {
  auto select = mask.getDefiningOp<SelectOp>();
  if (!select)
    return std::nullopt;
  // The select's constant side: false to and the others, true to or them.
  Value constant = keeps ? select.getOnFalse() : select.getOnTrue();
  std::optional<double> splat = splatOf(constant);
  if (!splat || (*splat != 0.0) == keeps)
    return std::nullopt;
  Value a = select.getCond(),
        b = keeps ? select.getOnTrue() : select.getOnFalse();
  for (auto [first, second] : {std::pair{a, b}, std::pair{b, a}}) {
    std::optional<TriangularMask> triangle = matchTriangularMask(first);
    if (!triangle || triangle->keyVsQuery == ComparePredicate::eq ||
        triangle->keyVsQuery == ComparePredicate::ne)
      continue;
    Value other = second;
    if (auto broadcast = other.getDefiningOp<BroadcastOp>())
      if (cast<ShapedType>(broadcast.getInput().getType()).getRank() ==
          cast<ShapedType>(other.getType()).getRank())
        other = broadcast.getInput();
    return TriangleAndMask{*triangle, other};
  }
  return std::nullopt;
}
