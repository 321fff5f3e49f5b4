//===- EventFile.h - TensorBoard event files (--tensorboard) ----*- C++ -*-===//
#ifndef GPUC_TRAINER_EVENTFILE_H
#define GPUC_TRAINER_EVENTFILE_H

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace gpuc::trainer {

/// CRC-32C (Castagnoli) of `size` bytes, as TFRecord framing checks it.
uint32_t crc32c(const void *data, size_t size);

/// A TensorBoard event file: TFRecord records (length, masked CRC-32C of
/// the length, payload, masked CRC-32C of the payload), each a serialized
/// `tensorflow.Event` message, encoded here field by field (the few fields
/// of Event, Summary, Summary.Value and SessionLog a scalar needs) rather
/// than through a protobuf library and TensorFlow's schemas.
class EventFile {
public:
  EventFile() = default;
  EventFile(const EventFile &) = delete;
  EventFile &operator=(const EventFile &) = delete;
  ~EventFile();

  /// Creates `dir` when missing and a new event file in it
  /// (events.out.tfevents.<seconds>.<host>.<microseconds>.<pid>.gpuc: a
  /// name TensorBoard looks for, in time order), starting with the
  /// file-version record. On failure, says
  /// why in `error`.
  bool open(const std::string &dir, std::string &error);
  bool isOpen() const { return file != nullptr; }
  const std::string &path() const { return filePath; }

  /// Marks a restart at `step`: TensorBoard drops the events of earlier
  /// files from `step` on, which the resumed run writes again (as --resume
  /// drops those lines of --metrics).
  void restartAt(int64_t step);
  /// One event holding `values` (tag, value) at `step`, as float scalars.
  void scalars(int64_t step,
               const std::vector<std::pair<std::string, double>> &values);
  /// Writes what is buffered to the file; false (and `error`) when it
  /// cannot.
  bool flush(std::string &error);
  /// Flushes and closes; false (and `error`) when the file is incomplete.
  bool close(std::string &error);

private:
  /// Frames `event` (a serialized Event message) as a record.
  void record(const std::string &event);

  FILE *file = nullptr;
  std::string filePath;
};

} // namespace gpuc::trainer

#endif // GPUC_TRAINER_EVENTFILE_H
