//===- GpucFold.cpp - constant folding of gpuc ops ------------------------===//
//
// Folders make the shape arithmetic of exported models (Shape -> Gather ->
// Concat -> Reshape chains) and the masks exporters build from positions
// disappear: the frontends build ops with createOrFold, and --canonicalize
// applies the same folders later. Parameters are arguments, never
// constants, so a fold cannot copy a weight; a folded constant is bounded
// by foldedElementsLimit, past which a value is computed at run time.
// Elements are read and written as stored, not one Attribute each.
//
//===----------------------------------------------------------------------===//
#include "gpuc/Dialect/Gpuc/FoldedConstants.h"
#include "gpuc/Dialect/Gpuc/GpucOps.h"
#include "gpuc/Dialect/Gpuc/ShapeInference.h"

#include "mlir/IR/Matchers.h"
#include "mlir/IR/TypeUtilities.h"

#include <cmath>
#include <cstring>

using namespace mlir;
using namespace mlir::gpuc;

int64_t mlir::gpuc::foldedElementsLimit(Type elementType) {
  return elementType.isInteger(1) ? int64_t(1) << 28 : int64_t(1) << 20;
}

bool mlir::gpuc::withinFoldLimit(ShapedType type) {
  return type.getNumElements() <= foldedElementsLimit(type.getElementType());
}

/// The attribute as dense elements if it is foldable (constant and within
/// the limit, or splat).
static DenseElementsAttr getFoldable(Attribute attr) {
  auto dense = dyn_cast_if_present<DenseElementsAttr>(attr);
  if (!dense)
    return {};
  if (!dense.isSplat() && !withinFoldLimit(dense.getType()))
    return {};
  return dense;
}

static RankedTensorType tensorTypeOf(Value v) {
  return cast<RankedTensorType>(v.getType());
}

SmallVector<int64_t> mlir::gpuc::stridesOf(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

namespace {
/// A constant's elements in whole-byte slots: as stored, or a boolean a
/// byte (i1 is stored a bit each). A splat holds one slot.
struct ElementSlots {
  SmallVector<char> unpacked; // booleans
  ArrayRef<char> stored;      // other elements, in the attribute
  size_t width = 0;
  bool booleans = false;
  bool splat = false;

  const char *at(int64_t i) const {
    const char *base = booleans ? unpacked.data() : stored.data();
    return base + (splat ? 0 : i) * width;
  }
};
} // namespace

static std::optional<ElementSlots> slotsOf(DenseElementsAttr attr) {
  ElementSlots slots;
  slots.splat = attr.isSplat();
  Type element = attr.getElementType();
  if (element.isInteger(1)) {
    if (slots.splat)
      slots.unpacked.push_back(attr.getSplatValue<bool>());
    else
      for (bool b : attr.getValues<bool>())
        slots.unpacked.push_back(b);
    slots.booleans = true;
    slots.width = 1;
    return slots;
  }
  if (!element.isIntOrFloat() || element.getIntOrFloatBitWidth() % 8 != 0)
    return std::nullopt;
  slots.width = element.getIntOrFloatBitWidth() / 8;
  slots.stored = attr.getRawData();
  int64_t count = slots.splat ? 1 : attr.getNumElements();
  if ((int64_t)slots.stored.size() != count * (int64_t)slots.width)
    return std::nullopt;
  return slots;
}

/// The constant of `type` whose elements are `bytes`, `width` each (a
/// boolean a byte); a splat where they are all equal.
static DenseElementsAttr fromSlots(RankedTensorType type, ArrayRef<char> bytes,
                                   size_t width) {
  bool equal = true;
  for (size_t at = width; at < bytes.size() && equal; at += width)
    equal = std::memcmp(bytes.data(), bytes.data() + at, width) == 0;
  if (equal && !bytes.empty())
    bytes = bytes.take_front(width);
  if (type.getElementType().isInteger(1)) {
    auto bools = ArrayRef<bool>(reinterpret_cast<const bool *>(bytes.data()),
                                bytes.size());
    if (bools.size() == 1)
      return DenseElementsAttr::get(type, bools.front());
    return DenseElementsAttr::get(type, bools);
  }
  return DenseElementsAttr::getFromRawBuffer(type, bytes);
}

DenseElementsAttr mlir::gpuc::moveElements(
    DenseElementsAttr source, RankedTensorType resultType,
    function_ref<int64_t(ArrayRef<int64_t>)> sourceIndexOf) {
  if (source.isSplat())
    return DenseElementsAttr::get(resultType,
                                  source.getSplatValue<Attribute>());
  if (!withinFoldLimit(resultType))
    return {};
  std::optional<ElementSlots> in = slotsOf(source);
  if (!in)
    return {};
  int64_t count = source.getNumElements();
  SmallVector<char> out(resultType.getNumElements() * in->width);
  ArrayRef<int64_t> shape = resultType.getShape();
  Shape index(shape.size(), 0);
  for (size_t at = 0; at < out.size(); at += in->width) {
    int64_t src = sourceIndexOf(index);
    if (src < 0 || src >= count)
      return {};
    std::memcpy(out.data() + at, in->at(src), in->width);
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
      if (++index[d] < shape[d])
        break;
      index[d] = 0;
    }
  }
  return fromSlots(resultType, out, in->width);
}

namespace {
/// A constant operand of an elementwise fold, read at the result's
/// multi-index through `strides` (0 along a dimension it is broadcast on).
struct ElementwiseOperand {
  DenseElementsAttr elements;
  Shape strides;
};
} // namespace

/// `v` (folded to `attr`) as a constant operand of a result of `shape`: a
/// constant, or a broadcast of one, read through so that a comparison of a
/// row index with a column index folds to a mask without either broadcast
/// becoming a constant of the mask's size.
static std::optional<ElementwiseOperand>
elementwiseOperand(Value v, Attribute attr, ArrayRef<int64_t> shape) {
  DenseElementsAttr elements = getFoldable(attr);
  ArrayRef<int64_t> from = shape;
  if (!elements) {
    auto broadcast = v.getDefiningOp<BroadcastOp>();
    Attribute input;
    if (!broadcast || !matchPattern(broadcast.getInput(), m_Constant(&input)))
      return std::nullopt;
    elements = getFoldable(input);
    if (!elements)
      return std::nullopt;
    from = tensorTypeOf(broadcast.getInput()).getShape();
  }
  ElementwiseOperand operand{elements, Shape(shape.size(), 0)};
  if (elements.isSplat())
    return operand;
  Shape fromStrides = stridesOf(from);
  size_t lead = shape.size() - from.size();
  for (size_t d = 0; d < from.size(); ++d)
    if (from[d] == shape[lead + d])
      operand.strides[lead + d] = fromStrides[d];
  return operand;
}

/// Applies a scalar function elementwise over constant operands (or
/// broadcasts of constants) of the result's shape. `intFn` returns nullopt
/// where the operation is undefined (division by zero), which cancels the
/// fold.
static Attribute
foldElementwise(Operation *op, ArrayRef<Attribute> attrs,
                RankedTensorType resultType,
                function_ref<std::optional<APInt>(ArrayRef<APInt>)> intFn,
                function_ref<double(ArrayRef<double>)> floatFn) {
  ArrayRef<int64_t> shape = resultType.getShape();
  SmallVector<ElementwiseOperand> operands;
  for (auto [v, attr] : llvm::zip(op->getOperands(), attrs)) {
    std::optional<ElementwiseOperand> operand =
        elementwiseOperand(v, attr, shape);
    if (!operand)
      return {};
    operands.push_back(std::move(*operand));
  }
  if (resultType.getNumElements() == 0)
    return {};
  bool allSplat = llvm::all_of(
      operands, [](const auto &o) { return o.elements.isSplat(); });
  if (!allSplat && !withinFoldLimit(resultType))
    return {};
  bool isInt = isa<IntegerType>(operands.front().elements.getElementType());
  if (isInt ? !intFn : !floatFn)
    return {};
  // Each operand's elements, as integers or as doubles.
  SmallVector<SmallVector<APInt>> ints;
  SmallVector<SmallVector<double>> floats;
  for (const ElementwiseOperand &o : operands) {
    if (isInt && o.elements.isSplat())
      ints.push_back({o.elements.getSplatValue<APInt>()});
    else if (isInt)
      ints.emplace_back(o.elements.getValues<APInt>());
    else if (o.elements.isSplat())
      floats.push_back({o.elements.getSplatValue<APFloat>().convertToDouble()});
    else
      floats.emplace_back(llvm::map_range(
          o.elements.getValues<APFloat>(),
          [](const APFloat &x) { return x.convertToDouble(); }));
  }
  Type resultElement = resultType.getElementType();
  auto resultInt = dyn_cast<IntegerType>(resultElement);
  const llvm::fltSemantics *resultSemantics =
      resultInt ? nullptr : &cast<FloatType>(resultElement).getFloatSemantics();
  SmallVector<bool> bools;
  SmallVector<APInt> intResults;
  SmallVector<APFloat> floatResults;
  int64_t count = allSplat ? 1 : resultType.getNumElements();
  Shape index(shape.size(), 0);
  SmallVector<int64_t> offsets(operands.size(), 0);
  SmallVector<APInt> intArgs(operands.size());
  SmallVector<double> floatArgs(operands.size());
  for (int64_t i = 0; i < count; ++i) {
    std::optional<APInt> intResult;
    double floatResult = 0;
    if (isInt) {
      for (size_t k = 0; k < operands.size(); ++k)
        intArgs[k] = ints[k][offsets[k]];
      intResult = intFn(intArgs);
      if (!intResult)
        return {};
    } else {
      for (size_t k = 0; k < operands.size(); ++k)
        floatArgs[k] = floats[k][offsets[k]];
      floatResult = floatFn(floatArgs);
    }
    if (resultInt && resultInt.getWidth() == 1) {
      bools.push_back(isInt ? !intResult->isZero() : floatResult != 0.0);
    } else if (resultInt) {
      intResults.push_back(isInt ? intResult->sextOrTrunc(resultInt.getWidth())
                                 : APInt(resultInt.getWidth(),
                                         static_cast<int64_t>(floatResult),
                                         /*isSigned=*/true));
    } else {
      APFloat value(isInt ? static_cast<double>(intResult->getSExtValue())
                          : floatResult);
      bool lost;
      value.convert(*resultSemantics, APFloat::rmNearestTiesToEven, &lost);
      floatResults.push_back(value);
    }
    // The next multi-index, and each operand's element there.
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
      for (size_t k = 0; k < operands.size(); ++k)
        offsets[k] += operands[k].strides[d];
      if (++index[d] < shape[d])
        break;
      for (size_t k = 0; k < operands.size(); ++k)
        offsets[k] -= operands[k].strides[d] * shape[d];
      index[d] = 0;
    }
  }
  if (!bools.empty())
    return allSplat ? DenseElementsAttr::get(resultType, bools.front())
                    : DenseElementsAttr::get(resultType, bools);
  if (!intResults.empty())
    return DenseElementsAttr::get(resultType, intResults);
  return DenseElementsAttr::get(resultType, floatResults);
}

//===----------------------------------------------------------------------===//
// Constants and elementwise
//===----------------------------------------------------------------------===//

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

OpFoldResult NegOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      getOperation(), adaptor.getOperands(), getType(),
      [](ArrayRef<APInt> a) -> std::optional<APInt> { return -a[0]; },
      [](ArrayRef<double> a) { return -a[0]; });
}

/// (PyTorch's export of scaled_dot_product_attention scales Q and K by the
/// square root of the scale; folded, the fused attention takes the scale.
/// A double's square root rounds to the f32 one sqrtf gives.)
OpFoldResult SqrtOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      getOperation(), adaptor.getOperands(), getType(),
      [](ArrayRef<APInt>) -> std::optional<APInt> { return std::nullopt; },
      [](ArrayRef<double> a) { return std::sqrt(a[0]); });
}

/// (Exporters compute an attention's scale as 1 / sqrt(d) at run time:
/// folded, it is the attention's scale. A double's quotient rounds to the
/// f32 one a division gives.)
OpFoldResult ReciprocalOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      getOperation(), adaptor.getOperands(), getType(),
      [](ArrayRef<APInt>) -> std::optional<APInt> { return std::nullopt; },
      [](ArrayRef<double> a) { return 1.0 / a[0]; });
}

/// (A rotary embedding's angles are constants where the shapes are static;
/// folded in double, each rounds once, where cosf and sinf may differ by a
/// rounding.)
OpFoldResult CosOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      getOperation(), adaptor.getOperands(), getType(),
      [](ArrayRef<APInt>) -> std::optional<APInt> { return std::nullopt; },
      [](ArrayRef<double> a) { return std::cos(a[0]); });
}

OpFoldResult SinOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      getOperation(), adaptor.getOperands(), getType(),
      [](ArrayRef<APInt>) -> std::optional<APInt> { return std::nullopt; },
      [](ArrayRef<double> a) { return std::sin(a[0]); });
}

OpFoldResult AddOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      getOperation(), adaptor.getOperands(), getType(),
      [](ArrayRef<APInt> a) -> std::optional<APInt> { return a[0] + a[1]; },
      [](ArrayRef<double> a) { return a[0] + a[1]; });
}

OpFoldResult SubOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      getOperation(), adaptor.getOperands(), getType(),
      [](ArrayRef<APInt> a) -> std::optional<APInt> { return a[0] - a[1]; },
      [](ArrayRef<double> a) { return a[0] - a[1]; });
}

OpFoldResult MulOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      getOperation(), adaptor.getOperands(), getType(),
      [](ArrayRef<APInt> a) -> std::optional<APInt> { return a[0] * a[1]; },
      [](ArrayRef<double> a) { return a[0] * a[1]; });
}

OpFoldResult DivOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      getOperation(), adaptor.getOperands(), getType(),
      [](ArrayRef<APInt> a) -> std::optional<APInt> {
        if (a[1].isZero())
          return std::nullopt;
        return a[0].sdiv(a[1]);
      },
      [](ArrayRef<double> a) { return a[0] / a[1]; });
}

OpFoldResult PowOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      getOperation(), adaptor.getOperands(), getType(), nullptr,
      [](ArrayRef<double> a) { return std::pow(a[0], a[1]); });
}

OpFoldResult MaxOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      getOperation(), adaptor.getOperands(), getType(),
      [](ArrayRef<APInt> a) -> std::optional<APInt> {
        return a[0].sge(a[1]) ? a[0] : a[1];
      },
      [](ArrayRef<double> a) { return std::fmax(a[0], a[1]); });
}

OpFoldResult MinOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      getOperation(), adaptor.getOperands(), getType(),
      [](ArrayRef<APInt> a) -> std::optional<APInt> {
        return a[0].sle(a[1]) ? a[0] : a[1];
      },
      [](ArrayRef<double> a) { return std::fmin(a[0], a[1]); });
}

OpFoldResult CompareOp::fold(FoldAdaptor adaptor) {
  ComparePredicate p = getPredicate();
  return foldElementwise(
      getOperation(), adaptor.getOperands(), getType(),
      [p](ArrayRef<APInt> a) -> std::optional<APInt> {
        int64_t l = a[0].getSExtValue(), r = a[1].getSExtValue();
        return APInt(1, holdsComparison(p, l, r));
      },
      [p](ArrayRef<double> a) {
        return static_cast<double>(holdsComparison(p, a[0], a[1]));
      });
}

OpFoldResult SelectOp::fold(FoldAdaptor adaptor) {
  if (getOnTrue() == getOnFalse())
    return getOnTrue();
  // select(c, true, false) of booleans is c (Trilu of ones, imported).
  auto onTrueSplat =
      dyn_cast_if_present<DenseElementsAttr>(adaptor.getOnTrue());
  auto onFalseSplat =
      dyn_cast_if_present<DenseElementsAttr>(adaptor.getOnFalse());
  if (getType().getElementType().isInteger(1) && onTrueSplat && onFalseSplat &&
      onTrueSplat.isSplat() && onFalseSplat.isSplat() &&
      onTrueSplat.getSplatValue<bool>() &&
      !onFalseSplat.getSplatValue<bool>() && getCond().getType() == getType())
    return getCond();
  auto cond = dyn_cast_if_present<DenseElementsAttr>(adaptor.getCond());
  if (cond && cond.isSplat())
    return cond.getSplatValue<bool>() ? getOnTrue() : getOnFalse();
  DenseElementsAttr t = getFoldable(adaptor.getOnTrue());
  DenseElementsAttr f = getFoldable(adaptor.getOnFalse());
  if (!getFoldable(cond) || !t || !f || !withinFoldLimit(getType()))
    return {};
  std::optional<ElementSlots> onTrue = slotsOf(t), onFalse = slotsOf(f);
  if (!onTrue || !onFalse)
    return {};
  size_t width = onTrue->width;
  SmallVector<char> out;
  out.reserve(getType().getNumElements() * width);
  for (auto [i, c] : llvm::enumerate(cond.getValues<bool>())) {
    const char *pick = c ? onTrue->at(i) : onFalse->at(i);
    out.append(pick, pick + width);
  }
  return fromSlots(getType(), out, width);
}

OpFoldResult CastOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  // A float widened exactly and narrowed back is itself (f16 -> f32 -> f16,
  // as mixed precision writes a stored value read by an f32 op).
  if (auto inner = getInput().getDefiningOp<CastOp>()) {
    auto from =
        dyn_cast<FloatType>(getElementTypeOrSelf(inner.getInput().getType()));
    auto via = dyn_cast<FloatType>(getElementTypeOrSelf(inner.getType()));
    if (from && via && inner.getInput().getType() == getType() &&
        llvm::APFloat::isRepresentableBy(from.getFloatSemantics(),
                                         via.getFloatSemantics()))
      return inner.getInput();
  }
  DenseElementsAttr in = getFoldable(adaptor.getInput());
  if (!in || (!in.isSplat() && !withinFoldLimit(getType())))
    return {};
  Type from = in.getElementType(), to = getType().getElementType();
  bool splat = in.isSplat();
  if (splat) // its one value, whatever the shape
    in = DenseElementsAttr::get(RankedTensorType::get({}, from),
                                in.getSplatValue<Attribute>());
  // Through a double, as the run-time cast goes; between integers, by
  // extension or truncation (a boolean is 0 or 1).
  SmallVector<double> values;
  SmallVector<APInt> ints;
  if (auto fromInt = dyn_cast<IntegerType>(from)) {
    for (const APInt &v : in.getValues<APInt>())
      ints.push_back(fromInt.getWidth() == 1 ? v.zext(64) : v.sext(64));
    for (const APInt &v : ints)
      values.push_back(static_cast<double>(v.getSExtValue()));
  } else {
    for (const APFloat &v : in.getValues<APFloat>())
      values.push_back(v.convertToDouble());
  }
  RankedTensorType type = splat ? RankedTensorType::get({}, to) : getType();
  DenseElementsAttr result;
  if (to.isInteger(1)) {
    SmallVector<bool> bools;
    for (double v : values)
      bools.push_back(v != 0.0);
    result = DenseElementsAttr::get(type, bools);
  } else if (auto toInt = dyn_cast<IntegerType>(to)) {
    SmallVector<APInt> out;
    for (size_t i = 0; i < values.size(); ++i)
      out.push_back(ints.empty() ? APInt(toInt.getWidth(),
                                         static_cast<int64_t>(values[i]),
                                         /*isSigned=*/true)
                                 : ints[i].trunc(toInt.getWidth()));
    result = DenseElementsAttr::get(type, out);
  } else {
    SmallVector<APFloat> out;
    for (double v : values) {
      APFloat value(v);
      bool lost;
      value.convert(cast<FloatType>(to).getFloatSemantics(),
                    APFloat::rmNearestTiesToEven, &lost);
      out.push_back(value);
    }
    result = DenseElementsAttr::get(type, out);
  }
  return splat ? DenseElementsAttr::get(getType(),
                                        result.getSplatValue<Attribute>())
               : result;
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  // reshape(reshape(x)) is one reshape.
  if (auto inner = getInput().getDefiningOp<ReshapeOp>()) {
    getInputMutable().assign(inner.getInput());
    return getResult();
  }
  if (DenseElementsAttr in = getFoldable(adaptor.getInput()))
    return in.reshape(getType());
  return {};
}

OpFoldResult TransposeOp::fold(FoldAdaptor adaptor) {
  ArrayRef<int64_t> perm = getPerm();
  if (llvm::equal(perm, llvm::seq<int64_t>(0, perm.size())))
    return getInput();
  // transpose(transpose(x, p), q) is transpose(x, p o q).
  if (auto inner = getInput().getDefiningOp<TransposeOp>()) {
    Shape composed;
    for (int64_t q : perm)
      composed.push_back(inner.getPerm()[q]);
    getInputMutable().assign(inner.getInput());
    setPerm(composed);
    if (llvm::equal(composed, llvm::seq<int64_t>(0, composed.size())) &&
        getInput().getType() == getType())
      return getInput();
    return getResult();
  }
  DenseElementsAttr in = getFoldable(adaptor.getInput());
  if (!in)
    return {};
  Shape inStrides = stridesOf(tensorTypeOf(getInput()).getShape());
  return moveElements(in, getType(), [&](ArrayRef<int64_t> index) {
    int64_t src = 0;
    for (auto [i, p] : llvm::enumerate(perm))
      src += index[i] * inStrides[p];
    return src;
  });
}

OpFoldResult BroadcastOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  DenseElementsAttr in = getFoldable(adaptor.getInput());
  if (!in)
    return {};
  ArrayRef<int64_t> inShape = tensorTypeOf(getInput()).getShape();
  Shape inStrides = stridesOf(inShape);
  size_t lead = getType().getRank() - inShape.size();
  return moveElements(in, getType(), [&](ArrayRef<int64_t> index) {
    int64_t src = 0;
    for (size_t i = 0; i < inShape.size(); ++i)
      src += (inShape[i] == 1 ? 0 : index[lead + i]) * inStrides[i];
    return src;
  });
}

OpFoldResult SliceOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  DenseElementsAttr in = getFoldable(adaptor.getInput());
  if (!in)
    return {};
  Shape inStrides = stridesOf(tensorTypeOf(getInput()).getShape());
  ArrayRef<int64_t> starts = getStarts(), strides = getStrides();
  return moveElements(in, getType(), [&](ArrayRef<int64_t> index) {
    int64_t src = 0;
    for (size_t i = 0; i < index.size(); ++i)
      src += (starts[i] + index[i] * strides[i]) * inStrides[i];
    return src;
  });
}

OpFoldResult PadOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType())
    return getInput();
  return {};
}

OpFoldResult ConcatOp::fold(FoldAdaptor adaptor) {
  if (getInputs().size() == 1)
    return getInputs().front();
  if (!withinFoldLimit(getType()))
    return {};
  SmallVector<ElementSlots> parts;
  for (Attribute a : adaptor.getInputs()) {
    DenseElementsAttr d = getFoldable(a);
    std::optional<ElementSlots> slots = d ? slotsOf(d) : std::nullopt;
    if (!slots)
      return {};
    parts.push_back(std::move(*slots));
  }
  // Row-major: the result is, for each outer index, each input's block.
  int64_t axis = getAxis();
  ArrayRef<int64_t> shape = getType().getShape();
  int64_t outer = getNumElements(shape.take_front(axis));
  int64_t inner = getNumElements(shape.drop_front(axis + 1));
  size_t width = parts.front().width;
  SmallVector<char> out;
  out.reserve(getType().getNumElements() * width);
  for (int64_t o = 0; o < outer; ++o)
    for (auto [part, in] : llvm::zip(parts, getInputs())) {
      int64_t block = tensorTypeOf(in).getShape()[axis] * inner;
      if (!part.splat)
        out.append(part.at(o * block), part.at((o + 1) * block));
      else
        for (int64_t k = 0; k < block; ++k)
          out.append(part.at(0), part.at(0) + width);
    }
  return fromSlots(getType(), out, width);
}

OpFoldResult GatherOp::fold(FoldAdaptor adaptor) {
  DenseElementsAttr data = getFoldable(adaptor.getData());
  DenseElementsAttr indices = getFoldable(adaptor.getIndices());
  if (!data || !indices)
    return {};
  ArrayRef<int64_t> dataShape = tensorTypeOf(getData()).getShape();
  int64_t axis = getAxis();
  int64_t extent = dataShape[axis];
  SmallVector<int64_t> idx;
  for (APInt v : indices.getValues<APInt>()) {
    int64_t i = v.getSExtValue();
    if (i < -extent || i >= extent)
      return {}; // Left for the run-time check to report.
    idx.push_back(i < 0 ? i + extent : i);
  }
  if (indices.isSplat())
    idx.assign(tensorTypeOf(getIndices()).getNumElements(), idx.front());
  Shape dataStrides = stridesOf(dataShape);
  Shape idxStrides = stridesOf(tensorTypeOf(getIndices()).getShape());
  int64_t idxRank = tensorTypeOf(getIndices()).getRank();
  return moveElements(data, getType(), [&](ArrayRef<int64_t> index) {
    int64_t src = 0;
    for (int64_t i = 0; i < axis; ++i)
      src += index[i] * dataStrides[i];
    int64_t flat = 0;
    for (int64_t j = 0; j < idxRank; ++j)
      flat += index[axis + j] * idxStrides[j];
    src += idx[flat] * dataStrides[axis];
    for (size_t i = axis + 1; i < dataShape.size(); ++i)
      src += index[idxRank + i - 1] * dataStrides[i];
    return src;
  });
}

LogicalResult RowGroupsOp::fold(FoldAdaptor adaptor,
                                SmallVectorImpl<OpFoldResult> &results) {
  DenseElementsAttr indices = getFoldable(adaptor.getIndices());
  int64_t rows = getRows(), n = tensorTypeOf(getIndices()).getNumElements();
  if (!indices ||
      rows + 1 > foldedElementsLimit(getOffsets().getType().getElementType()))
    return failure();
  SmallVector<int64_t> row;
  for (APInt v : indices.getValues<APInt>()) {
    int64_t k = v.getSExtValue();
    if (k < -rows || k >= rows)
      return failure(); // Left for the run-time check to report.
    row.push_back(k < 0 ? k + rows : k);
  }
  if (indices.isSplat())
    row.assign(n, row.front());
  SmallVector<int64_t> offsets, order;
  group(row, rows, offsets, order);
  auto i32 = [](ArrayRef<int64_t> values) {
    return SmallVector<int32_t>(values.begin(), values.end());
  };
  results.push_back(DenseElementsAttr::get(tensorTypeOf(getOffsets()),
                                           ArrayRef<int32_t>(i32(offsets))));
  results.push_back(DenseElementsAttr::get(tensorTypeOf(getOrder()),
                                           ArrayRef<int32_t>(i32(order))));
  return success();
}

/// Whether `perm` swaps the last two dimensions and keeps the others.
static bool swapsLastTwo(ArrayRef<int64_t> perm) {
  int64_t rank = perm.size();
  if (rank < 2 || perm[rank - 2] != rank - 1 || perm[rank - 1] != rank - 2)
    return false;
  return llvm::equal(perm.drop_back(2), llvm::seq<int64_t>(0, rank - 2));
}

OpFoldResult MatmulOp::fold(FoldAdaptor) {
  // matmul(transpose(a), b) is matmul(a, b) with the operand's flag
  // flipped: folded in place.
  // (An operand with a layout keeps it: the layout composes with the flag
  // in gpuc-fold-layouts. A window reads columns of the stored operand,
  // which a transpose would not have stored last.)
  // (A triangle is of the lhs as stored.)
  bool changed = false;
  if (auto t = getLhs().getDefiningOp<TransposeOp>();
      t && getLhsPerm().empty() && !getLhsWindow() && !getLhsTriangle() &&
      swapsLastTwo(t.getPerm())) {
    getLhsMutable().assign(t.getInput());
    setTransposeLhs(!getTransposeLhs());
    changed = true;
  }
  if (auto t = getRhs().getDefiningOp<TransposeOp>();
      t && getRhsPerm().empty() && !getRhsWindow() &&
      swapsLastTwo(t.getPerm())) {
    getRhsMutable().assign(t.getInput());
    setTransposeRhs(!getTransposeRhs());
    changed = true;
  }
  return changed ? getResult() : OpFoldResult();
}
