// The lazy backend ("lazy"): a group whose communicators are set up on first use, the seed's
// nccl-lazy. The first send/recv between two ranks creates a 2-rank shm channel for the pair
// (in the background: the Work is returned at once and the op issued when the channel is up,
// so a ring of first sends cannot deadlock on set-up); the first collective creates the full
// communicator. Pairs that never talk set up nothing, and sends to different peers run on
// different channels, so they overlap (pipeline stages). Sends to oneself are refused.
#pragma once

#include <string>

#include "tessera/distributed/backend.h"
#include "tessera/distributed/store.h"

namespace tessera::distributed {

BackendPtr make_lazy_backend(const StorePtr& store, int rank, int size, Milliseconds timeout,
                             const std::string& group_name = "default");

}  // namespace tessera::distributed
