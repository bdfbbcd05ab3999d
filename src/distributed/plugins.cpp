// Backend plugins: TESSERA_BACKEND_PLUGINS, manifests, dlopen and the ABI check.
#include "distributed/plugins.h"

#include <dlfcn.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "tessera/core/error.h"
#include "tessera/distributed/plugin.h"

namespace tessera::distributed::detail {
namespace {

namespace fs = std::filesystem;

std::mutex g_mutex;              // one loader at a time
std::set<std::string> g_loaded;  // canonical paths of the libraries loaded so far

std::vector<std::string> entries() {
  std::vector<std::string> out;
  const char* v = std::getenv("TESSERA_BACKEND_PLUGINS");
  if (!v) return out;
  std::stringstream ss(v);
  std::string item;
  while (std::getline(ss, item, ':'))
    if (!item.empty()) out.push_back(item);
  return out;
}

// Loads the library once: checks its ABI, then runs its init (which registers backends).
void load_library(const std::string& path, const std::string& origin) {
  std::error_code ec;
  const fs::path canonical = fs::canonical(path, ec);
  TS_CHECK(!ec, RuntimeError, "backend plugin {}: library '{}' not found ({})", origin, path,
           ec.message());
  if (!g_loaded.insert(canonical.string()).second) return;
  void* handle = ::dlopen(canonical.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    g_loaded.erase(canonical.string());
    const char* why = ::dlerror();
    TS_THROW(RuntimeError, "backend plugin {}: cannot load '{}': {}", origin, canonical.string(),
             why ? why : "unknown dlopen error");
  }
  auto abi = reinterpret_cast<int (*)()>(::dlsym(handle, "tessera_backend_plugin_abi"));
  auto init = reinterpret_cast<void (*)()>(::dlsym(handle, "tessera_backend_plugin_init"));
  if (!abi || !init) {
    ::dlclose(handle);
    g_loaded.erase(canonical.string());
    TS_THROW(RuntimeError,
             "backend plugin {}: '{}' is not a Tessera backend plugin (it lacks "
             "tessera_backend_plugin_abi/tessera_backend_plugin_init; define them with "
             "TESSERA_BACKEND_PLUGIN())",
             origin, canonical.string());
  }
  const int version = abi();
  if (version != kBackendPluginAbi) {
    ::dlclose(handle);
    g_loaded.erase(canonical.string());
    TS_THROW(RuntimeError,
             "backend plugin {}: '{}' was built for plugin ABI version {}, but this Tessera "
             "speaks version {}; rebuild the plugin against this Tessera",
             origin, canonical.string(), version, kBackendPluginAbi);
  }
  init();  // the library stays loaded: its backends live as long as the process
}

struct Manifest {
  std::string name, library;
};

Manifest read_manifest(const fs::path& file) {
  std::ifstream in(file);
  const auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  TS_CHECK(!j.is_discarded() && j.is_object() && j.contains("name") && j["name"].is_string() &&
               j.contains("library") && j["library"].is_string(),
           ValueError,
           "backend plugin manifest '{}': expected a JSON object with string fields \"name\" "
           "and \"library\"",
           file.string());
  fs::path lib = j["library"].get<std::string>();
  if (lib.is_relative()) lib = file.parent_path() / lib;
  return {j["name"].get<std::string>(), lib.string()};
}

}  // namespace

std::string load_backend_plugins(const std::string& name) {
  const std::vector<std::string> list = entries();
  if (list.empty()) return "";
  std::lock_guard lock(g_mutex);
  std::vector<std::string> libraries;
  for (const std::string& entry : list) {
    std::error_code ec;
    if (!fs::is_directory(entry, ec)) {
      libraries.push_back(entry);
      continue;
    }
    std::vector<fs::path> files;
    for (const auto& f : fs::directory_iterator(entry, ec))
      if (f.path().extension() == ".json") files.push_back(f.path());
    std::sort(files.begin(), files.end());
    for (const fs::path& file : files) {
      const Manifest m = read_manifest(file);
      if (m.name == name) {
        load_library(m.library, fmt::format("'{}' (manifest {})", name, file.string()));
        return fmt::format("TESSERA_BACKEND_PLUGINS={}", fmt::join(list, ":"));
      }
    }
  }
  for (const std::string& lib : libraries)
    load_library(lib, fmt::format("for '{}' (TESSERA_BACKEND_PLUGINS)", name));
  return fmt::format("TESSERA_BACKEND_PLUGINS={}", fmt::join(list, ":"));
}

}  // namespace tessera::distributed::detail
