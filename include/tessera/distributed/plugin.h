// Out-of-tree backends. A plugin is a shared library, linked against libtessera, that
// registers one or more backends (register_backend) when Tessera loads it:
//
//   #include "tessera/distributed/plugin.h"
//   TESSERA_BACKEND_PLUGIN() {
//     tessera::distributed::register_backend("mine", [](const auto& store, int rank, int size,
//                                                       auto timeout, const std::string& group) {
//       return std::make_shared<MyBackend>(...);
//     });
//   }
//
// Tessera finds plugins through TESSERA_BACKEND_PLUGINS, a ':'-separated list whose entries
// are either a shared library or a directory of manifests (`*.json`: {"name": "mine",
// "library": "libmine.so"}, the library path relative to the manifest's directory). Nothing
// is loaded until a backend name is asked for that is not registered (init_process_group,
// new_group, is_backend_available): then the manifest naming it is loaded, or, failing that,
// every listed library not loaded yet. A plugin built for another ABI version is refused
// with an error naming both versions, before any of its code runs.
// examples/backend_plugin is a complete plugin.
#pragma once

namespace tessera::distributed {

// Bumped whenever Backend, Work, the option structs or BackendFactory change incompatibly.
inline constexpr int kBackendPluginAbi = 1;

}  // namespace tessera::distributed

// Defines the plugin's two entry points; the body that follows registers its backends.
#define TESSERA_BACKEND_PLUGIN()                                                       \
  extern "C" __attribute__((visibility("default"))) int tessera_backend_plugin_abi() { \
    return ::tessera::distributed::kBackendPluginAbi;                                  \
  }                                                                                    \
  extern "C" __attribute__((visibility("default"))) void tessera_backend_plugin_init()
