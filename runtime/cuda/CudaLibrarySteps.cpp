//===- CudaLibrarySteps.cpp - GEMMs and convolutions by library --------===//
//
// cuBLASLt GEMMs (algorithm candidates from the heuristic, timed once per
// shape) and cuDNN convolutions (a deterministic algorithm within the
// workspace limit), prepared when the plan is loaded.
//
//===----------------------------------------------------------------------===//
#include "CudaDevice.h"

#include <algorithm>

#include "gpuc/runtime/AtomicFile.h"
#include "gpuc/runtime/ColumnMajorGemm.h"

namespace gpuc {
namespace cuda_device {

bool CudaDevice::prepareGemm(Step &step, const nlohmann::json &s,
                             std::string &error) {
  GemmStep g = gemmStepOf(s);
  ColumnMajorGemm lt;
  if (!columnMajorGemmOf(g, lt, error))
    return false;
  // f16/bf16 operands and result (mixed precision), accumulated in f32.
  std::string dtype = s.value("dtype", "F32");
  cudaDataType_t dataType = dtype == "F16"    ? CUDA_R_16F
                            : dtype == "BF16" ? CUDA_R_16BF
                                              : CUDA_R_32F;
  if (dataType == CUDA_R_32F && dtype != "F32") {
    error = "plan.json: a gemm step of dtype " + dtype +
            " (the CUDA device computes F32, F16 and BF16 ones); recompile";
    return false;
  }
  // 16-bit operands may store f32 products (a head's weight gradient,
  // summed over its chunks).
  std::string resultDtype = s.value("c_dtype", dtype);
  cudaDataType_t resultType = dataType;
  if (resultDtype != dtype) {
    if (resultDtype != "F32" || dataType == CUDA_R_32F) {
      error = "plan.json: a gemm step stores " + resultDtype + " products of " +
              dtype +
              " operands (the CUDA device stores their own type or F32); "
              "recompile";
      return false;
    }
    resultType = CUDA_R_32F;
  }
  int64_t elementBytes = dataType == CUDA_R_32F ? 4 : 2;
  int64_t resultBytes = resultType == CUDA_R_32F ? 4 : 2;
  step.dtype = dtype;
  step.id0 = s["a"];
  step.id1 = s["b"];
  step.id2 = s["c"];
  step.offset0 = lt.second.offset * elementBytes;
  step.offset1 = lt.first.offset * elementBytes;
  step.offset2 = lt.result.offset * resultBytes;
  step.accumulate = g.accumulate;
  step.calls = lt.calls;
  step.callStrideA = lt.second.callStride * elementBytes;
  step.callStrideB = lt.first.callStride * elementBytes;
  step.callStrideC = lt.result.callStride * resultBytes;
  // cuBLASLt's A is B's memory, its B A's (columnMajorGemmOf).
  cublasOperation_t opFirst = lt.transFirst ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opSecond = lt.transSecond ? CUBLAS_OP_T : CUBLAS_OP_N;
  auto fail = [&](cublasStatus_t status, const char *what) {
    error = std::string("cuBLASLt ") + what + " failed for GEMM " +
            std::to_string(g.m) + "x" + std::to_string(g.n) + "x" +
            std::to_string(g.k) + ": " + cublasLtGetStatusString(status);
    return false;
  };
  cublasStatus_t st;
  // F32 operands on FMA units, on TF32 tensor cores where the model was
  // compiled --tf32 (10-bit mantissas in the products, f32 sums), or
  // rounded to bf16 on tensor cores (--f32-gemms=bf16: 8-bit mantissas,
  // f32 sums, twice TF32's peak).
  cublasComputeType_t compute = dataType != CUDA_R_32F ? CUBLAS_COMPUTE_32F
                                : f32GemmsBf16 ? CUBLAS_COMPUTE_32F_FAST_16BF
                                : tf32         ? CUBLAS_COMPUTE_32F_FAST_TF32
                                               : CUBLAS_COMPUTE_32F;
  if ((st = cublasLtMatmulDescCreate(&step.gemmDesc, compute, CUDA_R_32F)) !=
      CUBLAS_STATUS_SUCCESS)
    return fail(st, "cublasLtMatmulDescCreate");
  cublasLtMatmulDescSetAttribute(step.gemmDesc, CUBLASLT_MATMUL_DESC_TRANSA,
                                 &opFirst, sizeof(opFirst));
  cublasLtMatmulDescSetAttribute(step.gemmDesc, CUBLASLT_MATMUL_DESC_TRANSB,
                                 &opSecond, sizeof(opSecond));
  // The bias epilogue: a vector over the row-major C's columns, the rows of
  // cuBLASLt's column-major D, of the result's type (its bias type), added
  // to the f32 sums before D is rounded; every batch entry and call adds
  // the same vector (batch stride 0). Its address is set once memory is.
  if (s.contains("bias")) {
    step.idBias = s["bias"];
    cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    int32_t biasType = resultType;
    if ((st = cublasLtMatmulDescSetAttribute(
             step.gemmDesc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
             sizeof(epilogue))) != CUBLAS_STATUS_SUCCESS ||
        (st = cublasLtMatmulDescSetAttribute(
             step.gemmDesc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &biasType,
             sizeof(biasType))) != CUBLAS_STATUS_SUCCESS)
      return fail(st, "the bias epilogue's cublasLtMatmulDescSetAttribute");
  }
  auto layout = [&](cublasLtMatrixLayout_t &l, const ColumnMajorMatrix &x,
                    cudaDataType_t type) {
    if ((st = cublasLtMatrixLayoutCreate(&l, type, x.rows, x.cols, x.ld)) !=
        CUBLAS_STATUS_SUCCESS)
      return false;
    if (lt.batch > 1) {
      int32_t count = (int32_t)lt.batch;
      cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                       &count, sizeof(count));
      cublasLtMatrixLayoutSetAttribute(
          l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &x.batchStride,
          sizeof(x.batchStride));
    }
    return true;
  };
  if (!layout(step.layoutA, lt.first, dataType) ||
      !layout(step.layoutB, lt.second, dataType) ||
      !layout(step.layoutC, lt.result, resultType))
    return fail(st, "cublasLtMatrixLayoutCreate");
  cublasLtMatmulPreference_t preference;
  cublasLtMatmulPreferenceCreate(&preference);
  uint64_t limit = workspaceBytes;
  cublasLtMatmulPreferenceSetAttribute(preference,
                                       CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                       &limit, sizeof(limit));
  // The heuristic assumes 256-byte aligned matrices unless told less: an
  // arena buffer is only 64-byte aligned, and a window or a call starts
  // where its offset or stride puts it. Each matrix's alignment is the
  // largest power of two dividing every address it starts at.
  auto alignment = [&](int id, int64_t offset, int64_t callStride) {
    const PlanBuffer &b = plan.buffers[id];
    return commonAlignment({b.persistent() ? 0 : b.offset, offset, callStride},
                           (uint32_t)kAlignment);
  };
  // cuBLASLt's A is B's memory, its B A's, C and D are C.
  uint32_t aligned[] = {alignment(step.id1, step.offset1, step.callStrideB),
                        alignment(step.id0, step.offset0, step.callStrideA),
                        alignment(step.id2, step.offset2, step.callStrideC),
                        alignment(step.id2, step.offset2, step.callStrideC)};
  const cublasLtMatmulPreferenceAttributes_t alignments[] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; i < 4; ++i)
    cublasLtMatmulPreferenceSetAttribute(preference, alignments[i], &aligned[i],
                                         sizeof(aligned[i]));
  // The heuristic's candidates, in its order; chooseLibraryAlgorithms times
  // them once the memory is there.
  cublasLtMatmulHeuristicResult_t results[kGemmCandidates] = {};
  int found = 0;
  st = cublasLtMatmulAlgoGetHeuristic(
      blas, step.gemmDesc, step.layoutA, step.layoutB, step.layoutC,
      step.layoutC, preference, kGemmCandidates, results, &found);
  cublasLtMatmulPreferenceDestroy(preference);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0) {
    fail(st == CUBLAS_STATUS_SUCCESS ? CUBLAS_STATUS_NOT_SUPPORTED : st,
         "cublasLtMatmulAlgoGetHeuristic");
    if (step.idBias >= 0)
      error += " (it adds a bias as its epilogue; gpuc compile "
               "--no-gemm-epilogues leaves the bias to the next kernel)";
    return false;
  }
  step.algo = results[0].algo;
  for (int i = 0; i < found; ++i)
    step.candidates.push_back(results[i].algo);
  step.shape =
      std::to_string(lt.cols) + "x" + std::to_string(lt.rows) + "x" +
      std::to_string(lt.depth) + (lt.transSecond ? " A^T" : "") +
      (lt.transFirst ? " B^T" : "") + (step.idBias >= 0 ? " +bias" : "") +
      (lt.batch > 1 ? " batch " + std::to_string(lt.batch) : "") +
      (step.calls > 1 ? " x" + std::to_string(step.calls) + " calls" : "");
  return true;
}

size_t CudaDevice::candidateCount(const Step &step) {
  return step.kind == StepKind::Gemm     ? step.candidates.size()
         : step.kind == StepKind::Kernel ? step.kernelCandidates.size()
                                         : step.convCandidates.size();
}

void CudaDevice::takeCandidate(Step &step, size_t candidate) {
  if (step.kind == StepKind::Gemm)
    step.algo = step.candidates[candidate];
  else if (step.kind == StepKind::Kernel) {
    step.function = step.kernelCandidates[candidate];
    step.block = step.kernelCandidateBlocks[candidate];
    step.sharedBytes = step.kernelCandidateShared[candidate];
  } else
    step.convAlgo = step.convCandidates[candidate];
}

bool CudaDevice::timeCandidate(Step &step, size_t candidate, double &us,
                               int repeats) {
  std::string error;
  takeCandidate(step, candidate);
  return timeCalls([&] { return issueStep(step, compute, error); }, us,
                   repeats);
}

bool CudaDevice::timeCalls(const std::function<bool()> &issue, double &us,
                           int repeats) {
  // The warm-up runs alone: a candidate the library refuses (cuDNN can
  // refuse an algorithm its heuristic proposed) is left out, not timed.
  cuEventRecord(timingStart, compute);
  bool issued = issue();
  cuEventRecord(timingStop, compute);
  if (!issued || cuStreamSynchronize(compute) != CUDA_SUCCESS)
    return false;
  if (repeats == 0)
    return true;
  // A candidate whose one run takes more than the timing's budget (30 ms)
  // is timed in fewer runs, at least one: that long a run is timed well
  // enough by itself, and the load stays short where a launch is slow (a
  // GPU's first launch of a large convolution, or the host CUDA's
  // emulated kernels). A kernel's candidate of up to 3 ms (10 runs) and a
  // convolution's of up to 10 ms (3 runs) are still timed in all of them.
  constexpr float kTimingBudgetMs = 30;
  float warmMs = 0;
  if (cuEventElapsedTime(&warmMs, timingStart, timingStop) == CUDA_SUCCESS &&
      warmMs > 0)
    repeats = std::clamp((int)(kTimingBudgetMs / warmMs), 1, repeats);
  cuEventRecord(timingStart, compute);
  for (int r = 0; r < repeats; ++r)
    if (!issue())
      return false;
  cuEventRecord(timingStop, compute);
  if (cuEventSynchronize(timingStop) != CUDA_SUCCESS)
    return false;
  float ms = 0;
  cuEventElapsedTime(&ms, timingStart, timingStop);
  us = 1e3 * ms / repeats;
  return true;
}

int CudaDevice::timingRepeats(const Step &step) {
  // A convolution over a real batch runs for milliseconds, and a model has
  // dozens of shapes, each with several candidates: 3 runs time it well
  // enough at a tenth of the load time 10 would take. A kernel's entry
  // points differ by a few percent: 10 runs.
  return step.kind == StepKind::Conv ||
                 step.kind == StepKind::ConvBackwardInput ||
                 step.kind == StepKind::ConvBackwardFilter
             ? 3
             : 10;
}

void CudaDevice::chooseLibraryAlgorithms(const std::string &dir) {
  // A measured choice can differ from one process to the next, and two
  // algorithms may round differently: the choices are kept beside the plan
  // (library-algorithms.json, per GPU), so every later run of the artifact
  // on this GPU takes the same ones and replays stay bit-identical. Only
  // deterministic convolution algorithms are candidates, so a choice never
  // costs reproducibility. A kernel's entry points (the same text under
  // other bounds) are chosen the same way; they compute the same bits.
  std::string path = dir + "/library-algorithms.json";
  nlohmann::json cache = nlohmann::json::object();
  if (std::ifstream in(path); in)
    cache = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!cache.is_object())
    cache = nlohmann::json::object();
  std::string gpu = description.substr(0, description.find(" (sm_"));
  nlohmann::json &choices = cache[gpu];
  if (!choices.is_object())
    choices = nlohmann::json::object();
  bool changed = false;
  for (auto &[name, steps] : programs)
    for (Step &step : steps) {
      bool conv = step.kind == StepKind::Conv ||
                  step.kind == StepKind::ConvBackwardInput ||
                  step.kind == StepKind::ConvBackwardFilter;
      size_t count = candidateCount(step);
      bool kernel = step.kind == StepKind::Kernel && count > 1;
      if ((step.kind != StepKind::Gemm && !conv && !kernel) || count == 0)
        continue;
      bool timed = !kernel || timeable(step, /*atLoad=*/true);
      // checkConvAlgorithms left a convolution on the first candidate
      // that runs.
      size_t fallback = 0;
      if (conv)
        fallback = std::find(step.convCandidates.begin(),
                             step.convCandidates.end(), step.convAlgo) -
                   step.convCandidates.begin();
      step.chosen = fallback;
      std::string key = conv ? step.label + " " + step.shape : step.shape;
      auto known = choices.find(key);
      double check = 0;
      if (known != choices.end() && known->is_number_unsigned() &&
          known->get<size_t>() < count &&
          (!conv ||
           timeCandidate(step, known->get<size_t>(), check, /*repeats=*/0))) {
        step.chosen = known->get<size_t>();
      } else if (count > 1 && timed) {
        // The first in the heuristic's order within 10 % of the fastest:
        // a near tie keeps the heuristic's pick. A kernel's entry points
        // round alike, so only the timing's noise (2 %) keeps its first.
        std::vector<double> us(count, 1e30);
        for (size_t c = 0; c < count; ++c)
          if (!timeCandidate(step, c, us[c], timingRepeats(step)))
            us[c] = 1e30;
        double best = *std::min_element(us.begin(), us.end());
        double tie = kernel ? 1.02 : 1.1;
        if (kernel)
          step.loadMicros = us;
        if (best < 1e30) {
          step.chosen = 0;
          while (step.chosen + 1 < count && us[step.chosen] > tie * best)
            ++step.chosen;
          choices[key] = step.chosen;
          changed = true;
        }
      }
      takeCandidate(step, step.chosen);
    }
  // cuDNN's attention against the kernels it stands in for, with the
  // entry points just chosen.
  chooseCudnnAttention(choices, changed);
  // Ranks of a data-parallel run on one machine may write it at once: each
  // file is one rank's whole choices, the last to finish.
  std::string error;
  if (changed && !writeFileAtomically(path, cache.dump(1) + "\n", error))
    fprintf(stderr,
            "cuda: the algorithms and entry points chosen are not kept (%s); "
            "the next run times them again\n",
            error.c_str());
}

void CudaDevice::reportLibraryCandidates() {
  fprintf(stderr, "gpuc profile (cuda): cuBLASLt GEMMs and cuDNN "
                  "convolutions, us per call of each candidate algorithm "
                  "(heuristic order; - where the library refuses it), and "
                  "generated kernels' alternative entry points:\n");
  for (auto &[name, steps] : programs)
    for (size_t i = 0; i < steps.size(); ++i) {
      Step &step = steps[i];
      // A kernel step that cannot run again now shows its times at load.
      bool kernel = step.kind == StepKind::Kernel;
      bool atLoad = kernel && !timeable(step, /*atLoad=*/false);
      size_t count = step.kind == StepKind::Gemm ||
                             !step.convCandidates.empty() ||
                             (kernel && (!atLoad || !step.loadMicros.empty()))
                         ? candidateCount(step)
                         : 0;
      if (count < 2)
        continue;
      std::string line;
      for (size_t c = 0; c < count; ++c) {
        double us = 0;
        // A kernel's candidates by name.
        std::string entry = kernel ? " " + step.kernelCandidateNames[c] : "";
        char text[40];
        bool timed = atLoad ? (us = step.loadMicros[c]) < 1e30
                            : timeCandidate(step, c, us, timingRepeats(step));
        if (timed)
          snprintf(text, sizeof text, " %.1f%s", us,
                   c == step.chosen ? "*" : "");
        else
          snprintf(text, sizeof text, " -");
        line += " #" + std::to_string(c) + entry + text;
      }
      takeCandidate(step, step.chosen);
      fprintf(stderr, "  %s step %zu (%s):%s%s\n", name.c_str(), i,
              step.shape.c_str(), line.c_str(), atLoad ? " (at load)" : "");
    }
}

bool CudaDevice::prepareConv(Step &step, const nlohmann::json &s,
                             std::string &error) {
  ConvGeometry g = convGeometryOf(s);
  step.id0 = s["x"];
  step.id1 = s["w"];
  step.id2 = s["y"];
  // With the step's kind (its label), what names the algorithm choice:
  // the data type and the whole geometry.
  step.shape = s.value("dtype", "F32") + " " + s["x_shape"].dump() + " * " +
               s["w_shape"].dump() + (g.channelsLast ? " NHWC" : "") +
               " strides " + s["strides"].dump() + " pads " + s["pads"].dump() +
               " dilations " + s["dilations"].dump() + " groups " +
               std::to_string(g.groups);
  auto fail = [&](cudnnStatus_t status, const char *what) {
    error = std::string("cuDNN ") + what + " failed for " + step.label + " " +
            s["x_shape"].dump() + " * " + s["w_shape"].dump() + ": " +
            cudnnGetErrorString(status);
    return false;
  };
  std::string dtype = s.value("dtype", "F32");
  cudnnDataType_t dataType = dtype == "F16"    ? CUDNN_DATA_HALF
                             : dtype == "BF16" ? CUDNN_DATA_BFLOAT16
                                               : CUDNN_DATA_FLOAT;
  if (dataType == CUDNN_DATA_FLOAT && dtype != "F32") {
    error = "plan.json: a " + step.label + " step of dtype " + dtype +
            " (the CUDA device computes F32, F16 and BF16 ones); recompile";
    return false;
  }
  bool tensorCores = dataType != CUDNN_DATA_FLOAT || tf32;
  cudnnStatus_t st;
  if ((st = cudnnCreateTensorDescriptor(&step.xDesc)) ||
      (st = cudnnCreateTensorDescriptor(&step.yDesc)) ||
      (st = cudnnCreateFilterDescriptor(&step.wDesc)) ||
      (st = cudnnCreateConvolutionDescriptor(&step.convDesc)))
    return fail(st, "descriptor creation");
  // f32 accumulation for every data type; tensor cores for f16/bf16, and
  // for f32 only with --tf32 (TF32 is 1e-3 away from the interpreter).
  // Channels last (NHWC tensors, KHWC filters) is what tensor cores read;
  // NCHW ones cuDNN reorders around its tensor-core kernels.
  cudnnTensorFormat_t format =
      g.channelsLast ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  if ((st = cudnnSetTensor4dDescriptor(step.xDesc, format, dataType, g.n, g.c,
                                       g.h, g.w)) ||
      (st = cudnnSetTensor4dDescriptor(step.yDesc, format, dataType, g.n, g.k,
                                       g.oh, g.ow)) ||
      (st = cudnnSetFilter4dDescriptor(step.wDesc, dataType, format, g.k, g.cg,
                                       g.kh, g.kw)) ||
      (st = cudnnSetConvolution2dDescriptor(
           step.convDesc, g.py, g.px, g.sy, g.sx, g.dy, g.dx,
           CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT)) ||
      (st = cudnnSetConvolutionGroupCount(step.convDesc, g.groups)) ||
      (st = cudnnSetConvolutionMathType(
           step.convDesc, tensorCores ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH)))
    return fail(st, "descriptor setup");
  // The first deterministic algorithm cuDNN's heuristics rank that fits the
  // workspace limit, on tensor cores only where the data type allows them
  // (never converting f32 operands to f16): the same choice on every run
  // of this GPU, so runs are reproducible and graph replay matches
  // kernel-by-kernel launches.
  // Every such algorithm is kept, in the heuristic's order, for
  // checkConvAlgorithms to fall back on; the workspace fits all of them.
  auto choose = [&](auto *perfs, int count, size_t &memory) -> int {
    for (int i = 0; i < count; ++i)
      if (perfs[i].status == CUDNN_STATUS_SUCCESS &&
          perfs[i].determinism == CUDNN_DETERMINISTIC &&
          (tensorCores || perfs[i].mathType != CUDNN_TENSOR_OP_MATH) &&
          perfs[i].mathType != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION &&
          perfs[i].memory <= kConvWorkspaceLimit) {
        memory = std::max(memory, perfs[i].memory);
        step.convCandidates.push_back((int)perfs[i].algo);
      }
    return step.convCandidates.empty() ? -1 : step.convCandidates[0];
  };
  size_t memory = 0;
  int count = 0;
  if (step.kind == StepKind::Conv) {
    cudnnConvolutionFwdAlgoPerf_t perfs[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    if ((st = cudnnGetConvolutionForwardAlgorithm_v7(
             dnn, step.xDesc, step.wDesc, step.convDesc, step.yDesc,
             CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count, perfs)))
      return fail(st, "cudnnGetConvolutionForwardAlgorithm_v7");
    step.convAlgo = choose(perfs, count, memory);
  } else if (step.kind == StepKind::ConvBackwardInput) {
    cudnnConvolutionBwdDataAlgoPerf_t
        perfs[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    if ((st = cudnnGetConvolutionBackwardDataAlgorithm_v7(
             dnn, step.wDesc, step.yDesc, step.convDesc, step.xDesc,
             CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &count, perfs)))
      return fail(st, "cudnnGetConvolutionBackwardDataAlgorithm_v7");
    step.convAlgo = choose(perfs, count, memory);
  } else {
    cudnnConvolutionBwdFilterAlgoPerf_t
        perfs[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    if ((st = cudnnGetConvolutionBackwardFilterAlgorithm_v7(
             dnn, step.xDesc, step.yDesc, step.convDesc, step.wDesc,
             CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &count, perfs)))
      return fail(st, "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
    step.convAlgo = choose(perfs, count, memory);
  }
  if (step.convAlgo < 0)
    return fail(CUDNN_STATUS_NOT_SUPPORTED,
                "algorithm choice (no deterministic FP32 algorithm)");
  workspaceBytes = std::max(workspaceBytes, memory);
  return true;
}

bool CudaDevice::replaceRefusedAlgorithm(Step &step, std::string &error) {
  auto &candidates = step.convCandidates;
  candidates.erase(
      std::remove(candidates.begin(), candidates.end(), step.convAlgo),
      candidates.end());
  for (size_t c = 0; c < candidates.size(); ++c) {
    double unused = 0;
    if (timeCandidate(step, c, unused, /*repeats=*/0)) {
      step.chosen = c;
      return true;
    }
  }
  error = "cuDNN runs none of the other deterministic algorithms it proposes "
          "for " +
          step.label + " " + step.shape + " (--precision fp32 may have one)";
  return false;
}

bool CudaDevice::checkConvAlgorithms(std::string &error) {
  for (auto &[name, steps] : programs)
    for (Step &step : steps) {
      if (step.kind != StepKind::Conv &&
          step.kind != StepKind::ConvBackwardInput &&
          step.kind != StepKind::ConvBackwardFilter)
        continue;
      // The step's output is written before the first training step runs,
      // which computes it again (as the GEMMs' timing does).
      std::string refusals;
      for (int algo : step.convCandidates) {
        step.convAlgo = algo;
        std::string failure;
        if (issueStep(step, compute, failure) &&
            check(cuStreamSynchronize(compute), "cuStreamSynchronize",
                  failure)) {
          if (!refusals.empty())
            fprintf(stderr,
                    "cuda: cuDNN refused %s's proposed algorithms for %s "
                    "(%s); it runs algorithm %d\n",
                    step.label.c_str(), step.shape.c_str(), refusals.c_str(),
                    algo);
          refusals.clear();
          break;
        }
        refusals += (refusals.empty() ? "" : "; ") + failure;
      }
      if (!refusals.empty()) {
        error = "cuDNN runs none of the deterministic algorithms it proposes "
                "for " +
                step.label + " " + step.shape + ": " + refusals +
                " (--precision fp32 may have one)";
        return false;
      }
    }
  return true;
}

} // namespace cuda_device
} // namespace gpuc
