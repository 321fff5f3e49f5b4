// Interfaces of gpuc ops: the gradient rule every differentiable op carries.
#ifndef GPUC_DIALECT_GPUC_GPUCINTERFACES_TD
#define GPUC_DIALECT_GPUC_GPUCINTERFACES_TD

include "mlir/IR/OpBase.td"

def Gpuc_GradientOpInterface : OpInterface<"GradientOpInterface"> {
  let cppNamespace = "::mlir::gpuc";
  let description = [{
    The reverse-mode gradient rule of a differentiable op. Ops without it are
    not differentiable (constants, compare, iota); autodiff refuses a loss
    that depends on a trainable parameter only through such an op.
  }];
  let methods = [
    InterfaceMethod<[{
        Builds, at the builder's position, the gradients of the operands from
        the gradients of the results. `resultGrads[i]` is null when result i
        does not reach the loss. `operandGrads` gets one entry per operand;
        an entry may stay null when `wanted[i]` is false or the operand is not
        differentiable (labels, indices, the RNG key).
      }], "::llvm::LogicalResult", "buildGradients",
      (ins "::mlir::OpBuilder &":$builder,
           "::llvm::ArrayRef<::mlir::Value>":$resultGrads,
           "::llvm::ArrayRef<bool>":$wanted,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>,
  ];
}

#endif // GPUC_DIALECT_GPUC_GPUCINTERFACES_TD
