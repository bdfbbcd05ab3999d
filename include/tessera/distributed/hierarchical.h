// The hierarchical backend ("hierarchical"), for jobs whose ranks span hosts: the ranks of one
// host share an shm communicator, the lowest rank of each host (its leader) joins a gloo
// communicator with the other leaders, and every rank also joins a flat gloo communicator.
// all_reduce runs in three steps (shm reduce to the leader, gloo all_reduce among leaders,
// shm broadcast), so only one rank per host sends over the network; barrier likewise. Every
// other op runs flat over gloo. Composite ops run in issue order on a worker thread of the
// backend; their argument errors surface on the Work (flat ops throw at the call, as gloo
// does). Hosts are told apart by name: TESSERA_HOST when set, else gethostname().
#pragma once

#include <string>

#include "tessera/distributed/backend.h"
#include "tessera/distributed/store.h"

namespace tessera::distributed {

struct HierarchicalOptions {
  std::string host;           // this rank's host name; empty: TESSERA_HOST or gethostname()
  std::string gloo_hostname;  // the address gloo listens on (GlooOptions::hostname)
  std::string group_name = "default";
};

// Collective over `store`: every rank publishes its host, then the communicators are made.
BackendPtr make_hierarchical_backend(const StorePtr& store, int rank, int size,
                                     Milliseconds timeout, HierarchicalOptions options = {});

}  // namespace tessera::distributed
