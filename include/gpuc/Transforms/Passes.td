// The passes of gpuc, in pipeline order.
#ifndef GPUC_TRANSFORMS_PASSES_TD
#define GPUC_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

//===----------------------------------------------------------------------===//
// Training: loss, gradients, optimizer
//===----------------------------------------------------------------------===//

def GpucAttachLoss : Pass<"gpuc-attach-loss", "::mlir::ModuleOp"> {
  let summary = "add a loss on a named output of @forward";
  let description = [{
    For models exported without their loss. Adds `cross_entropy` (class
    labels, a new i64 input; the class axis is moved to position 1 when it
    is elsewhere, and is inferred when not given) or `mse` (a target shaped like the output, a new
    float input) on the output named `target`, with mean reduction, and makes
    it the result `gpuc.output = "loss"` of `@forward`. A model that already
    returns a `loss` output is refused: its loss is already there.
  }];
  let options = [
    Option<"loss", "loss", "std::string", "\"cross_entropy\"",
           "cross_entropy or mse">,
    Option<"target", "target", "std::string", "\"\"",
           "the name of the output the loss is computed on">,
    Option<"labels", "labels", "std::string", "\"label\"",
           "the name of the new input holding labels or targets">,
    Option<"classAxis", "class-axis", "int64_t", "0",
           "cross_entropy: the axis of the output holding the classes (1 as "
           "in ONNX and PyTorch's NCd layout; -1 for the last, as language "
           "models have); 0 infers it: the last when an integer input has "
           "the output's shape without its last axis (tokens [B, T], logits "
           "[B, T, V]), else 1">,
  ];
  let dependentDialects = ["::mlir::gpuc::GpucDialect"];
}

def GpucAutodiff : Pass<"gpuc-autodiff", "::mlir::ModuleOp"> {
  let summary = "reverse-mode differentiation of @forward into @train_step";
  let description = [{
    Clones `@forward` into `@train_step` and appends, for every trainable
    parameter, the gradient of the scalar output `loss` with respect to it
    (result attribute `gpuc.grad = @param`). Each op contributes its own
    gradient rule (GradientOpInterface); only values on a path from a
    trainable parameter to the loss are differentiated, so labels, indices
    and the RNG key need no rule. `@forward` stays for evaluation.

    A trainable parameter whose gradient is structurally zero (it reaches
    the loss through no differentiable op: a causal mask registered as a
    buffer and read by a comparison) is a buffer, not a weight: it is made
    non-trainable and marked `gpuc.frozen` with the reason, so the
    optimizer gives it no state and no weight decay (PyTorch's optimizers
    skip a parameter whose gradient is None the same way). `frozen` names
    parameters to freeze whatever their gradient (fine-tuning a part of a
    model); `trainable` names parameters to train even so (a float buffer
    the importer did not mark trainable, or a weight to decay although no
    gradient reaches it).
  }];
  let options = [
    Option<"loss", "loss", "std::string", "\"loss\"",
           "the name of the scalar output to differentiate">,
    ListOption<"frozen", "frozen", "std::string",
               "parameters to keep constant (no gradient, no optimizer "
               "state)">,
    ListOption<"trainable", "trainable", "std::string",
               "parameters to train even when no gradient reaches them">,
  ];
  let dependentDialects = ["::mlir::gpuc::GpucDialect"];
}

def GpucAccumulateGradients
    : Pass<"gpuc-accumulate-gradients", "::mlir::ModuleOp"> {
  let summary = "add the gradients of several steps, and update from their "
                "mean in @apply_update";
  let description = [{
    Gradient accumulation: an effective batch of `steps` (K) times the
    step's. `@train_step` returns each gradient added into its accumulator
    `@p.grad_accum` (zero-initialized optimizer state) instead of the
    gradient. A new `@apply_update` (no inputs), which the trainer runs
    after every K steps, takes each parameter and its accumulator and
    returns the accumulator divided by K as the parameter's gradient
    (`gpuc.grad`, as autodiff leaves them in `@train_step`), with the
    accumulators zeroed. The passes that read gradients then work on
    `@apply_update`: `gpuc-data-parallel` sums them over the ranks once per
    update, and `gpuc-optimizer` turns them into the update. With `steps`
    1 the pass changes nothing.
  }];
  let options = [
    Option<"steps", "steps", "int64_t", "1",
           "micro-batches per update">,
  ];
  let dependentDialects = ["::mlir::gpuc::GpucDialect"];
}

def GpucSyncBatchNorm : Pass<"gpuc-sync-batch-norm", "::mlir::ModuleOp"> {
  let summary = "batch norm over every rank's batch (before gpuc-autodiff)";
  let description = [{
    Marks every `gpuc.batch_norm_train` of `@forward` `sync_ranks`: in a
    data-parallel run its statistics, and the sums its gradient needs, are
    then the global batch's, summed over the ranks (PyTorch's
    SyncBatchNorm), so N ranks train as one process with the whole batch.
    Without it each rank normalizes with its own batch's statistics, as
    DDP does by default. Runs before `gpuc-autodiff`, whose gradient rule
    reads the mark; `@eval` uses the running statistics and is left alone.
  }];
  let dependentDialects = ["::mlir::gpuc::GpucDialect"];
}

def GpucDataParallel : Pass<"gpuc-data-parallel", "::mlir::ModuleOp"> {
  let summary = "sum @train_step's gradients over the ranks of a run";
  let description = [{
    Data parallelism: every rank runs the same step on its own slice of the
    global batch, and the gradients are summed over the ranks before the
    optimizer (run after this pass) applies them, so every rank makes the
    same update.

    The gradients (`gpuc.grad` results) are grouped into buckets in the
    order backward computes them: a bucket closes once it holds
    `bucket-size` bytes (PyTorch DDP's 25 MiB by default). Each bucket is
    one `gpuc.all_reduce`, placed right after its last gradient, so the
    backward ops after it can overlap its communication. Each summed
    gradient is scaled by the hyperparameter `ranks_reciprocal` (1 / the
    number of ranks, set by the trainer; 1 by default), which the
    optimizer's kernel fuses, so the update applies the mean gradient of
    the global batch. Gradients that are constants (no data reaches them)
    are the same on every rank and are left alone.

    With `shard-ranks` N (optimizer-state sharding, ZeRO stage 1, for a run
    on exactly N ranks), each bucket is a `gpuc.reduce_scatter` instead:
    every gradient result becomes this rank's shard of the mean gradient,
    1-D with ceil(n / N) elements, and `gpuc-optimizer` then keeps only that
    shard of the optimizer state and updates only that shard of the
    parameters, which `gpuc.all_gather` puts together.

    With gradient accumulation (`gpuc-accumulate-gradients` ran before),
    the gradients are `@apply_update`'s: the ranks sum each accumulated
    gradient once per update instead of once per step.

    The function gets `gpuc.data_parallel = {buckets, bucket_bytes,
    gradient_bytes[, shard_ranks]}`, which the plan and `--report` show.
  }];
  let options = [
    Option<"bucketSize", "bucket-size", "int64_t", "26214400",
           "bytes of gradients per all-reduce (a bucket closes once it "
           "holds this many)">,
    Option<"shardRanks", "shard-ranks", "int64_t", "0",
           "shard the optimizer state over this many ranks (ZeRO stage 1; "
           "0: every rank keeps all of it)">,
  ];
  let dependentDialects = ["::mlir::gpuc::GpucDialect"];
}

def GpucOptimizer : Pass<"gpuc-optimizer", "::mlir::ModuleOp"> {
  let summary = "turn the gradients of @train_step into an optimizer update";
  let description = [{
    Replaces each `gpuc.grad = @p` result by the updated parameter
    (`gpuc.update = @p`) computed in the step by SGD (momentum, dampening,
    Nesterov, weight decay), Adam or AdamW, exactly as PyTorch defines them.
    Optimizer state (momentum buffers, moments, the step counter) becomes
    module-level `gpuc.parameter`s read and written by the step; learning
    rate and the other hyperparameters are scalar step arguments
    (`gpuc.hyper`) with the given defaults, so a schedule changes them
    without recompiling.

    The gradients are `@train_step`'s, or `@apply_update`'s when
    `gpuc-accumulate-gradients` made one: the update then happens there,
    once per K steps.
  }];
  let options = [
    Option<"kind", "kind", "std::string", "\"sgd\"", "sgd, adam or adamw">,
    Option<"lr", "lr", "double", "-1.0",
           "default learning rate (sgd 0.01, adam/adamw 0.001)">,
    Option<"momentum", "momentum", "double", "0.9", "SGD momentum">,
    Option<"dampening", "dampening", "double", "0.0", "SGD dampening">,
    Option<"nesterov", "nesterov", "bool", "false", "SGD Nesterov momentum">,
    Option<"weightDecay", "weight-decay", "double", "-1.0",
           "default weight decay (sgd/adam 0, adamw 0.01)">,
    Option<"beta1", "beta1", "double", "0.9", "Adam beta1">,
    Option<"beta2", "beta2", "double", "0.999", "Adam beta2">,
    Option<"epsilon", "epsilon", "double", "1e-8", "Adam epsilon">,
  ];
  let dependentDialects = ["::mlir::gpuc::GpucDialect"];
}

def GpucAmp : Pass<"gpuc-amp", "::mlir::ModuleOp"> {
  let summary = "mixed precision: f16/bf16 storage, f32 master weights and "
                "math where it matters, loss-scale state";
  let description = [{
    Rewrites `@forward` and `@eval` (before gpuc-autodiff, so backward
    follows the same types) under one policy: matmul and conv2d read and
    write the low type (the libraries accumulate in f32); data movement and
    max pooling keep their operand's type; every other op computes in f32
    from widened operands, and its float results of rank >= 1 are rounded
    to the low type for the ops that read them (activations are stored in
    the low type; their gradients follow through the casts' gradients).
    Reductions, losses, scalars, parameters (the f32 master weights),
    inputs and the functions' results keep f32. Each function gets
    `gpuc.precision`. With `low-head`, a linear cross-entropy takes its
    input and weight in the low type as a GEMM does, and keeps its f32 loss.
    With loss scaling (`dynamic` by default for fp16, `none` for bf16) the
    module gains the state `@amp.loss_scale` (marked `gpuc.loss_scale =
    {mode, growth_interval}`), `@amp.good_steps` and `@amp.skipped_steps`:
    gpuc-autodiff seeds backward with the scale, and gpuc-optimizer divides
    the gradients by it, leaves parameters and optimizer state unchanged
    when any gradient is not finite, and grows (x2 after
    `growth-interval` clean steps) or backs off (x0.5) the scale, all
    inside the step.
  }];
  let options = [
    Option<"precision", "precision", "std::string", "\"fp16\"",
           "fp16, bf16 (fp32: the pass does nothing)">,
    Option<"lossScale", "loss-scale", "std::string", "\"\"",
           "dynamic, static or none (default: dynamic for fp16, none for "
           "bf16)">,
    Option<"lossScaleInit", "loss-scale-init", "double", "65536.0",
           "the initial (or static) loss scale">,
    Option<"growthInterval", "growth-interval", "int64_t", "2000",
           "dynamic scaling: clean steps before the scale doubles">,
    Option<"lowHead", "low-head", "bool", "false",
           "a language model's head (linear_cross_entropy) reads its input "
           "and weight in the low type: its logits and their gradient are "
           "stored in it (as autocast's), its statistics and loss are f32">,
  ];
  let dependentDialects = ["::mlir::gpuc::GpucDialect"];
}
def GpucAmpWeightCopies : Pass<"gpuc-amp-weight-copies", "::mlir::ModuleOp"> {
  let summary = "keep 16-bit copies of the f32 master weights, written by "
                "the optimizer's update";
  let description = [{
    After gpuc-amp and gpuc-optimizer. A trainable parameter `@P` that some
    function casts to f16 or bf16 (a GEMM or convolution reads it) gets the
    state `@P.f16` (or `@P.bf16`), initialized to its rounded initial value:
    every such cast is replaced by that argument, and the function that
    writes `@P` (`gpuc.update`) also writes `@P.f16` as the rounded new
    value, which fusion makes one more output of the update kernel. A skipped
    (non-finite) step leaves `@P`, and so its copy, unchanged.
  }];
  let dependentDialects = ["::mlir::gpuc::GpucDialect"];
}
//===----------------------------------------------------------------------===//
// Evaluation
//===----------------------------------------------------------------------===//

def GpucEvalFunction : Pass<"gpuc-eval-function", "::mlir::ModuleOp"> {
  let summary = "clone @forward into @eval, the inference-mode forward";
  let description = [{
    `@eval` computes the model's outputs as a trained model is used: dropout
    is the identity, batch normalization uses the running statistics, and no
    state is written (the running-statistics results are dropped). Arguments
    that become unused (the RNG key) are removed. Run it before the loss is
    attached, so `@eval` returns the model's own outputs.
  }];
  let dependentDialects = ["::mlir::gpuc::GpucDialect"];
}

def GpucEvalTokenScores : Pass<"gpuc-eval-token-scores", "::mlir::ModuleOp"> {
  let summary = "a language model's @eval returns its held-out loss and "
                "accuracy instead of its logits";
  let description = [{
    After gpuc-eval-function (and gpuc-attach-loss, whose labels input it
    shares). When @eval's output `output`, `[d0, ..., dk, V]` class-last
    logits, is a linear head's (`input · weightᵀ + bias` through reshapes,
    as gpuc-form-linear-cross-entropy finds it), @eval takes the labels
    `labels` (`[d0, ..., dk]`, of the type @forward's input of that name
    has, else i64) and returns, in place of the logits,
    `<output>.loss_sum` and `<output>.correct` from one
    `gpuc.linear_token_scores`: the summed cross-entropy of the rows and
    the count of rows whose first largest logit is the label's. A label of
    -1 counts in neither (the trainer pads a short last batch with it).
    gpuc-decompose runs the op over row chunks, so no `N x V` value exists
    in @eval either. Logits that are not a linear head's stay @eval's
    output.
  }];
  let options = [
    Option<"output", "output", "std::string", "\"logits\"",
           "the @eval output holding the class-last logits">,
    Option<"labels", "labels", "std::string", "\"label\"",
           "the input holding the labels">,
  ];
  let dependentDialects = ["::mlir::gpuc::GpucDialect"];
}

def GpucFormAttention : Pass<"gpuc-form-attention", "::mlir::ModuleOp"> {
  let summary = "recognise scaled dot-product attention as gpuc.attention";
  let description = [{
    Finds `softmax(mask(scale * Q K^T)) V` as exporters write it: the scale
    a multiplication or division of the scores (or of Q and K, as PyTorch
    exports scaled_dot_product_attention), the mask a `select` with a
    constant fill (masked_fill, `where`) or the addition of a constant of
    zeros and -inf (a triu/tril mask built at export), with or without
    dropout on the weights, over rank-4 `[B, H, T, D]` or rank-3
    `[B*H, T, D]` operands. The chain becomes one `gpuc.attention` with its
    own gradient, so that gpuc-decompose can choose how it runs. Other
    readers of the weights or the scores keep their own ops.
  }];
  let dependentDialects = ["::mlir::gpuc::GpucDialect"];
}

def GpucFormGelu : Pass<"gpuc-form-gelu", "::mlir::ModuleOp"> {
  let summary = "recognise GELU as exporters spell it as gpuc.gelu";
  let description = [{
    Finds `x * 0.5 * (1 + erf(x / sqrt(2)))` (PyTorch's `nn.GELU()` below
    ONNX opset 20: a division, an erf, an addition and two products) and
    `x * 0.5 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))` (the tanh
    approximation, GPT-2's `gelu_new`), the products in any order and
    association, the scales as products or quotients, the cube as a `pow`
    or two products, and makes each one `gpuc.gelu`. As one op it
    differentiates as one (`Phi(x) + x phi(x)`, without the chain's
    quotients), and a kernel computes it as PyTorch's own GELU does: it
    multiplies by 1/sqrt(2) where the chain divides by sqrt(2), so results
    differ from the chain's by a rounding or two, as they do from PyTorch's
    ONNX export run by ONNX's reference. A chain whose intermediate values
    something else reads keeps its ops.
  }];
  let dependentDialects = ["::mlir::gpuc::GpucDialect"];
}

def GpucFormLinearCrossEntropy
    : Pass<"gpuc-form-linear-cross-entropy", "::mlir::ModuleOp"> {
  let summary = "fold a linear head and its cross-entropy into one op";
  let description = [{
    Finds, in @forward, a `cross_entropy` over `[N, V]` logits that are
    `input · weightᵀ (+ bias)` through reshapes (a language model's head),
    and makes the pair one `gpuc.linear_cross_entropy`. The logits stop
    being an output of the step (they stay in @eval), so no `[N, V]` value
    has to exist: gpuc-decompose runs the head over row chunks. A chain
    whose logits something else reads stays as it is, and so does a head
    with no more classes than features (a classifier's: its logits are no
    wider than the rows it reads).
  }];
  let dependentDialects = ["::mlir::gpuc::GpucDialect"];
}

//===----------------------------------------------------------------------===//
// Towards kernels
//===----------------------------------------------------------------------===//

def GpucDecompose : Pass<"gpuc-decompose", "::mlir::ModuleOp"> {
  let summary = "rewrite composite ops as core ops";
  let description = [{
    softmax, log_softmax, layer_norm, batch_norm_train, cross_entropy,
    nll_loss and mse_loss become reductions and elementwise core ops (max
    subtracted before exp; population variance as the composites define it),
    which is what fusion and codegen understand. gelu and dropout stay: they
    are elementwise, and codegen computes them directly. `attention` picks
    how gpuc.attention and its gradient run: `gemm` (batched GEMMs around
    row kernels; the gradient recomputes the weights from Q K^T) or `flash`
    (they stay, each a fused kernel of its own that keeps no weight).
    Under `gemm`, a causal mask's GEMMs come in `triangle-band-rows` bands
    that skip what its triangle excludes (`gpuc.matmul`'s `bands`).
    `gpuc.linear_cross_entropy_grad` runs over chunks of rows: each chunk's
    logits (a GEMM), its loss and logit gradient (row kernels), its rows of
    the input's gradient (a GEMM writing into its part of the result) and
    its share of the weight's (a GEMM accumulating into the sum so far). The
    forward op it was built from reads its loss. `gpuc.linear_token_scores`
    runs over the same chunks: a chunk's logits, its summed loss and its
    count of correct rows, added onto the chunks' before. With `pad-classes`, a
    vocabulary of at least 1,024 classes that is not a multiple of it runs
    over a weight padded with zero rows to one, the padded logits -inf (the
    GPU's GEMMs are faster on whole tiles; results are the unpadded ones).
  }];
  let options = [
    Option<"attention", "attention", "std::string", "\"gemm\"",
           "how attention runs: gemm or flash">,
    Option<"lossChunkRows", "loss-chunk-rows", "int64_t", "0",
           "rows per chunk of a linear cross-entropy (0: the chunk whose "
           "logits take about loss-chunk-bytes, in at most 16 chunks)">,
    Option<"lossChunkBytes", "loss-chunk-bytes", "int64_t", "33554432",
           "what a chunk's logits take by default (32 MiB)">,
    Option<"padClasses", "pad-classes", "int64_t", "0",
           "pad a linear cross-entropy's classes to a multiple of this "
           "(0: never)">,
    Option<"triangleBandRows", "triangle-band-rows", "int64_t", "128",
           "under the gemm lowering, cut a causal attention's GEMMs into "
           "bands of about this many rows (at most 16 bands) that skip its "
           "triangle (0: never)">
  ];
  let dependentDialects = ["::mlir::gpuc::GpucDialect"];
}

def GpucChannelsLast : Pass<"gpuc-channels-last", "::mlir::ModuleOp"> {
  let summary = "hold convolutions' tensors channels last (NHWC)";
  let description = [{
    Every `conv2d`, `conv2d_backward_input` and `conv2d_backward_filter`
    becomes `channels_last` (NHWC tensors, OHWI filters, as tensor cores
    read them) between transposes of its operands and its result. Each
    transpose then sinks through the ops after it that do not care about
    the layout (elementwise ops, reductions, broadcasts, concatenations):
    `add(transpose(x, p), transpose(y, p))` becomes `transpose(add(x, y),
    p)`, a reduction reduces the axes they are in x, a broadcast's small
    input is transposed instead. A transpose that meets the one into the
    next convolution cancels; one that moves only axes of size 1 becomes a
    reshape. A batch norm between two convolutions is then computed on
    NHWC tensors, with no transpose left. Runs after `gpuc-decompose`
    (batch norms are reductions and elementwise ops by then).

    With `grouped-only` the pass changes nothing unless a convolution is
    grouped (depthwise included): on the CPU, where a grouped
    convolution's few operations per byte leave the reorders of NCHW
    tensors into oneDNN's blocked layout most of its time, and NHWC ones
    need none.
  }];
  let options = [
    Option<"groupedOnly", "grouped-only", "bool", "false",
           "only when some convolution has groups > 1">
  ];
  let dependentDialects = ["::mlir::gpuc::GpucDialect"];
}

def GpucFoldLayouts : Pass<"gpuc-fold-layouts", "::mlir::ModuleOp"> {
  let summary = "fold transposes around matmuls into their layouts";
  let description = [{
    A `transpose` that feeds a `gpuc.matmul`, or that is the only reader of
    one's result, becomes the matmul's `lhs_perm`, `rhs_perm` or
    `result_perm`: the GEMM library reads and writes the tensor as stored,
    at its leading dimensions and batch strides, and no kernel copies it.
    Attention's head split and merge (`[B, T, H, D]` <-> `[B, H, T, D]`)
    fold this way. A layout the libraries cannot run (no contiguous matrix
    dimension, more than two strided batch levels) stays a transpose.
    A `gpuc.attention` left for the fused kernel whose query, key and value
    are head splits and whose result only head merges read takes the
    `bthd` layout, with its `gpuc.attention_grad`s when their operands and
    gradients are split and merged the same way. Runs after
    differentiation: layouts have no gradient rules.
  }];
  let dependentDialects = ["::mlir::gpuc::GpucDialect"];
}

def GpucGemmEpilogues : Pass<"gpuc-gemm-epilogues", "::mlir::ModuleOp"> {
  let summary = "fold a linear layer's bias add, and sums of products, into GEMMs";
  let description = [{
    `add(product, broadcast(b))`, with `b` a vector over the product's last
    dimension, becomes `gpuc.matmul ... bias %b`: the GEMM library adds the
    bias as it stores the product (cuBLASLt's bias epilogue), and the add
    leaves the kernels. The product may be reshaped on the way if its last
    dimension stays. Only where the rounding is the program's: an f32
    product and add, or a 16-bit product widened, summed with the bias and
    stored in its 16-bit type again (the bias is then cast to that type,
    as autocast's linear layer reads it). A 16-bit product whose biased
    sum flows on in f32 (a GELU's input) keeps its add. Runs after
    differentiation: a matmul with a bias has no gradient rule.

    `add(p, q)` of two products that nothing else reads, stored as
    computed, becomes `gpuc.matmul ... plus %p` for q: the second GEMM adds
    its f32 sums to the stored p and rounds once (backward's sum of the
    input gradients of Llama's query, key and value projections, then of
    its gate and up projections), and no kernel reads the terms to add them.
  }];
  let dependentDialects = ["::mlir::gpuc::GpucDialect"];
}

def GpucMaskPooledGradients : Pass<"gpuc-mask-pooled-gradients",
                                   "::mlir::ModuleOp"> {
  let summary = "a ReLU's gradient mask before max pooling's gradient";
  let description = [{
    A ReLU before max pooling masks its gradient after the pooling's:
    `select(x > 0, max_pool2d_backward(argmax(x), dy), 0)` reads x, which
    the step then keeps from forward. The pooling's gradient routes each
    window's value to where x is the window's maximum, the pooled value, so
    the mask taken of the pooled value on the pooled side,
    `max_pool2d_backward(argmax(x), select(max_pool2d(x) > 0, dy, 0))`, is
    the same gradient bit for bit (any comparison with a constant, with 0
    where the mask fails), and backward reads the pooled tensor, which the
    next layer keeps anyway. Needs the forward's `max_pool2d` of x with the
    argmax's attributes. Run before gpuc-form-kernels, unless fusion is
    memory-first (it then never stores x, and batch norm's backward computes
    the mask from what it reads).
  }];
  let dependentDialects = ["::mlir::gpuc::GpucDialect"];
}

def GpucFormKernels : Pass<"gpuc-form-kernels", "::mlir::ModuleOp"> {
  let summary = "wrap every remaining computing op into its own gpuc.fusion";
  let description = [{
    Each core op that codegen emits as a generated kernel is wrapped into a
    single-op `gpuc.fusion`; scalar and splat constants it uses are cloned
    into the region instead of becoming inputs. Library calls (matmul,
    conv2d and its backward ops), reshapes (aliases of their input's buffer)
    and constants stay outside. Ops already inside a fusion are left alone,
    so this pass completes whatever grouping `gpuc-fuse` did.
  }];
  let dependentDialects = ["::mlir::gpuc::GpucDialect"];
}

def GpucFuse : Pass<"gpuc-fuse", "::mlir::ModuleOp"> {
  let summary = "merge kernels: producers into consumers, siblings together";
  let description = [{
    Works on the one-op `gpuc.fusion`s of gpuc-form-kernels and merges them
    greedily, in program order, until nothing changes:
    - a producer into its consumer when the merged region still has one
      schedule: elementwise over one iteration space (pointwise chains), or
      rows shared by all its reductions (pointwise producers into a
      reduction, pointwise consumers of per-row or per-element values after
      it, reductions over the same rows: decomposed softmax, layer norm,
      batch norm and their gradients). A reshape between them moves inside.
      A producer read by later kernels too stays one of the merged kernel's
      results (multi-output), never recomputed;
    - siblings: two elementwise kernels over the same number of elements
      that read a common buffer and do not depend on each other;
    - multi-tensor: the kernels whose results only the step returns (the
      optimizer update of every parameter and its state) become one kernel
      with a grid segment per tensor size, placed where the last ran; an
      update that addresses memory by integers it loads (a tied
      embedding's, summing each row's positions) stays a kernel of its own.
    Illegal, and tested: a merge that would recompute a produced value at
    many positions (a window, gather or scatter reading it, a broadcast
    expanding it outside a row kernel), move a kernel above a reader of its
    producer (breaking a dependency), or need two different row shapes (a
    grid-wide barrier).

    `memory-first` (what `gpuc compile --memory-budget` asks for) trades
    time on the CPU for bytes: a pooling window may read a computed value
    when windows do not overlap (the normalized input's ReLU, never
    stored), and max pooling's gradient, routed by stored indices, may join
    a row kernel that then recomputes it in each of its passes (batch
    norm's backward, so the full-size gradient is never stored). On the GPU
    both only save traffic; the CPU's scalar loops pay for the recomputed
    index arithmetic (CNN at batch 128: 118 -> 125 ms a step at 2 threads).
  }];
  let options = [
    Option<"memoryFirst", "memory-first", "bool", "false",
           "fuse to store fewer bytes even where a CPU kernel gets slower">,
  ];
  let dependentDialects = ["::mlir::gpuc::GpucDialect"];
}

def GpucRecomputeReads : Pass<"gpuc-recompute-reads", "::mlir::ModuleOp"> {
  let summary = "compute a read tensor from what the kernel reads anyway";
  let description = [{
    On kernel-formed functions (after gpuc-fuse). A kernel that reads a
    tensor another kernel computes cheaply (negations, absolute values,
    ReLU, sums, differences, products, minima and maxima, comparisons,
    selects, casts and broadcasts) from tensors the first kernel reads
    already, and from values smaller than it (per-row statistics, biases),
    computes it instead of loading it. The producer still stores it for
    its other readers (a ReLU's output, which the next convolution reads),
    and no more where none is left; the kernel reads fewer bytes, and no
    large tensor lives longer.
    Batch norm's backward after a ReLU is the case: its mask read the
    ReLU's output beside the convolution's output, from which, with the
    stored mean and reciprocal deviation and the scale and shift, the ReLU's
    input is a few operations, in each of the kernel's passes. A reader is
    left as it is where the computed tensor needs a statistic its producer
    does not store, where the computation has a costlier op (an
    exponential, a division, a dropout mask), or where the kernel emitter
    has no schedule for the new kernel. Common operations of the reader's
    body and the computation are then one.
  }];
  let dependentDialects = ["::mlir::gpuc::GpucDialect"];
}

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

def GpucPlanMemory : Pass<"gpuc-plan-memory", "::mlir::ModuleOp"> {
  let summary = "give every buffer of the step a place: arena offsets, "
                "in-place updates";
  let description = [{
    Runs on kernel-formed functions (fusions, library calls, reshapes,
    constants: @train_step and @eval after gpuc-fuse); others are left
    alone. Decides, in program order:
    - in-place writes (`gpuc.in_place` on the fusion: per result, the
      operand it overwrites, or -1): an update of a parameter or optimizer
      state is written into that parameter when the step reads the old
      value nowhere after the update kernel, so no copy ends the step; a
      result of an elementwise kernel takes the buffer of an operand that
      dies in that kernel. Both need the kernel to read the operand only at
      the index it writes (see `canOverwrite`);
    - arena offsets for all other results (`gpuc.slots`, one `#gpuc.slot`
      per result): buffers are packed by several greedy orders (by size,
      by lifetime, by size × lifetime, program order), each placing a
      buffer at the lowest offset free over its lifetime; the smallest peak
      wins.
    The function gets `gpuc.memory = {arena_peak, lower_bound,
    kept_for_backward, forward_end}`: the arena's bytes, the liveness lower
    bound (the most bytes live at one program point, which no plan can go
    below), the bytes of forward values still live when backward starts,
    and the position of the last forward op. The plan is checked as
    gpuc-verify-memory-plan does before the pass returns.
  }];
  let options = [
    Option<"inPlace", "in-place", "bool", "true",
           "write updates and dying operands in place">,
  ];
  let dependentDialects = ["::mlir::gpuc::GpucDialect"];
}

def GpucRemat : Pass<"gpuc-remat", "::mlir::ModuleOp"> {
  let summary = "recompute forward values in backward to lower the arena's "
                "peak below a budget";
  let description = [{
    On kernel-formed `@train_step` (after gpuc-fuse, before
    gpuc-plan-memory). A forward value read in backward (a kernel's or
    library call's result) can be recomputed just before its first backward
    reader instead of being kept: the clone (`gpuc.recompute`) reads the same
    inputs, or their recomputations when those come earlier, so results,
    dropout masks included (same RNG key), do not change. Every choice is
    judged by the plan gpuc-plan-memory would make:
    1. pointwise kernels are recomputed whenever that lowers the arena's
       peak, or at the same peak the bytes kept for backward;
    2. with `budget` > 0, while the peak is above it: the cheapest
       recomputation that alone brings the peak within the budget, when
       one does; otherwise the one that lowers the peak most per recomputed
       FLOP (a lower liveness bound breaks ties); or, with `solver=milp`,
       the set of recomputations of least FLOPs under a 0-1 program (one row
       per program point bounding the live bytes, each recomputation's
       effect measured on the IR) solved by COIN-OR CBC, checked by the
       real packing and re-solved with a tighter bound while the packed
       peak is over the budget. A budget that cannot be met is an
       error that states the lowest peak reached.
    `@train_step` gets `gpuc.remat = {budget, peak_before, peak,
    recomputed, extra_flops, solver}`, plus `optimal` (whether CBC proved
    its choice optimal) when the exact mode ran.
  }];
  let options = [
    Option<"budget", "budget", "int64_t", "0",
           "bound on the arena's peak in bytes (0: only the recomputations "
           "of pointwise kernels that lower the peak)">,
    Option<"solver", "solver", "std::string", "\"greedy\"",
           "how to choose the recomputations that meet the budget: greedy, "
           "or milp (exact under the liveness model, COIN-OR CBC)">,
  ];
  let dependentDialects = ["::mlir::gpuc::GpucDialect"];
}

def GpucSchedule : Pass<"gpuc-schedule", "::mlir::ModuleOp"> {
  let summary = "reorder independent kernels to lower the arena's peak";
  let description = [{
    On kernel-formed functions (after gpuc-fuse, before gpuc-remat and
    gpuc-plan-memory). A list scheduler walks the dataflow graph and, among
    the ops whose operands are ready, runs next the one that adds the
    fewest bytes to the live set (its results' bytes minus the bytes of the
    buffers it reads last), ties in program order. The new order is kept
    only when the plan gpuc-plan-memory would make of it has a lower peak
    (or the same peak and a lower liveness bound); otherwise the function
    is left as it was. Reordering independent kernels changes no result.
    Each function considered gets `gpuc.schedule = {peak_before, peak,
    moved}` (moved: ops whose position changed, 0 when the order was kept).
  }];
  let dependentDialects = ["::mlir::gpuc::GpucDialect"];
}

def GpucVerifyMemoryPlan : Pass<"gpuc-verify-memory-plan", "::mlir::ModuleOp"> {
  let summary = "check a memory plan: sizes, in-place legality, no overlap";
  let description = [{
    For every function with a `gpuc.memory` plan: each kernel and library
    call has a `#gpuc.slot` of its result's size per result; each in-place
    write overwrites an operand read only at the written index and dead
    afterwards (a parameter: not read later in the step); arena slots end
    below `arena_peak`; and no two buffers whose lifetimes overlap share a
    byte. Errors name the op and the bytes.
  }];
  let dependentDialects = ["::mlir::gpuc::GpucDialect"];
}

#endif // GPUC_TRANSFORMS_PASSES_TD
