// Attributes of the gpuc dialect.
#ifndef GPUC_DIALECT_GPUC_GPUCATTRIBUTES_TD
#define GPUC_DIALECT_GPUC_GPUCATTRIBUTES_TD

include "gpuc/Dialect/Gpuc/GpucDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"

def Gpuc_SlotAttr : AttrDef<Gpuc_Dialect, "Slot"> {
  let mnemonic = "slot";
  let summary = "where a buffer the step writes lives";
  let description = [{
    The memory plan of gpuc-plan-memory: each result of a kernel or library
    call of a planned function has a slot, in the op's `gpuc.slots` array.
    A transient lives in the function's arena at `offset` (bytes, aligned to
    64) for `bytes` bytes. An update written in place into a parameter or
    optimizer state names it instead (`param`), and has no offset.

    ```mlir
    #gpuc.slot<offset = 4096, bytes = 2048>
    #gpuc.slot<bytes = 1024, param = @fc1.weight>
    ```
  }];
  let parameters = (ins
    DefaultValuedParameter<"int64_t", "-1">:$offset,
    "int64_t":$bytes,
    OptionalParameter<"::mlir::FlatSymbolRefAttr">:$param);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    bool isArena() const { return !getParam(); }
  }];
}

def Gpuc_ColumnsAttr : AttrDef<Gpuc_Dialect, "Columns"> {
  let mnemonic = "columns";
  let summary = "a window of the columns of an operand's stored rows";
  let description = [{
    How a library call reads an operand that is part of a wider tensor: of
    the operand's stored `[..., W]` rows it reads columns `[offset, offset +
    product(shape))`, split into `shape`, so the tensor it reads is
    `[..., shape...]`, its rows `W` elements apart. A fused query-key-value
    projection's output holds the query, key and value side by side in each
    token's row; a matmul reads each one in place as such a window.

    ```mlir
    #gpuc.columns<offset = 768, shape = [12, 64]>
    ```
  }];
  let parameters = (ins "int64_t":$offset,
                        ArrayRefParameter<"int64_t">:$shape);
  let assemblyFormat = "`<` `offset` `=` $offset `,` `shape` `=` `[` $shape `]` `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The columns the window reads: the product of its shape.
    int64_t getWidth() const;
  }];
}

#endif // GPUC_DIALECT_GPUC_GPUCATTRIBUTES_TD
