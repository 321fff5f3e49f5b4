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
    written back by the step (batch-norm running statistics),
    `gpuc.update = @name`.
  }];
  let hasConstantMaterializer = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let extraClassDeclaration = [{
    static constexpr ::llvm::StringLiteral kParamAttrName = "gpuc.param";
    static constexpr ::llvm::StringLiteral kInputAttrName = "gpuc.input";
    static constexpr ::llvm::StringLiteral kOutputAttrName = "gpuc.output";
    static constexpr ::llvm::StringLiteral kUpdateAttrName = "gpuc.update";
  }];
}

#endif // GPUC_DIALECT_GPUC_GPUCDIALECT_TD
