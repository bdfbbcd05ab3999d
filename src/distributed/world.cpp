// The World: the default group, the groups made from it, and the backend registry.
#include <fmt/chrono.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>

#include "distributed/backends/reconfigurable.h"
#include "distributed/plugins.h"
#include "tessera/distributed/distributed.h"
#include "tessera/distributed/flight_recorder.h"

#ifdef TESSERA_HAVE_MPI
#include "distributed/backends/mpi/mpi_backend.h"
#endif

namespace tessera::distributed {

namespace {

struct World {
  StorePtr store;
  std::string backend;
  Milliseconds timeout{0};
  int rank = -1;
  int world_size = 0;
  ProcessGroupPtr default_group;
  std::vector<ProcessGroupPtr> groups;  // made by new_group and split_group, in creation order
  // The counters below count within one generation of the default group (counters_for: its
  // generation_id()), so a replacement process that joined at a reconfigure agrees with the
  // survivors on every later group's name.
  std::string counters_for;
  int group_counter = 0;  // the same on every member: new_group is collective
  // split_group calls per parent group (the same on the parent's members, who all call it).
  std::map<std::string, int> split_counters;
};

std::mutex g_world_mutex;  // guards g_process_world
World g_process_world;
thread_local World* t_world = nullptr;  // set by WorldScope

// The World of the calling thread, and the lock to hold while using it.
struct WorldRef {
  std::unique_lock<std::mutex> lock;
  World& world;
};
WorldRef current_world() {
  if (t_world) return {std::unique_lock<std::mutex>(), *t_world};
  return {std::unique_lock<std::mutex>(g_world_mutex), g_process_world};
}

// What a backend's factory gets: the group's store (an in-process HashStore for backends that
// need none), this member's group rank and the group's size, the timeout, the group's name,
// the members' global ranks, and whether it is the default group.
struct BackendArgs {
  StorePtr store;
  int rank = 0;
  int size = 0;
  Milliseconds timeout{0};
  std::string group;
  std::vector<int> global_ranks;
  bool world = false;
  std::optional<Milliseconds> connect_timeout;  // bounds the set-up; unset: `timeout`
  bool reconfigurable = false;                  // one generation of a ReconfigurableBackend
};

struct RegisteredBackend {
  std::function<BackendPtr(const BackendArgs&)> make;
  // False for backends with a rendezvous of their own (mpi): init_process_group builds no
  // TCPStore or FileStore for them.
  bool needs_store = true;
  // Rank and world size when the caller gives none (mpi: MPI_COMM_WORLD's); null: the
  // environment's.
  std::function<std::pair<int, int>()> rank_and_size;
  // Whether init_process_group(..., enable_reconfigure = true) may wrap it in a
  // ReconfigurableBackend (its factory must rendezvous only through the store it is given).
  bool reconfigurable = false;
};

std::mutex g_registry_mutex;
std::map<std::string, RegisteredBackend>& registry() {
  static std::map<std::string, RegisteredBackend> r = [] {
    std::map<std::string, RegisteredBackend> m;
    m["shm"].make = [](const BackendArgs& a) {
      ShmOptions options;
      options.group_name = a.group;
      options.connect_timeout = a.connect_timeout;
      return make_shm_backend(a.store, a.rank, a.size, a.timeout, options);
    };
    m["shm"].reconfigurable = true;
    m["gloo"].make = [](const BackendArgs& a) {
      GlooOptions options;
      options.group_name = a.group;
      options.connect_timeout = a.connect_timeout;
      options.isolate_outputs = a.reconfigurable;
      return make_gloo_backend(a.store, a.rank, a.size, a.timeout, options);
    };
    m["gloo"].reconfigurable = true;
    m["lazy"].make = [](const BackendArgs& a) {
      return make_lazy_backend(a.store, a.rank, a.size, a.timeout, a.group);
    };
    m["hierarchical"].make = [](const BackendArgs& a) {
      HierarchicalOptions options;
      options.group_name = a.group;
      return make_hierarchical_backend(a.store, a.rank, a.size, a.timeout, options);
    };
#ifdef TESSERA_HAVE_MPI
    m["mpi"] = {[](const BackendArgs& a) {
                  return make_mpi_backend(a.rank, a.size, a.timeout, a.global_ranks, a.group,
                                          a.world);
                },
                false, mpi_world_rank_size};
#endif
    return m;
  }();
  return r;
}

std::optional<RegisteredBackend> registered(const std::string& name) {
  std::lock_guard lock(g_registry_mutex);
  auto& r = registry();
  auto it = r.find(name);
  if (it == r.end()) return std::nullopt;
  return it->second;
}

// A backend name, or a per-device-type spec like "cpu:shm" or "cpu:gloo,cuda:nccl"
// (torch's mixed form): the cpu entry's backend. Tessera's tensors live on the CPU only, so
// an entry for another device type is refused rather than ignored.
std::string resolve_spec(const std::string& spec) {
  if (spec.find(':') == std::string::npos) return spec;
  std::optional<std::string> cpu;
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t end = spec.find(',', pos);
    if (end == std::string::npos) end = spec.size();
    const std::string entry = spec.substr(pos, end - pos);
    pos = end + 1;
    const size_t colon = entry.find(':');
    TS_CHECK(colon != std::string::npos && colon > 0 && colon + 1 < entry.size(), ValueError,
             "init_process_group(): backend spec '{}': expected 'device:backend' entries "
             "separated by commas, but got '{}'",
             spec, entry);
    const std::string device = entry.substr(0, colon);
    TS_CHECK(device == "cpu", ValueError,
             "init_process_group(): backend spec '{}': entry '{}' is for device type '{}', but "
             "Tessera runs on the CPU only (give 'cpu:<backend>')",
             spec, entry, device);
    TS_CHECK(!cpu, ValueError, "init_process_group(): backend spec '{}' names the cpu twice", spec);
    cpu = entry.substr(colon + 1);
  }
  return *cpu;
}

// The registration for a backend name or spec, loading backend plugins (plugins.h) when the
// name is not registered.
RegisteredBackend find_backend(const std::string& spec) {
  const std::string name = resolve_spec(spec);
  if (auto f = registered(name)) return *f;
  TS_CHECK(name != "mpi", ValueError,
           "init_process_group(): backend 'mpi' is not available: this Tessera was built without "
           "MPI (install an MPI implementation, e.g. Debian's libopenmpi-dev, and reconfigure; "
           "sanitizer builds never include it)");
  const std::string searched = detail::load_backend_plugins(name);
  if (auto f = registered(name)) return *f;
  std::vector<std::string> names;
  {
    std::lock_guard lock(g_registry_mutex);
    for (const auto& [n, f] : registry()) names.push_back(n);
  }
  TS_THROW(ValueError, "init_process_group(): unknown backend '{}' (registered: {}; plugins: {})",
           name, fmt::join(names, ", "),
           searched.empty() ? std::string("TESSERA_BACKEND_PLUGINS is not set") : searched);
}

const ProcessGroupPtr& require_default(const World& w, const char* op) {
  TS_CHECK(w.default_group != nullptr, distributed::DistError,
           "{}(): the default process group is not initialised (call init_process_group first)",
           op);
  return w.default_group;
}

int parse_int(const std::string& what, const std::string& text) {
  int v = 0;
  const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  TS_CHECK(ec == std::errc() && p == text.data() + text.size(), ValueError,
           "init_process_group(): {} must be an integer, but got '{}'", what, text);
  return v;
}

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

// Rank or size from the first variable that is set (torchrun's, then OpenMPI's, then Slurm's).
int from_env(int given, std::initializer_list<const char*> names, const char* what) {
  if (given >= 0) return given;
  for (const char* n : names)
    if (auto v = env(n)) return parse_int(n, *v);
  TS_THROW(ValueError, "init_process_group(): {} not given and none of {} is set", what,
           fmt::join(names, ", "));
}

// A ReconfigurableBackend over the registered backend `name`: generation 0 has `initial`
// (rank, size) when its size is positive, else no communicator until the first reconfigure.
BackendPtr make_reconfigurable(const std::string& name, const RegisteredBackend& registered,
                               const StorePtr& store, const std::string& group, int global_rank,
                               Milliseconds timeout, std::pair<int, int> initial) {
  auto make = [make = registered.make, group, timeout](const StorePtr& s, int rank, int size,
                                                       Milliseconds connect) {
    std::vector<int> ranks(static_cast<size_t>(size));
    for (int r = 0; r < size; ++r) ranks[static_cast<size_t>(r)] = r;
    return make({s, rank, size, timeout, group, std::move(ranks), false, connect, true});
  };
  return std::make_shared<ReconfigurableBackend>(name, group, store, timeout, std::move(make),
                                                 global_rank, initial.first, initial.second);
}

// The default group's current generation, for naming the groups made in it: its uuid ("" for
// the initial one) and its members' global ranks. Resets the group counters when a
// reconfigure started a new generation.
struct Generation {
  std::string id;
  std::vector<int> members;
  // "group3" in generation 0, "group3@<uuid>" after a reconfigure; the store namespace alike.
  std::string name(const std::string& base) const { return id.empty() ? base : base + "@" + id; }
};
Generation current_generation(World& w) {
  Generation g;
  g.id = w.default_group->backend().generation_id();
  g.members = w.default_group->global_ranks();
  if (g.id != w.counters_for) {
    w.counters_for = g.id;
    w.group_counter = 0;
    w.split_counters.clear();
  }
  return g;
}

}  // namespace

void register_backend(const std::string& name, BackendFactory factory) {
  TS_CHECK(!name.empty() && factory, ValueError,
           "register_backend(): needs a name and a factory, but got name '{}'", name);
  std::lock_guard lock(g_registry_mutex);
  registry()[name] = {[factory = std::move(factory)](const BackendArgs& a) {
                        return factory(a.store, a.rank, a.size, a.timeout, a.group);
                      },
                      true, nullptr, false};
}

bool is_backend_available(const std::string& name) {
  if (registered(name)) return true;
  detail::load_backend_plugins(name);
  return registered(name).has_value();
}

void init_process_group(const std::string& backend, StorePtr store, int rank, int world_size,
                        Milliseconds timeout, bool enable_reconfigure) {
  TS_CHECK(store != nullptr, ValueError, "init_process_group(): argument 'store' must not be null");
  TS_CHECK(world_size >= 1, ValueError,
           "init_process_group(): argument 'world_size' must be positive, but got {}", world_size);
  TS_CHECK(rank >= 0 && rank < world_size, ValueError,
           "init_process_group(): argument 'rank' must be in [0, {}), but got {}", world_size,
           rank);
  TS_CHECK(timeout.count() > 0, ValueError,
           "init_process_group(): argument 'timeout' must be positive, but got {}", timeout);
  const RegisteredBackend registered = find_backend(backend);
  TS_CHECK(!enable_reconfigure || registered.reconfigurable, ValueError,
           "init_process_group(): backend '{}' cannot reconfigure, so enable_reconfigure=true is "
           "refused (the shm and gloo backends can)",
           backend);
  auto w = current_world();
  TS_CHECK(w.world.default_group == nullptr, distributed::DistError,
           "init_process_group(): the default process group is already initialised (rank {} of "
           "{}); call destroy_process_group() first",
           w.world.rank, w.world.world_size);
  std::vector<int> ranks(static_cast<size_t>(world_size));
  for (int r = 0; r < world_size; ++r) ranks[static_cast<size_t>(r)] = r;
  auto group_store = std::make_shared<PrefixStore>("group/0", store);
  BackendPtr b;
  if (enable_reconfigure) {
    b = make_reconfigurable(resolve_spec(backend), registered, group_store, "default", rank,
                            timeout, {rank, world_size});
  } else {
    b = registered.make(
        {group_store, rank, world_size, timeout, std::string("default"), ranks, true, {}, false});
  }
  w.world.default_group =
      std::make_shared<ProcessGroup>("default", std::move(ranks), rank, std::move(b), timeout);
  if (auto recorder = global_flight_recorder()) recorder->attach(w.world.default_group);
  w.world.store = std::move(store);
  w.world.backend = backend;
  w.world.timeout = timeout;
  w.world.rank = rank;
  w.world.world_size = world_size;
  w.world.group_counter = 0;
}

void init_process_group(const std::string& backend, const std::string& init_method, int rank,
                        int world_size, Milliseconds timeout, bool enable_reconfigure) {
  const RegisteredBackend registered = find_backend(backend);
  if (registered.rank_and_size && (rank < 0 || world_size < 0)) {
    const auto [r, n] = registered.rank_and_size();
    if (rank < 0) rank = r;
    if (world_size < 0) world_size = n;
  }
  rank = from_env(rank, {"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"}, "rank");
  world_size =
      from_env(world_size, {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS"}, "world_size");
  TS_CHECK(init_method == "env://" || init_method.rfind("tcp://", 0) == 0 ||
               init_method.rfind("file://", 0) == 0,
           ValueError,
           "init_process_group(): init_method must start with env://, tcp:// or file://, but got "
           "'{}'",
           init_method);
  if (!registered.needs_store) {
    // Its own rendezvous (mpirun's): an in-process store serves the groups' bookkeeping.
    init_process_group(backend, std::make_shared<HashStore>(timeout), rank, world_size, timeout,
                       enable_reconfigure);
    return;
  }
  StorePtr store;
  const bool external = env("TESSERA_STORE_EXTERNAL").value_or("0") == "1";
  const auto tcp = [&](const std::string& host, const std::string& port) {
    TCPStoreOptions o;
    const int p = parse_int("the store port", port);
    TS_CHECK(p > 0 && p < 65536, ValueError,
             "init_process_group(): the store port must be in [1, 65535], but got {}", p);
    o.port = static_cast<uint16_t>(p);
    o.is_server = rank == 0 && !external;
    o.num_workers = world_size;
    o.multi_host = host != "127.0.0.1" && host != "localhost";
    o.timeout = timeout;
    return std::make_shared<TCPStore>(host, o);
  };
  if (init_method == "env://") {
    const auto addr = env("MASTER_ADDR"), port = env("MASTER_PORT");
    TS_CHECK(addr && port, ValueError,
             "init_process_group(): init_method 'env://' needs MASTER_ADDR and MASTER_PORT");
    store = tcp(*addr, *port);
  } else if (init_method.rfind("tcp://", 0) == 0) {
    const std::string rest = init_method.substr(6);
    const auto colon = rest.rfind(':');
    TS_CHECK(colon != std::string::npos && colon > 0, ValueError,
             "init_process_group(): init_method must look like tcp://HOST:PORT, but got '{}'",
             init_method);
    store = tcp(rest.substr(0, colon), rest.substr(colon + 1));
  } else {  // file://
    store = std::make_shared<FileStore>(init_method.substr(7), timeout);
  }
  // A multi-node `tessera launch` keeps one store for the whole job and gives each restart
  // round a namespace of its own.
  if (const auto prefix = env("TESSERA_STORE_PREFIX"); prefix && !prefix->empty())
    store = std::make_shared<PrefixStore>(*prefix, std::move(store));
  init_process_group(backend, std::move(store), rank, world_size, timeout, enable_reconfigure);
}

bool is_initialized() {
  auto w = current_world();
  return w.world.default_group != nullptr;
}

void destroy_process_group(const ProcessGroupPtr& group) {
  std::vector<ProcessGroupPtr> to_shutdown;
  {
    auto w = current_world();
    if (group) {
      if (group == w.world.default_group) {
        to_shutdown = w.world.groups;
        to_shutdown.push_back(group);
        w.world = World{};
      } else {
        auto& gs = w.world.groups;
        gs.erase(std::remove(gs.begin(), gs.end(), group), gs.end());
        to_shutdown.push_back(group);
      }
    } else {
      require_default(w.world, "destroy_process_group");
      to_shutdown = w.world.groups;
      to_shutdown.push_back(w.world.default_group);
      w.world = World{};
    }
  }
  for (auto& g : to_shutdown) g->shutdown();  // outside the lock: shutdown waits for ops
}

ProcessGroupPtr group_world() {
  auto w = current_world();
  return require_default(w.world, "group_world");
}

namespace {
ProcessGroupPtr resolve(const ProcessGroupPtr& group, const char* op) {
  if (group) return group;
  auto w = current_world();
  return require_default(w.world, op);
}
}  // namespace

int get_rank(const ProcessGroupPtr& group) {
  return resolve(group, "get_rank")->rank();
}
int get_world_size(const ProcessGroupPtr& group) {
  return resolve(group, "get_world_size")->size();
}
std::string get_backend(const ProcessGroupPtr& group) {
  return resolve(group, "get_backend")->backend_name();
}
bool supports_reconfigure(const ProcessGroupPtr& group) {
  return resolve(group, "supports_reconfigure")->supports_reconfigure();
}
std::string get_reconfigure_handle(const ProcessGroupPtr& group) {
  return resolve(group, "get_reconfigure_handle")->reconfigure_handle();
}
WorkPtr reconfigure(const ReconfigureOptions& options, const ProcessGroupPtr& group) {
  return resolve(group, "reconfigure")->reconfigure(options);
}
ProcessGroupPtr new_reconfigurable_group(const std::string& backend, StorePtr store,
                                         int global_rank, Milliseconds timeout,
                                         const std::string& name) {
  TS_CHECK(store != nullptr, ValueError,
           "new_reconfigurable_group(): argument 'store' must not be null");
  TS_CHECK(timeout.count() > 0, ValueError,
           "new_reconfigurable_group(): argument 'timeout' must be positive, but got {}", timeout);
  const RegisteredBackend registered = find_backend(backend);
  TS_CHECK(registered.reconfigurable, ValueError,
           "new_reconfigurable_group(): backend '{}' cannot reconfigure (the shm and gloo "
           "backends can)",
           backend);
  BackendPtr b = make_reconfigurable(resolve_spec(backend), registered, store, name, global_rank,
                                     timeout, {0, 0});
  auto g =
      std::make_shared<ProcessGroup>(name, std::vector<int>{}, global_rank, std::move(b), timeout);
  if (auto recorder = global_flight_recorder()) recorder->attach(g);
  return g;
}

int get_group_rank(const ProcessGroupPtr& group, int global_rank) {
  return resolve(group, "get_group_rank")->group_rank(global_rank);
}
int get_global_rank(const ProcessGroupPtr& group, int group_rank) {
  return resolve(group, "get_global_rank")->global_rank(group_rank);
}

namespace {

// A group of the sorted global `ranks`; its backend is set up now (collectively among the
// members, through `store`) when this rank is one of them. Registered with the World (for
// destroy_process_group) and the Flight Recorder.
ProcessGroupPtr make_group(const std::string& name, std::vector<int> ranks, int my_rank,
                           const StorePtr& store, const std::string& backend_name,
                           Milliseconds timeout) {
  const RegisteredBackend registered = find_backend(backend_name);  // every rank checks it
  const auto it = std::find(ranks.begin(), ranks.end(), my_rank);
  BackendPtr b;
  if (it != ranks.end()) {
    b = registered.make({store,
                         static_cast<int>(it - ranks.begin()),
                         static_cast<int>(ranks.size()),
                         timeout,
                         name,
                         ranks,
                         false,
                         {},
                         false});
  }
  auto g = std::make_shared<ProcessGroup>(name, std::move(ranks), my_rank, std::move(b), timeout);
  if (auto recorder = global_flight_recorder()) recorder->attach(g);
  auto w = current_world();
  w.world.groups.push_back(g);
  return g;
}

}  // namespace

ProcessGroupPtr new_group(std::vector<int> ranks, std::optional<Milliseconds> timeout,
                          const std::string& backend) {
  StorePtr store;
  std::string backend_name;
  Milliseconds t{0};
  int my_rank = 0, counter = 0;
  Generation gen;
  {
    auto w = current_world();
    require_default(w.world, "new_group");
    // After a reconfigure the ranks are the global ranks of the default group's current
    // members (a process keeps its global rank across generations).
    gen = current_generation(w.world);
    std::vector<int> members = gen.members;
    std::sort(members.begin(), members.end());
    if (ranks.empty()) ranks = members;
    std::sort(ranks.begin(), ranks.end());
    for (size_t i = 0; i < ranks.size(); ++i) {
      TS_CHECK(std::binary_search(members.begin(), members.end(), ranks[i]), ValueError,
               "new_group(): argument 'ranks' must hold global ranks of the default group's "
               "members ({}), but got {}",
               gen.id.empty()
                   ? fmt::format("[0, {})", w.world.world_size)
                   : fmt::format("{} since reconfigure '{}'", fmt::join(members, ", "), gen.id),
               ranks[i]);
      TS_CHECK(i == 0 || ranks[i] != ranks[i - 1], ValueError,
               "new_group(): argument 'ranks' holds rank {} twice", ranks[i]);
    }
    counter = ++w.world.group_counter;
    store = w.world.store;
    backend_name = backend.empty() ? w.world.backend : backend;
    t = timeout.value_or(w.world.timeout);
    my_rank = w.world.rank;
  }
  return make_group(
      gen.name(fmt::format("group{}", counter)), std::move(ranks), my_rank,
      std::make_shared<PrefixStore>(gen.name(fmt::format("group/{}", counter)), store),
      backend_name, t);
}

ProcessGroupPtr split_group(const ProcessGroupPtr& parent_group,
                            std::vector<std::vector<int>> split_ranks,
                            std::optional<Milliseconds> timeout) {
  ProcessGroupPtr parent;
  StorePtr store;
  int my_rank = 0, counter = 0;
  Generation gen;
  {
    auto w = current_world();
    const ProcessGroupPtr& world_group = require_default(w.world, "split_group");
    parent = parent_group ? parent_group : world_group;
    gen = current_generation(w.world);
    TS_CHECK(parent->is_member(), ValueError,
             "split_group(): rank {} is not a member of the parent group '{}'; only its members "
             "call split_group",
             w.world.rank, parent->name());
    counter = ++w.world.split_counters[parent->name()];
    store = w.world.store;
    my_rank = w.world.rank;
  }
  TS_CHECK(!split_ranks.empty(), ValueError,
           "split_group(): argument 'split_ranks' must hold at least one list of ranks");
  const std::vector<int>& members = parent->global_ranks();
  std::vector<int> seen;
  int mine = -1;
  for (size_t i = 0; i < split_ranks.size(); ++i) {
    auto& ranks = split_ranks[i];
    TS_CHECK(!ranks.empty(), ValueError, "split_group(): split_ranks[{}] is empty", i);
    std::sort(ranks.begin(), ranks.end());
    for (int r : ranks) {
      TS_CHECK(std::find(members.begin(), members.end(), r) != members.end(), ValueError,
               "split_group(): split_ranks[{}] holds rank {}, which is not in the parent group "
               "'{}' (ranks {})",
               i, r, parent->name(), fmt::join(members, ", "));
      TS_CHECK(std::find(seen.begin(), seen.end(), r) == seen.end(), ValueError,
               "split_group(): rank {} appears in more than one of split_ranks (the splits must "
               "be disjoint)",
               r);
      seen.push_back(r);
      if (r == my_rank) mine = static_cast<int>(i);
    }
  }
  if (mine < 0) return nullptr;  // in no split: the "no color" call
  const std::string prefix = gen.name(fmt::format("{}/split{}", parent->name(), counter));
  return make_group(fmt::format("{}.{}", prefix, mine), std::move(split_ranks[mine]), my_rank,
                    std::make_shared<PrefixStore>(fmt::format("split/{}/{}", prefix, mine), store),
                    parent->backend_name(), timeout.value_or(parent->timeout()));
}

WorldScope::WorldScope() {
  TS_CHECK(t_world == nullptr, RuntimeError, "WorldScope: this thread already has one");
  t_world = new World();
}

WorldScope::~WorldScope() {
  World* w = t_world;
  if (w->default_group) {
    try {
      destroy_process_group();
    } catch (...) {  // shutdown errors live on the Works
    }
  }
  t_world = nullptr;
  delete w;
}

}  // namespace tessera::distributed
