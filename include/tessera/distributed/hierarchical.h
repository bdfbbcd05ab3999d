// The hierarchical backend ("hierarchical"), for jobs whose ranks span hosts: the ranks of one
// host share an shm communicator, the lowest rank of each host (its leader) joins a gloo
// communicator with the other leaders, and every rank also joins a flat gloo communicator.
// Collectives run in steps through the leaders (all_reduce: shm reduce to the leader, gloo
// all_reduce among leaders, shm broadcast; the gathers, scatters, reduce_scatter and
// all_to_all likewise), so only one rank per host sends over the network; send/recv run flat
// over gloo. Arguments are checked at the call, as on the shm and gloo backends; the steps run in
// issue order on a worker thread of the backend. Hosts are told apart by name: TESSERA_HOST
// when set, else gethostname(). docs/distributed.md has the steps of each op.
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
