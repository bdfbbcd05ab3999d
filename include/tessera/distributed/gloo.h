// The gloo backend: the Gloo library (Debian's libgloo-dev) over TCP, for jobs whose ranks span
// hosts. Nonblocking like shm: a worker thread per communicator runs the collectives in issue
// order through Gloo's algorithms; sends and receives are posted at once on Gloo's unbound
// buffers and completed by a waiter of their own, so a pending recv never holds up a
// collective. Every op carries its timeout into Gloo.
//
// Differences from shm, all Gloo's: reductions of float16/bfloat16 round every partial sum to
// the dtype (shm widens to float and rounds once); reduce_scatter runs as an all_reduce of the
// whole input. On a failure or abort() the backend closes its connections: the running
// collective ends at once, and the peers' ops fail on the closed connection rather than at
// their timeouts.
#pragma once

#include <optional>
#include <string>

#include "tessera/distributed/backend.h"
#include "tessera/distributed/store.h"

namespace tessera::distributed {

struct GlooOptions {
  // The address this rank listens on for its peers. Empty: TESSERA_GLOO_HOSTNAME if set, else
  // the interface named by TESSERA_GLOO_IFNAME if set, else 127.0.0.1 when MASTER_ADDR is unset
  // or a loopback address (a single-host job), else this host's name.
  std::string hostname;
  std::string iface;
  // Names the group in errors and namespaces its rendezvous keys in the store.
  std::string group_name = "default";
  // Bounds the set-up (address exchange and connections); unset: the backend's timeout.
  std::optional<Milliseconds> connect_timeout;
  // Gloo cannot cancel a collective blocked on a silent (e.g. stopped) peer: after an abort it
  // ends only at its own timeout. With this set, collectives write into private copies that
  // are copied back only on success, so such a collective can never write into the caller's
  // tensors later. Reconfigurable groups set it; it costs a copy of each output.
  bool isolate_outputs = false;
};

// Collective over `store`: every rank publishes its address and connects to every other rank.
// Bounded by `timeout`, which is also the default timeout of the backend's ops.
BackendPtr make_gloo_backend(const StorePtr& store, int rank, int size, Milliseconds timeout,
                             GlooOptions options = {});

}  // namespace tessera::distributed
