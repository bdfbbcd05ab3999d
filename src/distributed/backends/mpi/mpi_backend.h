// The mpi backend (see docs/distributed.md, "The mpi backend"): OpBackend's validated Ops run as
// nonblocking MPI calls on a communicator of its own. Built only when CMake found MPI
// (TESSERA_HAVE_MPI); world.cpp registers it as "mpi".
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tessera/distributed/backend.h"

namespace tessera::distributed {

// Initialises MPI (MPI_Init_thread asking for MPI_THREAD_MULTIPLE) unless it already is, and
// returns this process's rank in MPI_COMM_WORLD and its size. Throws DistBackendError when MPI
// was initialised by someone else below MPI_THREAD_SERIALIZED, or was already finalised.
std::pair<int, int> mpi_world_rank_size();

// A communicator over the MPI_COMM_WORLD ranks `global_ranks` (ordered; this process is
// global_ranks[rank]): a dup of MPI_COMM_WORLD when they are all of it, else
// MPI_Comm_create_group. Collective over those ranks. `timeout` is the default of its ops.
// `world`: the default group, whose rank and size must be MPI_COMM_WORLD's.
BackendPtr make_mpi_backend(int rank, int size, Milliseconds timeout,
                            const std::vector<int>& global_ranks, const std::string& group_name,
                            bool world);

}  // namespace tessera::distributed
