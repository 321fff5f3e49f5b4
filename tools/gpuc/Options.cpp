//===- Options.cpp - the options of gpuc import and gpuc compile ----------===//
#include "Driver.h"

using namespace mlir;

namespace mlir::gpuc::driver {

cl::OptionCategory
    importCategory("model options (gpuc import and gpuc compile)");

cl::opt<std::string>
    inputFilename(cl::Positional,
                  cl::desc("<model.onnx|.onnxtxt|.gdsl> (import) or "
                           "<module.mlir> (run)"),
                  cl::cat(importCategory), cl::cat(gpuc::runCategory));
cl::opt<std::string> outputFilename(
    "o",
    cl::desc("import: the .mlir file to write (default stdout); compile: the "
             "artifact directory"),
    cl::value_desc("path"), cl::init("-"), cl::cat(importCategory));
cl::opt<int64_t>
    batchSize("batch",
              cl::desc("Bind the symbolic batch dimension (dimension 0 of the "
                       "inputs) to N"),
              cl::value_desc("N"), cl::init(0), cl::cat(importCategory));
cl::list<std::string>
    inputShapes("input-shape",
                cl::desc("Give a full static shape to an input, e.g. "
                         "--input-shape image=32x1x28x28 (repeatable)"),
                cl::value_desc("name=D0xD1x..."), cl::cat(importCategory));
cl::opt<bool> noSimplify(
    "no-simplify",
    cl::desc("Print the module as imported, before canonicalize and CSE"),
    cl::init(false), cl::cat(importCategory));

cl::OptionCategory
    trainCategory("training options (gpuc compile; gpuc import --train)");
cl::opt<bool>
    train("train",
          cl::desc("Build @train_step: loss, gradients and optimizer update"),
          cl::init(false), cl::cat(trainCategory));
cl::opt<std::string>
    lossKind("loss",
             cl::desc("Add a loss on --loss-output when the model has none: "
                      "cross_entropy or mse"),
             cl::value_desc("kind"), cl::init(""), cl::cat(trainCategory));
cl::opt<std::string>
    lossTarget("loss-output",
               cl::desc("The model output the added loss is computed on"),
               cl::value_desc("output"), cl::init(""), cl::cat(trainCategory));
cl::opt<std::string> labelsName(
    "labels", cl::desc("Name of the new input holding labels/targets"),
    cl::value_desc("name"), cl::init("label"), cl::cat(trainCategory));
cl::opt<int64_t> classAxis(
    "class-axis",
    cl::desc("cross_entropy: the output axis holding the classes (1 as in "
             "ONNX and PyTorch's [N, C, ...]; -1 for the last). Default "
             "(0): the last when an integer input has the output's shape "
             "without it, as a language model's tokens [B, T] and logits "
             "[B, T, V]; else 1"),
    cl::value_desc("axis"), cl::init(0), cl::cat(trainCategory));
cl::opt<int64_t> accumulateSteps(
    "accumulate",
    cl::desc("gradient accumulation: add the gradients of K steps of --batch "
             "samples and update once from their mean (an effective batch of "
             "K x --batch); the trainer runs @apply_update every K steps"),
    cl::value_desc("K"), cl::init(1), cl::cat(trainCategory));
cl::opt<bool> dataParallel(
    "data-parallel",
    cl::desc("train on several processes (mpirun -np N out/train ...): each "
             "runs --batch samples of a global batch of N x --batch, and the "
             "gradients are summed over the ranks in buckets "
             "(gpuc-data-parallel) before one update, the same on every rank"),
    cl::init(false), cl::cat(trainCategory));
cl::opt<bool> syncBatchNorm(
    "sync-batch-norm",
    cl::desc("--data-parallel: batch norm with the statistics of every "
             "rank's batch (PyTorch's SyncBatchNorm), so that N ranks train "
             "as one process with the global batch; default: each rank's "
             "own, as DDP"),
    cl::init(false), cl::cat(trainCategory));
cl::opt<bool> shardOptimizer(
    "shard-optimizer",
    cl::desc("--data-parallel --ranks N: each of the N ranks keeps and "
             "updates 1/N of the optimizer state (ZeRO stage 1): gradients "
             "are reduce-scattered, and the updated parameters all-gathered"),
    cl::init(false), cl::cat(trainCategory));
cl::opt<int64_t> estimateRanks(
    "ranks",
    cl::desc("--data-parallel: the number of ranks the run will have, which "
             "--shard-optimizer needs; with --report, estimate the step on N "
             "GPUs (up to 1024): all-reduce time in the alpha-beta model of "
             "--link, the share that overlaps backward, the scaling "
             "efficiency"),
    cl::value_desc("N"), cl::init(0), cl::cat(trainCategory));
cl::opt<std::string> estimateLink(
    "link",
    cl::desc("--ranks: the GPUs' link, nvlink (default), pcie or infiniband"),
    cl::value_desc("nvlink|pcie|infiniband"), cl::init("nvlink"),
    cl::cat(trainCategory));
cl::opt<std::string> bucketSizeOption(
    "bucket-size",
    cl::desc("--data-parallel: gradient bytes per all-reduce, e.g. 25MiB "
             "(the default, PyTorch DDP's); smaller buckets start "
             "communicating earlier in backward"),
    cl::value_desc("size"), cl::init("25MiB"), cl::cat(trainCategory));
cl::opt<std::string> precisionOption(
    "precision",
    cl::desc("fp32 (default), fp16 or bf16: the storage type of activations, "
             "their gradients and GEMM/convolution operands (f32 master "
             "weights, reductions, norms and the loss; see gpuc-amp)"),
    cl::value_desc("type"), cl::init("fp32"), cl::cat(trainCategory));
cl::opt<std::string> lossScaleOption(
    "loss-scale",
    cl::desc("mixed precision's loss scaling, decided on the device in the "
             "step: dynamic (fp16's default), static:V or none (bf16's "
             "default)"),
    cl::value_desc("dynamic|static:V|none"), cl::init(""),
    cl::cat(trainCategory));
cl::opt<double> lossScaleInit(
    "loss-scale-init",
    cl::desc("the dynamic loss scale's initial value (default 65536)"),
    cl::value_desc("V"), cl::init(65536.0), cl::cat(trainCategory));
cl::opt<int64_t> lossScaleGrowthInterval(
    "loss-scale-growth-interval",
    cl::desc("dynamic loss scaling: clean steps before the scale doubles "
             "(default 2000)"),
    cl::value_desc("N"), cl::init(2000), cl::cat(trainCategory));
cl::list<std::string> frozenParameters(
    "frozen",
    cl::desc("Parameters to keep constant: no gradient, no optimizer state "
             "(comma-separated names; parameters no gradient reaches are "
             "frozen anyway)"),
    cl::CommaSeparated, cl::cat(trainCategory));
cl::list<std::string> trainableParameters(
    "trainable",
    cl::desc("Parameters to train even where no gradient reaches them "
             "(comma-separated names)"),
    cl::CommaSeparated, cl::cat(trainCategory));
cl::opt<std::string> optimizerKind("optimizer", cl::desc("sgd, adam or adamw"),
                                   cl::value_desc("kind"), cl::init("sgd"),
                                   cl::cat(trainCategory));
cl::opt<double>
    learningRate("lr",
                 cl::desc("Default learning rate (sgd 0.01, adam/adamw 0.001)"),
                 cl::init(-1.0), cl::cat(trainCategory));
cl::opt<double> momentumValue("momentum",
                              cl::desc("Default SGD momentum (0.9)"),
                              cl::init(0.9), cl::cat(trainCategory));
cl::opt<double> dampeningValue("dampening",
                               cl::desc("Default SGD dampening (0)"),
                               cl::init(0.0), cl::cat(trainCategory));
cl::opt<bool> nesterov("nesterov", cl::desc("SGD Nesterov momentum"),
                       cl::init(false), cl::cat(trainCategory));
cl::opt<double>
    weightDecay("weight-decay",
                cl::desc("Default weight decay (sgd/adam 0, adamw 0.01)"),
                cl::init(-1.0), cl::cat(trainCategory));
cl::opt<double> beta1("beta1", cl::desc("Adam beta1 (0.9)"), cl::init(0.9),
                      cl::cat(trainCategory));
cl::opt<double> beta2("beta2", cl::desc("Adam beta2 (0.999)"), cl::init(0.999),
                      cl::cat(trainCategory));
cl::opt<double> adamEpsilon("epsilon", cl::desc("Adam epsilon (1e-8)"),
                            cl::init(1e-8), cl::cat(trainCategory));

cl::OptionCategory compileCategory("gpuc compile options");
cl::opt<std::string> codegenTarget(
    "target",
    cl::desc("compile: cpu (the trainer), cuda (NVRTC cubin + PTX for "
             "sm_80 and sm_90) or all (default: all when NVRTC is available)"),
    cl::value_desc("cpu|cuda|all"), cl::init(""), cl::cat(compileCategory));
cl::list<std::string> cudaArchs(
    "cuda-arch",
    cl::desc("compile: the GPU architectures to build cubins (and PTX) for "
             "with the CUDA target, e.g. sm_90 for an H100 alone (default "
             "sm_80,sm_90; NVRTC compiles sm_80 and later to PTX once and "
             "ptxas assembles each)"),
    cl::value_desc("sm_XX,..."), cl::CommaSeparated, cl::cat(compileCategory));
cl::opt<std::string>
    dumpDir("dump-dir",
            cl::desc("compile: write the IR after every pass (NN-pass.mlir), "
                     "the kernel source and the plan into DIR"),
            cl::value_desc("DIR"), cl::init(""), cl::cat(compileCategory));
cl::opt<std::string>
    hostCompiler("cxx",
                 cl::desc("compile: the host C++ compiler for the CPU target "
                          "(default $CXX, else c++)"),
                 cl::value_desc("path"), cl::init(""),
                 cl::cat(compileCategory));

cl::opt<std::string> cacheDir(
    "cache-dir",
    cl::desc("compile: keep compiled CPU kernels, cubins and trainers in "
             "DIR, by a hash of their source, flags and compiler, and reuse "
             "them (default $GPUC_CACHE_DIR, else $XDG_CACHE_HOME/gpuc, else "
             "~/.cache/gpuc)"),
    cl::value_desc("DIR"), cl::init(""), cl::cat(compileCategory));
cl::opt<bool>
    timeCompile("time",
                cl::desc("compile: print where the compile's time goes: "
                         "import, every pass (MLIR's pass timing), the step "
                         "program, NVRTC, the host compiler and the link"),
                cl::init(false), cl::cat(compileCategory));
cl::opt<unsigned> compileJobs(
    "jobs",
    cl::desc("compile: host compiler processes run in parallel on the CPU "
             "kernels, each on a share of them, the threads NVRTC compiles "
             "a large kernels.cu's programs on, and those ptxas assembles a "
             "cubin's kernels on (default: this machine's hardware threads)"),
    cl::value_desc("N"), cl::init(0), cl::cat(compileCategory));
cl::opt<bool> nvrtcWhole(
    "nvrtc-whole",
    cl::desc("compile: one whole NVRTC compile per GPU architecture instead "
             "of one PTX per family assembled by ptxas (to compare cubins)"),
    cl::init(false), cl::Hidden, cl::cat(compileCategory));
cl::opt<bool> nvrtcOneProgram(
    "nvrtc-one-program",
    cl::desc("compile: NVRTC compiles kernels.cu as one program, not cut "
             "between its entry points into programs on --jobs threads (to "
             "compare their PTX and time the cut)"),
    cl::init(false), cl::Hidden, cl::cat(compileCategory));
cl::opt<bool> noArtifactCache(
    "no-artifact-cache",
    cl::desc("compile: build the artifact even when the cache holds one from "
             "the same model, options and tools (its kernels and cubins still "
             "come from the cache)"),
    cl::init(false), cl::cat(compileCategory));
cl::opt<bool> noWeights(
    "no-weights",
    cl::desc("compile: leave the model's weights out of the artifact (a "
             "small artifact to carry); its trainer takes them with --init "
             "FILE.safetensors"),
    cl::init(false), cl::cat(compileCategory));
cl::opt<bool>
    tf32("tf32",
         cl::desc("compile: on the GPU, F32 GEMMs and convolutions use TF32 "
                  "tensor cores (products of 10-bit mantissas, f32 sums: about "
                  "1e-3 from the CPU's results, as PyTorch's "
                  "allow_tf32); off by default for fp32, for parity; on "
                  "under --precision fp16/bf16, where the GEMMs left in f32 "
                  "are a language model's head (--tf32=false: off)"),
         cl::init(false), cl::cat(compileCategory));
cl::opt<std::string> f32Gemms(
    "f32-gemms",
    cl::desc("compile: how the GPU multiplies F32 GEMMs: exact (FMA units), "
             "tf32 (TF32 tensor cores, as --tf32) or bf16 (operands rounded "
             "to bf16 on tensor cores, f32 sums: PyTorch autocast's 16-bit "
             "head at the bf16 peak); auto (default): bf16 under --precision "
             "bf16, where the GEMMs left in f32 are a language model's head, "
             "else as --tf32 says"),
    cl::init("auto"), cl::cat(compileCategory));
cl::opt<bool> noCache("no-cache",
                      cl::desc("compile: compile the CPU kernels "
                               "without the cache"),
                      cl::init(false), cl::cat(compileCategory));

cl::opt<bool>
    report("report",
           cl::desc("compile: print each kernel of the training step (ops, "
                    "bytes read and written, FLOPs) and the totals against "
                    "one kernel per op; report.json is written either way"),
           cl::init(false), cl::cat(compileCategory));
cl::opt<std::string> memoryPictureFile(
    "memory-picture",
    cl::desc("compile: draw the training step's arena as an SVG: each "
             "buffer over the steps it is live (x) at its arena offset (y), "
             "coloured by what it holds"),
    cl::value_desc("FILE.svg"), cl::init(""), cl::cat(compileCategory));
cl::opt<std::string> memoryBudget(
    "memory-budget",
    cl::desc("compile: bound the training step's arena peak by recomputing "
             "forward values in backward (gpuc-remat): bytes, or with a unit "
             "(512MiB, 2GiB, 1.5GB); 'auto' recomputes only the pointwise "
             "kernels whose recomputation lowers the peak"),
    cl::value_desc("SIZE|auto"), cl::init(""), cl::cat(compileCategory));
cl::opt<std::string> rematSolver(
    "remat-solver",
    cl::desc("compile: how gpuc-remat chooses what to recompute to meet "
             "--memory-budget: greedy (default; least FLOPs per byte saved), "
             "or milp (least FLOPs under a 0-1 program solved by COIN-OR "
             "CBC; slower, shows how far greedy is from optimal)"),
    cl::value_desc("greedy|milp"), cl::init("greedy"),
    cl::cat(compileCategory));
cl::opt<bool> rematSweep(
    "remat-sweep",
    cl::desc("compile: print the arena peak and the recomputed FLOPs that "
             "gpuc-remat reaches at budgets of 100, 90, 75, 50 and 30% of "
             "the peak without it, with the greedy solver and, when gpuc "
             "has CBC, the exact one"),
    cl::init(false), cl::cat(compileCategory));
cl::opt<std::string> maxBatchFor(
    "max-batch-for",
    cl::desc("compile: plan the step at growing batch sizes (nothing runs) "
             "and print the largest batch whose whole step (persistent "
             "buffers + arena) fits in SIZE, without and with "
             "rematerialization; --batch is not needed"),
    cl::value_desc("SIZE"), cl::init(""), cl::cat(compileCategory));
cl::opt<std::string> memoryLimit(
    "memory-limit",
    cl::desc("compile: refuse to compile when the whole step (persistent "
             "buffers + arena) needs more than SIZE, and say how much it "
             "needs"),
    cl::value_desc("SIZE"), cl::init(""), cl::cat(compileCategory));
cl::opt<bool> noSchedule(
    "no-schedule",
    cl::desc("compile: keep the program order (skip gpuc-schedule, which "
             "reorders independent kernels when that lowers the peak)"),
    cl::init(false), cl::cat(compileCategory));
cl::opt<std::string> attentionOption(
    "attention",
    cl::desc(
        "compile: how attention runs: gemm (batched GEMMs around one "
        "row kernel; the [B, H, Tq, Tk] scores exist), flash (a fused "
        "kernel each way that stores no score: less memory; on the GPU "
        "on tensor cores under fp16/bf16) or auto (flash when the artifact has "
        "the CUDA target and --precision fp16|bf16, else gemm)"),
    cl::value_desc("auto|gemm|flash"), cl::init("auto"),
    cl::cat(compileCategory));
cl::opt<std::string> convLayoutOption(
    "conv-layout",
    cl::desc("compile: how convolutions hold their tensors: nchw, nhwc "
             "(channels last, as tensor cores read them; batch norms and "
             "activations between convolutions then run on NHWC tensors too) "
             "or auto (with the CUDA target: nhwc when its convolutions run "
             "on tensor cores, --precision fp16|bf16 or --tf32, else nchw; "
             "on the CPU alone: nhwc when a convolution is grouped or "
             "depthwise, else nchw)"),
    cl::value_desc("auto|nchw|nhwc"), cl::init("auto"),
    cl::cat(compileCategory));
cl::opt<int64_t> gpuBytesInFlight(
    "gpu-bytes-in-flight",
    cl::desc("compile: bytes of input a GPU thread of a memory-bound kernel "
             "loads (a batch of its elements) before it computes and stores "
             "any (default 32; 0: one element at a time, each result's "
             "loads where first used: the order before batching, to "
             "compare)"),
    cl::value_desc("N"), cl::init(32), cl::cat(compileCategory));
cl::opt<std::string> attentionBlocksPerSm(
    "attention-blocks-per-sm",
    cl::desc("compile: blocks of the fused attention's forward launch a "
             "GPU's SM holds at once: 1 (up to 255 registers a thread), 2 "
             "(at most 128, with more warps to hide latency), or auto "
             "(default: both, and the GPU times them at load and launches "
             "the faster)"),
    cl::value_desc("auto|1|2"), cl::init("auto"), cl::cat(compileCategory));
cl::opt<int64_t> attentionRowsPerWarp(
    "attention-rows-per-warp",
    cl::desc("compile: rows of the fused attention's forward a GPU warp owns "
             "on tensor cores, 16 or 32 (32 multiplies two row tiles by "
             "each tile of keys it loads, in one pass over a block's rows; "
             "by default both, and the GPU times them at load and launches "
             "the faster)"),
    cl::value_desc("N"), cl::init(16), cl::cat(compileCategory));
cl::opt<std::string> attentionScoreGradients(
    "attention-score-gradients",
    cl::desc("compile: how the fused attention's backward on GPU tensor "
             "cores gets the scores' gradients for the queries' gradients: "
             "recomputed (default: its queries' launch computes the scores "
             "and their gradients again) or stored (its keys' launch stores "
             "them, 2 bytes a score, and a third launch multiplies them by "
             "the keys)"),
    cl::value_desc("recomputed|stored"), cl::init("recomputed"),
    cl::cat(compileCategory));
cl::opt<std::string> attentionLibrary(
    "attention-library",
    cl::desc("compile: what runs the fused attention on the GPU: generated "
             "(gpuc's own kernels), cudnn (cuDNN's fused attention, forward "
             "and backward, where cuDNN takes the attention: 16-bit "
             "operands, no dropout, no mask or a causal one; the CUDA "
             "device checks it against the generated kernels at load, and "
             "they run where it does not agree) or auto (default: where "
             "cuDNN takes it and agrees, the CUDA device also times both "
             "at load and runs the faster, a choice kept in "
             "library-algorithms.json)"),
    cl::value_desc("auto|generated|cudnn"), cl::init("auto"),
    cl::cat(compileCategory));
cl::opt<int64_t> gpuColumnLanesOption(
    "gpu-column-lanes",
    cl::desc("compile: the most columns a GPU block of a column kernel (a "
             "bias gradient, a channels-last batch norm's statistics) takes, "
             "8, 16, 32, 64, 128 or 256 (default 256: a block's loads are "
             "whole rows of up to 256 columns; 16 reads 32 bytes of each "
             "row, the layout before, to compare)"),
    cl::value_desc("N"), cl::init(256), cl::cat(compileCategory));
cl::opt<int64_t> gpuWarpRowRegisters(
    "gpu-warp-row-registers",
    cl::desc("compile: the most elements of a row that a GPU lane of a row "
             "kernel with a warp per row (a layer norm over 768 features: 24 "
             "a lane) keeps in registers for its later passes, over the "
             "inputs they read again, up to 256 (default 64; 0: every pass "
             "reads the row from memory, to compare)"),
    cl::value_desc("N"), cl::init(mlir::gpuc::kGpuWarpRowRegisters),
    cl::cat(compileCategory));
cl::opt<int64_t> gpuRowStageBytes(
    "gpu-row-stage-bytes",
    cl::desc("compile: the most bytes of a row that a GPU block of a row "
             "kernel (a block per long row: a softmax or a cross-entropy "
             "over a large vocabulary) keeps in shared memory for its later "
             "passes over the row, up to 232448 (default 114688, less where "
             "a --cuda-arch gives a block less; 0: every pass reads the row "
             "from memory, to compare)"),
    cl::value_desc("N"), cl::init(mlir::gpuc::kGpuRowStageBytes),
    cl::cat(compileCategory));
cl::opt<int64_t> lossChunkRows(
    "loss-chunk-rows",
    cl::desc(
        "compile: rows per chunk of a language model's head and its "
        "cross-entropy, which run a chunk of rows at a time so that only "
        "one chunk's logits exist (default: the chunk whose logits take "
        "about 32 MiB, 256 MiB where the artifact has the CUDA target, in at "
        "most 16 chunks of as many rows)"),
    cl::value_desc("rows"), cl::init(0), cl::cat(compileCategory));
cl::opt<int64_t> attentionBandRows(
    "attention-band-rows",
    cl::desc("compile: under the gemm lowering of attention, cut a causal "
             "mask's GEMMs into bands of about N rows of the scores (at most "
             "16 bands), each computing only the scores, or summing only the "
             "terms, its rows keep (default 128: about 44 % fewer products "
             "at 1,024 tokens; 0: whole GEMMs, to compare)"),
    cl::value_desc("N"), cl::init(128), cl::cat(compileCategory));
cl::opt<std::string> padClassesOption(
    "pad-classes",
    cl::desc("compile: run a language model's head over its vocabulary "
             "padded with zero rows to a multiple of N (the padded logits "
             "-inf: results unchanged), where it has at least 1,024 classes "
             "and is not one already: the GPU's GEMMs are faster on whole "
             "tiles. auto (default): 64 when the artifact has the CUDA "
             "target, else 0 (never)"),
    cl::value_desc("auto|N"), cl::init("auto"), cl::cat(compileCategory));
cl::opt<std::string> headLogitsOption(
    "head-logits",
    cl::desc("compile: under --precision fp16/bf16, the type a language "
             "model's head stores its logits and their gradient in: low "
             "(default; 16 bits, as autocast's: half the head's memory "
             "traffic, its GEMMs on 16-bit operands, the softmax and loss "
             "still summed in f32) or f32"),
    cl::value_desc("low|f32"), cl::init("low"), cl::cat(compileCategory));
cl::opt<bool> evalLogits(
    "eval-logits",
    cl::desc("compile: a language model's @eval returns its logits, which "
             "the trainer copies to the host and scores there, instead of "
             "each batch's summed loss and correct tokens, computed on the "
             "device over row chunks"),
    cl::cat(compileCategory));
cl::opt<bool> noGemmEpilogues(
    "no-gemm-epilogues",
    cl::desc("compile: keep a linear layer's bias add in the next kernel "
             "(skip gpuc-gemm-epilogues, which has the GEMM library add it "
             "as it stores the product), to compare or where a GPU's "
             "cuBLASLt has no algorithm for a biased GEMM"),
    cl::init(false), cl::cat(compileCategory));
cl::opt<bool>
    noFuse("no-fuse",
           cl::desc("compile: one kernel per op (skip gpuc-fuse), to compare"),
           cl::init(false), cl::cat(compileCategory));

} // namespace mlir::gpuc::driver
