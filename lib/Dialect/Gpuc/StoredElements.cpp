//===- StoredElements.cpp - an elements attribute's bytes, as stored ------===//
#include "gpuc/Dialect/Gpuc/StoredElements.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir;

std::optional<ArrayRef<char>>
mlir::gpuc::storedElementBytes(ElementsAttr attr) {
  auto type = cast<ShapedType>(attr.getType());
  Type element = type.getElementType();
  if (!element.isIntOrFloat() || element.getIntOrFloatBitWidth() % 8 != 0)
    return std::nullopt;
  ArrayRef<char> bytes;
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(attr)) {
    AsmResourceBlob *blob = resource.getRawHandle().getBlob();
    if (!blob)
      return std::nullopt;
    bytes = blob->getData();
  } else if (auto dense = dyn_cast<DenseElementsAttr>(attr);
             dense && !dense.isSplat()) {
    bytes = dense.getRawData();
  } else {
    return std::nullopt;
  }
  if ((int64_t)bytes.size() !=
      type.getNumElements() * (element.getIntOrFloatBitWidth() / 8))
    return std::nullopt;
  return bytes;
}

std::optional<ArrayRef<float>> mlir::gpuc::storedFloats(ElementsAttr attr) {
  if (!cast<ShapedType>(attr.getType()).getElementType().isF32())
    return std::nullopt;
  std::optional<ArrayRef<char>> bytes = storedElementBytes(attr);
  if (!bytes || reinterpret_cast<uintptr_t>(bytes->data()) % alignof(float))
    return std::nullopt;
  return ArrayRef<float>(reinterpret_cast<const float *>(bytes->data()),
                         bytes->size() / sizeof(float));
}

bool mlir::gpuc::isElided(ElementsAttr attr) {
  auto resource = dyn_cast<DenseResourceElementsAttr>(attr);
  return resource && !resource.getRawHandle().getBlob();
}

std::optional<std::string> mlir::gpuc::missingElements(ElementsAttr attr) {
  auto resource = dyn_cast<DenseResourceElementsAttr>(attr);
  if (!resource)
    return std::nullopt;
  DenseResourceElementsHandle handle = resource.getRawHandle();
  if (!handle.getBlob())
    // (The size --dump-dir elides from is the driver's to state, once.)
    return llvm::formatv("is elided (resource '{0}' has no data: --dump-dir "
                         "prints large constants as "
                         "dense_resource<__elided__>)",
                         handle.getKey())
        .str();
  auto type = cast<ShapedType>(attr.getType());
  Type element = type.getElementType();
  if (!element.isIntOrFloat())
    return std::nullopt;
  // i1 is stored one element a byte.
  int64_t need =
      type.getNumElements() * ((element.getIntOrFloatBitWidth() + 7) / 8);
  int64_t have = handle.getBlob()->getData().size();
  if (have == need)
    return std::nullopt;
  return llvm::formatv("has resource '{0}' of {1} bytes, where '{2}' needs {3}",
                       handle.getKey(), have, type, need)
      .str();
}
