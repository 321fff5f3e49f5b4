// The gpuc dialect: tensor-level operations for whole-step training graphs.
#ifndef GPUC_DIALECT_GPUC_GPUCDIALECT_TD
#define GPUC_DIALECT_GPUC_GPUCDIALECT_TD

include "mlir/IR/OpBase.td"

def Gpuc_Dialect : Dialect {
  let name = "gpuc";
  let cppNamespace = "::mlir::gpuc";
  let summary = "Tensor operations of a training step, with static shapes";
  let description = [{
    The gpuc dialect holds the whole training step of a model on builtin ranked
    tensors with static shapes. It has two layers:

    * core ops (elementwise, reductions, data movement, matmul, conv2d, pooling)
      are what fusion and code generation understand; broadcasting is always
      explicit (`gpuc.broadcast`), so elementwise ops take operands of one type;
    * composite ops (softmax, layer_norm, batch_norm_train, gelu, dropout,
      cross_entropy, ...) carry hand-written gradients and are decomposed into
      core ops before fusion.

    Model parameters live in module-level `gpuc.parameter` symbols; the function
    arguments that receive them carry `gpuc.param = @name`, graph inputs carry
    `gpuc.input = "name"`, and results carry `gpuc.output = "name"` or, for state
    written back by the step (batch-norm running statistics, trained weights,
    optimizer state), `gpuc.update = @name`. A training step also has
    `gpuc.rng` (the tensor<2xi64> (seed, step) key of its random numbers),
    `gpuc.hyper = "lr"` with `gpuc.default = 1.0e-3 : f64` (runtime scalar
    hyperparameters) and, before the optimizer is attached, results
    `gpuc.grad = @name`.
  }];
  let hasConstantMaterializer = 1;
  let useDefaultAttributePrinterParser = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let extraClassDeclaration = [{
    static constexpr ::llvm::StringLiteral kParamAttrName = "gpuc.param";
    static constexpr ::llvm::StringLiteral kInputAttrName = "gpuc.input";
    static constexpr ::llvm::StringLiteral kOutputAttrName = "gpuc.output";
    static constexpr ::llvm::StringLiteral kUpdateAttrName = "gpuc.update";
    /// The (seed, step) key of the step's random numbers (dropout).
    static constexpr ::llvm::StringLiteral kRngAttrName = "gpuc.rng";
    /// A runtime hyperparameter of the step (learning rate, ...), a scalar.
    static constexpr ::llvm::StringLiteral kHyperAttrName = "gpuc.hyper";
    /// The gradient of the loss with respect to a trainable parameter.
    static constexpr ::llvm::StringLiteral kGradAttrName = "gpuc.grad";
    /// On a gpuc.parameter that gpuc-autodiff made a constant of the step
    /// (no gradient, no optimizer state, no weight decay): why, as a string.
    static constexpr ::llvm::StringLiteral kFrozenAttrName = "gpuc.frozen";
    /// On a frozen gpuc.parameter whose attention mask gpuc-decompose
    /// computes from the query and key indices instead of reading it: a
    /// dictionary {compare, with, key_vs_query} saying that `value compare
    /// with` is `key key_vs_query query` at every [..., query, key]. The
    /// trainer checks every value it loads for the parameter against it.
    static constexpr ::llvm::StringLiteral kCompiledMaskAttrName =
        "gpuc.compiled_mask";
    /// On a gpuc.parameter: the other names the model gives it (a tied
    /// weight listed under each of its modules), as an array of strings.
    /// The trainer matches initial weights by these too.
    static constexpr ::llvm::StringLiteral kAliasesAttrName = "gpuc.aliases";
    /// On a gpuc.parameter: a buffer its module keeps out of its state_dict
    /// (PyTorch's persistent=False, as rotary embeddings keep their
    /// frequencies), which no checkpoint holds: the artifact keeps its
    /// value even where it withholds the weights (--no-weights).
    static constexpr ::llvm::StringLiteral kUnsavedBufferAttrName =
        "gpuc.unsaved_buffer";
    /// The value a hyperparameter takes when the runtime is not told one.
    static constexpr ::llvm::StringLiteral kDefaultAttrName = "gpuc.default";
    /// On a gpuc.parameter the optimizer created (moments, momentum
    /// buffers, the step counter), to tell it from model state.
    static constexpr ::llvm::StringLiteral kOptimizerStateAttrName =
        "gpuc.optimizer_state";
    /// The memory plan: on each kernel and library call, one #gpuc.slot
    /// per result.
    static constexpr ::llvm::StringLiteral kSlotsAttrName = "gpuc.slots";
    /// On a fusion: per result, the operand whose buffer it overwrites in
    /// place (-1: none).
    static constexpr ::llvm::StringLiteral kInPlaceAttrName = "gpuc.in_place";
    /// On the module (gpuc compile --gpu-bytes-in-flight): bytes of input a
    /// GPU thread of a memory-bound kernel loads before it computes and
    /// stores; absent, kGpuBytesInFlight.
    static constexpr ::llvm::StringLiteral kGpuBytesInFlightAttrName =
        "gpuc.gpu_bytes_in_flight";
    /// On the module (gpuc compile --gpu-column-lanes): the most columns a
    /// GPU block of a column kernel takes (gpuColumnLanes); absent, 256.
    static constexpr ::llvm::StringLiteral kGpuColumnLanesAttrName =
        "gpuc.gpu_column_lanes";
    /// On the module (gpuc compile --gpu-warp-row-registers): the most
    /// elements a lane of a GPU warp's row keeps in registers for its
    /// later passes; absent, kGpuWarpRowRegisters.
    static constexpr ::llvm::StringLiteral kGpuWarpRowRegistersAttrName =
        "gpuc.gpu_warp_row_registers";
    /// On the module (gpuc compile --gpu-row-stage-bytes): the most bytes
    /// of a row a GPU block of a row kernel stages in shared memory for
    /// its later passes; absent, kGpuRowStageBytes.
    static constexpr ::llvm::StringLiteral kGpuRowStageBytesAttrName =
        "gpuc.gpu_row_stage_bytes";
    /// On the module (gpuc compile --attention-blocks-per-sm): blocks of
    /// the fused attention's forward launch a GPU's SM is to hold at once
    /// (its registers are capped to fit them); absent, both 1 and 2, as
    /// alternatives the GPU times at load.
    static constexpr ::llvm::StringLiteral kAttentionBlocksPerSmAttrName =
        "gpuc.attention_blocks_per_sm";
    /// On the module (gpuc compile --attention-rows-per-warp): rows of the
    /// fused attention's forward a warp owns on tensor cores, 16 or 32;
    /// absent, 16.
    static constexpr ::llvm::StringLiteral kAttentionRowsPerWarpAttrName =
        "gpuc.attention_rows_per_warp";
    /// On the module (gpuc compile --attention-score-gradients stored):
    /// the fused attention's backward on tensor cores stores its score
    /// gradients in its keys' launch, and a third launch multiplies them
    /// by the keys for the queries' gradients; absent, the queries' launch
    /// computes them again.
    static constexpr ::llvm::StringLiteral
        kAttentionStoredScoreGradientsAttrName =
            "gpuc.attention_stored_score_gradients";
    /// On the module (gpuc compile --attention-library auto|cudnn): each
    /// fused attention kernel cuDNN's fused attention can stand in for
    /// says so in its plan step (`cudnn_attention`), for the CUDA device to
    /// run that instead: 1 wherever it agrees with the kernels at load, 2
    /// where it also is the faster (the device times both).
    static constexpr ::llvm::StringLiteral kAttentionCudnnAttrName =
        "gpuc.attention_cudnn";
    /// On a planned function: arena_peak, lower_bound (bytes) and what
    /// the report shows of its memory.
    static constexpr ::llvm::StringLiteral kMemoryAttrName = "gpuc.memory";
    /// On @train_step after gpuc-remat: budget, peak_before, peak,
    /// recomputed, extra_flops.
    static constexpr ::llvm::StringLiteral kRematAttrName = "gpuc.remat";
    /// gpuc-decompose's record of each linear cross-entropy it ran in row
    /// chunks, on the function: one dictionary each (rows, classes,
    /// chunk_rows, element_bytes).
    static constexpr ::llvm::StringLiteral kChunkedLossesAttrName =
        "gpuc.chunked_losses";
    /// gpuc-schedule's summary on a function: {peak_before, peak, moved}.
    static constexpr ::llvm::StringLiteral kScheduleAttrName = "gpuc.schedule";
    /// On a kernel that recomputes a forward value in backward.
    static constexpr ::llvm::StringLiteral kRecomputeAttrName =
        "gpuc.recompute";
    /// On the gpuc.parameter holding the loss scale (gpuc-amp): a
    /// dictionary {mode = "dynamic"|"static", growth_interval}. Autodiff
    /// seeds backward with the scale; the optimizer unscales, skips a
    /// non-finite update and updates the scale.
    static constexpr ::llvm::StringLiteral kLossScaleAttrName =
        "gpuc.loss_scale";
    /// On @forward and @eval after gpuc-amp: the storage precision,
    /// "fp16" or "bf16".
    static constexpr ::llvm::StringLiteral kPrecisionAttrName =
        "gpuc.precision";
    /// On optimizer state sharded over the ranks (ZeRO stage 1): the shape
    /// of the whole tensor this rank holds one shard of, so that
    /// checkpoints gather and store the whole.
    static constexpr ::llvm::StringLiteral kShardOfAttrName = "gpuc.shard_of";
    /// On the function whose gradients gpuc-data-parallel summed
    /// (@train_step, or @apply_update when accumulating): {buckets,
    /// bucket_bytes, gradient_bytes[, shard_ranks]}, what the plan and the
    /// report show.
    static constexpr ::llvm::StringLiteral kDataParallelAttrName =
        "gpuc.data_parallel";
  }];
}

#endif // GPUC_DIALECT_GPUC_GPUCDIALECT_TD
