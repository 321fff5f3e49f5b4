//===- TriangularMask.cpp - masks that are a comparison of indices --------===//
#include "gpuc/Transforms/TriangularMask.h"
#include "gpuc/Dialect/Gpuc/StoredElements.h"
#include "gpuc/Transforms/Constants.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <cmath>
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

/// A value of an index expression over the [query, key] plane: what
/// exporters compute a causal mask from at run time (Trilu's comparison of
/// iotas, PyTorch's `is_causal` as ones through Trilu and a comparison with
/// zero, `arange(T)[None, :] > arange(T)[:, None]`). A boolean there is
/// read as the set of offsets d = key - query it holds at: a mask that is a
/// function of d alone is a triangle when that set is a triangle's.
struct PlaneValue {
  enum Kind { Affine, Condition, TwoValued };
  Kind kind = Affine;
  /// Affine: key * keyCoef + query * queryCoef + offset, integers.
  int64_t keyCoef = 0, queryCoef = 0, offset = 0;
  /// Condition and TwoValued: whether the condition holds at each offset
  /// d from the plane's lowest, 1 - queries, to its highest, keys - 1.
  std::vector<bool> holds;
  /// TwoValued: onTrue where the condition holds, else onFalse.
  double onTrue = 1, onFalse = 0;

  bool isConstant() const { return kind == Affine && !keyCoef && !queryCoef; }

  static PlaneValue constant(int64_t value) {
    PlaneValue c;
    c.offset = value;
    return c;
  }
  static PlaneValue condition(std::vector<bool> holds) {
    PlaneValue c;
    c.kind = Condition;
    c.holds = std::move(holds);
    return c;
  }
  PlaneValue negated() const {
    PlaneValue c = condition(holds);
    c.holds.flip();
    return c;
  }
};

/// The plane an index expression is read over: its last two dimensions.
struct Plane {
  int64_t queries, keys;
  int64_t lowest() const { return 1 - queries; }
  int64_t offsets() const { return queries + keys - 1; }

  /// The condition `d p 0` at every offset d, scaled: `s * d + c p 0`.
  std::vector<bool> holding(ComparePredicate p, int64_t s, int64_t c) const {
    std::vector<bool> holds(offsets());
    for (int64_t i = 0; i < offsets(); ++i)
      holds[i] = holdsComparison<int64_t>(p, s * (lowest() + i) + c, 0);
    return holds;
  }
};

constexpr int kMaxIndexExpressionDepth = 24;

/// The size of `shape`'s dimension `fromEnd` places from its end (1 the
/// key's), 1 where it has none.
int64_t sizeFromEnd(ArrayRef<int64_t> shape, int64_t fromEnd) {
  return (int64_t)shape.size() >= fromEnd ? shape[shape.size() - fromEnd] : 1;
}

/// Whether every value of the affine `value` over a tensor of `type` is an
/// integer `type`'s elements hold exactly (as the kernels compute it).
bool holdsExactly(const PlaneValue &value, ShapedType type) {
  if (std::abs(value.keyCoef) > (int64_t(1) << 31) ||
      std::abs(value.queryCoef) > (int64_t(1) << 31) ||
      std::abs(value.offset) > (int64_t(1) << 52))
    return false;
  double largest = std::abs((double)value.keyCoef) *
                       (double)(sizeFromEnd(type.getShape(), 1) - 1) +
                   std::abs((double)value.queryCoef) *
                       (double)(sizeFromEnd(type.getShape(), 2) - 1) +
                   std::abs((double)value.offset);
  Type element = type.getElementType();
  if (auto f = dyn_cast<FloatType>(element))
    return largest <= std::ldexp(1.0, f.getFPMantissaWidth());
  if (element.isInteger(1))
    return value.isConstant() && (value.offset == 0 || value.offset == 1);
  if (element.isInteger())
    return largest < std::ldexp(1.0, (int)element.getIntOrFloatBitWidth() - 1);
  return false;
}

/// A boolean as a condition: a condition, a two-valued boolean (0 and 1),
/// or a constant (true or false everywhere).
std::optional<PlaneValue> asCondition(const PlaneValue &v, const Plane &plane) {
  switch (v.kind) {
  case PlaneValue::Condition:
    return v;
  case PlaneValue::TwoValued: {
    PlaneValue c = PlaneValue::condition(v.holds);
    if ((v.onTrue != 0) == (v.onFalse != 0))
      c.holds.assign(plane.offsets(), v.onTrue != 0);
    else if (v.onTrue == 0)
      c.holds.flip();
    return c;
  }
  case PlaneValue::Affine:
    if (!v.isConstant())
      return std::nullopt;
    return PlaneValue::condition(
        std::vector<bool>(plane.offsets(), v.offset != 0));
  }
  return std::nullopt;
}

/// `lhs p rhs` of two affine values, where it is a function of the offset
/// key - query alone.
std::optional<PlaneValue> compareAffine(ComparePredicate p,
                                        const PlaneValue &lhs,
                                        const PlaneValue &rhs,
                                        const Plane &plane) {
  // s * (key - query) + c  p  0
  int64_t s = lhs.keyCoef - rhs.keyCoef;
  if (lhs.queryCoef - rhs.queryCoef != -s)
    return std::nullopt;
  return PlaneValue::condition(plane.holding(p, s, lhs.offset - rhs.offset));
}

/// `two p c` (or `c p two`) of a two-valued value and a constant.
PlaneValue compareTwoValued(ComparePredicate p, const PlaneValue &two, double c,
                            bool twoOnLeft) {
  auto holds = [&](double value) {
    return twoOnLeft ? holdsComparison(p, value, c)
                     : holdsComparison(p, c, value);
  };
  PlaneValue result = PlaneValue::condition(two.holds);
  for (size_t i = 0; i < result.holds.size(); ++i)
    result.holds[i] = holds(two.holds[i] ? two.onTrue : two.onFalse);
  return result;
}

/// The elements of a constant along its one dimension that is not 1, as an
/// affine function of that dimension's index (an arange).
std::optional<PlaneValue> arangeOf(ConstantOp constant) {
  auto type = cast<ShapedType>(constant.getType());
  ArrayRef<int64_t> shape = type.getShape();
  int64_t fromEnd = 0;
  for (int64_t d = 0; d < (int64_t)shape.size(); ++d) {
    if (shape[d] == 1)
      continue;
    if (fromEnd)
      return std::nullopt;
    fromEnd = (int64_t)shape.size() - d;
  }
  if (fromEnd != 1 && fromEnd != 2)
    return std::nullopt;
  auto elements = dyn_cast<ElementsAttr>(constant.getValue());
  std::optional<SmallVector<double>> values =
      elements ? valuesOf(elements) : std::nullopt;
  if (!values || values->size() < 2)
    return std::nullopt;
  double first = values->front(), step = (*values)[1] - first;
  if (first != std::trunc(first) || step != std::trunc(step) ||
      std::abs(first) > 0x1p52 || std::abs(step) > 0x1p31)
    return std::nullopt;
  for (size_t i = 0; i < values->size(); ++i)
    if ((*values)[i] != first + step * (double)i)
      return std::nullopt;
  PlaneValue v = PlaneValue::constant((int64_t)first);
  (fromEnd == 1 ? v.keyCoef : v.queryCoef) = (int64_t)step;
  return v;
}

/// A value through a reshape that only adds or drops 1s. An affine value
/// follows its key's and query's dimensions (arange(T)[:, None] makes the
/// keys' arange the queries'); a condition, a function of key - query,
/// keeps both where they are.
std::optional<PlaneValue> reshapedPlaneValue(std::optional<PlaneValue> value,
                                             ArrayRef<int64_t> from,
                                             ArrayRef<int64_t> to) {
  // Positions from the end of the dimensions that are not 1.
  auto spread = [](ArrayRef<int64_t> shape, SmallVector<int64_t> &sizes,
                   SmallVector<int64_t> &fromEnd) {
    for (int64_t d = 0; d < (int64_t)shape.size(); ++d) {
      if (shape[d] == 1)
        continue;
      sizes.push_back(shape[d]);
      fromEnd.push_back((int64_t)shape.size() - d);
    }
  };
  SmallVector<int64_t> fromSizes, fromEnds, toSizes, toEnds;
  spread(from, fromSizes, fromEnds);
  spread(to, toSizes, toEnds);
  if (!value || fromSizes != toSizes)
    return std::nullopt;
  if (value->kind != PlaneValue::Affine) {
    if (fromEnds != toEnds)
      return std::nullopt;
    return value;
  }
  PlaneValue moved = PlaneValue::constant(value->offset);
  for (size_t i = 0; i < fromEnds.size(); ++i) {
    int64_t coef = fromEnds[i] == 1   ? value->keyCoef
                   : fromEnds[i] == 2 ? value->queryCoef
                                      : 0;
    if (!coef)
      continue;
    if (toEnds[i] == 1)
      moved.keyCoef = coef;
    else if (toEnds[i] == 2)
      moved.queryCoef = coef;
    else
      return std::nullopt;
  }
  return moved;
}

/// `v` as a value over `plane`, where it is one.
std::optional<PlaneValue> planeValueOf(Value v, const Plane &plane,
                                       int depth = 0) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  Operation *def = v.getDefiningOp();
  if (!type || !def || depth > kMaxIndexExpressionDepth)
    return std::nullopt;
  auto of = [&](Value operand) {
    return planeValueOf(operand, plane, depth + 1);
  };
  auto affine = [&](Value operand) -> std::optional<PlaneValue> {
    std::optional<PlaneValue> a = of(operand);
    if (!a || a->kind != PlaneValue::Affine)
      return std::nullopt;
    return a;
  };
  auto condition = [&](Value operand) -> std::optional<PlaneValue> {
    std::optional<PlaneValue> c = of(operand);
    return c ? asCondition(*c, plane) : std::nullopt;
  };
  // A boolean condition as the values 1 and 0.
  auto twoValued = [](std::optional<PlaneValue> x) {
    if (x && x->kind == PlaneValue::Condition) {
      x->kind = PlaneValue::TwoValued;
      x->onTrue = 1;
      x->onFalse = 0;
    }
    return x && x->kind == PlaneValue::TwoValued ? x : std::nullopt;
  };

  std::optional<PlaneValue> result;
  if (std::optional<double> splat = splatOf(v)) {
    if (*splat != std::trunc(*splat) || std::abs(*splat) > 0x1p52)
      return std::nullopt;
    result = PlaneValue::constant((int64_t)*splat);
  } else if (auto iota = dyn_cast<IotaOp>(def)) {
    int64_t fromEnd = type.getRank() - iota.getDim();
    result = PlaneValue::constant(0);
    if (type.getShape()[iota.getDim()] != 1) {
      if (fromEnd == 1)
        result->keyCoef = 1;
      else if (fromEnd == 2)
        result->queryCoef = 1;
      else
        return std::nullopt;
    }
  } else if (auto constant = dyn_cast<ConstantOp>(def)) {
    result = arangeOf(constant);
  } else if (auto broadcast = dyn_cast<BroadcastOp>(def)) {
    // Aligned at the last dimension: the key and query stay where they are.
    result = of(broadcast.getInput());
  } else if (auto reshape = dyn_cast<ReshapeOp>(def)) {
    result = reshapedPlaneValue(of(reshape.getInput()),
                                shapeOf(reshape.getInput()), type.getShape());
  } else if (isa<AddOp, SubOp>(def)) {
    std::optional<PlaneValue> l = affine(def->getOperand(0)),
                              r = affine(def->getOperand(1));
    if (!l || !r)
      return std::nullopt;
    int64_t sign = isa<AddOp>(def) ? 1 : -1;
    l->keyCoef += sign * r->keyCoef;
    l->queryCoef += sign * r->queryCoef;
    l->offset += sign * r->offset;
    result = l;
  } else if (auto neg = dyn_cast<NegOp>(def)) {
    result = affine(neg.getInput());
    if (result) {
      result->keyCoef = -result->keyCoef;
      result->queryCoef = -result->queryCoef;
      result->offset = -result->offset;
    }
  } else if (auto mul = dyn_cast<MulOp>(def)) {
    std::optional<PlaneValue> l = affine(mul.getLhs()),
                              r = affine(mul.getRhs());
    if (!l || !r)
      return std::nullopt;
    if (l->isConstant())
      std::swap(l, r);
    if (!r->isConstant() || std::abs(r->offset) > (int64_t(1) << 20) ||
        !holdsExactly(*l, type))
      return std::nullopt;
    l->keyCoef *= r->offset;
    l->queryCoef *= r->offset;
    l->offset *= r->offset;
    result = l;
  } else if (auto castOp = dyn_cast<CastOp>(def)) {
    Value input = castOp.getInput();
    result = of(input);
    if (result && result->kind == PlaneValue::Condition) {
      // false and true are 0 and 1.
      result = twoValued(result);
    } else if (result && result->kind == PlaneValue::TwoValued) {
      // Small integers keep their values; to i1, "is not zero".
      for (double value : {result->onTrue, result->onFalse})
        if (value != std::trunc(value) || std::abs(value) > 256)
          return std::nullopt;
      if (type.getElementType().isInteger(1)) {
        result->onTrue = result->onTrue != 0;
        result->onFalse = result->onFalse != 0;
      }
    } else if (result && !isa<FloatType>(type.getElementType()) &&
               isa<FloatType>(getElementTypeOrSelf(input))) {
      // Floats that hold integers exactly truncate to themselves.
      if (!holdsExactly(*result, cast<ShapedType>(input.getType())))
        return std::nullopt;
    }
  } else if (auto compare = dyn_cast<CompareOp>(def)) {
    Value lhs = compare.getLhs(), rhs = compare.getRhs();
    std::optional<PlaneValue> l = of(lhs), r = of(rhs);
    ComparePredicate p = compare.getPredicate();
    // A two-valued side against a constant (an integer or any splat).
    auto constantSide = [](std::optional<PlaneValue> x,
                           Value side) -> std::optional<double> {
      if (x && x->isConstant())
        return (double)x->offset;
      return splatOf(side);
    };
    if (l && r && l->kind == PlaneValue::Affine &&
        r->kind == PlaneValue::Affine) {
      if (!holdsExactly(*l, cast<ShapedType>(lhs.getType())) ||
          !holdsExactly(*r, cast<ShapedType>(rhs.getType())))
        return std::nullopt;
      result = compareAffine(p, *l, *r, plane);
    } else if (std::optional<PlaneValue> two = twoValued(l)) {
      if (std::optional<double> c = constantSide(r, rhs))
        result = compareTwoValued(p, *two, *c, /*twoOnLeft=*/true);
    } else if ((two = twoValued(r))) {
      if (std::optional<double> c = constantSide(l, lhs))
        result = compareTwoValued(p, *two, *c, /*twoOnLeft=*/false);
    }
  } else if (auto select = dyn_cast<SelectOp>(def)) {
    std::optional<PlaneValue> cond = condition(select.getCond());
    if (!cond)
      return std::nullopt;
    if (type.getElementType().isInteger(1)) {
      // Booleans chosen between: cond ? a : b at each offset.
      std::optional<PlaneValue> a = condition(select.getOnTrue()),
                                b = condition(select.getOnFalse());
      if (!a || !b)
        return std::nullopt;
      result = cond;
      for (size_t i = 0; i < result->holds.size(); ++i)
        result->holds[i] = cond->holds[i] ? a->holds[i] : b->holds[i];
    } else {
      std::optional<double> onTrue = splatOf(select.getOnTrue()),
                            onFalse = splatOf(select.getOnFalse());
      if (!onTrue || !onFalse)
        return std::nullopt;
      result = cond;
      result->kind = PlaneValue::TwoValued;
      result->onTrue = *onTrue;
      result->onFalse = *onFalse;
    }
  }
  if (!result)
    return std::nullopt;
  if (result->kind == PlaneValue::Affine && !holdsExactly(*result, type))
    return std::nullopt;
  if (type.getElementType().isInteger(1))
    return asCondition(*result, plane);
  return result;
}

/// The triangle an index expression `mask` (i1, [..., queries, keys]) is,
/// if it is one.
std::optional<ComparePredicate> indexTriangle(Value mask) {
  ArrayRef<int64_t> shape = shapeOf(mask);
  Plane plane{shape[shape.size() - 2], shape.back()};
  if (plane.queries < 1 || plane.keys < 1)
    return std::nullopt;
  std::optional<PlaneValue> value = planeValueOf(mask, plane);
  if (!value || value->kind != PlaneValue::Condition)
    return std::nullopt;
  // Each offset occurs at some place of the plane: the mask is the
  // triangle `key p query` where it holds at the offsets `d p 0` do.
  for (ComparePredicate p : {ComparePredicate::gt, ComparePredicate::ge,
                             ComparePredicate::lt, ComparePredicate::le})
    if (value->holds == plane.holding(p, 1, 0))
      return p;
  return std::nullopt;
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
    if (!param || !with ||
        param.getTensorType() != compare.getLhs().getType()) {
      if (std::optional<ComparePredicate> p = indexTriangle(mask))
        return TriangularMask{*p, nullptr};
      return std::nullopt;
    }
    bits = maskOf(param.getInitialValue(),
                  [&](double v) { return holdsComparison(p, v, *with); });
    match.parameter = param;
    match.compare = p;
    match.with = *with;
  } else if (std::optional<ComparePredicate> p = indexTriangle(mask)) {
    return TriangularMask{*p, nullptr};
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
