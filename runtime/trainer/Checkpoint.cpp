//===- Checkpoint.cpp - checkpoints written, checked and resumed ----------===//
#include "Checkpoint.h"

#include "CompiledStep.h"
#include "Directories.h"
#include "Metrics.h"

#include "gpuc/runtime/AtomicFile.h"
#include "gpuc/runtime/Numbers.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace gpuc::trainer {

namespace {

/// Takes `dir`'s lock file for the life of the process. The kernel drops
/// the lock when its holder exits, however it ends; a holder still
/// finishing its exit (a run just killed) is waited for, up to 10 s.
void lockCheckpointDir(const std::string &dir) {
  std::string path = dir + "/.lock";
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    fail("cannot create " + path + ": " + strerror(errno));
  for (int tries = 0; flock(fd, LOCK_EX | LOCK_NB) != 0; ++tries) {
    if (errno != EWOULDBLOCK)
      fail("cannot lock " + path + ": " + strerror(errno));
    if (tries == 100) {
      char holder[32] = {0};
      ssize_t n = pread(fd, holder, sizeof(holder) - 1, 0);
      std::string pid = n > 0 ? std::string(holder, n) : "unknown";
      pid.erase(pid.find_last_not_of(" \n") + 1);
      fail("another trainer (pid " + pid + ") is using --checkpoint-dir " +
           dir + "; stop it, or give this run another directory");
    }
    usleep(100000);
  }
  std::string pid = std::to_string(getpid()) + "\n";
  if (ftruncate(fd, 0) != 0 ||
      pwrite(fd, pid.data(), pid.size(), 0) != (ssize_t)pid.size())
    fail("cannot write " + path + ": " + strerror(errno));
  // The descriptor stays open (and locked) until the process exits.
}

/// Resuming under other conditions than the checkpoint's (another thread
/// count, CPU or device) continues the run, but not bit-exactly: says so
/// once, before anything else of the resume. Checkpoints of trainers that
/// did not record the conditions say nothing.
void sayIfNotBitExact(const std::string &path,
                      std::map<std::string, std::string> &meta,
                      const Numerics &now) {
  if (!meta.count("device") || !meta.count("processor") ||
      !meta.count("threads"))
    return;
  Numerics then{meta["device"], meta["processor"], 0};
  if (!parseInteger(meta["threads"], 0, INT32_MAX, then.threads))
    fail(path + ": its 'threads' metadata is '" + meta["threads"] +
         "', not a thread count; the checkpoint is damaged or not the "
         "trainer's");
  if (then == now)
    return;
  std::string remedy =
      then.device == now.device && then.processor == now.processor
          ? "OMP_NUM_THREADS=" + std::to_string(then.threads) +
                " resumes it bit-exactly"
          : "only the same device, processor and thread count resume it "
            "bit-exactly";
  fprintf(stderr,
          "train: warning: %s was written on %s; this run is on %s: it "
          "continues the run, but not bit-exactly (the results agree within "
          "rounding only; %s)\n",
          path.c_str(), then.describe().c_str(), now.describe().c_str(),
          remedy.c_str());
  fflush(stderr);
}

} // namespace

/// FNV-1a (64 bits) over every tensor's name, type, shape and bytes, by
/// name (a safetensors header lists them sorted, not in the plan's order),
/// as hex: what a checkpoint's "checksum" metadata holds.
std::string checkpointChecksum(const std::vector<NamedTensor> &unordered) {
  std::vector<const NamedTensor *> tensors;
  for (const NamedTensor &t : unordered)
    tensors.push_back(&t);
  std::sort(tensors.begin(), tensors.end(),
            [](const NamedTensor *a, const NamedTensor *b) {
              return a->name < b->name;
            });
  uint64_t hash = 0xcbf29ce484222325ull;
  auto add = [&](const void *data, size_t n) {
    const unsigned char *bytes = static_cast<const unsigned char *>(data);
    for (size_t i = 0; i < n; ++i)
      hash = (hash ^ bytes[i]) * 0x100000001b3ull;
  };
  for (const NamedTensor *t : tensors) {
    add(t->name.data(), t->name.size() + 1);
    add(t->dtype.data(), t->dtype.size() + 1);
    add(t->shape.data(), t->shape.size() * sizeof(int64_t));
    add(t->data.data(), t->data.size());
  }
  char text[32];
  snprintf(text, sizeof(text), "fnv1a64:%016llx", (unsigned long long)hash);
  return text;
}

/// Why `tensors` cannot be a checkpoint to train on: the first floating
/// tensor holding NaN or infinite values (a diverged run), or "".
std::string nonFiniteTensor(const std::vector<NamedTensor> &tensors) {
  for (const NamedTensor &t : tensors) {
    // Exponent bits all set: infinity or NaN, in every IEEE width.
    size_t width = t.dtype == "F32"    ? 4
                   : t.dtype == "F16"  ? 2
                   : t.dtype == "BF16" ? 2
                                       : 0;
    if (!width)
      continue;
    uint32_t exponent = t.dtype == "F32"   ? 0x7f800000u
                        : t.dtype == "F16" ? 0x7c00u
                                           : 0x7f80u;
    int64_t count = 0, first = -1;
    for (size_t i = 0; i + width <= t.data.size(); i += width) {
      uint32_t bits = 0;
      memcpy(&bits, t.data.data() + i, width);
      if ((bits & exponent) == exponent && !count++)
        first = (int64_t)(i / width);
    }
    if (count)
      return "'" + t.name + "' holds " + std::to_string(count) +
             " NaN or infinite values (the first at element " +
             std::to_string(first) + ")";
  }
  return "";
}

std::string checkpointPath(const Options &o) {
  return o.checkpointDir + "/checkpoint.safetensors";
}

void prepareCheckpointDir(const Options &o) {
  if (o.checkpointDir.empty())
    return;
  std::string error;
  if (!makeDirectories(o.checkpointDir, error))
    fail("--checkpoint-dir " + o.checkpointDir + ": " + error);
  // One trainer at a time per checkpoint directory, before anything in it
  // is read: a resume started right after `kill -9` could otherwise read
  // the directory while the killed process is still finishing a write.
  lockCheckpointDir(o.checkpointDir);
  // A checkpoint write cut short (the process killed mid-write) leaves its
  // temporary file; the checkpoint itself is replaced only by rename.
  removeTemporariesOf(checkpointPath(o));
}

int64_t resumeRun(CompiledStep &s, const Options &o, FILE *&metrics) {
  if (o.resume.empty())
    return 0;
  if (o.resume == "auto" && o.checkpointDir.empty())
    fail("--resume without a file needs --checkpoint-dir");
  std::string path = o.resume == "auto" ? checkpointPath(o) : o.resume;
  // --resume without a file where no checkpoint was written yet starts the
  // run (what a job script that always passes --resume needs); a named
  // file must exist.
  if (o.resume == "auto" && access(path.c_str(), F_OK) != 0 &&
      errno == ENOENT) {
    if (!s.withheld.empty() && o.init.empty())
      fail("no checkpoint in " + o.checkpointDir +
           " yet, and this artifact was compiled with --no-weights: give "
           "the initial weights with --init FILE.safetensors to start the "
           "run");
    if (!o.quiet)
      printf("no checkpoint in %s yet: starting from the initial weights\n",
             o.checkpointDir.c_str());
    // The lines of a run that never reached a checkpoint: it starts again.
    if (metrics)
      metrics = dropMetricsAfter(metrics, o.metrics, 0);
    return 0;
  }
  std::vector<NamedTensor> tensors;
  std::map<std::string, std::string> meta;
  std::string error;
  if (!readSafetensors(path, tensors, meta, error))
    fail(error);
  s.restore(tensors, path, /*complete=*/true);
  // Checkpoints carry a checksum of their tensors (names, types, shapes,
  // bytes); a flipped byte would otherwise resume silently. Checked after
  // restore(), whose diagnosis of another model's tensors is the sharper
  // one (the process ends either way before a step runs). Checkpoints
  // written before the checksum's text had room for all 16 digits hold its
  // first 15.
  std::string checksum = checkpointChecksum(tensors);
  if (meta.count("checksum") && meta["checksum"] != checksum &&
      meta["checksum"] != checksum.substr(0, 23))
    fail(path + ": its tensors do not match the checksum it was written "
                "with: the checkpoint is damaged; resume from a copy, or "
                "start again without --resume");
  // A diverged run's values would train on as NaN from the first step.
  std::string diverged = nonFiniteTensor(tensors);
  if (!diverged.empty())
    fail(path + ": " + diverged +
         ": the run had diverged when it was saved; resume from an "
         "earlier checkpoint (with a lower --lr), or start again without "
         "--resume");
  // The position in the data: a whole number of steps within the run.
  int64_t startStep = 0;
  const std::string &stepText = meta["step"];
  if (!parseInteger(stepText, 0, INT64_MAX, startStep))
    fail(path + ": its 'step' metadata is '" + stepText +
         "', not a step number; the checkpoint is damaged or not the "
         "trainer's (checkpoints come from --checkpoint-dir)");
  uint64_t seed = 0;
  if (meta.count("seed") && !parseUnsigned(meta["seed"], seed))
    fail(path + ": its 'seed' metadata is '" + meta["seed"] +
         "', not a seed (an integer from 0 to 2^64-1); the checkpoint is "
         "damaged or not the trainer's");
  if (meta.count("seed") && seed != o.seed)
    fail(path + " was written by a run with --seed " + meta["seed"] +
         "; resume with the same seed to continue it exactly");
  sayIfNotBitExact(path, meta, s.device->numerics());
  // A step is a global batch of ranks x --batch samples: with another
  // number of ranks the run goes on from the same number of updates, over
  // other batches (checkpoints from before data parallelism: one rank).
  int64_t writtenRanks = 1;
  if (meta.count("ranks") &&
      !parseInteger(meta["ranks"], 1, INT32_MAX, writtenRanks))
    fail(path + ": its 'ranks' metadata is '" + meta["ranks"] +
         "', not a number of ranks; the checkpoint is damaged");
  if (writtenRanks != s.ranks && s.rank == 0)
    fprintf(stderr,
            "train: warning: %s was written by a run on %lld rank%s (a "
            "global batch of %lld); this run has %d (a global batch of "
            "%lld): it continues after update %lld with the new global "
            "batch, so it will not repeat the data order or the results of "
            "a run on %lld rank%s (resume on %lld for that)\n",
            path.c_str(), (long long)writtenRanks, writtenRanks == 1 ? "" : "s",
            (long long)(writtenRanks * s.batch), s.ranks,
            (long long)(s.ranks * s.batch), (long long)startStep,
            (long long)writtenRanks, writtenRanks == 1 ? "" : "s",
            (long long)writtenRanks);
  if (!o.quiet)
    printf("resumed from %s at step %lld\n", path.c_str(),
           (long long)startStep);
  if (metrics)
    metrics = dropMetricsAfter(metrics, o.metrics, startStep);
  return startStep;
}

bool CheckpointWriter::save(int64_t stepsDone) {
  // Every rank takes part (a sharded optimizer state is gathered); rank 0
  // writes.
  std::vector<NamedTensor> tensors = s.snapshot();
  if (s.rank != 0)
    return true;
  // A diverged run does not replace the last good checkpoint.
  std::string diverged = nonFiniteTensor(tensors);
  if (!diverged.empty()) {
    if (!divergedSaid)
      fprintf(stderr,
              "train: checkpoint at step %lld not written: %s; the run "
              "has diverged (lower --lr), and %s keeps the last checkpoint "
              "written before\n",
              (long long)stepsDone, diverged.c_str(),
              checkpointPath(o).c_str());
    divergedSaid = true;
    return false;
  }
  Numerics numerics = s.device->numerics();
  std::map<std::string, std::string> meta = {
      {"step", std::to_string(stepsDone)},
      {"epoch", std::to_string(stepsDone / stepsPerEpoch)},
      {"seed", std::to_string(o.seed)},
      {"checksum", checkpointChecksum(tensors)},
      {"device", numerics.device},
      {"processor", numerics.processor},
      {"threads", std::to_string(numerics.threads)},
      {"ranks", std::to_string(s.ranks)}};
  std::string error;
  if (!writeSafetensors(checkpointPath(o), tensors, meta, error))
    fail(error);
  return true;
}

} // namespace gpuc::trainer
