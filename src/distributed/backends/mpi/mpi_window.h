// The mpi backend's RMA windows (mpi_window.cpp) and the pieces of the backend they use.
#pragma once

#include <mpi.h>

#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "tessera/distributed/backend.h"
#include "tessera/distributed/window.h"

namespace tessera::distributed::mpi_impl {

// Held around every MPI call (a no-op lock under MPI_THREAD_MULTIPLE).
std::unique_lock<std::mutex> lock_mpi_calls();
// Throws DistBackendError naming `where` and `call` when rc is not MPI_SUCCESS.
void check_mpi_call(int rc, const std::string& where, const char* call);
// The MPI type that MPI_SUM adds `dtype` in; MPI_DATATYPE_NULL for the types MPI lacks
// (float16, bfloat16, float8: summed in float32 and rounded once).
MPI_Datatype sum_datatype(ScalarType dtype);

// A window whose registrations are MPI windows on the backend's communicator, as `comm()`
// returns it at registration (a suspend and resume replace it). `where` names the group and
// rank in errors.
std::shared_ptr<Window> make_mpi_window(std::shared_ptr<Backend> backend,
                                        std::function<MPI_Comm()> comm, Milliseconds timeout,
                                        std::string where);

}  // namespace tessera::distributed::mpi_impl
