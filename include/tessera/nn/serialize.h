// safetensors files (the format Hugging Face tools read) and training checkpoints.
//
// Format: an 8-byte little-endian header length N, N bytes of JSON
//   {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...,
//    "__metadata__": {"key": "value"}}
// then the tensors' bytes (row-major, little-endian), every byte belonging to exactly one
// tensor. Tessera writes the largest elements first and pads the header with spaces so every
// tensor starts aligned to its element size.
//
// Writing is atomic: a temporary file beside the target, fsync, rename, fsync of the
// directory; a crash leaves either the old file or the new one, never a torn one. Loading maps
// the file (private, copy-on-write) and returns tensors that view the mapping without copying
// when aligned; truncated, corrupt or foreign files get a ValueError naming the problem.
#pragma once

#include <map>
#include <string>

#include "tessera/core/tensor.h"
#include "tessera/nn/module.h"

namespace tessera::nn {

using Metadata = std::map<std::string, std::string>;

void save_safetensors(const std::string& path, const StateDict& tensors,
                      const Metadata& metadata = {});

struct SafetensorsFile {
  StateDict tensors;  // in file order
  Metadata metadata;
};
SafetensorsFile load_safetensors(const std::string& path);
// The same, from bytes in memory (copied); what the fuzz test drives.
SafetensorsFile parse_safetensors(const void* data, size_t size, const std::string& what);

}  // namespace tessera::nn

namespace tessera::optim {
class Optimizer;
}  // namespace tessera::optim

namespace tessera::nn {

// A training checkpoint: the model's state_dict ("model." keys), the optimizer's ("optim."),
// the step and the default generator's state, in one safetensors file written atomically.
// `extra` metadata (a model's configuration, say) is stored beside them.
void save_checkpoint(const std::string& path, const Module& model,
                     const optim::Optimizer* optimizer, int64_t step, const Metadata& extra = {});

struct CheckpointInfo {
  int64_t step = 0;
  Metadata metadata;
};
// Loads into the given model (strictly: another model's shape is an error naming the keys) and
// optimizer, restores the generator, and returns the step and metadata.
CheckpointInfo load_checkpoint(const std::string& path, Module& model, optim::Optimizer* optimizer);
// Only the metadata (to rebuild the right model before loading).
Metadata read_checkpoint_metadata(const std::string& path);

}  // namespace tessera::nn
