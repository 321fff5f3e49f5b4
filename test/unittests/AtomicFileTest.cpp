//===- AtomicFileTest.cpp - files written whole or not at all -------------===//
#include "gpuc/runtime/AtomicFile.h"

#include <gtest/gtest.h>

#include <dirent.h>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace gpuc;

namespace {
std::string scratchDir(const std::string &name) {
  std::string dir =
      "/tmp/gpuc-atomic-file-test-" + std::to_string(getpid()) + "-" + name;
  mkdir(dir.c_str(), 0755);
  return dir;
}

std::string readText(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::set<std::string> namesIn(const std::string &dir) {
  std::set<std::string> names;
  if (DIR *entries = opendir(dir.c_str())) {
    while (dirent *entry = readdir(entries))
      if (entry->d_name[0] != '.')
        names.insert(entry->d_name);
    closedir(entries);
  }
  return names;
}

TEST(AtomicFile, ReplacesTheFileWhole) {
  std::string dir = scratchDir("replace");
  std::string path = dir + "/choices.json";
  std::string error;
  ASSERT_TRUE(writeFileAtomically(path, "old\n", error)) << error;
  ASSERT_TRUE(writeFileAtomically(path, "new, and longer\n", error)) << error;
  EXPECT_EQ(readText(path), "new, and longer\n");
  EXPECT_EQ(namesIn(dir), std::set<std::string>{"choices.json"});
}

TEST(AtomicFile, AFailedWriteLeavesTheOldFileAndNoTemporary) {
  std::string dir = scratchDir("fail");
  std::string path = dir + "/model.onnx";
  std::string error;
  ASSERT_TRUE(writeFileAtomically(path, "old\n", error)) << error;
  EXPECT_FALSE(writeFileAtomically(
      path,
      [](FILE *f) {
        fputs("half of it", f);
        return false;
      },
      error));
  EXPECT_NE(error.find("cannot write " + path), std::string::npos) << error;
  EXPECT_EQ(readText(path), "old\n");
  EXPECT_EQ(namesIn(dir), std::set<std::string>{"model.onnx"});
  // A directory that does not exist: the error names the file.
  EXPECT_FALSE(writeFileAtomically(dir + "/missing/x.json", "x", error));
  EXPECT_NE(error.find("missing/x.json"), std::string::npos) << error;
  EXPECT_NE(error.find("No such file or directory"), std::string::npos)
      << error;
}

TEST(AtomicFile, ProcessesWritingOnePathLeaveOneWholeFile) {
  // Two processes (data-parallel ranks on one machine) write the same file
  // many times at once, each its own large content: a reader sees one of
  // them whole, never a mix, and no temporary is left.
  std::string dir = scratchDir("race");
  std::string path = dir + "/library-algorithms.json";
  std::string contents[2] = {std::string(1 << 20, 'a') + "\n",
                             std::string(1 << 19, 'b') + "\n"};
  pid_t writers[2];
  for (int w = 0; w < 2; ++w) {
    writers[w] = fork();
    ASSERT_GE(writers[w], 0);
    if (writers[w] == 0) {
      std::string error;
      for (int k = 0; k < 20; ++k)
        if (!writeFileAtomically(path, contents[w], error))
          _exit(1);
      _exit(0);
    }
  }
  for (int k = 0; k < 200; ++k) {
    std::string text = readText(path);
    EXPECT_TRUE(text.empty() || text == contents[0] || text == contents[1])
        << "a mix of " << text.size() << " bytes";
  }
  for (pid_t writer : writers) {
    int status = 0;
    waitpid(writer, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  std::string last = readText(path);
  EXPECT_TRUE(last == contents[0] || last == contents[1]);
  EXPECT_EQ(namesIn(dir), std::set<std::string>{"library-algorithms.json"});
}

TEST(AtomicFile, TemporariesOfAPathAreRemovedAndNothingElse) {
  std::string dir = scratchDir("temporaries");
  std::string path = dir + "/checkpoint.safetensors";
  for (const char *name :
       {"checkpoint.safetensors", "checkpoint.safetensors.tmp",
        "checkpoint.safetensors.tmp.4242", "checkpoint.safetensors.tmp.x1",
        "checkpoint.safetensors.tmpfile", "other.safetensors.tmp.4242"})
    std::ofstream(dir + "/" + name) << "x";
  removeTemporariesOf(path);
  EXPECT_EQ(namesIn(dir),
            (std::set<std::string>{"checkpoint.safetensors",
                                   "checkpoint.safetensors.tmp.x1",
                                   "checkpoint.safetensors.tmpfile",
                                   "other.safetensors.tmp.4242"}));
}
} // namespace
