// Loading backend plugins (tessera/distributed/plugin.h): the registry calls this when a
// backend name is not registered.
#pragma once

#include <string>

namespace tessera::distributed::detail {

// Loads what TESSERA_BACKEND_PLUGINS offers for `name` (see plugin.h); the plugins register
// their backends themselves. Returns what was searched, for the caller's "unknown backend"
// error ("" when the variable is unset). Throws for a plugin that cannot be used (missing
// file, dlopen error, missing entry points, ABI mismatch, bad manifest).
std::string load_backend_plugins(const std::string& name);

}  // namespace tessera::distributed::detail
