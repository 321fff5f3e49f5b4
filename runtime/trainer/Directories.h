//===- Directories.h - folders the trainer writes into ----------*- C++ -*-===//
#ifndef GPUC_TRAINER_DIRECTORIES_H
#define GPUC_TRAINER_DIRECTORIES_H

#include <string>

namespace gpuc::trainer {

/// Creates `dir` and every missing parent, as mkdir -p. False, with
/// `error` naming the part in the way (a file, a folder it may not write),
/// where one cannot be made.
bool makeDirectories(const std::string &dir, std::string &error);

} // namespace gpuc::trainer

#endif // GPUC_TRAINER_DIRECTORIES_H
