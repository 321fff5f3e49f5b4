//===- GpucFold.cpp - constant folding of gpuc ops ------------------------===//
//
// Folders make the shape arithmetic of exported models (Shape -> Gather ->
// Concat -> Reshape chains) disappear: the frontends build ops with
// createOrFold, and --canonicalize applies the same folders later. Only
// tensors up to kMaxFoldedElements are folded so that large weights are never
// duplicated as constants.
//
//===----------------------------------------------------------------------===//
#include "gpuc/Dialect/Gpuc/GpucOps.h"
#include "gpuc/Dialect/Gpuc/ShapeInference.h"

#include "mlir/IR/Matchers.h"
#include "mlir/IR/TypeUtilities.h"

#include <cmath>

using namespace mlir;
using namespace mlir::gpuc;

static constexpr int64_t kMaxFoldedElements = 1 << 16;

/// The attribute as dense elements if it is foldable (constant and small or
/// splat).
static DenseElementsAttr getFoldable(Attribute attr) {
  auto dense = dyn_cast_if_present<DenseElementsAttr>(attr);
  if (!dense)
    return {};
  if (!dense.isSplat() && dense.getNumElements() > kMaxFoldedElements)
    return {};
  return dense;
}

static RankedTensorType tensorTypeOf(Value v) {
  return cast<RankedTensorType>(v.getType());
}

/// Row-major strides of a shape.
static Shape stridesOf(ArrayRef<int64_t> shape) {
  Shape strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

/// Builds a constant of `resultType` whose element at each multi-index is the
/// element of `source` at the linear index `sourceIndexOf(index)`. This is the
/// one mechanism behind every data-movement folder.
static DenseElementsAttr
moveElements(DenseElementsAttr source, RankedTensorType resultType,
             function_ref<int64_t(ArrayRef<int64_t>)> sourceIndexOf) {
  if (source.isSplat())
    return DenseElementsAttr::get(resultType,
                                  source.getSplatValue<Attribute>());
  if (resultType.getNumElements() > kMaxFoldedElements)
    return {};
  SmallVector<Attribute> in = llvm::to_vector(source.getValues<Attribute>());
  SmallVector<Attribute> out;
  out.reserve(resultType.getNumElements());
  ArrayRef<int64_t> shape = resultType.getShape();
  Shape index(shape.size(), 0);
  for (int64_t linear = 0, e = resultType.getNumElements(); linear < e;
       ++linear) {
    int64_t src = sourceIndexOf(index);
    if (src < 0 || src >= static_cast<int64_t>(in.size()))
      return {};
    out.push_back(in[src]);
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
      if (++index[d] < shape[d])
        break;
      index[d] = 0;
    }
  }
  return DenseElementsAttr::get(resultType, out);
}

/// Applies a scalar function elementwise over constant operands of one shape.
/// `intFn` returns nullopt where the operation is undefined (division by
/// zero), which cancels the fold.
static Attribute
foldElementwise(ArrayRef<Attribute> operands, RankedTensorType resultType,
                function_ref<std::optional<APInt>(ArrayRef<APInt>)> intFn,
                function_ref<double(ArrayRef<double>)> floatFn) {
  SmallVector<DenseElementsAttr> dense;
  for (Attribute a : operands) {
    DenseElementsAttr d = getFoldable(a);
    if (!d)
      return {};
    dense.push_back(d);
  }
  Type elementType = dense.front().getElementType();
  bool allSplat = llvm::all_of(dense, [](auto d) { return d.isSplat(); });
  int64_t n = allSplat ? 1 : resultType.getNumElements();
  auto elementAt = [&](DenseElementsAttr d, int64_t i) {
    return d.isSplat() ? d.getSplatValue<Attribute>()
                       : d.getValues<Attribute>()[i];
  };
  SmallVector<Attribute> out;
  Type resultElementType = resultType.getElementType();
  for (int64_t i = 0; i < n; ++i) {
    if (isa<IntegerType>(elementType)) {
      if (!intFn)
        return {};
      SmallVector<APInt> args;
      for (DenseElementsAttr d : dense)
        args.push_back(cast<IntegerAttr>(elementAt(d, i)).getValue());
      std::optional<APInt> r = intFn(args);
      if (!r)
        return {};
      out.push_back(IntegerAttr::get(resultElementType, *r));
    } else {
      if (!floatFn)
        return {};
      SmallVector<double> args;
      for (DenseElementsAttr d : dense)
        args.push_back(
            cast<FloatAttr>(elementAt(d, i)).getValue().convertToDouble());
      double r = floatFn(args);
      if (auto intType = dyn_cast<IntegerType>(resultElementType))
        out.push_back(IntegerAttr::get(intType, APInt(intType.getWidth(),
                                                      static_cast<int64_t>(r),
                                                      /*isSigned=*/true)));
      else
        out.push_back(FloatAttr::get(resultElementType, r));
    }
  }
  if (allSplat)
    return DenseElementsAttr::get(resultType, out.front());
  return DenseElementsAttr::get(resultType, out);
}

//===----------------------------------------------------------------------===//
// Constants and elementwise
//===----------------------------------------------------------------------===//

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

OpFoldResult NegOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      adaptor.getOperands(), getType(),
      [](ArrayRef<APInt> a) -> std::optional<APInt> { return -a[0]; },
      [](ArrayRef<double> a) { return -a[0]; });
}

/// (PyTorch's export of scaled_dot_product_attention scales Q and K by the
/// square root of the scale; folded, the fused attention takes the scale.
/// A double's square root rounds to the f32 one sqrtf gives.)
OpFoldResult SqrtOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      adaptor.getOperands(), getType(),
      [](ArrayRef<APInt>) -> std::optional<APInt> { return std::nullopt; },
      [](ArrayRef<double> a) { return std::sqrt(a[0]); });
}

OpFoldResult AddOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      adaptor.getOperands(), getType(),
      [](ArrayRef<APInt> a) -> std::optional<APInt> { return a[0] + a[1]; },
      [](ArrayRef<double> a) { return a[0] + a[1]; });
}

OpFoldResult SubOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      adaptor.getOperands(), getType(),
      [](ArrayRef<APInt> a) -> std::optional<APInt> { return a[0] - a[1]; },
      [](ArrayRef<double> a) { return a[0] - a[1]; });
}

OpFoldResult MulOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      adaptor.getOperands(), getType(),
      [](ArrayRef<APInt> a) -> std::optional<APInt> { return a[0] * a[1]; },
      [](ArrayRef<double> a) { return a[0] * a[1]; });
}

OpFoldResult DivOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      adaptor.getOperands(), getType(),
      [](ArrayRef<APInt> a) -> std::optional<APInt> {
        if (a[1].isZero())
          return std::nullopt;
        return a[0].sdiv(a[1]);
      },
      [](ArrayRef<double> a) { return a[0] / a[1]; });
}

OpFoldResult PowOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      adaptor.getOperands(), getType(), nullptr,
      [](ArrayRef<double> a) { return std::pow(a[0], a[1]); });
}

OpFoldResult MaxOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      adaptor.getOperands(), getType(),
      [](ArrayRef<APInt> a) -> std::optional<APInt> {
        return a[0].sge(a[1]) ? a[0] : a[1];
      },
      [](ArrayRef<double> a) { return std::fmax(a[0], a[1]); });
}

OpFoldResult MinOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      adaptor.getOperands(), getType(),
      [](ArrayRef<APInt> a) -> std::optional<APInt> {
        return a[0].sle(a[1]) ? a[0] : a[1];
      },
      [](ArrayRef<double> a) { return std::fmin(a[0], a[1]); });
}

OpFoldResult CompareOp::fold(FoldAdaptor adaptor) {
  ComparePredicate p = getPredicate();
  return foldElementwise(
      adaptor.getOperands(), getType(),
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
  auto cond = dyn_cast_if_present<DenseElementsAttr>(adaptor.getCond());
  if (cond && cond.isSplat())
    return cond.getSplatValue<bool>() ? getOnTrue() : getOnFalse();
  DenseElementsAttr t = getFoldable(adaptor.getOnTrue());
  DenseElementsAttr f = getFoldable(adaptor.getOnFalse());
  if (!getFoldable(cond) || !t || !f)
    return {};
  SmallVector<Attribute> out;
  for (auto [i, c] : llvm::enumerate(cond.getValues<bool>())) {
    DenseElementsAttr pick = c ? t : f;
    out.push_back(pick.isSplat() ? pick.getSplatValue<Attribute>()
                                 : pick.getValues<Attribute>()[i]);
  }
  return DenseElementsAttr::get(getType(), out);
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
  if (!in)
    return {};
  Type to = getType().getElementType();
  auto convert = [&](Attribute a) -> Attribute {
    double v;
    if (auto i = dyn_cast<IntegerAttr>(a))
      v = i.getType().isInteger(1)
              ? static_cast<double>(i.getValue().getZExtValue())
              : static_cast<double>(i.getValue().getSExtValue());
    else
      v = cast<FloatAttr>(a).getValue().convertToDouble();
    if (to.isInteger(1))
      return IntegerAttr::get(to, APInt(1, v != 0.0));
    if (auto it = dyn_cast<IntegerType>(to))
      return IntegerAttr::get(to, APInt(it.getWidth(), static_cast<int64_t>(v),
                                        /*isSigned=*/true));
    return FloatAttr::get(to, v);
  };
  if (in.isSplat())
    return DenseElementsAttr::get(getType(),
                                  convert(in.getSplatValue<Attribute>()));
  SmallVector<Attribute> out;
  for (Attribute a : in.getValues<Attribute>())
    out.push_back(convert(a));
  return DenseElementsAttr::get(getType(), out);
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
  SmallVector<SmallVector<Attribute>> parts;
  for (Attribute a : adaptor.getInputs()) {
    DenseElementsAttr d = getFoldable(a);
    if (!d)
      return {};
    parts.push_back(llvm::to_vector(d.getValues<Attribute>()));
  }
  if (getType().getNumElements() > kMaxFoldedElements)
    return {};
  // Row-major: the result is, for each outer index, each input's block.
  int64_t axis = getAxis();
  ArrayRef<int64_t> shape = getType().getShape();
  int64_t outer = getNumElements(shape.take_front(axis));
  int64_t inner = getNumElements(shape.drop_front(axis + 1));
  SmallVector<Attribute> out;
  for (int64_t o = 0; o < outer; ++o)
    for (auto [part, in] : llvm::zip(parts, getInputs())) {
      int64_t block = tensorTypeOf(in).getShape()[axis] * inner;
      out.append(part.begin() + o * block, part.begin() + (o + 1) * block);
    }
  return DenseElementsAttr::get(getType(), out);
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
  if (!indices || rows + 1 > kMaxFoldedElements)
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
  bool changed = false;
  if (auto t = getLhs().getDefiningOp<TransposeOp>();
      t && getLhsPerm().empty() && !getLhsWindow() &&
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
