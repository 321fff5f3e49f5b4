//===- StoredElements.cpp - an elements attribute's bytes, as stored ------===//
#include "gpuc/Dialect/Gpuc/StoredElements.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"

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
