//===- CollectiveLoader.cpp - find the ranks and the MPI plugin -----------===//
#include "gpuc/runtime/Collective.h"

#include <cstdlib>
#include <dlfcn.h>
#include <sys/stat.h>

namespace gpuc {

std::unique_ptr<Collective> loadMpiCollective(const std::string &artifactDir,
                                              double timeoutSeconds,
                                              std::string &error) {
  std::string plugin = artifactDir + "/libgpuc_mpi.so";
  if (const char *env = getenv("GPUC_MPI_PLUGIN"))
    plugin = env;
  struct stat st;
  if (stat(plugin.c_str(), &st) != 0) {
    error = plugin +
            " is missing: this artifact cannot join several ranks (gpuc was "
            "built without MPI; install libopenmpi-dev, rebuild gpuc and "
            "compile again with --data-parallel)";
    return nullptr;
  }
  // The handle stays open for the life of the process (MPI lives in it).
  // RTLD_GLOBAL: Open MPI opens its own components and needs libmpi's
  // symbols visible to them.
  void *handle = dlopen(plugin.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!handle) {
    error = "cannot load " + plugin + ": " + dlerror() +
            " (is Open MPI installed? apt-get install openmpi-bin)";
    return nullptr;
  }
  auto create = reinterpret_cast<CreateMpiCollectiveFn>(
      dlsym(handle, kCreateMpiCollectiveSymbol));
  if (!create) {
    error = plugin + " has no " + kCreateMpiCollectiveSymbol +
            " (a plugin from another gpuc version?); recompile the model";
    return nullptr;
  }
  return std::unique_ptr<Collective>(create(timeoutSeconds, error));
}

} // namespace gpuc
