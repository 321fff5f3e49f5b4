//===- EventFile.cpp - TensorBoard event files (--tensorboard) ------------===//
#include "EventFile.h"
#include "Directories.h"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <sys/stat.h>
#include <unistd.h>

namespace gpuc::trainer {

uint32_t crc32c(const void *data, size_t size) {
  // Byte-wise with a table of the reflected Castagnoli polynomial: a log
  // point's record is a few hundred bytes.
  static const auto table = [] {
    std::vector<uint32_t> t(256);
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k)
        c = (c >> 1) ^ (c & 1 ? 0x82F63B78u : 0);
      t[i] = c;
    }
    return t;
  }();
  uint32_t crc = ~0u;
  const unsigned char *p = static_cast<const unsigned char *>(data);
  for (size_t i = 0; i < size; ++i)
    crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

namespace {

/// TFRecord's masked CRC: a CRC stored beside the data it covers would
/// otherwise be easy to mistake for more data.
uint32_t maskedCrc(const void *data, size_t size) {
  uint32_t crc = crc32c(data, size);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

/// Protobuf's wire format, the parts an Event needs.
class Message {
public:
  enum WireType { Varint = 0, Fixed64 = 1, Bytes = 2, Fixed32 = 5 };
  Message &varint(int field, uint64_t value) {
    key(field, Varint);
    putVarint(value);
    return *this;
  }
  Message &fixed64(int field, double value) {
    key(field, Fixed64);
    putLittleEndian(&value, 8);
    return *this;
  }
  Message &fixed32(int field, float value) {
    key(field, Fixed32);
    putLittleEndian(&value, 4);
    return *this;
  }
  Message &bytes(int field, const std::string &value) {
    key(field, Bytes);
    putVarint(value.size());
    text += value;
    return *this;
  }
  Message &message(int field, const Message &value) {
    return bytes(field, value.text);
  }
  const std::string &str() const { return text; }

private:
  void key(int field, WireType type) { putVarint((uint64_t)field << 3 | type); }
  void putVarint(uint64_t v) {
    for (; v >= 0x80; v >>= 7)
      text += (char)((v & 0x7f) | 0x80);
    text += (char)v;
  }
  void putLittleEndian(const void *value, size_t size) {
    // x86-64 and every target gpuc builds for are little-endian.
    text.append(static_cast<const char *>(value), size);
  }
  std::string text;
};

// Field numbers of tensorflow.Event (tensorflow/core/util/event.proto) and
// of the messages it holds (summary.proto).
constexpr int kEventWallTime = 1, kEventStep = 2, kEventFileVersion = 3,
              kEventSummary = 5, kEventSessionLog = 7;
constexpr int kSummaryValue = 1;
constexpr int kValueTag = 1, kValueSimpleValue = 2;
constexpr int kSessionLogStatus = 1, kSessionLogStart = 1;

double wallTime() {
  return std::chrono::duration<double>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Message event(int64_t step) {
  Message e;
  e.fixed64(kEventWallTime, wallTime()).varint(kEventStep, (uint64_t)step);
  return e;
}

} // namespace

EventFile::~EventFile() {
  if (file)
    fclose(file);
}

bool EventFile::open(const std::string &dir, std::string &error) {
  if (!makeDirectories(dir, error))
    return false;
  char host[256] = "localhost";
  gethostname(host, sizeof(host) - 1);
  host[sizeof(host) - 1] = 0;
  // TensorBoard reads a directory's files in the order of their names:
  // a resumed run's file must come after the interrupted one's, even
  // within a second.
  double now = wallTime();
  char stamp[64];
  snprintf(stamp, sizeof(stamp), "%010lld", (long long)now);
  char micro[64];
  snprintf(micro, sizeof(micro), "%06lld.%lld",
           (long long)((now - (long long)now) * 1e6), (long long)getpid());
  filePath = dir + "/events.out.tfevents." + stamp + "." + host + "." + micro +
             ".gpuc";
  file = fopen(filePath.c_str(), "wb");
  if (!file) {
    error = "cannot write " + filePath + ": " + strerror(errno);
    return false;
  }
  record(event(0).bytes(kEventFileVersion, "brain.Event:2").str());
  return flush(error);
}

void EventFile::restartAt(int64_t step) {
  Message start;
  start.varint(kSessionLogStatus, kSessionLogStart);
  record(event(step).message(kEventSessionLog, start).str());
}

void EventFile::scalars(
    int64_t step, const std::vector<std::pair<std::string, double>> &values) {
  Message summary;
  for (const auto &[tag, value] : values) {
    Message v;
    v.bytes(kValueTag, tag).fixed32(kValueSimpleValue, (float)value);
    summary.message(kSummaryValue, v);
  }
  record(event(step).message(kEventSummary, summary).str());
}

void EventFile::record(const std::string &payload) {
  if (!file)
    return;
  uint64_t length = payload.size();
  uint32_t lengthCrc = maskedCrc(&length, 8);
  uint32_t payloadCrc = maskedCrc(payload.data(), payload.size());
  fwrite(&length, 8, 1, file);
  fwrite(&lengthCrc, 4, 1, file);
  fwrite(payload.data(), 1, payload.size(), file);
  fwrite(&payloadCrc, 4, 1, file);
}

bool EventFile::flush(std::string &error) {
  if (file && (fflush(file) != 0 || ferror(file))) {
    error = "cannot write " + filePath + ": " + strerror(errno);
    return false;
  }
  return true;
}

bool EventFile::close(std::string &error) {
  if (!file)
    return true;
  bool ok = flush(error);
  if (fclose(file) != 0 && ok) {
    error = "cannot write " + filePath + ": " + strerror(errno);
    ok = false;
  }
  file = nullptr;
  return ok;
}

} // namespace gpuc::trainer
