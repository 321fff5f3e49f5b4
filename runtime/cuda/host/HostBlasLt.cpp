//===- HostBlasLt.cpp - the cuBLASLt calls CudaDevice makes, on the host --===//
//
// Column-major, strided-batched D = alpha op(A) op(B) + beta C (+ a bias
// over D's rows), f32, f16 or bf16 operands summed in double (eight
// running sums in a fixed order).
// The heuristic proposes two algorithms (the same loops), so that the
// device's timing and its cache of choices run; an algorithm keeps the
// alignments it was proposed for, and a matrix that does not have them is
// refused at the call, as cuBLASLt's kernels would fault on it.
//
//===----------------------------------------------------------------------===//
#include "HostCuda.h"

#include <cublasLt.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace {

struct Layout {
  cudaDataType type = CUDA_R_32F;
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
  int32_t batch = 1;
  int64_t batchStride = 0;
};

struct MatmulDesc {
  cublasOperation_t transA = CUBLAS_OP_N, transB = CUBLAS_OP_N;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void *bias = nullptr;
  int32_t biasType = -1;
};

struct Preference {
  uint64_t workspace = 0;
  /// The least alignment of A, B, C and D the caller promises (256 where it
  /// says nothing, as cuBLASLt assumes).
  uint32_t alignment[4] = {256, 256, 256, 256};
};

template <typename T, typename Opaque> T *own(Opaque *handle) {
  return reinterpret_cast<T *>(handle);
}

using gpuc::host_cuda::Element;

Element elementOf(cudaDataType type) {
  return type == CUDA_R_16F    ? Element::F16
         : type == CUDA_R_16BF ? Element::BF16
                               : Element::F32;
}

int64_t elementBytes(cudaDataType type) {
  return gpuc::host_cuda::elementBytes(elementOf(type));
}

float load(const void *base, int64_t i, cudaDataType type) {
  return gpuc::host_cuda::loadElement(base, i, elementOf(type));
}

void store(void *base, int64_t i, cudaDataType type, float value) {
  gpuc::host_cuda::storeElement(base, i, elementOf(type), value);
}

bool supported(cudaDataType type) {
  return type == CUDA_R_32F || type == CUDA_R_16F || type == CUDA_R_16BF;
}

/// `count` vectors of `k` elements of the column-major matrix at `base` +
/// `offset`, widened to double into `out`: its rows when `strided` (a row's
/// elements lie `ld` apart), else its columns. op(A)'s rows are A's rows
/// when A is not transposed; op(B)'s columns are B's rows when B is.
void widen(std::vector<double> &out, const void *base, int64_t offset,
           const Layout &l, bool strided, int64_t count, int64_t k) {
  out.resize(count * k);
  for (int64_t v = 0; v < count; ++v)
    for (int64_t e = 0; e < k; ++e)
      out[v * k + e] =
          load(base, offset + (strided ? v + e * l.ld : e + v * l.ld), l.type);
}

/// x . y in double: eight running sums (element e in sum e % 8), added in a
/// fixed order, so every run on every machine gives the same bits and the
/// host compiler can keep the sums in vector registers.
double dot(const double *x, const double *y, int64_t k) {
  constexpr int kSums = 8;
  double sums[kSums] = {};
  int64_t e = 0;
  for (; e + kSums <= k; e += kSums)
    for (int s = 0; s < kSums; ++s)
      sums[s] += x[e + s] * y[e + s];
  for (int s = 0; e < k; ++e, ++s)
    sums[s] += x[e] * y[e];
  for (int width = kSums / 2; width > 0; width /= 2)
    for (int s = 0; s < width; ++s)
      sums[s] += sums[s + width];
  return sums[0];
}

/// Whether all of a layout's elements from `base` lie in device memory.
bool inDevice(const void *base, const Layout &l) {
  if (l.rows == 0 || l.cols == 0)
    return true;
  int64_t last = (int64_t)(l.batch - 1) * l.batchStride +
                 (int64_t)(l.cols - 1) * l.ld + (int64_t)l.rows;
  return gpuc::host_cuda::isDeviceRange(base, last * elementBytes(l.type));
}

} // namespace

extern "C" {

cublasStatus_t cublasLtCreate(cublasLtHandle_t *handle) {
  static int context;
  *handle = reinterpret_cast<cublasLtHandle_t>(&context);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t) {
  return CUBLAS_STATUS_SUCCESS;
}

const char *cublasLtGetStatusString(cublasStatus_t status) {
  switch (status) {
  case CUBLAS_STATUS_SUCCESS:
    return "CUBLAS_STATUS_SUCCESS";
  case CUBLAS_STATUS_INVALID_VALUE:
    return "CUBLAS_STATUS_INVALID_VALUE";
  case CUBLAS_STATUS_NOT_SUPPORTED:
    return "CUBLAS_STATUS_NOT_SUPPORTED";
  case CUBLAS_STATUS_MAPPING_ERROR:
    return "CUBLAS_STATUS_MAPPING_ERROR (host CUDA: a matrix outside device "
           "memory, or less aligned than the heuristic was told)";
  default:
    return "CUBLAS_STATUS_INTERNAL_ERROR";
  }
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *desc,
                                        cublasComputeType_t compute,
                                        cudaDataType_t scale) {
  if (scale != CUDA_R_32F || (compute != CUBLAS_COMPUTE_32F &&
                              compute != CUBLAS_COMPUTE_32F_FAST_TF32 &&
                              compute != CUBLAS_COMPUTE_32F_FAST_16BF))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  *desc = reinterpret_cast<cublasLtMatmulDesc_t>(new MatmulDesc);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete own<MatmulDesc>(desc);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t
cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t handle,
                               cublasLtMatmulDescAttributes_t attribute,
                               const void *value, size_t bytes) {
  MatmulDesc *desc = own<MatmulDesc>(handle);
  auto take = [&](auto &field) {
    if (bytes != sizeof(field))
      return CUBLAS_STATUS_INVALID_VALUE;
    memcpy(&field, value, bytes);
    return CUBLAS_STATUS_SUCCESS;
  };
  switch (attribute) {
  case CUBLASLT_MATMUL_DESC_TRANSA:
    return take(desc->transA);
  case CUBLASLT_MATMUL_DESC_TRANSB:
    return take(desc->transB);
  case CUBLASLT_MATMUL_DESC_EPILOGUE:
    if (cublasStatus_t st = take(desc->epilogue); st != CUBLAS_STATUS_SUCCESS)
      return st;
    return desc->epilogue == CUBLASLT_EPILOGUE_DEFAULT ||
                   desc->epilogue == CUBLASLT_EPILOGUE_BIAS
               ? CUBLAS_STATUS_SUCCESS
               : CUBLAS_STATUS_NOT_SUPPORTED;
  case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
    return take(desc->bias);
  case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
    return take(desc->biasType);
  default:
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *handle,
                                          cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  if (!supported(type) || ld < (int64_t)rows)
    return CUBLAS_STATUS_INVALID_VALUE;
  Layout *layout = new Layout;
  layout->type = type;
  layout->rows = rows;
  layout->cols = cols;
  layout->ld = ld;
  *handle = reinterpret_cast<cublasLtMatrixLayout_t>(layout);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t handle) {
  delete own<Layout>(handle);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t
cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t handle,
                                 cublasLtMatrixLayoutAttribute_t attribute,
                                 const void *value, size_t bytes) {
  Layout *layout = own<Layout>(handle);
  if (attribute == CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT &&
      bytes == sizeof(int32_t)) {
    memcpy(&layout->batch, value, bytes);
    return CUBLAS_STATUS_SUCCESS;
  }
  if (attribute == CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET &&
      bytes == sizeof(int64_t)) {
    memcpy(&layout->batchStride, value, bytes);
    return CUBLAS_STATUS_SUCCESS;
  }
  return CUBLAS_STATUS_NOT_SUPPORTED;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p) {
  *p = reinterpret_cast<cublasLtMatmulPreference_t>(new Preference);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
  delete own<Preference>(p);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(
    cublasLtMatmulPreference_t handle,
    cublasLtMatmulPreferenceAttributes_t attribute, const void *value,
    size_t bytes) {
  Preference *p = own<Preference>(handle);
  int index = -1;
  switch (attribute) {
  case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
    if (bytes != sizeof(uint64_t))
      return CUBLAS_STATUS_INVALID_VALUE;
    memcpy(&p->workspace, value, bytes);
    return CUBLAS_STATUS_SUCCESS;
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
    index = 0;
    break;
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
    index = 1;
    break;
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
    index = 2;
    break;
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
    index = 3;
    break;
  default:
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (bytes != sizeof(uint32_t))
    return CUBLAS_STATUS_INVALID_VALUE;
  memcpy(&p->alignment[index], value, bytes);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t, cublasLtMatmulDesc_t descHandle,
    cublasLtMatrixLayout_t aHandle, cublasLtMatrixLayout_t bHandle,
    cublasLtMatrixLayout_t cHandle, cublasLtMatrixLayout_t dHandle,
    cublasLtMatmulPreference_t preference, int requested,
    cublasLtMatmulHeuristicResult_t results[], int *found) {
  const MatmulDesc *desc = own<MatmulDesc>(descHandle);
  const Layout *a = own<Layout>(aHandle), *b = own<Layout>(bHandle),
               *c = own<Layout>(cHandle), *d = own<Layout>(dHandle);
  *found = 0;
  uint64_t m = desc->transA == CUBLAS_OP_N ? a->rows : a->cols;
  uint64_t k = desc->transA == CUBLAS_OP_N ? a->cols : a->rows;
  uint64_t kb = desc->transB == CUBLAS_OP_N ? b->rows : b->cols;
  uint64_t n = desc->transB == CUBLAS_OP_N ? b->cols : b->rows;
  if (k != kb || d->rows != m || d->cols != n || c->rows != m || c->cols != n ||
      a->type != b->type || c->type != d->type || a->batch != b->batch ||
      a->batch != d->batch)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (desc->epilogue == CUBLASLT_EPILOGUE_BIAS && desc->biasType != -1 &&
      desc->biasType != d->type)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  const Preference *p = own<Preference>(preference);
  for (int i = 0; i < 2 && i < requested; ++i) {
    cublasLtMatmulHeuristicResult_t &r = results[i];
    memset(&r, 0, sizeof(r));
    r.algo.data[0] = i;
    for (int j = 0; j < 4; ++j)
      r.algo.data[1 + j] = p->alignment[j];
    r.state = CUBLAS_STATUS_SUCCESS;
    r.wavesCount = 1.0f;
    ++*found;
  }
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t descHandle,
                              const void *alpha, const void *A,
                              cublasLtMatrixLayout_t aHandle, const void *B,
                              cublasLtMatrixLayout_t bHandle, const void *beta,
                              const void *C, cublasLtMatrixLayout_t cHandle,
                              void *D, cublasLtMatrixLayout_t dHandle,
                              const cublasLtMatmulAlgo_t *algo, void *, size_t,
                              cudaStream_t stream) {
  const MatmulDesc desc = *own<MatmulDesc>(descHandle);
  const Layout a = *own<Layout>(aHandle), b = *own<Layout>(bHandle),
               c = *own<Layout>(cHandle), d = *own<Layout>(dHandle);
  if (!algo)
    return CUBLAS_STATUS_INVALID_VALUE;
  const void *pointers[4] = {A, B, C, D};
  for (int i = 0; i < 4; ++i)
    if ((uintptr_t)pointers[i] % algo->data[1 + i] != 0)
      return CUBLAS_STATUS_MAPPING_ERROR;
  if (!inDevice(A, a) || !inDevice(B, b) || !inDevice(C, c) || !inDevice(D, d))
    return CUBLAS_STATUS_MAPPING_ERROR;
  bool bias = desc.epilogue == CUBLASLT_EPILOGUE_BIAS;
  if (bias && (!desc.bias || !gpuc::host_cuda::isDeviceRange(
                                 desc.bias, d.rows * elementBytes(d.type))))
    return CUBLAS_STATUS_MAPPING_ERROR;
  float scale = *(const float *)alpha, keep = *(const float *)beta;
  gpuc::host_cuda::enqueue((CUstream)stream, [=]() -> CUresult {
    int64_t m = d.rows, n = d.cols;
    int64_t k = desc.transA == CUBLAS_OP_N ? a.cols : a.rows;
    std::vector<double> rowsOfA, columnsOfB;
    for (int32_t batch = 0; batch < d.batch; ++batch) {
      int64_t co = batch * c.batchStride, d0 = batch * d.batchStride;
      // op(A)'s rows and op(B)'s columns, each k contiguous doubles.
      widen(rowsOfA, A, batch * a.batchStride, a, desc.transA == CUBLAS_OP_N, m,
            k);
      widen(columnsOfB, B, batch * b.batchStride, b, desc.transB != CUBLAS_OP_N,
            n, k);
      for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < m; ++i) {
          double sum = dot(&rowsOfA[i * k], &columnsOfB[j * k], k);
          float value = scale * (float)sum;
          if (keep != 0.0f)
            value += keep * load(C, co + i + j * c.ld, c.type);
          if (bias)
            value += load(desc.bias, i, d.type);
          store(D, d0 + i + j * d.ld, d.type, value);
        }
    }
    return CUDA_SUCCESS;
  });
  return CUBLAS_STATUS_SUCCESS;
}

} // extern "C"
