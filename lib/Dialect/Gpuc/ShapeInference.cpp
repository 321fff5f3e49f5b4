//===- ShapeInference.cpp - result shapes of gpuc ops ---------------------===//
#include "gpuc/Dialect/Gpuc/ShapeInference.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace mlir::gpuc;

std::string mlir::gpuc::formatShape(ArrayRef<int64_t> shape) {
  if (shape.empty())
    return "scalar";
  return llvm::join(
      llvm::map_range(shape, [](int64_t d) { return std::to_string(d); }), "x");
}

int64_t mlir::gpuc::getNumElements(ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

FailureOr<int64_t> mlir::gpuc::normalizeAxis(int64_t axis, int64_t rank,
                                             EmitErrorFn emitError) {
  if (axis < -rank || axis >= std::max<int64_t>(rank, 1))
    return emitError() << "axis " << axis << " is out of range for rank "
                       << rank;
  return axis < 0 ? axis + rank : axis;
}

FailureOr<Shape> mlir::gpuc::inferBroadcastShape(ArrayRef<int64_t> lhs,
                                                 ArrayRef<int64_t> rhs,
                                                 EmitErrorFn emitError) {
  size_t rank = std::max(lhs.size(), rhs.size());
  Shape result(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t l = i < rank - lhs.size() ? 1 : lhs[i - (rank - lhs.size())];
    int64_t r = i < rank - rhs.size() ? 1 : rhs[i - (rank - rhs.size())];
    if (l != r && l != 1 && r != 1)
      return emitError() << "shapes " << formatShape(lhs) << " and "
                         << formatShape(rhs) << " do not broadcast";
    result[i] = l == 1 ? r : l;
  }
  return result;
}

bool mlir::gpuc::isBroadcastableTo(ArrayRef<int64_t> from,
                                   ArrayRef<int64_t> to) {
  if (from.size() > to.size())
    return false;
  size_t lead = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i] != 1 && from[i] != to[lead + i])
      return false;
  return true;
}

LogicalResult mlir::gpuc::verifyAxes(ArrayRef<int64_t> axes, int64_t rank,
                                     EmitErrorFn emitError) {
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] < 0 || axes[i] >= rank)
      return emitError() << "axis " << axes[i] << " is out of range for rank "
                         << rank;
    if (i > 0 && axes[i] <= axes[i - 1])
      return emitError() << "axes must be sorted and unique";
  }
  return success();
}

Shape mlir::gpuc::inferReduceShape(ArrayRef<int64_t> input,
                                   ArrayRef<int64_t> axes, bool keepDims) {
  Shape result;
  for (auto [i, d] : llvm::enumerate(input)) {
    if (!llvm::is_contained(axes, static_cast<int64_t>(i)))
      result.push_back(d);
    else if (keepDims)
      result.push_back(1);
  }
  return result;
}

FailureOr<Shape> mlir::gpuc::inferTransposeShape(ArrayRef<int64_t> input,
                                                 ArrayRef<int64_t> perm,
                                                 EmitErrorFn emitError) {
  if (perm.size() != input.size())
    return emitError() << "permutation has " << perm.size()
                       << " entries for a tensor of rank " << input.size();
  SmallVector<bool> seen(input.size(), false);
  Shape result;
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(input.size()) || seen[p])
      return emitError() << "perm is not a permutation of 0.."
                         << input.size() - 1;
    seen[p] = true;
    result.push_back(input[p]);
  }
  return result;
}

FailureOr<Shape> mlir::gpuc::inferSliceShape(ArrayRef<int64_t> input,
                                             ArrayRef<int64_t> starts,
                                             ArrayRef<int64_t> limits,
                                             ArrayRef<int64_t> strides,
                                             EmitErrorFn emitError) {
  if (starts.size() != input.size() || limits.size() != input.size() ||
      strides.size() != input.size())
    return emitError() << "starts, limits and strides need one entry per axis ("
                       << input.size() << ")";
  Shape result;
  for (size_t i = 0; i < input.size(); ++i) {
    if (strides[i] <= 0)
      return emitError() << "stride " << strides[i] << " of axis " << i
                         << " must be positive";
    if (starts[i] < 0 || starts[i] > limits[i] || limits[i] > input[i])
      return emitError() << "slice [" << starts[i] << ", " << limits[i]
                         << ") of axis " << i << " is outside 0.." << input[i];
    result.push_back((limits[i] - starts[i] + strides[i] - 1) / strides[i]);
  }
  return result;
}

FailureOr<Shape> mlir::gpuc::inferPadShape(ArrayRef<int64_t> input,
                                           ArrayRef<int64_t> low,
                                           ArrayRef<int64_t> high,
                                           EmitErrorFn emitError) {
  if (low.size() != input.size() || high.size() != input.size())
    return emitError() << "low and high pads need one entry per axis ("
                       << input.size() << ")";
  Shape result;
  for (size_t i = 0; i < input.size(); ++i) {
    if (low[i] < 0 || high[i] < 0)
      return emitError() << "pads must be non-negative";
    result.push_back(input[i] + low[i] + high[i]);
  }
  return result;
}

FailureOr<Shape>
mlir::gpuc::inferConcatShape(ArrayRef<ArrayRef<int64_t>> inputs, int64_t axis,
                             EmitErrorFn emitError) {
  if (inputs.empty())
    return emitError() << "needs at least one input";
  Shape result(inputs.front());
  if (axis < 0 || axis >= static_cast<int64_t>(result.size()))
    return emitError() << "axis " << axis << " is out of range for rank "
                       << result.size();
  for (ArrayRef<int64_t> in : inputs.drop_front()) {
    if (in.size() != result.size())
      return emitError() << "inputs have different ranks";
    for (size_t i = 0; i < in.size(); ++i) {
      if (static_cast<int64_t>(i) == axis)
        result[i] += in[i];
      else if (in[i] != result[i])
        return emitError() << "inputs differ in dimension " << i << " ("
                           << formatShape(inputs.front()) << " vs "
                           << formatShape(in) << ")";
    }
  }
  return result;
}

FailureOr<Shape> mlir::gpuc::inferGatherShape(ArrayRef<int64_t> data,
                                              ArrayRef<int64_t> indices,
                                              int64_t axis,
                                              EmitErrorFn emitError) {
  if (axis < 0 || axis >= static_cast<int64_t>(data.size()))
    return emitError() << "axis " << axis << " is out of range for rank "
                       << data.size();
  Shape result(data.begin(), data.begin() + axis);
  llvm::append_range(result, indices);
  result.append(data.begin() + axis + 1, data.end());
  return result;
}

FailureOr<Shape> mlir::gpuc::inferMatmulShape(ArrayRef<int64_t> lhs,
                                              ArrayRef<int64_t> rhs,
                                              bool transposeLhs,
                                              bool transposeRhs,
                                              EmitErrorFn emitError) {
  if (lhs.size() < 2 || lhs.size() != rhs.size())
    return emitError() << "operands must have the same rank >= 2, got "
                       << formatShape(lhs) << " and " << formatShape(rhs);
  size_t r = lhs.size();
  if (lhs.take_front(r - 2) != rhs.take_front(r - 2))
    return emitError() << "batch dimensions differ: " << formatShape(lhs)
                       << " vs " << formatShape(rhs);
  int64_t m = transposeLhs ? lhs[r - 1] : lhs[r - 2];
  int64_t kl = transposeLhs ? lhs[r - 2] : lhs[r - 1];
  int64_t kr = transposeRhs ? rhs[r - 1] : rhs[r - 2];
  int64_t n = transposeRhs ? rhs[r - 2] : rhs[r - 1];
  if (kl != kr)
    return emitError() << "contracting dimensions differ: " << kl << " vs "
                       << kr << " (" << formatShape(lhs) << " x "
                       << formatShape(rhs) << ")";
  Shape result(lhs.take_front(r - 2));
  result.push_back(m);
  result.push_back(n);
  return result;
}

/// Output extent of one spatial axis of a window op.
static FailureOr<int64_t> windowExtent(int64_t in, int64_t kernel,
                                       int64_t stride, int64_t padLo,
                                       int64_t padHi, int64_t dilation,
                                       EmitErrorFn emitError) {
  if (kernel <= 0 || stride <= 0 || dilation <= 0 || padLo < 0 || padHi < 0)
    return emitError() << "kernel, strides and dilations must be positive and "
                          "pads non-negative";
  int64_t span = dilation * (kernel - 1) + 1;
  int64_t padded = in + padLo + padHi;
  if (padded < span)
    return emitError() << "window of " << span << " does not fit in " << padded
                       << " (input " << in << " plus padding)";
  return (padded - span) / stride + 1;
}

FailureOr<Shape>
mlir::gpuc::inferConv2DShape(ArrayRef<int64_t> input, ArrayRef<int64_t> filter,
                             ArrayRef<int64_t> strides, ArrayRef<int64_t> pads,
                             ArrayRef<int64_t> dilations, int64_t groups,
                             EmitErrorFn emitError) {
  if (input.size() != 4 || filter.size() != 4)
    return emitError() << "input and filter must be rank 4 (NCHW, OIHW)";
  if (strides.size() != 2 || dilations.size() != 2 || pads.size() != 4)
    return emitError() << "needs 2 strides, 2 dilations and 4 pads";
  if (groups <= 0 || input[1] % groups != 0 || filter[0] % groups != 0)
    return emitError() << "groups " << groups
                       << " must divide input and output channels";
  if (filter[1] * groups != input[1])
    return emitError() << "filter expects " << filter[1] * groups
                       << " input channels, input has " << input[1];
  Shape result = {input[0], filter[0], 0, 0};
  for (int i = 0; i < 2; ++i) {
    FailureOr<int64_t> extent =
        windowExtent(input[2 + i], filter[2 + i], strides[i], pads[i],
                     pads[2 + i], dilations[i], emitError);
    if (failed(extent))
      return failure();
    result[2 + i] = *extent;
  }
  return result;
}

Shape mlir::gpuc::permuteShape(ArrayRef<int64_t> shape,
                               ArrayRef<int64_t> perm) {
  Shape result;
  for (int64_t p : perm)
    result.push_back(shape[p]);
  return result;
}

FailureOr<Shape>
mlir::gpuc::inferConv2DShape(ArrayRef<int64_t> input, ArrayRef<int64_t> filter,
                             ArrayRef<int64_t> strides, ArrayRef<int64_t> pads,
                             ArrayRef<int64_t> dilations, int64_t groups,
                             bool channelsLast, EmitErrorFn emitError) {
  if (!channelsLast)
    return inferConv2DShape(input, filter, strides, pads, dilations, groups,
                            emitError);
  if (input.size() != 4 || filter.size() != 4)
    return emitError()
           << "input and filter must be rank 4 (channels last: NHWC, OHWI)";
  FailureOr<Shape> result = inferConv2DShape(
      permuteShape(input, kToChannelsFirst),
      permuteShape(filter, kToChannelsFirst), strides, pads, dilations, groups,
      [&] { return emitError() << "(channels last, read as NCHW) "; });
  if (failed(result))
    return failure();
  return permuteShape(*result, kToChannelsLast);
}

FailureOr<Shape>
mlir::gpuc::inferPool2DShape(ArrayRef<int64_t> input, ArrayRef<int64_t> kernel,
                             ArrayRef<int64_t> strides, ArrayRef<int64_t> pads,
                             bool channelsLast, EmitErrorFn emitError) {
  if (!channelsLast)
    return inferPool2DShape(input, kernel, strides, pads, emitError);
  if (input.size() != 4)
    return emitError() << "input must be rank 4 (channels last: NHWC)";
  FailureOr<Shape> result = inferPool2DShape(
      permuteShape(input, kToChannelsFirst), kernel, strides, pads,
      [&] { return emitError() << "(channels last, read as NCHW) "; });
  if (failed(result))
    return failure();
  return permuteShape(*result, kToChannelsLast);
}

FailureOr<Shape> mlir::gpuc::inferPool2DShape(ArrayRef<int64_t> input,
                                              ArrayRef<int64_t> kernel,
                                              ArrayRef<int64_t> strides,
                                              ArrayRef<int64_t> pads,
                                              EmitErrorFn emitError) {
  if (input.size() != 4)
    return emitError() << "input must be rank 4 (NCHW)";
  if (kernel.size() != 2 || strides.size() != 2 || pads.size() != 4)
    return emitError() << "needs 2 kernel sizes, 2 strides and 4 pads";
  Shape result = {input[0], input[1], 0, 0};
  for (int i = 0; i < 2; ++i) {
    if (pads[i] >= kernel[i] || pads[2 + i] >= kernel[i])
      return emitError() << "padding must be smaller than the kernel";
    FailureOr<int64_t> extent =
        windowExtent(input[2 + i], kernel[i], strides[i], pads[i], pads[2 + i],
                     1, emitError);
    if (failed(extent))
      return failure();
    result[2 + i] = *extent;
  }
  return result;
}
