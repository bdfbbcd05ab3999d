#pragma once

namespace tessera::cli {

// `tessera demo`: the showcase `make demo` runs. Returns the exit status.
int run_demo();

}  // namespace tessera::cli
