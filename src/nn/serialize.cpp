#include "tessera/nn/serialize.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tessera/nn/optim.h"
#include "tessera/ops/factory.h"
#include "tessera/ops/random.h"

namespace tessera::nn {

namespace {

using Json = nlohmann::json;

constexpr uint64_t kMaxHeader = uint64_t{100} << 20;  // as the reference implementation

struct DtypeName {
  ScalarType dtype;
  const char* name;
};
constexpr DtypeName kDtypes[] = {
    {ScalarType::Bool, "BOOL"},
    {ScalarType::UInt8, "U8"},
    {ScalarType::Int8, "I8"},
    {ScalarType::Int16, "I16"},
    {ScalarType::Int32, "I32"},
    {ScalarType::Int64, "I64"},
    {ScalarType::Float16, "F16"},
    {ScalarType::BFloat16, "BF16"},
    {ScalarType::Float32, "F32"},
    {ScalarType::Float64, "F64"},
    {ScalarType::Float8_e4m3fn, "F8_E4M3"},
    {ScalarType::Float8_e5m2, "F8_E5M2"},
};

const char* st_name(ScalarType t, const std::string& key) {
  for (const auto& d : kDtypes)
    if (d.dtype == t) return d.name;
  TS_THROW(TypeError,
           "save_safetensors(): tensor \"{}\" has dtype {}, which safetensors cannot hold", key, t);
}

std::string sys_error(const std::string& what, const std::string& path) {
  return fmt::format("{} {}: {}", what, path, std::strerror(errno));
}

// write(2) until done (or throw).
void write_all(int fd, const void* data, size_t n, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    TS_CHECK(w > 0, RuntimeError, "save_safetensors(): {}", sys_error("cannot write", path));
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// A file mapped privately (copy-on-write) for zero-copy tensors.
struct Mapping {
  void* base = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (base && base != MAP_FAILED) ::munmap(base, size);
  }
};

[[noreturn]] void bad(const std::string& what, const std::string& why) {
  TS_THROW(ValueError, "load_safetensors(): {} is not a valid safetensors file: {}", what, why);
}

// Parses and checks the header; returns the entries sorted by offset. `data_len` is the size
// of the byte buffer after the header.
struct Entry {
  std::string name;
  ScalarType dtype;
  DimVector shape;
  uint64_t begin, end;
};

std::vector<Entry> parse_header(const char* header, size_t n, uint64_t data_len,
                                const std::string& what, Metadata& metadata) {
  Json j;
  try {
    j = Json::parse(header, header + n);
  } catch (const Json::exception& e) {
    bad(what, fmt::format("the header is not valid JSON ({})", e.what()));
  }
  if (!j.is_object()) bad(what, "the header is not a JSON object");
  std::vector<Entry> entries;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    const Json& v = it.value();
    if (key == "__metadata__") {
      if (!v.is_object()) bad(what, "__metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string())
          bad(what, fmt::format("metadata \"{}\" is not a string", m.key()));
        metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") ||
        !v.contains("data_offsets"))
      bad(what, fmt::format("entry \"{}\" lacks dtype, shape or data_offsets", key));
    const Json& dt = v["dtype"];
    const Json& sh = v["shape"];
    const Json& off = v["data_offsets"];
    if (!dt.is_string()) bad(what, fmt::format("entry \"{}\": dtype is not a string", key));
    Entry e{key, ScalarType::Undefined, {}, 0, 0};
    for (const auto& d : kDtypes)
      if (dt.get<std::string>() == d.name) e.dtype = d.dtype;
    if (e.dtype == ScalarType::Undefined)
      bad(what, fmt::format("entry \"{}\": unsupported dtype \"{}\"", key, dt.get<std::string>()));
    if (!sh.is_array() || sh.size() > 64) bad(what, fmt::format("entry \"{}\": bad shape", key));
    uint64_t numel = 1;
    for (const Json& d : sh) {
      if (!d.is_number_unsigned()) bad(what, fmt::format("entry \"{}\": bad shape", key));
      const uint64_t s = d.get<uint64_t>();
      if (s > (uint64_t{1} << 62) || (s != 0 && numel > (uint64_t{1} << 62) / s))
        bad(what, fmt::format("entry \"{}\": shape overflows", key));
      numel *= s;
      e.shape.push_back(static_cast<int64_t>(s));
    }
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
        !off[1].is_number_unsigned())
      bad(what, fmt::format("entry \"{}\": data_offsets is not [begin, end]", key));
    e.begin = off[0].get<uint64_t>();
    e.end = off[1].get<uint64_t>();
    const uint64_t esz = static_cast<uint64_t>(element_size(e.dtype));
    if (e.begin > e.end || e.end > data_len)
      bad(what, fmt::format("entry \"{}\": data_offsets [{}, {}] outside the {} data bytes "
                            "(truncated?)",
                            key, e.begin, e.end, data_len));
    if (numel > (uint64_t{1} << 62) / esz || e.end - e.begin != numel * esz)
      bad(what, fmt::format("entry \"{}\": {} bytes for shape [{}] of {}", key, e.end - e.begin,
                            fmt::join(e.shape, ", "), e.dtype));
    entries.push_back(std::move(e));
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;  // empties first
  });
  uint64_t at = 0;
  for (const Entry& e : entries) {
    if (e.begin != at)
      bad(what, fmt::format("entry \"{}\" starts at byte {} but the previous one ends at {} "
                            "(holes or overlaps)",
                            e.name, e.begin, at));
    at = e.end;
  }
  if (at != data_len)
    bad(what, fmt::format("the tensors cover {} of the {} data bytes", at, data_len));
  return entries;
}

// Tensors for the entries over `data` (kept alive by `owner`): zero-copy when aligned. A bool
// must be a 0 or 1 byte: anything else would be undefined behaviour to read as bool.
StateDict make_tensors(const std::vector<Entry>& entries, char* data,
                       const std::shared_ptr<void>& owner, const std::string& what) {
  StateDict out;
  for (const Entry& e : entries) {
    char* p = data + e.begin;
    if (e.dtype == ScalarType::Bool) {
      for (uint64_t i = 0; i < e.end - e.begin; ++i)
        if (static_cast<unsigned char>(p[i]) > 1)
          bad(what, fmt::format("entry \"{}\": BOOL element {} holds byte {} (expected 0 or 1)",
                                e.name, i, static_cast<unsigned char>(p[i])));
    }
    const int64_t esz = element_size(e.dtype);
    if (reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(esz) == 0 && e.end > e.begin) {
      out.emplace_back(e.name, from_blob(p, e.shape, e.dtype, [owner](void*) {}));
    } else {
      Tensor t = empty(e.shape, e.dtype);
      if (e.end > e.begin) std::memcpy(t.data_ptr(), p, e.end - e.begin);
      out.emplace_back(e.name, t);
    }
  }
  return out;
}

SafetensorsFile parse_bytes(char* data, size_t size, const std::string& what,
                            const std::shared_ptr<void>& owner) {
  if (size < 8) bad(what, fmt::format("{} bytes is shorter than the 8-byte header length", size));
  uint64_t n = 0;
  std::memcpy(&n, data, 8);  // little-endian, as x86-64
  if (n > kMaxHeader) bad(what, fmt::format("header length {} exceeds {} bytes", n, kMaxHeader));
  if (n > size - 8)
    bad(what, fmt::format("header length {} but only {} bytes follow (truncated?)", n, size - 8));
  SafetensorsFile f;
  const auto entries =
      parse_header(data + 8, static_cast<size_t>(n), size - 8 - n, what, f.metadata);
  f.tensors = make_tensors(entries, data + 8 + n, owner, what);
  return f;
}

}  // namespace

void save_safetensors(const std::string& path, const StateDict& tensors, const Metadata& metadata) {
  // Largest elements first: every tensor then starts aligned to its element size.
  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return tensors[a].second.element_size() > tensors[b].second.element_size();
  });
  Json header = Json::object();
  std::vector<Tensor> data;
  uint64_t offset = 0;
  for (size_t i : order) {
    const auto& [name, t] = tensors[i];
    TS_CHECK(t.defined(), ValueError, "save_safetensors(): tensor \"{}\" is undefined", name);
    TS_CHECK(name != "__metadata__" && !header.contains(name), ValueError,
             "save_safetensors(): duplicate or reserved name \"{}\"", name);
    const Tensor c = t.detach().contiguous();
    const uint64_t bytes = static_cast<uint64_t>(c.nbytes());
    header[name] = {{"dtype", st_name(c.dtype(), name)},
                    {"shape", c.sizes().vec()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    data.push_back(c);
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string h = header.dump();
  h.append((8 - (8 + h.size()) % 8) % 8, ' ');  // the data starts 8-byte aligned
  const uint64_t n = h.size();

  const std::filesystem::path target(path);
  const std::filesystem::path dir = target.has_parent_path() ? target.parent_path() : ".";
  const std::string tmp =
      (dir / fmt::format(".{}.tmp-{}", target.filename().string(), ::getpid())).string();
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  TS_CHECK(fd >= 0, RuntimeError, "save_safetensors(): {}", sys_error("cannot create", tmp));
  try {
    write_all(fd, &n, 8, tmp);
    write_all(fd, h.data(), h.size(), tmp);
    for (const Tensor& c : data)
      if (c.nbytes() > 0) write_all(fd, c.data_ptr(), static_cast<size_t>(c.nbytes()), tmp);
    TS_CHECK(::fsync(fd) == 0, RuntimeError, "save_safetensors(): {}",
             sys_error("cannot fsync", tmp));
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = sys_error("cannot rename onto", path);
    ::unlink(tmp.c_str());
    TS_THROW(RuntimeError, "save_safetensors(): {}", why);
  }
  // The rename itself must reach the disk.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

SafetensorsFile load_safetensors(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  TS_CHECK(fd >= 0, ValueError, "load_safetensors(): {}", sys_error("cannot open", path));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    TS_THROW(ValueError, "load_safetensors(): {} is not a regular file", path);
  }
  const size_t size = static_cast<size_t>(st.st_size);
  auto map = std::make_shared<Mapping>();
  if (size > 0) {
    map->base = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    map->size = size;
  }
  ::close(fd);
  TS_CHECK(size == 0 || map->base != MAP_FAILED, ValueError, "load_safetensors(): {}",
           sys_error("cannot map", path));
  return parse_bytes(static_cast<char*>(map->base), size, path, map);
}

SafetensorsFile parse_safetensors(const void* data, size_t size, const std::string& what) {
  auto copy = std::shared_ptr<char[]>(new char[size + 64]);
  // 64-byte aligned start, as a mapping would be.
  char* base = copy.get() + (64 - reinterpret_cast<uintptr_t>(copy.get()) % 64) % 64;
  if (size > 0) std::memcpy(base, data, size);
  return parse_bytes(base, size, what, copy);
}

// ---- checkpoints ----------------------------------------------------------------------------

namespace {
constexpr const char* kFormat = "tessera-checkpoint";
constexpr const char* kVersion = "1";
}  // namespace

void save_checkpoint(const std::string& path, const Module& model,
                     const optim::Optimizer* optimizer, int64_t step, const Metadata& extra) {
  StateDict all;
  for (auto& [k, t] : model.state_dict()) all.emplace_back("model." + k, t);
  if (optimizer)
    for (auto& [k, t] : optimizer->state_dict()) all.emplace_back("optim." + k, t);
  Metadata meta = extra;
  const Generator& g = default_generator();
  meta["format"] = std::string(kFormat);
  meta["format_version"] = std::string(kVersion);
  meta["step"] = std::to_string(step);
  meta["rng_seed"] = std::to_string(g.seed());
  meta["rng_offset"] = std::to_string(g.offset());
  save_safetensors(path, all, meta);
}

namespace {
void check_format(const Metadata& m, const std::string& path) {
  auto it = m.find("format");
  TS_CHECK(it != m.end() && it->second == kFormat, ValueError,
           "load_checkpoint(): {} is a safetensors file but not a Tessera checkpoint (no "
           "format=\"{}\" metadata)",
           path, kFormat);
  auto v = m.find("format_version");
  TS_CHECK(v != m.end() && v->second == kVersion, ValueError,
           "load_checkpoint(): {} has checkpoint format version {}, this Tessera reads {}", path,
           v == m.end() ? "(none)" : v->second, kVersion);
}

uint64_t parse_u64(const Metadata& m, const char* key, const std::string& path) {
  auto it = m.find(key);
  TS_CHECK(it != m.end(), ValueError, "load_checkpoint(): {} lacks metadata \"{}\"", path, key);
  try {
    size_t used = 0;
    const uint64_t v = std::stoull(it->second, &used);
    TS_CHECK(used == it->second.size(), ValueError, "trailing characters");
    return v;
  } catch (const std::exception&) {
    TS_THROW(ValueError, "load_checkpoint(): {}: metadata \"{}\" = \"{}\" is not a number", path,
             key, it->second);
  }
}
}  // namespace

Metadata read_checkpoint_metadata(const std::string& path) {
  SafetensorsFile f = load_safetensors(path);
  check_format(f.metadata, path);
  return f.metadata;
}

CheckpointInfo load_checkpoint(const std::string& path, Module& model,
                               optim::Optimizer* optimizer) {
  SafetensorsFile f = load_safetensors(path);
  check_format(f.metadata, path);
  StateDict model_sd, optim_sd;
  for (auto& [k, t] : f.tensors) {
    if (k.starts_with("model.")) {
      model_sd.emplace_back(k.substr(6), t);
    } else if (k.starts_with("optim.")) {
      optim_sd.emplace_back(k.substr(6), t);
    } else {
      TS_THROW(ValueError, "load_checkpoint(): {}: unexpected tensor \"{}\"", path, k);
    }
  }
  CheckpointInfo info;
  info.step = static_cast<int64_t>(parse_u64(f.metadata, "step", path));
  const uint64_t seed = parse_u64(f.metadata, "rng_seed", path);
  const uint64_t offset = parse_u64(f.metadata, "rng_offset", path);
  model.load_state_dict(model_sd);
  if (optimizer) {
    TS_CHECK(!optim_sd.empty(), ValueError, "load_checkpoint(): {} holds no optimizer state", path);
    optimizer->load_state_dict(optim_sd);
  }
  Generator& g = default_generator();
  g.manual_seed(seed);
  g.set_offset(offset);
  info.metadata = std::move(f.metadata);
  return info;
}

}  // namespace tessera::nn
