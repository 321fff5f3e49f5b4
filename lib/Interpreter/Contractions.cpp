//===- Contractions.cpp - the interpreter: matmuls, convolutions ----------===//
//
// Products as plain loops over every term, summed in double.
//
//===----------------------------------------------------------------------===//
#include "Executor.h"

#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace mlir::gpuc;
using namespace mlir::gpuc::interpreter;

namespace {
/// The columns `window` reads of x's rows, split into its shape
/// (gpuc.matmul's lhs_window and rhs_window); x itself without one.
HostTensor columnsOf(const HostTensor &x, ColumnsAttr window) {
  if (!window)
    return x;
  Index shape(x.shape.begin(), x.shape.end() - 1);
  llvm::append_range(shape, window.getShape());
  HostTensor y(shape, x.elementType);
  int64_t width = window.getWidth(), row = x.shape.back();
  for (int64_t i = 0; i < y.numElements(); ++i)
    y.data[i] = x.data[(i / width) * row + window.getOffset() + i % width];
  return y;
}

/// Calls `visit(outIndex, inIndex, weightIndex)` for every term of a 2-D
/// convolution: the one loop nest that forward, backward-input and
/// backward-filter all share.
void forEachConvTerm(ArrayRef<int64_t> x, ArrayRef<int64_t> w,
                     ArrayRef<int64_t> y, ArrayRef<int64_t> strides,
                     ArrayRef<int64_t> pads, ArrayRef<int64_t> dilations,
                     int64_t groups,
                     function_ref<void(int64_t, int64_t, int64_t)> visit) {
  int64_t n = x[0], c = x[1], ih = x[2], iw = x[3];
  int64_t o = w[0], cg = w[1], kh = w[2], kw = w[3];
  int64_t oh = y[2], ow = y[3];
  int64_t og = o / groups;
  (void)c;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t oc = 0; oc < o; ++oc) {
      int64_t g = oc / og;
      for (int64_t yy = 0; yy < oh; ++yy)
        for (int64_t xx = 0; xx < ow; ++xx) {
          int64_t out = ((b * o + oc) * oh + yy) * ow + xx;
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t ky = 0; ky < kh; ++ky) {
              int64_t iy = yy * strides[0] - pads[0] + ky * dilations[0];
              if (iy < 0 || iy >= ih)
                continue;
              for (int64_t kx = 0; kx < kw; ++kx) {
                int64_t ix = xx * strides[1] - pads[1] + kx * dilations[1];
                if (ix < 0 || ix >= iw)
                  continue;
                int64_t in = ((b * x[1] + g * cg + ci) * ih + iy) * iw + ix;
                int64_t wt = ((oc * cg + ci) * kh + ky) * kw + kx;
                visit(out, in, wt);
              }
            }
        }
    }
}
} // namespace

std::optional<LogicalResult> Interpreter::executeContraction(Operation *op) {
  using std::exp;
  return llvm::TypeSwitch<Operation *, std::optional<LogicalResult>>(op)
      // Contractions and windows
      .Case([&](MatmulOp o) {
        // The operands as the product reads them, and the product before
        // its layout.
        HostTensor a = transposed(
            columnsOf(get(o.getLhs()), o.getLhsWindowAttr()), o.getLhsPerm());
        // A triangle's entries of the lhs read as zero; the result's are
        // not computed, NaN here so that a reader that depends on them
        // shows.
        auto inTriangle = [](ComparePredicate p, int64_t row, int64_t col) {
          return p == ComparePredicate::gt ? col > row : col < row;
        };
        auto overTriangle = [&](HostTensor &t, ComparePredicate p,
                                double value) {
          int64_t rows = t.shape.end()[-2], cols = t.shape.back();
          for (size_t e = 0; e < t.data.size(); ++e)
            if (inTriangle(p, (int64_t)(e / cols) % rows, (int64_t)e % cols))
              t.data[e] = value;
        };
        if (std::optional<ComparePredicate> p = o.getLhsTriangle())
          overTriangle(a, *p, 0.0);
        HostTensor b = transposed(
            columnsOf(get(o.getRhs()), o.getRhsWindowAttr()), o.getRhsPerm());
        Index productShape(a.shape.begin(), a.shape.end() - 2);
        productShape.push_back(o.getTransposeLhs() ? a.shape.back()
                                                   : a.shape.end()[-2]);
        productShape.push_back(o.getTransposeRhs() ? b.shape.end()[-2]
                                                   : b.shape.back());
        HostTensor y(productShape, elementTypeOf(o.getResult()));
        size_t r = y.shape.size();
        int64_t m = y.shape[r - 2], n = y.shape[r - 1];
        int64_t k = o.getTransposeLhs() ? a.shape[r - 2] : a.shape[r - 1];
        int64_t batches = y.numElements() / (m * n);
        bool ta = o.getTransposeLhs(), tb = o.getTransposeRhs();
        for (int64_t p = 0; p < batches; ++p) {
          const double *pa = a.data.data() + p * m * k;
          const double *pb = b.data.data() + p * k * n;
          double *py = y.data.data() + p * m * n;
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) {
              double acc = 0.0;
              for (int64_t l = 0; l < k; ++l)
                acc += (ta ? pa[l * m + i] : pa[i * k + l]) *
                       (tb ? pb[j * k + l] : pb[l * n + j]);
              py[i * n + j] = acc;
            }
        }
        if (Value acc = o.getAcc())
          for (auto [out, plus] : llvm::zip(y.data, get(acc).data))
            out += plus;
        // The bias joins the sums before the result is rounded to its type.
        if (Value bias = o.getBias()) {
          const std::vector<double> &b = get(bias).data;
          for (size_t e = 0; e < y.data.size(); ++e)
            y.data[e] += b[e % n];
        }
        if (std::optional<ComparePredicate> p = o.getResultTriangle())
          overTriangle(y, *p, std::nan(""));
        set(o.getResult(), transposed(y, o.getResultPerm()));
        return success();
      })
      // A channels-last convolution is the NCHW one of its operands' NCHW
      // views, its result held channels last again.
      .Case([&](Conv2DOp o) {
        auto [first, last] = channelsFirstViews(o.getChannelsLast());
        HostTensor x = transposed(get(o.getInput()), first);
        HostTensor w = transposed(get(o.getFilter()), first);
        HostTensor y = transposed(like(o.getResult()), first);
        forEachConvTerm(x.shape, w.shape, y.shape, o.getStrides(), o.getPads(),
                        o.getDilations(), o.getGroups(),
                        [&](int64_t out, int64_t in, int64_t wt) {
                          y.data[out] += x.data[in] * w.data[wt];
                        });
        set(o.getResult(), transposed(y, last));
        return success();
      })
      .Case([&](Conv2DBackwardInputOp o) {
        auto [first, last] = channelsFirstViews(o.getChannelsLast());
        HostTensor dy = transposed(get(o.getGradOutput()), first);
        HostTensor w = transposed(get(o.getFilter()), first);
        HostTensor dx = transposed(like(o.getResult()), first);
        forEachConvTerm(dx.shape, w.shape, dy.shape, o.getStrides(),
                        o.getPads(), o.getDilations(), o.getGroups(),
                        [&](int64_t out, int64_t in, int64_t wt) {
                          dx.data[in] += dy.data[out] * w.data[wt];
                        });
        set(o.getResult(), transposed(dx, last));
        return success();
      })
      .Case([&](Conv2DBackwardFilterOp o) {
        auto [first, last] = channelsFirstViews(o.getChannelsLast());
        HostTensor x = transposed(get(o.getInput()), first);
        HostTensor dy = transposed(get(o.getGradOutput()), first);
        HostTensor dw = transposed(like(o.getResult()), first);
        forEachConvTerm(x.shape, dw.shape, dy.shape, o.getStrides(),
                        o.getPads(), o.getDilations(), o.getGroups(),
                        [&](int64_t out, int64_t in, int64_t wt) {
                          dw.data[wt] += x.data[in] * dy.data[out];
                        });
        set(o.getResult(), transposed(dw, last));
        return success();
      })
      .Default([](Operation *) { return std::nullopt; });
}
