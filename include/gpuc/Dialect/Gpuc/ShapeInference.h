//===- ShapeInference.h - result shapes of gpuc ops -------------*- C++ -*-===//
//
// The one place that knows how each op's result shape follows from its
// operands. Op verifiers check results against it and the frontends build
// result types with it, so the two can never disagree.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_DIALECT_GPUC_SHAPEINFERENCE_H
#define GPUC_DIALECT_GPUC_SHAPEINFERENCE_H

#include "mlir/IR/Diagnostics.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/SmallVector.h"

namespace mlir::gpuc {

using Shape = SmallVector<int64_t>;
using EmitErrorFn = function_ref<InFlightDiagnostic()>;

/// Numpy broadcasting of two shapes (right-aligned, 1 stretches).
FailureOr<Shape> inferBroadcastShape(ArrayRef<int64_t> lhs,
                                     ArrayRef<int64_t> rhs,
                                     EmitErrorFn emitError);

/// True if `from` broadcasts to exactly `to`.
bool isBroadcastableTo(ArrayRef<int64_t> from, ArrayRef<int64_t> to);

/// Checks that `axes` are sorted, unique and in [0, rank).
LogicalResult verifyAxes(ArrayRef<int64_t> axes, int64_t rank,
                         EmitErrorFn emitError);

/// Result shape of a reduction over sorted, unique `axes`.
Shape inferReduceShape(ArrayRef<int64_t> input, ArrayRef<int64_t> axes,
                       bool keepDims);

FailureOr<Shape> inferTransposeShape(ArrayRef<int64_t> input,
                                     ArrayRef<int64_t> perm,
                                     EmitErrorFn emitError);

FailureOr<Shape> inferSliceShape(ArrayRef<int64_t> input,
                                 ArrayRef<int64_t> starts,
                                 ArrayRef<int64_t> limits,
                                 ArrayRef<int64_t> strides,
                                 EmitErrorFn emitError);

FailureOr<Shape> inferPadShape(ArrayRef<int64_t> input, ArrayRef<int64_t> low,
                               ArrayRef<int64_t> high, EmitErrorFn emitError);

FailureOr<Shape> inferConcatShape(ArrayRef<ArrayRef<int64_t>> inputs,
                                  int64_t axis, EmitErrorFn emitError);

FailureOr<Shape> inferGatherShape(ArrayRef<int64_t> data,
                                  ArrayRef<int64_t> indices, int64_t axis,
                                  EmitErrorFn emitError);

FailureOr<Shape> inferMatmulShape(ArrayRef<int64_t> lhs, ArrayRef<int64_t> rhs,
                                  bool transposeLhs, bool transposeRhs,
                                  EmitErrorFn emitError);

/// NCHW input, OIHW filter, pads = [top, left, bottom, right].
FailureOr<Shape> inferConv2DShape(ArrayRef<int64_t> input,
                                  ArrayRef<int64_t> filter,
                                  ArrayRef<int64_t> strides,
                                  ArrayRef<int64_t> pads,
                                  ArrayRef<int64_t> dilations, int64_t groups,
                                  EmitErrorFn emitError);

/// The permutations between a convolution's two layouts: `transpose(x,
/// kToChannelsLast)` is NCHW's (OIHW's) x held NHWC (OHWI), and
/// kToChannelsFirst takes it back.
inline constexpr int64_t kToChannelsLast[] = {0, 2, 3, 1};
inline constexpr int64_t kToChannelsFirst[] = {0, 3, 1, 2};

/// `shape` permuted by `perm` (result axis i is input axis perm[i]).
Shape permuteShape(ArrayRef<int64_t> shape, ArrayRef<int64_t> perm);

/// A convolution's result shape in its own layout: inferConv2DShape on the
/// NCHW view of channels-last operands, the result held channels last.
FailureOr<Shape> inferConv2DShape(ArrayRef<int64_t> input,
                                  ArrayRef<int64_t> filter,
                                  ArrayRef<int64_t> strides,
                                  ArrayRef<int64_t> pads,
                                  ArrayRef<int64_t> dilations, int64_t groups,
                                  bool channelsLast, EmitErrorFn emitError);

/// NCHW input, pads = [top, left, bottom, right].
FailureOr<Shape> inferPool2DShape(ArrayRef<int64_t> input,
                                  ArrayRef<int64_t> kernel,
                                  ArrayRef<int64_t> strides,
                                  ArrayRef<int64_t> pads,
                                  EmitErrorFn emitError);
/// NCHW or, channels last, NHWC input.
FailureOr<Shape> inferPool2DShape(ArrayRef<int64_t> input,
                                  ArrayRef<int64_t> kernel,
                                  ArrayRef<int64_t> strides,
                                  ArrayRef<int64_t> pads, bool channelsLast,
                                  EmitErrorFn emitError);

/// Normalizes a possibly negative axis into [0, rank).
FailureOr<int64_t> normalizeAxis(int64_t axis, int64_t rank,
                                 EmitErrorFn emitError);

int64_t getNumElements(ArrayRef<int64_t> shape);

/// "4x8x16", for messages.
std::string formatShape(ArrayRef<int64_t> shape);

} // namespace mlir::gpuc

#endif // GPUC_DIALECT_GPUC_SHAPEINFERENCE_H
