//===- AttentionGemms.h - attention as GEMMs around row kernels -*- C++ -*-===//
#ifndef GPUC_TRANSFORMS_ATTENTIONGEMMS_H
#define GPUC_TRANSFORMS_ATTENTIONGEMMS_H

#include "mlir/IR/PatternMatch.h"

namespace mlir::gpuc {

/// gpuc.attention and gpuc.attention_grad as batched GEMMs around row
/// kernels (gpuc-decompose's `attention=gemm`); a causal mask's GEMMs in
/// bands of about `bandRows` rows that skip its triangle (0: whole).
void populateAttentionGemmPatterns(RewritePatternSet &patterns,
                                   int64_t bandRows);

} // namespace mlir::gpuc

#endif // GPUC_TRANSFORMS_ATTENTIONGEMMS_H
