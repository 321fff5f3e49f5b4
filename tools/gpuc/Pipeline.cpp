//===- Pipeline.cpp - the model loader and the pass pipelines -------------===//
#include "Driver.h"

using namespace mlir;

namespace mlir::gpuc::driver {

/// Parses --memory-budget: "auto" (0), or bytes with an optional unit.
std::optional<int64_t> parseMemorySize(StringRef text) {
  if (text == "auto")
    return 0;
  size_t digits = text.find_first_not_of("0123456789.");
  StringRef number = text.take_front(digits), unit = text.drop_front(digits);
  double value;
  if (number.empty() || number.getAsDouble(value) || value <= 0)
    return std::nullopt;
  static const std::pair<StringRef, double> units[] = {{"", 1},
                                                       {"B", 1},
                                                       {"KiB", 1024.0},
                                                       {"MiB", 1048576.0},
                                                       {"GiB", 1073741824.0},
                                                       {"TiB", 1099511627776.0},
                                                       {"KB", 1e3},
                                                       {"MB", 1e6},
                                                       {"GB", 1e9},
                                                       {"TB", 1e12}};
  for (auto [name, scale] : units)
    // Beyond 2^62 bytes no size is meaningful (and the conversion to
    // int64 would overflow).
    if (unit == name)
      return value * scale <= 4611686018427387904.0
                 ? std::optional<int64_t>((int64_t)(value * scale))
                 : std::nullopt;
  return std::nullopt;
}

std::optional<int64_t> gradientBucketBytes() {
  std::optional<int64_t> bytes = parseMemorySize(bucketSizeOption);
  if (!bytes || *bytes < 1)
    return std::nullopt;
  return bytes;
}

/// Parses "name=2x3x4".
static LogicalResult parseInputShape(StringRef spec,
                                     gpuc::OnnxImportOptions &options) {
  auto [name, dims] = spec.split('=');
  if (name.empty() || dims.empty()) {
    llvm::errs() << "gpuc: --input-shape expects name=D0xD1x..., got '" << spec
                 << "'\n";
    return failure();
  }
  std::vector<int64_t> shape;
  SmallVector<StringRef> parts;
  dims.split(parts, 'x');
  for (StringRef part : parts) {
    int64_t d;
    if (part.getAsInteger(10, d) || d <= 0) {
      llvm::errs() << "gpuc: --input-shape " << spec << ": '" << part
                   << "' is not a positive dimension\n";
      return failure();
    }
    shape.push_back(d);
  }
  options.inputShapes[name.str()] = shape;
  return success();
}

/// --batch and --input-shape as import options.
LogicalResult importOptions(gpuc::OnnxImportOptions &options) {
  if (batchSize > 0)
    options.batch = batchSize;
  for (const std::string &spec : inputShapes)
    if (failed(parseInputShape(spec, options)))
      return failure();
  return success();
}

OwningOpRef<ModuleOp> ModelLoader::load() {
  gpuc::OnnxImportOptions options;
  if (failed(importOptions(options)))
    return nullptr;
  options.externalFiles = &externalFiles;
  if (StringRef(inputFilename).ends_with(".gdsl")) {
    gpuc::DslOptions dslOptions;
    dslOptions.batch = options.batch;
    return gpuc::parseDslFile(inputFilename, context.get(), sourceMgr,
                              dslOptions);
  }
  return gpuc::importOnnxFile(inputFilename, context.get(), options);
}

/// attach-loss (when --loss), autodiff, optimizer: what --train adds.
std::string targetOrDefault() {
  if (!codegenTarget.empty())
    return codegenTarget;
  return gpuc::nvrtcAvailable() ? "all" : "cpu";
}

/// The gpuc-amp options the flags ask for, or nullopt after an error that
/// names the flag (none for --precision fp32).
std::optional<gpuc::GpucAmpOptions> ampOptions(StringRef tool) {
  gpuc::GpucAmpOptions amp;
  amp.precision = precisionOption;
  if (precisionOption != "fp32" && precisionOption != "fp16" &&
      precisionOption != "bf16") {
    llvm::errs() << tool << ": --precision " << precisionOption
                 << " is not one of fp32, fp16, bf16\n";
    return std::nullopt;
  }
  StringRef mode = lossScaleOption;
  amp.lossScaleInit = lossScaleInit;
  if (mode.consume_front("static:")) {
    double value;
    if (mode.getAsDouble(value) || !(value > 0) || !std::isfinite(value)) {
      llvm::errs() << tool << ": --loss-scale static:" << mode
                   << " needs a positive finite scale, e.g. static:1024\n";
      return std::nullopt;
    }
    amp.lossScale = "static";
    amp.lossScaleInit = value;
  } else if (mode.empty() || mode == "dynamic" || mode == "none") {
    amp.lossScale = mode.str();
  } else {
    llvm::errs() << tool << ": --loss-scale " << lossScaleOption
                 << " is not one of dynamic, static:V, none\n";
    return std::nullopt;
  }
  if (!(lossScaleInit > 0) || !std::isfinite(lossScaleInit)) {
    llvm::errs() << tool << ": --loss-scale-init " << lossScaleInit
                 << " must be a positive finite number\n";
    return std::nullopt;
  }
  if (lossScaleGrowthInterval < 1) {
    llvm::errs() << tool << ": --loss-scale-growth-interval "
                 << lossScaleGrowthInterval << " must be at least 1\n";
    return std::nullopt;
  }
  amp.growthInterval = lossScaleGrowthInterval;
  bool scaling = !lossScaleOption.empty() ||
                 lossScaleInit.getNumOccurrences() > 0 ||
                 lossScaleGrowthInterval.getNumOccurrences() > 0;
  if (precisionOption == "fp32" && scaling) {
    llvm::errs() << tool
                 << ": loss scaling (--loss-scale*) needs --precision "
                    "fp16 or bf16\n";
    return std::nullopt;
  }
  StringRef head = headLogitsOption;
  if (head != "low" && head != "f32") {
    llvm::errs() << tool << ": --head-logits " << head
                 << " is not one of low, f32\n";
    return std::nullopt;
  }
  if (head == "low" && precisionOption == "fp32" &&
      headLogitsOption.getNumOccurrences()) {
    llvm::errs() << tool
                 << ": --head-logits low needs --precision fp16 or bf16\n";
    return std::nullopt;
  }
  amp.lowHead = head == "low";
  return amp;
}

std::optional<std::string> attentionLowering(StringRef tool) {
  StringRef choice = attentionOption;
  if (choice == "gemm" || choice == "flash")
    return choice.str();
  if (choice != "auto") {
    llvm::errs() << tool << ": --attention " << choice
                 << " is not one of auto, gemm, flash\n";
    return std::nullopt;
  }
  // flash where the artifact runs on a GPU and the fused kernels run on
  // tensor cores (fp16/bf16): GPT-2 124M's bf16 step (T 1024, batch 16,
  // H200) took 55.6 ms with them and 69.3 ms with the GEMMs around a
  // softmax, which also write and read the [B, H, T, T] scores. gemm
  // elsewhere: on the CPU the library GEMMs are faster than the fused
  // kernel's loops, and in fp32 the fused kernel is SIMT f32, where the
  // GEMMs run on cuBLAS's FMA kernels. `flash` still saves the scores'
  // memory where that is what limits the batch (--max-batch-for shows how
  // much).
  bool tensorCores = precisionOption != "fp32";
  return std::string(targetOrDefault() != "cpu" && tensorCores ? "flash"
                                                               : "gemm");
}

std::optional<int64_t> padClasses(StringRef tool) {
  StringRef choice = padClassesOption;
  if (choice == "auto") {
    // The GPU's GEMMs are faster on whole tiles; on the CPU the library's
    // are not, and padding would only add work.
    return targetOrDefault() == "cpu" ? 0 : 64;
  }
  int64_t multiple = 0;
  if (choice.getAsInteger(10, multiple) || multiple < 0) {
    llvm::errs() << tool << ": --pad-classes " << choice
                 << " is not auto or a count (0: never pad)\n";
    return std::nullopt;
  }
  return multiple;
}

std::optional<ConvLayout> convLayout(StringRef tool) {
  StringRef choice = convLayoutOption;
  if (choice == "nchw")
    return ConvLayout::Nchw;
  if (choice == "nhwc")
    return ConvLayout::Nhwc;
  if (choice != "auto") {
    llvm::errs() << tool << ": --conv-layout " << choice
                 << " is not one of auto, nchw, nhwc\n";
    return std::nullopt;
  }
  // Tensor cores read NHWC; cuDNN reorders NCHW tensors around its
  // tensor-core kernels (and has few bf16 NCHW algorithms). The CPU's
  // oneDNN reorders NCHW tensors into its blocked layout and back around
  // every convolution and runs NHWC ones as they are: that pays where the
  // reorders outweigh the convolution, grouped and depthwise ones
  // (MobileNet-V3 and EfficientNet-B0 steps a third shorter), and loses
  // where the network's NHWC batch norms and concatenations cost more than
  // the reorders of its dense convolutions (DenseNet-121's step a tenth
  // longer; ResNet-50's even). An artifact with the CUDA target keeps one
  // layout for both devices: the GPU's.
  bool tensorCores =
      precisionOption != "fp32" || (tf32.getNumOccurrences() && tf32);
  if (targetOrDefault() == "cpu")
    return ConvLayout::NhwcWhereGrouped;
  return tensorCores ? ConvLayout::Nhwc : ConvLayout::Nchw;
}

void addTrainingPasses(PassManager &pm, StringRef lossOutput,
                       StringRef scoredOutput) {
  if (!lossKind.empty())
    pm.addPass(gpuc::createGpucAttachLoss(gpuc::GpucAttachLossOptions{
        lossKind, lossOutput.str(), labelsName, classAxis}));
  pm.addPass(gpuc::createGpucFormLinearCrossEntropy());
  // Before gpuc-amp, which then treats @eval's head as the step's.
  if (!scoredOutput.empty())
    pm.addPass(gpuc::createGpucEvalTokenScores(
        gpuc::GpucEvalTokenScoresOptions{scoredOutput.str(), labelsName}));
  // Validated by ampOptions before any pipeline is built.
  if (precisionOption != "fp32")
    pm.addPass(gpuc::createGpucAmp(*ampOptions("gpuc")));
  if (dataParallel && syncBatchNorm)
    pm.addPass(gpuc::createGpucSyncBatchNorm());
  gpuc::GpucAutodiffOptions autodiff;
  autodiff.frozen.assign(frozenParameters.begin(), frozenParameters.end());
  autodiff.trainable.assign(trainableParameters.begin(),
                            trainableParameters.end());
  pm.addPass(gpuc::createGpucAutodiff(autodiff));
  if (accumulateSteps > 1)
    pm.addPass(gpuc::createGpucAccumulateGradients(
        gpuc::GpucAccumulateGradientsOptions{accumulateSteps}));
  if (dataParallel)
    pm.addPass(gpuc::createGpucDataParallel(gpuc::GpucDataParallelOptions{
        gradientBucketBytes().value_or(0),
        shardOptimizer ? (int64_t)estimateRanks : 0}));
  gpuc::GpucOptimizerOptions opt;
  opt.kind = optimizerKind;
  opt.lr = learningRate;
  opt.momentum = momentumValue;
  opt.dampening = dampeningValue;
  opt.nesterov = nesterov;
  opt.weightDecay = weightDecay;
  opt.beta1 = beta1;
  opt.beta2 = beta2;
  opt.epsilon = adamEpsilon;
  pm.addPass(gpuc::createGpucOptimizer(opt));
  // Before the weight copies: a 16-bit GEMM's bias, cast to its type, is
  // then a persistent copy as its weight is, not a cast every step.
  if (!noGemmEpilogues)
    pm.addPass(gpuc::createGpucGemmEpilogues());
  if (precisionOption != "fp32")
    pm.addPass(gpuc::createGpucAmpWeightCopies());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

/// The passes of gpuc compile, in the three stages it runs them in (the
/// report reads the step before kernels are formed, --remat-sweep the fused
/// step before remat).
void addStepPipeline(PassManager &pm, StringRef lossOutput,
                     StringRef scoredOutput) {
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(gpuc::createGpucFormAttention());
  pm.addPass(gpuc::createGpucFormGelu());
  pm.addPass(gpuc::createGpucEvalFunction());
  addTrainingPasses(pm, lossOutput, scoredOutput);
  // Validated by attentionLowering and padClasses before any pipeline is
  // built.
  // On the GPU the head's weight-gradient GEMM, which reads and writes the
  // whole f32 [V, C] sum once per chunk, does 2 * chunk rows of work per
  // element of it: 1,024-row chunks (GPT-2's in 32 MiB) would leave it
  // at the H100's ridge, bound by that sum's memory traffic, where 2,048 or
  // more rows are bound by its tensor cores. The CPU's GEMMs are bound by
  // their arithmetic at any chunk of 64 rows or more, and there the
  // logits' memory counts.
  int64_t chunkBytes =
      targetOrDefault() == "cpu" ? int64_t(32) << 20 : int64_t(256) << 20;
  pm.addPass(gpuc::createGpucDecompose(gpuc::GpucDecomposeOptions{
      *attentionLowering("gpuc"), lossChunkRows, chunkBytes,
      *padClasses("gpuc"), attentionBandRows}));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  // Validated by convLayout before any pipeline is built.
  if (ConvLayout layout = *convLayout("gpuc"); layout != ConvLayout::Nchw) {
    pm.addPass(gpuc::createGpucChannelsLast(
        gpuc::GpucChannelsLastOptions{layout == ConvLayout::NhwcWhereGrouped}));
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createCSEPass());
  }
  pm.addPass(gpuc::createGpucFoldLayouts());
}
/// `memoryFirst` when the step must fit a budget: gpuc-fuse then stores
/// fewer bytes at some CPU time (its memory-first option).
void addKernelPipeline(PassManager &pm, bool memoryFirst) {
  if (!memoryFirst)
    pm.addPass(gpuc::createGpucMaskPooledGradients());
  pm.addPass(gpuc::createGpucFormKernels());
  if (!noFuse) {
    pm.addPass(gpuc::createGpucFuse(gpuc::GpucFuseOptions{memoryFirst}));
    pm.addPass(gpuc::createGpucRecomputeReads());
  }
  if (!noSchedule)
    pm.addPass(gpuc::createGpucSchedule());
}
void addPlanPipeline(PassManager &pm, std::optional<int64_t> arenaBudget) {
  if (arenaBudget)
    pm.addPass(gpuc::createGpucRemat(
        gpuc::GpucRematOptions{*arenaBudget, rematSolver}));
  pm.addPass(gpuc::createGpucPlanMemory());
}

/// The names of @forward's outputs.
SmallVector<std::string> forwardOutputs(ModuleOp module) {
  SmallVector<std::string> names;
  if (auto forward = module.lookupSymbol<func::FuncOp>("forward"))
    for (unsigned i = 0; i < forward.getNumResults(); ++i)
      if (auto name = forward.getResultAttrOfType<StringAttr>(
              i, gpuc::GpucDialect::kOutputAttrName))
        names.push_back(name.str());
  return names;
}

/// The loss output the step trains on: the model's own "loss" output, else
/// --loss (default cross_entropy) on --loss-output (default: the model's
/// only output). Empty after an error.
std::optional<std::string> chooseLossOutput(ModuleOp module) {
  SmallVector<std::string> outputs = forwardOutputs(module);
  std::string lossOutput = lossTarget;
  if (llvm::is_contained(outputs, "loss"))
    return lossOutput;
  if (lossKind.empty())
    lossKind = "cross_entropy";
  if (lossOutput.empty()) {
    if (outputs.size() != 1) {
      llvm::errs() << "gpuc compile: the model has " << outputs.size()
                   << " outputs (" << llvm::join(outputs, ", ")
                   << "); name the one to train with --loss-output\n";
      return std::nullopt;
    }
    lossOutput = outputs[0];
  }
  return lossOutput;
}

/// The output the trainer evaluates (class scores, argmax against the
/// label): the one --loss was attached to, else, for a model that computes
/// its own loss, the one output the loss is computed from. Empty with
/// `why` set when there is no such single output.
std::string chooseEvalOutput(ModuleOp module, StringRef lossOutput,
                             std::string &why) {
  if (!lossOutput.empty())
    return lossOutput.str();
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!forward) {
    why = "the model has no forward function";
    return "";
  }
  auto ret = cast<func::ReturnOp>(forward.getBody().front().getTerminator());
  Value loss;
  SmallVector<std::pair<std::string, Value>> others;
  for (unsigned i = 0; i < forward.getNumResults(); ++i) {
    auto name = forward.getResultAttrOfType<StringAttr>(
        i, gpuc::GpucDialect::kOutputAttrName);
    if (!name)
      continue;
    if (name.getValue() == "loss")
      loss = ret.getOperand(i);
    else
      others.push_back({name.str(), ret.getOperand(i)});
  }
  // What the loss is computed from.
  DenseSet<Value> slice;
  SmallVector<Value> worklist;
  if (loss)
    worklist.push_back(loss);
  while (!worklist.empty()) {
    Value v = worklist.pop_back_val();
    if (!slice.insert(v).second)
      continue;
    if (Operation *def = v.getDefiningOp())
      llvm::append_range(worklist, def->getOperands());
  }
  SmallVector<std::string> scores;
  for (auto &[name, value] : others) {
    auto type = dyn_cast<RankedTensorType>(value.getType());
    if (slice.contains(value) && type && type.getRank() >= 2)
      scores.push_back(name);
  }
  if (scores.size() == 1)
    return scores[0];
  why = scores.empty()
            ? "no output of the model holds what its loss is computed from "
              "(output the class scores beside the loss to have them "
              "evaluated)"
            : "the loss is computed from several outputs (" +
                  llvm::join(scores, ", ") +
                  "); none is the obvious class "
                  "scores";
  return "";
}

std::string scoredEvalOutput(ModuleOp module, StringRef evalOutput) {
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (evalLogits || evalOutput.empty() || !forward)
    return "";
  // The data input as the trainer finds it: the first that is not the
  // labels.
  RankedTensorType data, logits;
  for (unsigned i = 0; i < forward.getNumArguments() && !data; ++i)
    if (auto name = forward.getArgAttrOfType<StringAttr>(
            i, gpuc::GpucDialect::kInputAttrName);
        name && name.getValue() != labelsName)
      data = dyn_cast<RankedTensorType>(forward.getArgument(i).getType());
  for (unsigned i = 0; i < forward.getNumResults(); ++i)
    if (auto name = forward.getResultAttrOfType<StringAttr>(
            i, gpuc::GpucDialect::kOutputAttrName);
        name && name.getValue() == evalOutput)
      logits = dyn_cast<RankedTensorType>(forward.getResultTypes()[i]);
  bool tokens = data && logits && data.getRank() == 2 &&
                isa<IntegerType>(data.getElementType()) &&
                logits.getRank() == 3 &&
                logits.getShape().drop_back() == data.getShape();
  return tokens ? evalOutput.str() : "";
}

/// A size option's bytes, or an error naming it.
std::optional<int64_t> sizeOption(StringRef flag, StringRef text,
                                  bool allowAuto) {
  std::optional<int64_t> bytes = parseMemorySize(text);
  if (bytes && (*bytes > 0 || allowAuto))
    return bytes;
  llvm::errs() << "gpuc compile: " << flag << " '" << text
               << "' is not a size: give bytes, optionally with a unit "
                  "(KiB, MiB, GiB, TiB, KB, MB, GB, TB), as in 512MiB"
               << (allowAuto ? ", or auto" : "") << "\n";
  return std::nullopt;
}

} // namespace mlir::gpuc::driver
