// Operations of the gpuc dialect: core ops (what fusion and codegen understand)
// and composite ops (with hand-written gradients, decomposed before fusion).
#ifndef GPUC_DIALECT_GPUC_GPUCOPS_TD
#define GPUC_DIALECT_GPUC_GPUCOPS_TD

include "gpuc/Dialect/Gpuc/GpucAttributes.td"
include "gpuc/Dialect/Gpuc/GpucDialect.td"
include "gpuc/Dialect/Gpuc/GpucInterfaces.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/OpBase.td"
include "mlir/IR/Properties.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"

//===----------------------------------------------------------------------===//
// Types and enums
//===----------------------------------------------------------------------===//

def Gpuc_FloatType : AnyTypeOf<[F32, F16, BF16]>;
def Gpuc_IndexElementType : AnyTypeOf<[I64, I32]>;
def Gpuc_FloatTensor : StaticShapeTensorOf<[F32, F16, BF16]>;
def Gpuc_NumericTensor : StaticShapeTensorOf<[F32, F16, BF16, I64, I32]>;
def Gpuc_IndexTensor : StaticShapeTensorOf<[I64, I32]>;
def Gpuc_I32Tensor : StaticShapeTensorOf<[I32]>;
def Gpuc_WindowIndexTensor : StaticShapeTensorOf<[I8, I32]>;
def Gpuc_BoolTensor : StaticShapeTensorOf<[I1]>;
def Gpuc_Tensor : StaticShapeTensorOf<[F32, F16, BF16, I64, I32, I8, I1]>;
def Gpuc_ScalarFloatTensor : 0DTensorOf<[F32, F16, BF16]>;
def Gpuc_RngKey : RankedTensorOf<[I64],
    [CPred<"::llvm::cast<::mlir::RankedTensorType>($_self).getShape() == "
           "::llvm::ArrayRef<int64_t>{2}">], "tensor<2xi64> holding (seed, step)"> {
  let builderCall =
      "::mlir::RankedTensorType::get({2}, $_builder.getIntegerType(64))";
}

def Gpuc_ComparePredicate : I32EnumAttr<"ComparePredicate",
    "elementwise comparison predicate", [
      I32EnumAttrCase<"eq", 0>, I32EnumAttrCase<"ne", 1>,
      I32EnumAttrCase<"lt", 2>, I32EnumAttrCase<"le", 3>,
      I32EnumAttrCase<"gt", 4>, I32EnumAttrCase<"ge", 5>]> {
  let cppNamespace = "::mlir::gpuc";
}

def Gpuc_Reduction : I32EnumAttr<"Reduction",
    "how a loss combines its per-sample values", [
      I32EnumAttrCase<"none", 0>, I32EnumAttrCase<"sum", 1>,
      I32EnumAttrCase<"mean", 2>]> {
  let cppNamespace = "::mlir::gpuc";
}

class Gpuc_Op<string mnemonic, list<Trait> traits = []>
    : Op<Gpuc_Dialect, mnemonic, traits>;

//===----------------------------------------------------------------------===//
// Module-level parameters
//===----------------------------------------------------------------------===//

def Gpuc_ParameterOp : Gpuc_Op<"parameter", [Symbol, HasParent<"::mlir::ModuleOp">]> {
  let summary = "a named model parameter or buffer with its initial value";
  let description = [{
    Declares a persistent tensor of the model. `trainable` marks weights that
    receive gradients; without it the tensor is a buffer (batch-norm running
    statistics) that the step may overwrite through a `gpuc.update` result.
    The initial value usually is a `dense_resource` blob imported from the
    model's initializers.

    ```mlir
    gpuc.parameter @fc1.weight trainable : tensor<256x784xf32> = dense_resource<fc1.weight>
    gpuc.parameter @bn.running_mean : tensor<16xf32> = dense<0.0>
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypeAttrOf<Gpuc_Tensor>:$type,
                       ElementsAttr:$initial_value,
                       UnitAttr:$trainable);
  let assemblyFormat = [{
    $sym_name (`trainable` $trainable^)? `:` $type `=` $initial_value attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::RankedTensorType getTensorType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getType());
    }
  }];
}

//===----------------------------------------------------------------------===//
// Constants
//===----------------------------------------------------------------------===//

def Gpuc_ConstantOp : Gpuc_Op<"constant", [ConstantLike, Pure,
    AllTypesMatch<["value", "result"]>]> {
  let summary = "a constant tensor";
  let description = [{
    ```mlir
    %0 = gpuc.constant dense<[1, 784]> : tensor<2xi64>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Gpuc_Tensor:$result);
  let assemblyFormat = "$value attr-dict";
  let hasFolder = 1;
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise core ops. Operands always have one type: broadcasting is made
// explicit with gpuc.broadcast by the frontends.
//===----------------------------------------------------------------------===//

class Gpuc_UnaryOp<string mnemonic, Type tensorType, string doc>
    : Gpuc_Op<mnemonic, [DeclareOpInterfaceMethods<Gpuc_GradientOpInterface>, Pure, Elementwise, SameOperandsAndResultType]> {
  let summary = "elementwise " # doc;
  let description = [{
    Applies }] # doc # [{ to every element.

    ```mlir
    %1 = gpuc.}] # mnemonic # [{ %0 : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins tensorType:$input);
  let results = (outs tensorType:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Gpuc_NegOp : Gpuc_UnaryOp<"neg", Gpuc_NumericTensor, "negation"> {
  let hasFolder = 1;
}
def Gpuc_AbsOp : Gpuc_UnaryOp<"abs", Gpuc_NumericTensor, "absolute value">;
def Gpuc_ExpOp : Gpuc_UnaryOp<"exp", Gpuc_FloatTensor, "exp(x)">;
def Gpuc_LogOp : Gpuc_UnaryOp<"log", Gpuc_FloatTensor, "natural logarithm">;
def Gpuc_SqrtOp : Gpuc_UnaryOp<"sqrt", Gpuc_FloatTensor, "square root"> {
  let hasFolder = 1;
}
def Gpuc_RsqrtOp : Gpuc_UnaryOp<"rsqrt", Gpuc_FloatTensor, "1/sqrt(x)">;
def Gpuc_ReciprocalOp : Gpuc_UnaryOp<"reciprocal", Gpuc_FloatTensor, "1/x"> {
  let hasFolder = 1;
}
def Gpuc_TanhOp : Gpuc_UnaryOp<"tanh", Gpuc_FloatTensor, "hyperbolic tangent">;
// (Rotary position embeddings take the cosine and sine of positions times
// constant frequencies: constants, folded, in a model with static shapes.)
def Gpuc_CosOp : Gpuc_UnaryOp<"cos", Gpuc_FloatTensor, "cosine"> {
  let hasFolder = 1;
}
def Gpuc_SinOp : Gpuc_UnaryOp<"sin", Gpuc_FloatTensor, "sine"> {
  let hasFolder = 1;
}
def Gpuc_ErfOp : Gpuc_UnaryOp<"erf", Gpuc_FloatTensor, "error function">;
def Gpuc_SigmoidOp : Gpuc_UnaryOp<"sigmoid", Gpuc_FloatTensor, "1/(1+exp(-x))">;
def Gpuc_ReluOp : Gpuc_UnaryOp<"relu", Gpuc_FloatTensor, "max(x, 0)">;

class Gpuc_BinaryOp<string mnemonic, Type tensorType, string doc>
    : Gpuc_Op<mnemonic, [DeclareOpInterfaceMethods<Gpuc_GradientOpInterface>, Pure, Elementwise, SameOperandsAndResultType]> {
  let summary = "elementwise " # doc;
  let description = [{
    Computes }] # doc # [{ element by element on two tensors of the same
    type. Integer operands are allowed so that shape arithmetic folds.

    ```mlir
    %2 = gpuc.}] # mnemonic # [{ %0, %1 : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins tensorType:$lhs, tensorType:$rhs);
  let results = (outs tensorType:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($result)";
  let hasFolder = 1;
}

def Gpuc_AddOp : Gpuc_BinaryOp<"add", Gpuc_NumericTensor, "lhs + rhs"> {
  // A sum of zero pads that are adjacent along one axis is a concatenation
  // (the gradient of a split into slices).
  let hasCanonicalizer = 1;
}
def Gpuc_SubOp : Gpuc_BinaryOp<"sub", Gpuc_NumericTensor, "lhs - rhs">;
def Gpuc_MulOp : Gpuc_BinaryOp<"mul", Gpuc_NumericTensor, "lhs * rhs">;
def Gpuc_DivOp : Gpuc_BinaryOp<"div", Gpuc_NumericTensor,
    "lhs / rhs (integer division truncates toward zero)">;
def Gpuc_PowOp : Gpuc_BinaryOp<"pow", Gpuc_NumericTensor, "lhs ** rhs">;
def Gpuc_MaxOp : Gpuc_BinaryOp<"max", Gpuc_NumericTensor, "max(lhs, rhs)">;
def Gpuc_MinOp : Gpuc_BinaryOp<"min", Gpuc_NumericTensor, "min(lhs, rhs)">;

def Gpuc_CompareOp : Gpuc_Op<"compare", [Pure, Elementwise,
    AllTypesMatch<["lhs", "rhs"]>,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "elementwise comparison producing i1";
  let description = [{
    ```mlir
    %m = gpuc.compare lt, %a, %b : tensor<4xf32>
    ```
  }];
  let arguments = (ins Gpuc_ComparePredicate:$predicate,
                       Gpuc_Tensor:$lhs, Gpuc_Tensor:$rhs);
  let results = (outs Gpuc_BoolTensor:$result);
  let assemblyFormat = "$predicate `,` $lhs `,` $rhs attr-dict `:` type($lhs)";
  let hasFolder = 1;
}

def Gpuc_SelectOp : Gpuc_Op<"select", [DeclareOpInterfaceMethods<Gpuc_GradientOpInterface>, Pure, Elementwise,
    AllTypesMatch<["on_true", "on_false", "result"]>]> {
  let summary = "elementwise choice: cond ? on_true : on_false";
  let description = [{
    ```mlir
    %r = gpuc.select %m, %a, %b : tensor<4xi1>, tensor<4xf32>
    ```
  }];
  let arguments = (ins Gpuc_BoolTensor:$cond, Gpuc_Tensor:$on_true,
                       Gpuc_Tensor:$on_false);
  let results = (outs Gpuc_Tensor:$result);
  let assemblyFormat = [{
    $cond `,` $on_true `,` $on_false attr-dict `:` type($cond) `,` type($result)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Gpuc_CastOp : Gpuc_Op<"cast", [DeclareOpInterfaceMethods<Gpuc_GradientOpInterface>, Pure, Elementwise]> {
  let summary = "elementwise conversion of the element type";
  let description = [{
    Float to integer truncates toward zero; to i1 means "is not zero".

    ```mlir
    %h = gpuc.cast %x : tensor<4xf32> to tensor<4xf16>
    ```
  }];
  let arguments = (ins Gpuc_Tensor:$input);
  let results = (outs Gpuc_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

class Gpuc_ReduceOp<string mnemonic, Type tensorType, string doc>
    : Gpuc_Op<mnemonic, [DeclareOpInterfaceMethods<Gpuc_GradientOpInterface>, Pure, SameOperandsAndResultElementType]> {
  let summary = doc # " over the given axes";
  let description = [{
    Reduces `input` over `axes` (sorted, unique, non-negative). With
    `keep_dims` the reduced axes stay as size 1, otherwise they are dropped.

    ```mlir
    %s = gpuc.}] # mnemonic # [{ %x axes = [1] keep_dims : tensor<4x8xf32> -> tensor<4x1xf32>
    ```
  }];
  let arguments = (ins tensorType:$input, ArrayProp<I64Prop>:$axes,
                       UnitProp:$keep_dims);
  let results = (outs tensorType:$result);
  let assemblyFormat = [{
    $input `axes` `=` $axes (`keep_dims` $keep_dims^)? attr-dict `:`
    type($input) `->` type($result)
  }];
  let hasVerifier = 1;
  let hasCanonicalizer = 1;
}

def Gpuc_ReduceSumOp : Gpuc_ReduceOp<"reduce_sum", Gpuc_NumericTensor, "sum">;
def Gpuc_ReduceMaxOp : Gpuc_ReduceOp<"reduce_max", Gpuc_NumericTensor, "maximum">;
def Gpuc_ReduceMeanOp : Gpuc_ReduceOp<"reduce_mean", Gpuc_FloatTensor, "mean">;

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

def Gpuc_ReshapeOp : Gpuc_Op<"reshape", [DeclareOpInterfaceMethods<Gpuc_GradientOpInterface>, Pure, SameOperandsAndResultElementType]> {
  let summary = "reinterpret a tensor with another shape of the same size";
  let description = [{
    ```mlir
    %f = gpuc.reshape %x : tensor<8x1x28x28xf32> -> tensor<8x784xf32>
    ```
  }];
  let arguments = (ins Gpuc_Tensor:$input);
  let results = (outs Gpuc_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Gpuc_TransposeOp : Gpuc_Op<"transpose", [DeclareOpInterfaceMethods<Gpuc_GradientOpInterface>, Pure, SameOperandsAndResultElementType]> {
  let summary = "permute the axes of a tensor";
  let description = [{
    Result axis `i` is input axis `perm[i]`.

    ```mlir
    %t = gpuc.transpose %x perm = [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
    ```
  }];
  let arguments = (ins Gpuc_Tensor:$input, ArrayProp<I64Prop>:$perm);
  let results = (outs Gpuc_Tensor:$result);
  let assemblyFormat = [{
    $input `perm` `=` $perm attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

def Gpuc_BroadcastOp : Gpuc_Op<"broadcast", [DeclareOpInterfaceMethods<Gpuc_GradientOpInterface>, Pure, SameOperandsAndResultElementType]> {
  let summary = "numpy-style broadcast to a larger shape";
  let description = [{
    Shapes are aligned at the right; every input dimension must equal the
    result's or be 1, and missing leading dimensions are added.

    ```mlir
    %b = gpuc.broadcast %bias : tensor<10xf32> -> tensor<32x10xf32>
    ```
  }];
  let arguments = (ins Gpuc_Tensor:$input);
  let results = (outs Gpuc_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Gpuc_SliceOp : Gpuc_Op<"slice", [DeclareOpInterfaceMethods<Gpuc_GradientOpInterface>, Pure, SameOperandsAndResultElementType]> {
  let summary = "a strided window of a tensor";
  let description = [{
    For every axis, takes `starts[i], starts[i] + strides[i], ...` below
    `limits[i]`; all values are static and in range, strides positive.

    ```mlir
    %s = gpuc.slice %x starts = [0, 2] limits = [4, 8] strides = [1, 2]
           : tensor<4x8xf32> -> tensor<4x3xf32>
    ```
  }];
  let arguments = (ins Gpuc_Tensor:$input, ArrayProp<I64Prop>:$starts,
                       ArrayProp<I64Prop>:$limits, ArrayProp<I64Prop>:$strides);
  let results = (outs Gpuc_Tensor:$result);
  let assemblyFormat = [{
    $input `starts` `=` $starts `limits` `=` $limits `strides` `=` $strides
    attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Gpuc_ConcatOp : Gpuc_Op<"concat", [DeclareOpInterfaceMethods<Gpuc_GradientOpInterface>, Pure, SameOperandsAndResultElementType]> {
  let summary = "join tensors along one axis";
  let description = [{
    ```mlir
    %c = gpuc.concat %a, %b axis = 0 : (tensor<2xi64>, tensor<1xi64>) -> tensor<3xi64>
    ```
  }];
  let arguments = (ins Variadic<Gpuc_Tensor>:$inputs, I64Prop:$axis);
  let results = (outs Gpuc_Tensor:$result);
  let assemblyFormat = [{
    $inputs `axis` `=` $axis attr-dict `:` `(` type($inputs) `)` `->` type($result)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Gpuc_GatherOp : Gpuc_Op<"gather", [DeclareOpInterfaceMethods<Gpuc_GradientOpInterface>, Pure]> {
  let summary = "take slices of data along an axis by index";
  let description = [{
    `result[i0..ia-1, j..., ia+1...] = data[i0..ia-1, indices[j...], ia+1...]`.
    Indices in `[-n, n)` are valid (negative ones count from the end, as in
    ONNX); others are an error at run time.

    ```mlir
    %e = gpuc.gather %table[%ids] axis = 0
           : (tensor<100x16xf32>, tensor<4x8xi64>) -> tensor<4x8x16xf32>
    ```
  }];
  let arguments = (ins Gpuc_Tensor:$data, Gpuc_IndexTensor:$indices, I64Prop:$axis);
  let results = (outs Gpuc_Tensor:$result);
  let assemblyFormat = [{
    $data `[` $indices `]` `axis` `=` $axis attr-dict `:`
    `(` type($data) `,` type($indices) `)` `->` type($result)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

def Gpuc_PadOp : Gpuc_Op<"pad", [DeclareOpInterfaceMethods<Gpuc_GradientOpInterface>, Pure, SameOperandsAndResultElementType]> {
  let summary = "pad a tensor with a constant";
  let description = [{
    Adds `low[i]` elements before and `high[i]` after axis `i`, all set to
    `value`. Pads are static and non-negative.

    ```mlir
    %p = gpuc.pad %x low = [0, 0, 1, 1] high = [0, 0, 1, 1] value = 0.000000e+00
           : tensor<8x1x28x28xf32> -> tensor<8x1x30x30xf32>
    ```
  }];
  let arguments = (ins Gpuc_Tensor:$input, ArrayProp<I64Prop>:$low,
                       ArrayProp<I64Prop>:$high, F64Attr:$value);
  let results = (outs Gpuc_Tensor:$result);
  let assemblyFormat = [{
    $input `low` `=` $low `high` `=` $high `value` `=` $value
    attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Contractions and windows
//===----------------------------------------------------------------------===//

def Gpuc_MatmulOp : Gpuc_Op<"matmul", [DeclareOpInterfaceMethods<Gpuc_GradientOpInterface>, Pure,
    AttrSizedOperandSegments]> {
  let summary = "batched matrix product with optional transposes and layouts";
  let description = [{
    Both operands have the same rank (>= 2) and the same leading (batch)
    dimensions; the last two are the matrix. `transpose_lhs`/`transpose_rhs`
    swap those two dimensions of an operand before the product. An operand
    that is a `transpose` of those two dimensions folds into the flag: the
    library reads the matrix as stored, and no kernel copies it.

    `lhs_perm`, `rhs_perm` and `result_perm` (empty: as stored) say how an
    operand or the result is laid out in memory: the product reads
    `transpose(lhs, lhs_perm)` and stores `transpose(product, result_perm)`.
    `gpuc-fold-layouts` sets them where a transpose around the product
    (attention's head split and merge) becomes the library call's leading
    dimensions and batch strides. A layout must leave a matrix dimension
    contiguous, and the batch must come down to at most two strided levels.

    With `plus %acc` the result is the product plus `acc` (of the result's
    type): the library call accumulates into the result, which the memory
    plan places over `acc` when nothing reads `acc` afterwards. A chunked
    language-model head sums its weight gradient this way, one chunk of
    rows at a time. It has no result layout.

    The operands share an element type, and the result has it too, or is
    f32 where the operands are f16 or bf16: the products are summed in f32
    and stored without rounding to 16 bits (the chunked head's weight
    gradient, summed over its chunks in f32).

    With `bias %b` (a vector over the result's last dimension, of the
    result's type) the library adds `b` to every row of the product as its
    epilogue, to the f32 sums before they are rounded to the result's type
    (a linear layer's bias: cuBLASLt's bias epilogue). `gpuc-gemm-epilogues`
    sets it after differentiation; it has no layout for its result and
    does not accumulate.

    `lhs_window` and `rhs_window` (a `#gpuc.columns`) say that the operand
    is read as a window of its stored rows: of `lhs` stored `[..., W]` the
    product reads columns `[offset, offset + product(shape))`, split into
    `shape`, then through `lhs_perm`. A fused query-key-value projection
    stores the query, key and value side by side in each token's row;
    `gpuc-fold-layouts` makes the attention's products read them there, at
    the library call's leading dimension `W`, and no kernel copies them
    out.

    `lhs_triangle P` and `result_triangle P` say that a causal attention's
    product need not compute what its mask excludes. Of the square matrix
    stored in the lhs's (or the result's) last two dimensions, entry (row
    r, column c) lies in the triangle where `c P r` (`gt`: above the
    diagonal; `lt`: below it). `lhs_triangle`: the lhs reads as zero there
    (the product's producer makes it so: attention's weights and their
    gradient); `result_triangle`: the result is not computed there, and its
    value is unspecified (the interpreter writes NaN: every reader selects
    it away). `bands N` cuts the result's rows into N bands; a band's
    library call computes only the columns, or sums only the terms, that
    some row of the band needs (a causal attention's scores, at 8 bands:
    36 of 64 blocks). The lhs or result with a triangle has no layout or
    window, and the product neither accumulates nor adds a bias.

    ```mlir
    %y = gpuc.matmul %x, %w transpose_rhs
           : (tensor<32x784xf32>, tensor<256x784xf32>) -> tensor<32x256xf32>
    %s = gpuc.matmul %q, %k transpose_rhs lhs_perm = [0, 2, 1, 3]
           rhs_perm = [0, 2, 1, 3]
           : (tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>) -> tensor<2x4x16x16xf32>
    %dw = gpuc.matmul %dz, %x transpose_lhs plus %acc : tensor<64x32xf32>
           : (tensor<8x64xbf16>, tensor<8x32xbf16>) -> tensor<64x32xf32>
    %h = gpuc.matmul %x, %w transpose_rhs bias %b : tensor<256xbf16>
           : (tensor<32x784xbf16>, tensor<256x784xbf16>) -> tensor<32x256xbf16>
    %qk = gpuc.matmul %qkv, %qkv transpose_rhs
           lhs_window = #gpuc.columns<offset = 0, shape = [4, 8]>
           rhs_window = #gpuc.columns<offset = 32, shape = [4, 8]>
           lhs_perm = [0, 2, 1, 3] rhs_perm = [0, 2, 1, 3]
           : (tensor<2x16x96xf32>, tensor<2x16x96xf32>) -> tensor<2x4x16x16xf32>
    %s = gpuc.matmul %q, %k transpose_rhs result_triangle gt bands 4
           : (tensor<2x4x512x64xf32>, tensor<2x4x512x64xf32>) -> tensor<2x4x512x512xf32>
    %o = gpuc.matmul %p, %v lhs_triangle gt bands 4
           : (tensor<2x4x512x512xf32>, tensor<2x4x512x64xf32>) -> tensor<2x4x512x64xf32>
    ```
  }];
  let arguments = (ins Gpuc_FloatTensor:$lhs, Gpuc_FloatTensor:$rhs,
                       Optional<Gpuc_FloatTensor>:$acc,
                       Optional<Gpuc_FloatTensor>:$bias,
                       UnitProp:$transpose_lhs, UnitProp:$transpose_rhs,
                       DefaultValuedProp<ArrayProp<I64Prop>, "::llvm::ArrayRef<int64_t>{}", "::llvm::SmallVector<int64_t>{}">:$lhs_perm,
                       DefaultValuedProp<ArrayProp<I64Prop>, "::llvm::ArrayRef<int64_t>{}", "::llvm::SmallVector<int64_t>{}">:$rhs_perm,
                       DefaultValuedProp<ArrayProp<I64Prop>, "::llvm::ArrayRef<int64_t>{}", "::llvm::SmallVector<int64_t>{}">:$result_perm,
                       OptionalAttr<Gpuc_ColumnsAttr>:$lhs_window,
                       OptionalAttr<Gpuc_ColumnsAttr>:$rhs_window,
                       OptionalAttr<Gpuc_ComparePredicate>:$lhs_triangle,
                       OptionalAttr<Gpuc_ComparePredicate>:$result_triangle,
                       OptionalAttr<I64Attr>:$bands);
  let results = (outs Gpuc_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs (`transpose_lhs` $transpose_lhs^)? (`transpose_rhs` $transpose_rhs^)?
    (`lhs_window` `=` $lhs_window^)? (`rhs_window` `=` $rhs_window^)?
    (`lhs_perm` `=` $lhs_perm^)? (`rhs_perm` `=` $rhs_perm^)?
    (`result_perm` `=` $result_perm^)? (`plus` $acc^ `:` type($acc))?
    (`bias` $bias^ `:` type($bias))?
    (`lhs_triangle` $lhs_triangle^)? (`result_triangle` $result_triangle^)?
    (`bands` $bands^)?
    attr-dict `:` `(` type($lhs) `,` type($rhs) `)` `->` type($result)
  }];
  let builders = [
    OpBuilder<(ins "::mlir::Type":$result, "::mlir::Value":$lhs,
                   "::mlir::Value":$rhs,
                   CArg<"bool", "false">:$transpose_lhs,
                   CArg<"bool", "false">:$transpose_rhs,
                   CArg<"::llvm::ArrayRef<int64_t>", "{}">:$lhs_perm,
                   CArg<"::llvm::ArrayRef<int64_t>", "{}">:$rhs_perm,
                   CArg<"::llvm::ArrayRef<int64_t>", "{}">:$result_perm), [{
      build($_builder, $_state, result, lhs, rhs, ::mlir::Value(),
            ::mlir::Value(), transpose_lhs, transpose_rhs, lhs_perm, rhs_perm,
            result_perm, /*lhs_window=*/nullptr, /*rhs_window=*/nullptr,
            /*lhs_triangle=*/nullptr, /*result_triangle=*/nullptr,
            /*bands=*/nullptr);
    }]>];
  let extraClassDeclaration = [{
    /// Whether any operand or the result has a layout of its own.
    bool hasLayouts() {
      return !getLhsPerm().empty() || !getRhsPerm().empty() ||
             !getResultPerm().empty() || getLhsWindow() || getRhsWindow();
    }
    /// The shape of operand `i` (0: lhs, 1: rhs) as the product reads it
    /// before its permutation: the stored shape, or its window's.
    ::llvm::SmallVector<int64_t> readShape(unsigned i);
    /// The verifier's part for `lhs_triangle`, `result_triangle` and
    /// `bands`, of a product of `rows` rows.
    ::mlir::LogicalResult verifyTriangle(int64_t rows);
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Gpuc_Conv2DOp : Gpuc_Op<"conv2d", [DeclareOpInterfaceMethods<Gpuc_GradientOpInterface>, Pure, SameOperandsAndResultElementType]> {
  let summary = "2-D convolution, NCHW input, OIHW filter (or channels last)";
  let description = [{
    `pads` are `[top, left, bottom, right]`. With `groups = g` the input
    channels split into g groups of `C/g`, the filter is `O x C/g x KH x KW`.
    Bias is a separate broadcast add.

    With `channels_last` the input, filter and result hold their channels
    innermost: input `N x H x W x C`, filter `O x KH x KW x C/g` and result
    `N x OH x OW x O`, the layout tensor cores read without reordering
    (`gpuc-channels-last` makes such convolutions).

    ```mlir
    %y = gpuc.conv2d %x, %w strides = [1, 1] pads = [1, 1, 1, 1]
           dilations = [1, 1] groups = 1
           : (tensor<8x1x28x28xf32>, tensor<16x1x3x3xf32>) -> tensor<8x16x28x28xf32>
    ```
  }];
  let arguments = (ins Gpuc_FloatTensor:$input, Gpuc_FloatTensor:$filter,
                       ArrayProp<I64Prop>:$strides, ArrayProp<I64Prop>:$pads,
                       ArrayProp<I64Prop>:$dilations, I64Prop:$groups,
                       UnitProp:$channels_last);
  let results = (outs Gpuc_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $filter `strides` `=` $strides `pads` `=` $pads
    `dilations` `=` $dilations `groups` `=` $groups
    (`channels_last` $channels_last^)? attr-dict `:`
    `(` type($input) `,` type($filter) `)` `->` type($result)
  }];
  let hasVerifier = 1;
}

class Gpuc_Pool2DOp<string mnemonic, string doc>
    : Gpuc_Op<mnemonic, [DeclareOpInterfaceMethods<Gpuc_GradientOpInterface>, Pure, SameOperandsAndResultElementType]> {
  let summary = doc # " pooling over the two spatial axes of NCHW (or NHWC)";
  let arguments = (ins Gpuc_FloatTensor:$input, ArrayProp<I64Prop>:$kernel,
                       ArrayProp<I64Prop>:$strides, ArrayProp<I64Prop>:$pads,
                       UnitProp:$channels_last);
  let results = (outs Gpuc_FloatTensor:$result);
  let hasVerifier = 1;
}

def Gpuc_MaxPool2DOp : Gpuc_Pool2DOp<"max_pool2d", "maximum"> {
  let description = [{
    Padding never wins the maximum. `pads` are `[top, left, bottom, right]`.
    With `channels_last` the input and result are NHWC (as in every pooling
    op and its gradient).

    ```mlir
    %p = gpuc.max_pool2d %x kernel = [2, 2] strides = [2, 2] pads = [0, 0, 0, 0]
           : tensor<8x16x28x28xf32> -> tensor<8x16x14x14xf32>
    ```
  }];
  let assemblyFormat = [{
    $input `kernel` `=` $kernel `strides` `=` $strides `pads` `=` $pads
    (`channels_last` $channels_last^)?
    attr-dict `:` type($input) `->` type($result)
  }];
}

def Gpuc_AvgPool2DOp : Gpuc_Pool2DOp<"avg_pool2d", "average"> {
  let description = [{
    Without `count_include_pad`, each window's sum is divided by the number of
    its elements inside the input.

    ```mlir
    %p = gpuc.avg_pool2d %x kernel = [2, 2] strides = [2, 2] pads = [0, 0, 0, 0]
           : tensor<8x16x28x28xf32> -> tensor<8x16x14x14xf32>
    ```
  }];
  let arguments = (ins Gpuc_FloatTensor:$input, ArrayProp<I64Prop>:$kernel,
                       ArrayProp<I64Prop>:$strides, ArrayProp<I64Prop>:$pads,
                       UnitProp:$count_include_pad, UnitProp:$channels_last);
  let assemblyFormat = [{
    $input `kernel` `=` $kernel `strides` `=` $strides `pads` `=` $pads
    (`count_include_pad` $count_include_pad^)?
    (`channels_last` $channels_last^)?
    attr-dict `:` type($input) `->` type($result)
  }];
}

//===----------------------------------------------------------------------===//
// Core ops that gradients need: index generation, scatter, and the backward
// data/filter products of convolution and pooling (library calls on GPU).
//===----------------------------------------------------------------------===//

def Gpuc_IotaOp : Gpuc_Op<"iota", [Pure]> {
  let summary = "the index along one dimension";
  let description = [{
    Every element holds its own index along `dim`. With a compare, it builds
    one-hot masks.

    ```mlir
    %i = gpuc.iota dim = 1 : tensor<32x10xi64>
    ```
  }];
  let arguments = (ins I64Prop:$dim);
  let results = (outs Gpuc_NumericTensor:$result);
  let assemblyFormat = "`dim` `=` $dim attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Gpuc_ScatterAddOp : Gpuc_Op<"scatter_add", [Pure,
    DeclareOpInterfaceMethods<Gpuc_GradientOpInterface>]> {
  let summary = "the adjoint of gather: sums updates into the rows they came from";
  let description = [{
    Starts from zeros of the result type and adds each slice of `updates` at
    the position along `axis` named by `indices` (negative indices count from
    the end, as in gather). `updates` has the shape gather would produce from
    a result-shaped tensor. This is the gradient of an embedding lookup.

    ```mlir
    %g = gpuc.scatter_add %dy, %ids axis = 0
           : (tensor<4x16x32xf32>, tensor<4x16xi64>) -> tensor<100x32xf32>
    ```
  }];
  let arguments = (ins Gpuc_FloatTensor:$updates, Gpuc_IndexTensor:$indices,
                       I64Prop:$axis);
  let results = (outs Gpuc_FloatTensor:$result);
  let assemblyFormat = [{
    $updates `,` $indices `axis` `=` $axis attr-dict `:`
    `(` type($updates) `,` type($indices) `)` `->` type($result)
  }];
  let hasVerifier = 1;
}

def Gpuc_RowGroupsOp : Gpuc_Op<"row_groups", [Pure]> {
  let summary = "the positions of indices, grouped by the row each names";
  let description = [{
    A stable counting sort of the positions of `indices` (flattened, `n` of
    them) by the row of an axis of `rows` that each names: positions
    `order[offsets[k]]` .. `order[offsets[k + 1] - 1]` name row `k`, in
    increasing order. Negative indices count from the end; others outside
    the axis are clamped, as gather clamps them. `scatter_add` decomposes
    into this and `segment_sum`, so an embedding's gradient costs work in
    proportion to the tokens, not to the vocabulary. One block computes it;
    indices known at compile time fold to constants.

    ```mlir
    %offsets, %order = gpuc.row_groups %ids rows = 50257
        : tensor<4x256xi64> -> tensor<50258xi32>, tensor<1024xi32>
    ```
  }];
  let arguments = (ins Gpuc_IndexTensor:$indices, I64Prop:$rows);
  let results = (outs Gpuc_I32Tensor:$offsets, Gpuc_I32Tensor:$order);
  let assemblyFormat = [{
    $indices `rows` `=` $rows attr-dict `:` type($indices) `->` type($offsets)
    `,` type($order)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
  let extraClassDeclaration = [{
    /// The op's result for positions whose rows (already in [0, rows)) are
    /// `rowOf`: what the folder and the interpreter compute.
    static void group(::llvm::ArrayRef<int64_t> rowOf, int64_t rows,
                      ::llvm::SmallVectorImpl<int64_t> &offsets,
                      ::llvm::SmallVectorImpl<int64_t> &order);
  }];
}

def Gpuc_SegmentSumOp : Gpuc_Op<"segment_sum", [Pure]> {
  let summary = "sums the slices of updates that each row's group names";
  let description = [{
    With `offsets` and `order` from `row_groups`, row `k` of the result along
    `axis` is the sum, in increasing position, of the slices
    `updates[..., order[p], ...]` for `p` in `offsets[k]` .. `offsets[k+1]-1`
    (zero for a row no position names). `updates` has the result's shape
    but along `axis`, where it has one entry per position. Each result
    element adds its own group's slices in a fixed order: the same sum on
    every run and on both targets. Not differentiable: it only stands for a
    `scatter_add`, which carries the gradient rule.

    ```mlir
    %g = gpuc.segment_sum %dy, %offsets, %order axis = 0
           : (tensor<1024x384xf32>, tensor<50258xi32>, tensor<1024xi32>)
             -> tensor<50257x384xf32>
    ```
  }];
  let arguments = (ins Gpuc_FloatTensor:$updates, Gpuc_I32Tensor:$offsets,
                       Gpuc_I32Tensor:$order, I64Prop:$axis);
  let results = (outs Gpuc_FloatTensor:$result);
  let assemblyFormat = [{
    $updates `,` $offsets `,` $order `axis` `=` $axis attr-dict `:`
    `(` type($updates) `,` type($offsets) `,` type($order) `)` `->`
    type($result)
  }];
  let hasVerifier = 1;
}

def Gpuc_AllReduceOp : Gpuc_Op<"all_reduce", [Pure,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "sums tensors over the ranks of a data-parallel run";
  let description = [{
    Each result is its operand summed element by element over every rank
    of the run, the same value on each rank; with one rank it is the
    operand. `gpuc-data-parallel` puts one bucket of gradients in each op,
    right after the bucket's last gradient is computed. The memory plan
    places each result over its operand, so the step program reduces the
    gradients where they lie (MPI on the CPU, NCCL on the GPU). `bucket`
    numbers the all-reduce within its function, so that the step program
    can wait for it by number: gradient buckets, and the statistics of
    batch norm synchronized over the ranks.

    Every rank runs the same compiled step, so the ranks meet the same
    all-reduces in the same order.

    ```mlir
    %g:2 = gpuc.all_reduce %dw, %db bucket = 0
             : tensor<10x784xf32>, tensor<10xf32>
    ```
  }];
  let arguments = (ins Variadic<Gpuc_FloatTensor>:$inputs, I64Prop:$bucket);
  let results = (outs Variadic<Gpuc_FloatTensor>:$results);
  let assemblyFormat =
      "$inputs `bucket` `=` $bucket attr-dict `:` type($inputs)";
  let hasVerifier = 1;
}

def Gpuc_ReduceScatterOp : Gpuc_Op<"reduce_scatter", [Pure]> {
  let summary = "this rank's shard of tensors summed over the ranks";
  let description = [{
    Optimizer-state sharding (ZeRO stage 1) over `ranks` ranks: each
    operand, flattened, is cut into `ranks` shards of `ceil(n / ranks)`
    elements, and rank `r`'s result is shard `r` of the operand summed
    element by element over the ranks, zero past the operand's end. Each
    rank then updates its shard of the parameters, and `gpuc.all_gather`
    puts them together. `bucket` numbers the collective within its
    function, as `gpuc.all_reduce`'s does.

    ```mlir
    %s:2 = gpuc.reduce_scatter %dw, %db bucket = 0 ranks = 2
             : (tensor<10x784xf32>, tensor<10xf32>)
             -> (tensor<3920xf32>, tensor<5xf32>)
    ```
  }];
  let arguments = (ins Variadic<Gpuc_FloatTensor>:$inputs, I64Prop:$bucket,
                       I64Prop:$ranks);
  let results = (outs Variadic<Gpuc_FloatTensor>:$results);
  let assemblyFormat = [{
    $inputs `bucket` `=` $bucket `ranks` `=` $ranks attr-dict `:`
    `(` type($inputs) `)` `->` `(` type($results) `)`
  }];
  let hasVerifier = 1;
}

def Gpuc_AllGatherOp : Gpuc_Op<"all_gather", [Pure]> {
  let summary = "whole tensors from every rank's shard";
  let description = [{
    The inverse of `gpuc.reduce_scatter`'s cut: each operand is this rank's
    shard of `ceil(n / ranks)` elements, and each result is the shards of
    ranks 0 to `ranks - 1` one after another, cut to the result's `n`
    elements and shaped as the result. Every rank gets the same tensors.

    ```mlir
    %w:2 = gpuc.all_gather %sw, %sb bucket = 1 ranks = 2
             : (tensor<3920xf32>, tensor<5xf32>)
             -> (tensor<10x784xf32>, tensor<10xf32>)
    ```
  }];
  let arguments = (ins Variadic<Gpuc_FloatTensor>:$inputs, I64Prop:$bucket,
                       I64Prop:$ranks);
  let results = (outs Variadic<Gpuc_FloatTensor>:$results);
  let assemblyFormat = [{
    $inputs `bucket` `=` $bucket `ranks` `=` $ranks attr-dict `:`
    `(` type($inputs) `)` `->` `(` type($results) `)`
  }];
  let hasVerifier = 1;
}

def Gpuc_RankShardOp : Gpuc_Op<"rank_shard", [Pure]> {
  let summary = "this rank's shard of a tensor";
  let description = [{
    Shard `r` of the flattened operand on rank `r` of `ranks`: elements
    `r * s` to `r * s + s - 1` with `s = ceil(n / ranks)`, zero past the
    operand's end; the cut `gpuc.reduce_scatter` and `gpuc.all_gather`
    use. The optimizer reads each parameter's shard through it.

    ```mlir
    %s = gpuc.rank_shard %w ranks = 2 : tensor<10x784xf32> -> tensor<3920xf32>
    ```
  }];
  let arguments = (ins Gpuc_FloatTensor:$input, I64Prop:$ranks);
  let results = (outs Gpuc_FloatTensor:$result);
  let assemblyFormat = [{
    $input `ranks` `=` $ranks attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Gpuc_Conv2DBackwardInputOp : Gpuc_Op<"conv2d_backward_input", [
    DeclareOpInterfaceMethods<Gpuc_GradientOpInterface>, Pure,
    SameOperandsAndResultElementType]> {
  let summary = "gradient of conv2d with respect to its input";
  let description = [{
    The transposed convolution of the output gradient with the filter; the
    result type is the forward input's. Attributes are the forward op's,
    `channels_last` included.
    ONNX's ConvTranspose imports as this op; its own gradients are a conv2d
    (for `grad_output`) and a conv2d_backward_filter (for `filter`).

    ```mlir
    %dx = gpuc.conv2d_backward_input %dy, %w strides = [1, 1] pads = [1, 1, 1, 1]
            dilations = [1, 1] groups = 1
            : (tensor<8x16x28x28xf32>, tensor<16x1x3x3xf32>) -> tensor<8x1x28x28xf32>
    ```
  }];
  let arguments = (ins Gpuc_FloatTensor:$grad_output, Gpuc_FloatTensor:$filter,
                       ArrayProp<I64Prop>:$strides, ArrayProp<I64Prop>:$pads,
                       ArrayProp<I64Prop>:$dilations, I64Prop:$groups,
                       UnitProp:$channels_last);
  let results = (outs Gpuc_FloatTensor:$result);
  let assemblyFormat = [{
    $grad_output `,` $filter `strides` `=` $strides `pads` `=` $pads
    `dilations` `=` $dilations `groups` `=` $groups
    (`channels_last` $channels_last^)? attr-dict `:`
    `(` type($grad_output) `,` type($filter) `)` `->` type($result)
  }];
  let hasVerifier = 1;
}

def Gpuc_Conv2DBackwardFilterOp : Gpuc_Op<"conv2d_backward_filter", [Pure,
    SameOperandsAndResultElementType]> {
  let summary = "gradient of conv2d with respect to its filter";
  let description = [{
    Correlates the forward input with the output gradient; the result type is
    the filter's. Attributes are the forward op's, `channels_last` included.

    ```mlir
    %dw = gpuc.conv2d_backward_filter %x, %dy strides = [1, 1] pads = [1, 1, 1, 1]
            dilations = [1, 1] groups = 1
            : (tensor<8x1x28x28xf32>, tensor<8x16x28x28xf32>) -> tensor<16x1x3x3xf32>
    ```
  }];
  let arguments = (ins Gpuc_FloatTensor:$input, Gpuc_FloatTensor:$grad_output,
                       ArrayProp<I64Prop>:$strides, ArrayProp<I64Prop>:$pads,
                       ArrayProp<I64Prop>:$dilations, I64Prop:$groups,
                       UnitProp:$channels_last);
  let results = (outs Gpuc_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $grad_output `strides` `=` $strides `pads` `=` $pads
    `dilations` `=` $dilations `groups` `=` $groups
    (`channels_last` $channels_last^)? attr-dict `:`
    `(` type($input) `,` type($grad_output) `)` `->` type($result)
  }];
  let hasVerifier = 1;
}

def Gpuc_MaxPool2DArgmaxOp : Gpuc_Op<"max_pool2d_argmax", [Pure]> {
  let summary = "where each max_pool2d window has its maximum";
  let description = [{
    For each window of `max_pool2d` with the same attributes, the position of
    its first maximum in scan order, `ky * kernel[1] + kx` from the window's
    top-left corner (padding included in the count, never chosen). Computed
    in the forward pass beside the pooling, it is all that the gradient needs
    of the input: `i8` when the window has at most 127 positions, else `i32`.

    ```mlir
    %i = gpuc.max_pool2d_argmax %x kernel = [2, 2] strides = [2, 2]
           pads = [0, 0, 0, 0] : tensor<8x16x28x28xf32> -> tensor<8x16x14x14xi8>
    ```
  }];
  let arguments = (ins Gpuc_FloatTensor:$input, ArrayProp<I64Prop>:$kernel,
                       ArrayProp<I64Prop>:$strides, ArrayProp<I64Prop>:$pads,
                       UnitProp:$channels_last);
  let results = (outs Gpuc_WindowIndexTensor:$result);
  let assemblyFormat = [{
    $input `kernel` `=` $kernel `strides` `=` $strides `pads` `=` $pads
    (`channels_last` $channels_last^)?
    attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Gpuc_MaxPool2DBackwardOp : Gpuc_Op<"max_pool2d_backward", [Pure]> {
  let summary = "gradient of max_pool2d";
  let description = [{
    Routes each window's output gradient to the position `indices`
    (`max_pool2d_argmax` of the forward input) names: the first position of
    its maximum, as PyTorch does. The result type is the forward input's.

    ```mlir
    %dx = gpuc.max_pool2d_backward %i, %dy kernel = [2, 2] strides = [2, 2]
            pads = [0, 0, 0, 0]
            : tensor<8x16x14x14xi8>, tensor<8x16x14x14xf32> -> tensor<8x16x28x28xf32>
    ```
  }];
  let arguments = (ins Gpuc_WindowIndexTensor:$indices,
                       Gpuc_FloatTensor:$grad_output,
                       ArrayProp<I64Prop>:$kernel, ArrayProp<I64Prop>:$strides,
                       ArrayProp<I64Prop>:$pads, UnitProp:$channels_last);
  let results = (outs Gpuc_FloatTensor:$result);
  let assemblyFormat = [{
    $indices `,` $grad_output `kernel` `=` $kernel `strides` `=` $strides
    `pads` `=` $pads (`channels_last` $channels_last^)? attr-dict `:`
    type($indices) `,` type($grad_output) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Gpuc_AvgPool2DBackwardOp : Gpuc_Op<"avg_pool2d_backward", [Pure,
    SameOperandsAndResultElementType]> {
  let summary = "gradient of avg_pool2d";
  let description = [{
    Spreads each window's output gradient evenly over the window (divided by
    the same count the forward op used); the result type is the forward
    input's.

    ```mlir
    %dx = gpuc.avg_pool2d_backward %dy kernel = [2, 2] strides = [2, 2]
            pads = [0, 0, 0, 0] : tensor<8x16x14x14xf32> -> tensor<8x16x28x28xf32>
    ```
  }];
  let arguments = (ins Gpuc_FloatTensor:$grad_output, ArrayProp<I64Prop>:$kernel,
                       ArrayProp<I64Prop>:$strides, ArrayProp<I64Prop>:$pads,
                       UnitProp:$count_include_pad, UnitProp:$channels_last);
  let results = (outs Gpuc_FloatTensor:$result);
  let assemblyFormat = [{
    $grad_output `kernel` `=` $kernel `strides` `=` $strides `pads` `=` $pads
    (`count_include_pad` $count_include_pad^)?
    (`channels_last` $channels_last^)?
    attr-dict `:` type($grad_output) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Composite ops: decomposed into core ops before fusion; their gradients are
// written by hand for accuracy.
//===----------------------------------------------------------------------===//

class Gpuc_AxisOp<string mnemonic, string doc>
    : Gpuc_Op<mnemonic, [DeclareOpInterfaceMethods<Gpuc_GradientOpInterface>, Pure, SameOperandsAndResultType]> {
  let summary = doc # " along one axis";
  let description = [{
    Numerically stable (the maximum is subtracted first).

    ```mlir
    %p = gpuc.}] # mnemonic # [{ %logits axis = 1 : tensor<32x10xf32>
    ```
  }];
  let arguments = (ins Gpuc_FloatTensor:$input, I64Prop:$axis);
  let results = (outs Gpuc_FloatTensor:$result);
  let assemblyFormat = "$input `axis` `=` $axis attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Gpuc_SoftmaxOp : Gpuc_AxisOp<"softmax", "softmax">;
def Gpuc_LogSoftmaxOp : Gpuc_AxisOp<"log_softmax", "log(softmax)">;

def Gpuc_GeluOp : Gpuc_Op<"gelu", [DeclareOpInterfaceMethods<Gpuc_GradientOpInterface>, Pure, Elementwise, SameOperandsAndResultType]> {
  let summary = "Gaussian error linear unit";
  let description = [{
    `x * 0.5 * (1 + erf(x / sqrt(2)))`, or with `tanh` the tanh approximation.

    ```mlir
    %g = gpuc.gelu %x : tensor<32x256xf32>
    ```
  }];
  let arguments = (ins Gpuc_FloatTensor:$input, UnitProp:$tanh);
  let results = (outs Gpuc_FloatTensor:$result);
  let assemblyFormat = "$input (`tanh` $tanh^)? attr-dict `:` type($result)";
}

def Gpuc_DropoutOp : Gpuc_Op<"dropout", [DeclareOpInterfaceMethods<Gpuc_GradientOpInterface>, Pure,
    AllTypesMatch<["input", "result"]>]> {
  let summary = "training-mode dropout (inverted scaling)";
  let description = [{
    Zeroes each element with probability `ratio` and scales the others by
    `1 / (1 - ratio)`. The mask comes from the counter-based Philox 4x32-10
    generator keyed by `rng_key` = (seed, step) and counted by the element
    index and this op's `stream`, so the same step recomputes the same mask
    (remat needs that) and the gradient is the same dropout of the incoming
    gradient.

    ```mlir
    %d = gpuc.dropout %x, %key stream = 0 ratio = 1.000000e-01 : tensor<32x256xf32>
    ```
  }];
  let arguments = (ins Gpuc_FloatTensor:$input, Gpuc_RngKey:$rng_key,
                       F64Attr:$ratio, I64Prop:$stream);
  let results = (outs Gpuc_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $rng_key `stream` `=` $stream `ratio` `=` $ratio attr-dict
    `:` type($result)
  }];
  let hasVerifier = 1;
}

def Gpuc_AttentionOp : Gpuc_Op<"attention", [DeclareOpInterfaceMethods<Gpuc_GradientOpInterface>, Pure,
    AttrSizedOperandSegments]> {
  let summary = "scaled dot-product attention, with its row statistics";
  let description = [{
    `query` is `B x H x Tq x D`, `key` is `B x Hk x Tk x D`, `value` is
    `B x Hk x Tk x Dv`, where Hk divides H: grouped-query attention's query
    head h reads key and value head h / (H / Hk) (Hk = H: one each; Hk =
    1: multi-query attention). Each query row attends to the keys: the scores are
    `scale * q . k`; where the optional `mask` (i1, each dimension 1 or
    `[B, H, Tq, Tk]`'s, read as broadcast) is true a score becomes `fill`
    (or, with `mask_keeps`, where it is false); the weights are the
    softmax of the row; with `dropout` > 0 they are dropped as
    `gpuc.dropout` of the `[B, H, Tq, Tk]` weights with `rng_key` and
    `stream` would drop them; the result is their sum of value rows.
    `logsumexp` (`B x H x Tq`, f32) is the log of each row's softmax
    normalizer, from which the gradient recomputes the weights.

    Two lowerings (gpuc-decompose's `attention` option): batched GEMMs
    around one row kernel, or a fused kernel that never stores the weights.

    With `bthd`, query, key, value and the result are stored `B x T x H x
    D` (a token's heads side by side, as the projections write them) and
    read as the `B x H x T x D` above: `gpuc-fold-layouts` sets it where
    the head split and merge around the fused kernel would be transposes.
    `logsumexp` and the mask keep their shapes.

    `triangle P` (`mask_triangle`) says the mask is `key P query` at every
    `[..., query, key]` (a causal mask): the fused kernels then compare
    indices instead of reading it, and skip the tiles it excludes whole.
    The flash lowering sets it where it recognises the mask and drops the
    operand: without one, the mask is that comparison (`mask_keeps` says
    whether a true one keeps the score, as for an operand). Beside an
    operand (a padding mask the triangle was and'ed with), a score is
    excluded where either excludes it.

    ```mlir
    %o, %lse = gpuc.attention %q, %k, %v mask %m : tensor<1x1x64x64xi1>
        scale = 1.250000e-01 fill = 0xFFF0000000000000
        : tensor<4x12x64x64xf32>, tensor<4x12x64x64xf32>, tensor<4x12x64x64xf32>
          -> tensor<4x12x64x64xf32>, tensor<4x12x64xf32>
    ```
  }];
  let arguments = (ins Gpuc_FloatTensor:$query, Gpuc_FloatTensor:$key,
                       Gpuc_FloatTensor:$value, Optional<Gpuc_BoolTensor>:$mask,
                       Optional<Gpuc_RngKey>:$rng_key, F64Attr:$scale,
                       F64Attr:$fill, UnitAttr:$mask_keeps,
                       OptionalAttr<Gpuc_ComparePredicate>:$mask_triangle,
                       DefaultValuedAttr<F64Attr, "0.0">:$dropout,
                       DefaultValuedAttr<I64Attr, "0">:$stream, UnitProp:$bthd);
  let results = (outs Gpuc_FloatTensor:$result, F32Tensor:$logsumexp);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`mask` $mask^ `:` type($mask))?
    (`key` $rng_key^)? `scale` `=` $scale `fill` `=` $fill
    (`triangle` $mask_triangle^)? (`bthd` $bthd^)?
    attr-dict `:` type($query) `,` type($key) `,` type($value) `->`
    type($result) `,` type($logsumexp)
  }];
  let hasVerifier = 1;
}

def Gpuc_AttentionGradOp : Gpuc_Op<"attention_grad", [Pure,
    AttrSizedOperandSegments, AllTypesMatch<["query", "query_grad"]>,
    AllTypesMatch<["key", "key_grad"]>, AllTypesMatch<["value", "value_grad"]>,
    AllTypesMatch<["result", "result_grad"]>]> {
  let summary = "the gradients of gpuc.attention's query, key and value";
  let description = [{
    From the attention's operands, its `result` and `logsumexp`, and the
    gradient of its result: the weights are recomputed from the scores and
    `logsumexp` (never stored), and each gradient sums in a fixed order;
    a grouped key or value head's sums over the query heads that read it.
    The attributes are the attention's; with `bthd` the result's gradient
    and the three gradients are stored `B x T x H x D` as well.

    ```mlir
    %dq, %dk, %dv = gpuc.attention_grad %q, %k, %v, %o, %lse, %do
        scale = 1.250000e-01 fill = 0xFFF0000000000000
        : tensor<4x12x64x64xf32>, tensor<4x12x64x64xf32>,
          tensor<4x12x64x64xf32>, tensor<4x12x64x64xf32>, tensor<4x12x64xf32>
    ```
  }];
  let arguments = (ins Gpuc_FloatTensor:$query, Gpuc_FloatTensor:$key,
                       Gpuc_FloatTensor:$value, Gpuc_FloatTensor:$result,
                       F32Tensor:$logsumexp, Gpuc_FloatTensor:$result_grad,
                       Optional<Gpuc_BoolTensor>:$mask,
                       Optional<Gpuc_RngKey>:$rng_key, F64Attr:$scale,
                       F64Attr:$fill, UnitAttr:$mask_keeps,
                       OptionalAttr<Gpuc_ComparePredicate>:$mask_triangle,
                       DefaultValuedAttr<F64Attr, "0.0">:$dropout,
                       DefaultValuedAttr<I64Attr, "0">:$stream, UnitProp:$bthd);
  let results = (outs Gpuc_FloatTensor:$query_grad,
                      Gpuc_FloatTensor:$key_grad,
                      Gpuc_FloatTensor:$value_grad);
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $result `,` $logsumexp `,` $result_grad
    (`mask` $mask^ `:` type($mask))? (`key` $rng_key^)? `scale` `=` $scale
    `fill` `=` $fill (`triangle` $mask_triangle^)? (`bthd` $bthd^)?
    attr-dict `:` type($query) `,`
    type($key) `,` type($value) `,` type($result) `,` type($logsumexp)
  }];
  let hasVerifier = 1;
}

def Gpuc_LayerNormOp : Gpuc_Op<"layer_norm", [DeclareOpInterfaceMethods<Gpuc_GradientOpInterface>, Pure,
    AllTypesMatch<["input", "result"]>, AllTypesMatch<["scale", "bias"]>]> {
  let summary = "layer normalization over the trailing axes";
  let description = [{
    Normalizes over axes `axis..rank-1` (population variance), then applies
    `scale` and `bias`, whose shape is those trailing dimensions.

    ```mlir
    %y = gpuc.layer_norm %x, %g, %b axis = 2 epsilon = 1.000000e-05
           : tensor<4x16x64xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins Gpuc_FloatTensor:$input, Gpuc_FloatTensor:$scale,
                       Gpuc_FloatTensor:$bias, I64Prop:$axis, F64Attr:$epsilon);
  let results = (outs Gpuc_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $scale `,` $bias `axis` `=` $axis `epsilon` `=` $epsilon
    attr-dict `:` type($input) `,` type($scale)
  }];
  let hasVerifier = 1;
}

def Gpuc_BatchNormTrainOp : Gpuc_Op<"batch_norm_train", [DeclareOpInterfaceMethods<Gpuc_GradientOpInterface>, Pure,
    AllTypesMatch<["input", "result"]>,
    AllTypesMatch<["scale", "bias", "running_mean", "running_var",
                   "new_running_mean", "new_running_var"]>]> {
  let summary = "training-mode batch normalization over N, H, W";
  let description = [{
    Normalizes each channel (axis 1) with the batch's mean and population
    variance, applies `scale` and `bias`, and returns the updated running
    statistics with the ONNX convention:
    `new = running * momentum + batch_stat * (1 - momentum)`
    (PyTorch's `momentum=0.1` is ONNX's `0.9`). `batch_stat` for the variance
    is the population variance as ONNX defines it, or with
    `unbiased_running_var` the unbiased one that PyTorch keeps (models
    exported by PyTorch get it, so they train as they did there).

    With `sync_ranks` the statistics, and the sums its gradient needs, are
    those of every rank's batch together (`gpuc.all_reduce` of the sums and
    the count), as PyTorch's SyncBatchNorm: N ranks then normalize as one
    process with the global batch.

    ```mlir
    %y, %m, %v = gpuc.batch_norm_train %x, %g, %b, %rm, %rv
                   epsilon = 1.000000e-05 momentum = 9.000000e-01
                   : tensor<8x16x28x28xf32>, tensor<16xf32>
    ```
  }];
  let arguments = (ins Gpuc_FloatTensor:$input, Gpuc_FloatTensor:$scale,
                       Gpuc_FloatTensor:$bias, Gpuc_FloatTensor:$running_mean,
                       Gpuc_FloatTensor:$running_var, F64Attr:$epsilon,
                       F64Attr:$momentum, UnitProp:$unbiased_running_var,
                       UnitProp:$sync_ranks);
  let results = (outs Gpuc_FloatTensor:$result,
                      Gpuc_FloatTensor:$new_running_mean,
                      Gpuc_FloatTensor:$new_running_var);
  let assemblyFormat = [{
    $input `,` $scale `,` $bias `,` $running_mean `,` $running_var
    `epsilon` `=` $epsilon `momentum` `=` $momentum
    (`unbiased_running_var` $unbiased_running_var^)?
    (`sync_ranks` $sync_ranks^)?
    attr-dict `:` type($input) `,` type($scale)
  }];
  let hasVerifier = 1;
}

class Gpuc_ClassLossOp<string mnemonic, string doc>
    : Gpuc_Op<mnemonic, [DeclareOpInterfaceMethods<Gpuc_GradientOpInterface>, Pure]> {
  let summary = doc;
  let arguments = (ins Gpuc_FloatTensor:$input, Gpuc_IndexTensor:$labels,
                       Gpuc_Reduction:$reduction,
                       OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Gpuc_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $labels `reduction` `=` $reduction
    (`ignore_index` `=` $ignore_index^)? attr-dict `:`
    `(` type($input) `,` type($labels) `)` `->` type($result)
  }];
  let hasVerifier = 1;
}

def Gpuc_CrossEntropyOp : Gpuc_ClassLossOp<"cross_entropy",
    "softmax cross-entropy of logits against class labels"> {
  let description = [{
    `input` is `N x C` (or `N x C x d1...`), `labels` is `N` (or `N x d1...`).
    The result is a scalar for `mean`/`sum`, the labels' shape for `none`.
    Samples whose label equals `ignore_index` count for nothing (and not in the
    mean's denominator).

    ```mlir
    %l = gpuc.cross_entropy %logits, %y reduction = mean
           : (tensor<32x10xf32>, tensor<32xi64>) -> tensor<f32>
    ```
  }];
}

def Gpuc_NllLossOp : Gpuc_ClassLossOp<"nll_loss",
    "negative log-likelihood of log-probabilities against class labels"> {
  let description = [{
    Like `gpuc.cross_entropy`, but `input` already holds log-probabilities.

    ```mlir
    %l = gpuc.nll_loss %logp, %y reduction = mean
           : (tensor<32x10xf32>, tensor<32xi64>) -> tensor<f32>
    ```
  }];
}

def Gpuc_MseLossOp : Gpuc_Op<"mse_loss", [DeclareOpInterfaceMethods<Gpuc_GradientOpInterface>, Pure]> {
  let summary = "mean squared error";
  let description = [{
    ```mlir
    %l = gpuc.mse_loss %pred, %target reduction = mean
           : (tensor<32x1xf32>, tensor<32x1xf32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Gpuc_FloatTensor:$input, Gpuc_FloatTensor:$target,
                       Gpuc_Reduction:$reduction);
  let results = (outs Gpuc_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $target `reduction` `=` $reduction attr-dict `:`
    `(` type($input) `,` type($target) `)` `->` type($result)
  }];
  let hasVerifier = 1;
}

def Gpuc_LinearCrossEntropyOp : Gpuc_Op<"linear_cross_entropy", [
    DeclareOpInterfaceMethods<Gpuc_GradientOpInterface>, Pure]> {
  let summary = "cross-entropy of a linear layer's logits (a language model's head)";
  let description = [{
    `cross_entropy(input · weightᵀ + bias, labels)`: `input` is `N x C`,
    `weight` is `V x C` (a vocabulary of V classes), `bias` (optional) is `V`,
    `labels` is `N`. The logits are never a value of their own: the
    gradient, `gpuc.linear_cross_entropy_grad`, computes the loss too, and
    `gpuc-decompose` runs both over row chunks, so no `N x V` value exists.

    ```mlir
    %l = gpuc.linear_cross_entropy %h, %w, %y reduction = mean
           : (tensor<1024x768xf32>, tensor<50257x768xf32>, tensor<1024xi64>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Gpuc_FloatTensor:$input, Gpuc_FloatTensor:$weight,
                       Gpuc_IndexTensor:$labels,
                       Optional<Gpuc_FloatTensor>:$bias,
                       Gpuc_Reduction:$reduction,
                       OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Gpuc_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `,` $labels (`bias` $bias^ `:` type($bias))?
    `reduction` `=` $reduction (`ignore_index` `=` $ignore_index^)? attr-dict
    `:` `(` type($input) `,` type($weight) `,` type($labels) `)` `->` type($result)
  }];
  let hasVerifier = 1;
}

def Gpuc_LinearCrossEntropyGradOp : Gpuc_Op<"linear_cross_entropy_grad", [
    Pure, AllTypesMatch<["input", "input_grad"]>,
    AllTypesMatch<["weight", "weight_grad"]>]> {
  let summary = "gpuc.linear_cross_entropy's loss and gradients, in one pass";
  let description = [{
    From the operands of a `gpuc.linear_cross_entropy` and the gradient of
    its loss (`result_grad`, a scalar): the loss itself, and the gradients
    of `input`, `weight` and (when present) `bias`. One pass over row chunks
    computes them all: a chunk's logits, their softmax and loss, the chunk's
    rows of the input's gradient and its share of the weight's.

    ```mlir
    %l, %dh, %dw = gpuc.linear_cross_entropy_grad %h, %w, %y, %g reduction = mean
        : (tensor<1024x768xf32>, tensor<50257x768xf32>, tensor<1024xi64>, tensor<f32>)
        -> (tensor<f32>, tensor<1024x768xf32>, tensor<50257x768xf32>)
    ```
  }];
  let arguments = (ins Gpuc_FloatTensor:$input, Gpuc_FloatTensor:$weight,
                       Gpuc_IndexTensor:$labels, Gpuc_FloatTensor:$result_grad,
                       Optional<Gpuc_FloatTensor>:$bias,
                       Gpuc_Reduction:$reduction,
                       OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Gpuc_FloatTensor:$result, Gpuc_FloatTensor:$input_grad,
                      Gpuc_FloatTensor:$weight_grad,
                      Optional<Gpuc_FloatTensor>:$bias_grad);
  let assemblyFormat = [{
    $input `,` $weight `,` $labels `,` $result_grad
    (`bias` $bias^ `:` type($bias))? `reduction` `=` $reduction
    (`ignore_index` `=` $ignore_index^)? attr-dict `:` `(` type($input) `,`
    type($weight) `,` type($labels) `,` type($result_grad) `)` `->` `(`
    type($result) `,` type($input_grad) `,` type($weight_grad)
    (`,` type($bias_grad)^)? `)`
  }];
  let hasVerifier = 1;
}

def Gpuc_LinearTokenScoresOp : Gpuc_Op<"linear_token_scores", [Pure]> {
  let summary = "a language model's held-out loss and accuracy from its head";
  let description = [{
    For the logits `input · weightᵀ + bias` of `N` rows (`input` `N x C`,
    `weight` `V x C`, `bias` `V`, `labels` `N`): `loss_sum`, the sum of the
    rows' cross-entropies against their labels, and `correct`, the count of
    rows whose largest logit (the first, on a tie) is the label's. A row
    whose label is `ignore_index` counts in neither. `@eval` returns these
    for a language model instead of its `N x V` logits: `gpuc-decompose`
    runs the op over row chunks as it runs the head's gradient, so no
    `N x V` value exists and only two scalars leave the device. Both are
    f32 (the inputs' type for f32 inputs); the count is exact below 2^24.

    ```mlir
    %loss, %correct = gpuc.linear_token_scores %h, %w, %y ignore_index = -1
        : (tensor<1024x768xf32>, tensor<50257x768xf32>, tensor<1024xi64>)
        -> (tensor<f32>, tensor<f32>)
    ```
  }];
  let arguments = (ins Gpuc_FloatTensor:$input, Gpuc_FloatTensor:$weight,
                       Gpuc_IndexTensor:$labels,
                       Optional<Gpuc_FloatTensor>:$bias,
                       OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Gpuc_FloatTensor:$loss_sum, Gpuc_FloatTensor:$correct);
  let assemblyFormat = [{
    $input `,` $weight `,` $labels (`bias` $bias^ `:` type($bias))?
    (`ignore_index` `=` $ignore_index^)? attr-dict `:` `(` type($input) `,`
    type($weight) `,` type($labels) `)` `->` `(` type($loss_sum) `,`
    type($correct) `)`
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Kernels: a group of core ops that codegen emits as one kernel
//===----------------------------------------------------------------------===//

def Gpuc_FusionOp : Gpuc_Op<"fusion", [IsolatedFromAbove,
    SingleBlockImplicitTerminator<"YieldOp">, RecursiveMemoryEffects]> {
  let summary = "core ops that run as one generated kernel";
  let description = [{
    The body is one kernel: its block arguments are the buffers the kernel
    reads (the operands, in order), the values it yields are the buffers it
    writes. Isolated from above, so the kernel's inputs are exactly its
    operands; scalar constants are cloned inside. Codegen picks the kernel's
    shape from what it yields: elementwise over the shape of the results, or
    one block per element of a reduction's result.

    ```mlir
    %r = gpuc.fusion (%x, %b) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> {
    ^bb0(%a: tensor<4x8xf32>, %c: tensor<4x8xf32>):
      %s = gpuc.add %a, %c : tensor<4x8xf32>
      %t = gpuc.relu %s : tensor<4x8xf32>
      gpuc.yield %t : tensor<4x8xf32>
    }
    ```
  }];
  let arguments = (ins Variadic<Gpuc_Tensor>:$inputs);
  let results = (outs Variadic<Gpuc_Tensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    `(` $inputs `)` attr-dict `:` functional-type($inputs, $results) $body
  }];
  let hasVerifier = 1;
  let skipDefaultBuilders = 1;
  let builders = [OpBuilder<(ins "::mlir::TypeRange":$resultTypes,
                                 "::mlir::ValueRange":$inputs)>];
  let extraClassDeclaration = [{
    ::mlir::Block &getBodyBlock() { return getBody().front(); }
  }];
}

def Gpuc_YieldOp : Gpuc_Op<"yield", [Pure, Terminator,
    HasParent<"FusionOp">]> {
  let summary = "the values a kernel writes";
  let arguments = (ins Variadic<Gpuc_Tensor>:$values);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
  let builders = [OpBuilder<(ins), [{ build($_builder, $_state, {}); }]>];
}

#endif // GPUC_DIALECT_GPUC_GPUCOPS_TD
