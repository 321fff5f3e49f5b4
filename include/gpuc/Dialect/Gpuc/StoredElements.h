//===- StoredElements.h - an elements attribute's bytes, as stored --------===//
//
// Parameters and large constants (GPT-2's 124M weights, a 1024 x 1024
// attention mask) are read where they are stored rather than element by
// element through APFloat/APInt: the passes that copy, round or match them
// and the step program that writes them out share this one reader.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_DIALECT_GPUC_STOREDELEMENTS_H
#define GPUC_DIALECT_GPUC_STOREDELEMENTS_H

#include "mlir/IR/BuiltinAttributeInterfaces.h"

#include <optional>
#include <string>

namespace mlir::gpuc {

/// The bytes `attr`'s elements are stored in, when that storage is the
/// tensor's own layout (one element after another, little-endian, every
/// element present): a resource blob or a dense attribute that is not a
/// splat, of whole-byte elements. nullopt otherwise (a splat, a blob not
/// yet loaded or of another size, i1 elements).
std::optional<ArrayRef<char>> storedElementBytes(ElementsAttr attr);

/// The same bytes as floats, when `attr` holds f32 elements so stored at a
/// float's alignment (no copy).
std::optional<ArrayRef<float>> storedFloats(ElementsAttr attr);

/// Why `attr` does not hold all of its elements, or nullopt when it does: a
/// resource with no blob (the weights of a `--dump-dir` file print as
/// `dense_resource<__elided__>`), or a blob of another size than the
/// tensor's. Whatever reads the values checks this first.
std::optional<std::string> missingElements(ElementsAttr attr);

/// Whether `attr` is a resource with no blob (elided).
bool isElided(ElementsAttr attr);

} // namespace mlir::gpuc

#endif // GPUC_DIALECT_GPUC_STOREDELEMENTS_H
