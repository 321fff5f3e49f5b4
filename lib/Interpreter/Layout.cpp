//===- Layout.cpp - the interpreter: data movement ------------------------===//
//
// Reshapes, transposes, broadcasts, slices, pads, concatenations, gathers
// and scatters, and the grouping of rows by index.
//
//===----------------------------------------------------------------------===//
#include "Executor.h"

#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace mlir::gpuc;
using namespace mlir::gpuc::interpreter;

/// transpose(x, perm): result axis i is x's axis perm[i] (x itself when
/// `perm` is empty).
HostTensor mlir::gpuc::interpreter::transposed(const HostTensor &x,
                                               ArrayRef<int64_t> perm) {
  if (perm.empty())
    return x;
  Index shape;
  for (int64_t p : perm)
    shape.push_back(x.shape[p]);
  HostTensor y(shape, x.elementType);
  Index inStrides = stridesOf(x.shape), index;
  for (int64_t i = 0; i < y.numElements(); ++i) {
    unravel(i, y.shape, index);
    int64_t in = 0;
    for (auto [d, p] : llvm::enumerate(perm))
      in += index[d] * inStrides[p];
    y.data[i] = x.data[in];
  }
  return y;
}

std::optional<LogicalResult> Interpreter::executeLayout(Operation *op) {
  using std::exp;
  return llvm::TypeSwitch<Operation *, std::optional<LogicalResult>>(op)
      // Data movement
      .Case([&](ReshapeOp o) {
        HostTensor y = get(o.getInput());
        y.shape.assign(shapeOf(o.getResult()).begin(),
                       shapeOf(o.getResult()).end());
        set(o.getResult(), std::move(y));
        return success();
      })
      .Case([&](TransposeOp o) {
        set(o.getResult(), transposed(get(o.getInput()), o.getPerm()));
        return success();
      })
      .Case([&](BroadcastOp o) {
        const HostTensor &x = get(o.getInput());
        HostTensor y = like(o.getResult());
        Index inStrides = stridesOf(x.shape), index;
        int64_t lead = y.shape.size() - x.shape.size();
        for (int64_t i = 0; i < y.numElements(); ++i) {
          unravel(i, y.shape, index);
          int64_t in = 0;
          for (int64_t d = 0; d < (int64_t)x.shape.size(); ++d)
            if (x.shape[d] != 1)
              in += index[d + lead] * inStrides[d];
          y.data[i] = x.data[in];
        }
        set(o.getResult(), std::move(y));
        return success();
      })
      .Case([&](SliceOp o) {
        const HostTensor &x = get(o.getInput());
        HostTensor y = like(o.getResult());
        Index inStrides = stridesOf(x.shape), index;
        for (int64_t i = 0; i < y.numElements(); ++i) {
          unravel(i, y.shape, index);
          int64_t in = 0;
          for (size_t d = 0; d < index.size(); ++d)
            in += (o.getStarts()[d] + index[d] * o.getStrides()[d]) *
                  inStrides[d];
          y.data[i] = x.data[in];
        }
        set(o.getResult(), std::move(y));
        return success();
      })
      .Case([&](PadOp o) {
        const HostTensor &x = get(o.getInput());
        HostTensor y = like(o.getResult(), o.getValue().convertToDouble());
        Index outStrides = stridesOf(y.shape), index;
        for (int64_t i = 0; i < x.numElements(); ++i) {
          unravel(i, x.shape, index);
          bool inside = true;
          for (size_t d = 0; d < index.size(); ++d) {
            index[d] += o.getLow()[d];
            inside &= index[d] >= 0 && index[d] < y.shape[d];
          }
          if (inside)
            y.data[ravel(index, outStrides)] = x.data[i];
        }
        set(o.getResult(), std::move(y));
        return success();
      })
      .Case([&](ConcatOp o) {
        HostTensor y = like(o.getResult());
        AxisView out(y.shape, o.getAxis());
        int64_t offset = 0;
        for (Value input : o.getInputs()) {
          const HostTensor &x = get(input);
          AxisView in(x.shape, o.getAxis());
          for (int64_t a = 0; a < in.outer; ++a)
            for (int64_t k = 0; k < in.size; ++k)
              for (int64_t b = 0; b < in.inner; ++b)
                y.data[out.at(a, offset + k, b)] = x.data[in.at(a, k, b)];
          offset += in.size;
        }
        set(o.getResult(), std::move(y));
        return success();
      })
      .Case([&](GatherOp o) -> LogicalResult {
        const HostTensor &x = get(o.getData());
        const HostTensor &indices = get(o.getIndices());
        AxisView in(x.shape, o.getAxis());
        HostTensor y = like(o.getResult());
        int64_t n = indices.numElements();
        for (int64_t a = 0; a < in.outer; ++a)
          for (int64_t j = 0; j < n; ++j) {
            int64_t k = (int64_t)indices.data[j];
            if (k < 0)
              k += in.size;
            if (k < 0 || k >= in.size)
              return o.emitOpError()
                     << "index " << (int64_t)indices.data[j] << " is outside [-"
                     << in.size << ", " << in.size << ")";
            for (int64_t b = 0; b < in.inner; ++b)
              y.data[(a * n + j) * in.inner + b] = x.data[in.at(a, k, b)];
          }
        set(o.getResult(), std::move(y));
        return success();
      })
      .Case([&](ScatterAddOp o) -> LogicalResult {
        const HostTensor &u = get(o.getUpdates());
        const HostTensor &indices = get(o.getIndices());
        HostTensor y = like(o.getResult());
        AxisView out(y.shape, o.getAxis());
        int64_t n = indices.numElements();
        for (int64_t a = 0; a < out.outer; ++a)
          for (int64_t j = 0; j < n; ++j) {
            int64_t k = (int64_t)indices.data[j];
            if (k < 0)
              k += out.size;
            if (k < 0 || k >= out.size)
              return o.emitOpError()
                     << "index " << (int64_t)indices.data[j] << " is outside [-"
                     << out.size << ", " << out.size << ")";
            for (int64_t b = 0; b < out.inner; ++b)
              y.data[out.at(a, k, b)] += u.data[(a * n + j) * out.inner + b];
          }
        set(o.getResult(), std::move(y));
        return success();
      })
      .Case([&](RowGroupsOp o) -> LogicalResult {
        const HostTensor &indices = get(o.getIndices());
        int64_t rows = o.getRows(), n = indices.numElements();
        SmallVector<int64_t> rowOf(n);
        for (int64_t j = 0; j < n; ++j) {
          int64_t k = (int64_t)indices.data[j];
          if (k < 0)
            k += rows;
          if (k < 0 || k >= rows)
            return o.emitOpError()
                   << "index " << (int64_t)indices.data[j] << " is outside [-"
                   << rows << ", " << rows << ")";
          rowOf[j] = k;
        }
        SmallVector<int64_t> groupOffsets, groupOrder;
        RowGroupsOp::group(rowOf, rows, groupOffsets, groupOrder);
        HostTensor offsets = like(o.getOffsets()), order = like(o.getOrder());
        offsets.data.assign(groupOffsets.begin(), groupOffsets.end());
        order.data.assign(groupOrder.begin(), groupOrder.end());
        set(o.getOffsets(), std::move(offsets));
        set(o.getOrder(), std::move(order));
        return success();
      })
      .Case([&](SegmentSumOp o) -> LogicalResult {
        const HostTensor &u = get(o.getUpdates());
        const HostTensor &offsets = get(o.getOffsets());
        const HostTensor &order = get(o.getOrder());
        HostTensor y = like(o.getResult());
        AxisView out(y.shape, o.getAxis()), in(u.shape, o.getAxis());
        for (int64_t k = 0; k < out.size; ++k) {
          auto begin = (int64_t)offsets.data[k],
               end = (int64_t)offsets.data[k + 1];
          if (begin < 0 || begin > end || end > in.size)
            return o.emitOpError()
                   << "row " << k << "'s group [" << begin << ", " << end
                   << ") is not within the " << in.size << " positions";
          for (int64_t p = begin; p < end; ++p) {
            auto j = (int64_t)order.data[p];
            if (j < 0 || j >= in.size)
              return o.emitOpError() << "position " << j << " is outside [0, "
                                     << in.size << ")";
            for (int64_t a = 0; a < out.outer; ++a)
              for (int64_t b = 0; b < out.inner; ++b)
                y.data[out.at(a, k, b)] += u.data[in.at(a, j, b)];
          }
        }
        set(o.getResult(), std::move(y));
        return success();
      })
      .Default([](Operation *) { return std::nullopt; });
}
