//===- CudaAttentionSteps.cpp - cuDNN's fused attention for kernel steps --===//
//
// A fused attention kernel step whose plan carries `cudnn_attention` (gpuc
// compile --attention-library auto|cudnn): cuDNN's graphs are built while
// the steps resolve (their workspace joins the library workspace), then,
// once memory is bound, each is run beside the generated kernels it would
// replace, on the same operands (random values written where the arena
// holds nothing yet), and it replaces them only where the results agree
// and, where the plan asks for the faster (auto), where it also takes less
// time than they do with their chosen entry points: a choice kept in
// library-algorithms.json, so that every later run on that GPU takes it.
// cuDNN's choice of kernels, not gpuc's, decides its bits: the same on
// every run on one GPU (its backward is asked for deterministically), but
// not the generated kernels' bits.
//
//===----------------------------------------------------------------------===//
#include "CudaDevice.h"

#include "gpuc/runtime/device/Float16.h"

#include <cmath>
#include <cstring>
#include <random>

namespace gpuc {
namespace cuda_device {

namespace {

/// An operand's elements, as floats, from a copy of its argument.
std::vector<float> elementsOf(const CudnnAttentionShape &shape,
                              const std::string &name,
                              const std::vector<char> &bytes) {
  const CudnnAttentionShape::Operand &o = shape.operands.at(name);
  int64_t heads = shape.headsOf(name), rows = shape.rowsOf(name),
          width = shape.widthOf(name);
  std::vector<float> values;
  values.reserve(shape.batch * heads * rows * width);
  for (int64_t b = 0; b < shape.batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < width; ++c) {
          int64_t at = o.offset + b * o.strides[0] + h * o.strides[1] +
                       r * o.strides[2] + c;
          if (name == "lse") {
            float f;
            std::memcpy(&f, bytes.data() + 4 * at, 4);
            values.push_back(f);
            continue;
          }
          uint16_t e;
          std::memcpy(&e, bytes.data() + 2 * at, 2);
          values.push_back(shape.bf16 ? bfloat16BitsToFloat(e)
                                      : halfBitsToFloat(e));
        }
  return values;
}

} // namespace

bool CudaDevice::prepareCudnnAttention(Step &step, const nlohmann::json &s,
                                       std::string &error) {
  std::vector<size_t> argBytes;
  for (int id : step.argIds)
    argBytes.push_back(id >= 0 && id < (int)plan.buffers.size()
                           ? (size_t)plan.buffers[id].bytes
                           : 0);
  std::string problem;
  if (!parseCudnnAttention(s["cudnn_attention"], argBytes, step.cudnnShape,
                           problem)) {
    error = "plan.json: kernel " + step.label + ": " + problem;
    return false;
  }
  // Steps of one descriptor (GPT-2's twelve layers) share its graphs:
  // cuDNN compiles each graph's kernels when it builds it.
  std::string key = s["cudnn_attention"].dump();
  // (A refusal is kept too, said once.)
  if (auto known = cudnnAttentionGraphs.find(key);
      known != cudnnAttentionGraphs.end()) {
    step.pendingCudnn = known->second;
    return true;
  }
  std::string why;
  std::shared_ptr<CudnnAttention> built =
      buildCudnnAttention(dnn, step.cudnnShape, why);
  if (!cudnnAttentionBuilt()) {
    if (!cudnnAttentionNoted)
      fprintf(stderr,
              "cuda: the plan asks for cuDNN's fused attention, but %s: the "
              "generated attention kernels run\n",
              why.c_str());
    cudnnAttentionNoted = true;
    return true;
  }
  cudnnAttentionGraphs[key] = built;
  if (!built) {
    fprintf(stderr,
            "cuda: cuDNN's fused attention does not take %s (%s; nor any "
            "step of its shapes): %s; the generated kernels run\n",
            step.label.c_str(),
            step.cudnnShape.backward ? "backward" : "forward", why.c_str());
    return true;
  }
  workspaceBytes = std::max(workspaceBytes, built->workspaceBytes());
  step.pendingCudnn = std::move(built);
  return true;
}

bool CudaDevice::compareCudnnAttention(std::vector<Step> &steps, size_t i,
                                       double &worst, std::string &worstName,
                                       std::string &failure,
                                       std::string &error) {
  Step &step = steps[i];
  const CudnnAttentionShape &shape = step.cudnnShape;
  const std::vector<CUdeviceptr> &args = step.argValues;
  auto argBytes = [&](int arg) {
    return (size_t)plan.buffers[step.argIds[arg]].bytes;
  };
  // Random operands (the arena holds nothing yet), and a backward's
  // output and logsumexps from cuDNN's forward over them.
  std::mt19937 random(7);
  std::uniform_real_distribution<float> uniform(-1.5f, 1.5f);
  std::vector<std::string> inputs = {"q", "k", "v"};
  if (shape.backward)
    inputs.push_back("d_out");
  std::set<int> filled;
  for (const std::string &input : inputs) {
    int arg = shape.operands.at(input).arg;
    if (!filled.insert(arg).second)
      continue;
    std::vector<uint16_t> values(argBytes(arg) / 2);
    for (uint16_t &v : values)
      v = shape.bf16 ? floatToBFloat16Bits(uniform(random))
                     : floatToHalfBits(uniform(random));
    if (!check(cuMemcpyHtoD(args[arg], values.data(), values.size() * 2),
               "cuMemcpyHtoD", error))
      return false;
  }
  auto copyOutputs = [&](std::map<int, std::vector<char>> &copies) {
    for (const std::string &output : shape.outputs()) {
      // (A fused projection's three gradients are windows of one.)
      int arg = shape.operands.at(output).arg;
      if (copies.count(arg))
        continue;
      std::vector<char> &bytes = copies[arg];
      bytes.resize(argBytes(arg));
      if (!check(cuMemcpyDtoH(bytes.data(), args[arg], bytes.size()),
                 "cuMemcpyDtoH", failure))
        return false;
    }
    return true;
  };
  std::map<int, std::vector<char>> generated, library;
  bool ran =
      (!shape.backward ||
       step.pendingCudnn->runForward(dnn, args, workspace, failure)) &&
      check(cuStreamSynchronize(compute), "cuStreamSynchronize", failure);
  for (int j = 0; ran && j < shape.launches; ++j)
    ran = issueStep(steps[i + j], compute, failure);
  ran = ran &&
        check(cuStreamSynchronize(compute), "cuStreamSynchronize", failure) &&
        copyOutputs(generated) &&
        step.pendingCudnn->run(dnn, args, workspace, failure) &&
        check(cuStreamSynchronize(compute), "cuStreamSynchronize", failure) &&
        copyOutputs(library);
  if (!ran) {
    worst = INFINITY;
    return true;
  }
  // Each output's largest difference against its largest magnitude: both
  // round to 16 bits once from f32 sums, so a few units of the last place;
  // a wrong stride or layout is of the order of 1.
  worst = 0;
  for (const std::string &output : shape.outputs()) {
    int arg = shape.operands.at(output).arg;
    std::vector<float> a = elementsOf(shape, output, generated[arg]),
                       b = elementsOf(shape, output, library[arg]);
    double largest = 1e-6, difference = 0;
    for (size_t e = 0; e < a.size(); ++e) {
      largest = std::max(largest, (double)std::fabs(a[e]));
      double d = std::fabs((double)a[e] - (double)b[e]);
      difference = std::isnan(d) ? INFINITY : std::max(difference, d);
    }
    if (difference / largest >= worst) {
      worst = difference / largest;
      worstName = output;
    }
  }
  double tolerance = shape.backward ? 0.05 : 0.02;
  if (!(worst <= tolerance))
    failure = "its " + worstName + " differs from the kernels' by " +
              std::to_string(worst) + " of its largest magnitude";
  return true;
}

/// What the log calls the attention of `shape`.
static std::string attentionText(const CudnnAttentionShape &shape) {
  char text[200], grouped[48] = "";
  if (shape.keyHeads != shape.heads)
    snprintf(grouped, sizeof grouped, " over %lld key heads",
             (long long)shape.keyHeads);
  snprintf(text, sizeof text,
           "%s, %lld x %lld heads%s, %lld queries by %lld keys, width %lld%s",
           shape.backward ? "backward" : "forward", (long long)shape.batch,
           (long long)shape.heads, grouped, (long long)shape.queries,
           (long long)shape.keys, (long long)shape.width,
           shape.causal ? ", causal" : "");
  return text;
}

bool CudaDevice::checkCudnnAttention(std::string &error) {
  // Each graph is checked once, on its first step: the steps sharing it
  // have the same descriptor, so the same kernels.
  std::map<const CudnnAttention *, bool> verdicts;
  for (auto &[name, steps] : programs)
    for (size_t i = 0; i < steps.size(); ++i) {
      Step &step = steps[i];
      if (!step.pendingCudnn)
        continue;
      const CudnnAttentionShape &shape = step.cudnnShape;
      // The launches it stands in for: this kernel's, in order.
      std::string base = step.label;
      if (shape.launches > 1 && base.size() > 3 &&
          base.compare(base.size() - 3, 3, "_p0") == 0)
        base.resize(base.size() - 3);
      for (int j = 1; j < shape.launches; ++j)
        if (i + j >= steps.size() || steps[i + j].kind != StepKind::Kernel ||
            steps[i + j].label != base + "_p" + std::to_string(j)) {
          error = "plan.json: kernel " + step.label +
                  "'s cudnn_attention stands in for " +
                  std::to_string(shape.launches) +
                  " launches, which do not follow it; recompile the model";
          return false;
        }
      auto verdict = verdicts.find(step.pendingCudnn.get());
      if (verdict == verdicts.end()) {
        double worst = 0;
        std::string worstName, failure;
        if (!compareCudnnAttention(steps, i, worst, worstName, failure, error))
          return false;
        bool agrees = failure.empty();
        if (agrees && shape.timed)
          fprintf(stderr,
                  "cuda: cuDNN's fused attention agrees with %s (%s; and "
                  "every step of its shapes) within %.2g of the generated "
                  "kernels' %s at load\n",
                  step.label.c_str(), attentionText(shape).c_str(), worst,
                  worstName.c_str());
        else if (agrees)
          fprintf(stderr,
                  "cuda: cuDNN's fused attention runs %s (%s; and every "
                  "step of its shapes), within %.2g of the generated "
                  "kernels' %s at load\n",
                  step.label.c_str(), attentionText(shape).c_str(), worst,
                  worstName.c_str());
        else
          fprintf(stderr,
                  "cuda: cuDNN's fused attention does not take %s (%s; nor "
                  "any step of its shapes): %s; the generated kernels "
                  "run\n",
                  step.label.c_str(), attentionText(shape).c_str(),
                  failure.c_str());
        verdict = verdicts.emplace(step.pendingCudnn.get(), agrees).first;
      }
      if (!verdict->second)
        step.pendingCudnn.reset();
      else if (!shape.timed)
        takeCudnnAttention(steps, i);
      // (A timed one waits for the kernels' entry points to be chosen.)
    }
  return true;
}

void CudaDevice::takeCudnnAttention(std::vector<Step> &steps, size_t i) {
  Step &step = steps[i];
  step.cudnn = std::move(step.pendingCudnn);
  // The profile names what runs: the kernel, not its first launch (the
  // profile adds the others' figures to it).
  std::string kernel = step.label;
  if (step.cudnnShape.launches > 1 && kernel.size() > 3 &&
      kernel.compare(kernel.size() - 3, 3, "_p0") == 0)
    kernel.resize(kernel.size() - 3);
  step.time.label = "cudnn attention (" + kernel + ")";
  // Neither it nor the launches it replaces have entry points to time.
  for (int j = 0; j < step.cudnnShape.launches; ++j) {
    Step &launch = steps[i + j];
    launch.skipped = j > 0;
    if (j > 0)
      launch.time.label = launch.label + " (in cudnn attention)";
    launch.kernelCandidates.resize(1);
    launch.kernelCandidateNames.resize(1);
    launch.kernelCandidateBlocks.resize(1);
    launch.kernelCandidateShared.resize(1);
    launch.loadMicros.clear();
    launch.chosen = 0;
    takeCandidate(launch, 0);
  }
}

void CudaDevice::chooseCudnnAttention(nlohmann::json &choices, bool &changed) {
  // Steps of one graph (one descriptor) take one choice.
  std::map<const CudnnAttention *, bool> taken;
  for (auto &[name, steps] : programs)
    for (size_t i = 0; i < steps.size(); ++i) {
      Step &step = steps[i];
      if (!step.pendingCudnn)
        continue;
      const CudnnAttentionShape &shape = step.cudnnShape;
      auto known = taken.find(step.pendingCudnn.get());
      if (known == taken.end()) {
        std::string key = "cudnn attention " + attentionText(shape) +
                          (shape.bf16 ? " BF16" : " F16") + " scale " +
                          std::to_string(shape.scale);
        const nlohmann::json &kept = choices.value(key, nlohmann::json());
        bool library = false;
        std::string why;
        double kernelsUs = 0, libraryUs = 0;
        std::string error;
        if (kept == "cudnn" || kept == "generated") {
          library = kept == "cudnn";
          why = "as library-algorithms.json keeps for this GPU";
        } else {
          bool kernelsRan = timeCalls(
              [&] {
                for (int j = 0; j < shape.launches; ++j)
                  if (!issueStep(steps[i + j], compute, error))
                    return false;
                return true;
              },
              kernelsUs, /*repeats=*/10);
          CudnnAttention &graph = *step.pendingCudnn;
          bool libraryRan = timeCalls(
              [&] { return graph.run(dnn, step.argValues, workspace, error); },
              libraryUs, /*repeats=*/10);
          // A near tie (2 %, the timing's noise) keeps the kernels: gpuc's
          // own bits.
          library = libraryRan && (!kernelsRan || libraryUs * 1.02 < kernelsUs);
          char text[160];
          if (kernelsRan && libraryRan)
            snprintf(text, sizeof text,
                     "%.1f us a call at load, against %s %.1f",
                     library ? libraryUs : kernelsUs,
                     library ? "the generated kernels'" : "cuDNN's",
                     library ? kernelsUs : libraryUs);
          else
            snprintf(text, sizeof text, "%s did not run at load (%s)",
                     kernelsRan ? "cuDNN's attention" : "the generated kernels",
                     error.c_str());
          why = text;
          if (kernelsRan || libraryRan) {
            choices[key] = library ? "cudnn" : "generated";
            changed = true;
          }
        }
        fprintf(stderr, "cuda: %s %s (%s; and every step of its shapes): %s\n",
                library ? "cuDNN's fused attention runs"
                        : "the generated kernels run",
                step.label.c_str(), attentionText(shape).c_str(), why.c_str());
        known = taken.emplace(step.pendingCudnn.get(), library).first;
      }
      if (known->second)
        takeCudnnAttention(steps, i);
      else
        step.pendingCudnn.reset();
    }
}

} // namespace cuda_device
} // namespace gpuc
