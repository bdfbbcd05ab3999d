// Backend plugins (tessera/distributed/plugin.h): the example plugin loaded by path and by
// manifest, lazily; refused plugins and bad manifests give errors naming the file and why.
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "dist_test_util.h"

namespace tessera::testing {
namespace {

namespace fs = std::filesystem;

// Sets TESSERA_BACKEND_PLUGINS for the scope, restoring what was there.
class PluginsEnv {
 public:
  explicit PluginsEnv(const std::string& value) {
    if (const char* v = std::getenv(kName)) saved_ = v;
    ::setenv(kName, value.c_str(), 1);
  }
  ~PluginsEnv() {
    if (saved_) {
      ::setenv(kName, saved_->c_str(), 1);
    } else {
      ::unsetenv(kName);
    }
  }

 private:
  static constexpr const char* kName = "TESSERA_BACKEND_PLUGINS";
  std::optional<std::string> saved_;
};

fs::path temp_dir(const std::string& name) {
  const fs::path d =
      fs::temp_directory_path() / fmt::format("tessera-plugins-{}-{}", name, ::getpid());
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream(p) << text;
}

// Two ranks as threads on the named backend: an all-reduce, and the backend's name.
void all_reduce_on(const std::string& backend) {
  run_world(
      2,
      [](int r) {
        Tensor t = filled(kFloat32, 3, [&](int64_t i) { return r + i; });
        dist::all_reduce(t);
        EXPECT_EQ(as_doubles(t), (std::vector<double>{1, 3, 5}));
        EXPECT_EQ(dist::get_backend().rfind("counting(", 0), 0u) << dist::get_backend();
      },
      backend);
}

TEST(Plugins, TheExamplePluginLoadsByManifestAndByPath) {
  const fs::path dir = temp_dir("manifest");
  write_file(dir / "counting.json",
             fmt::format(R"({{"name": "counting", "library": "{}"}})", TS_COUNTING_PLUGIN));
  {
    PluginsEnv env(dir.string());
    EXPECT_TRUE(dist::is_backend_available("counting"));
    all_reduce_on("counting");
  }
  {
    PluginsEnv env(TS_COUNTING_PLUGIN);  // a library path; loading it again is a no-op
    EXPECT_TRUE(dist::is_backend_available("counting"));
    all_reduce_on("counting");
  }
  fs::remove_all(dir);
}

TEST(Plugins, APluginForAnotherAbiIsRefusedBeforeItRuns) {
  PluginsEnv env(TS_WRONG_ABI_PLUGIN);  // its init aborts the process if it ever runs
  expect_error_mentions([] { dist::is_backend_available("nosuch"); },
                        {"plugin ABI version 999", "speaks version 1", "wrong_abi_plugin"});
}

TEST(Plugins, BadEntriesAreNamed) {
  {
    PluginsEnv env("/nonexistent/libnothing.so");
    expect_error_mentions([] { dist::is_backend_available("nosuch"); },
                          {"backend plugin", "/nonexistent/libnothing.so", "not found"});
  }
  const fs::path dir = temp_dir("bad");
  write_file(dir / "broken.json", R"({"name": 3})");
  {
    PluginsEnv env(dir.string());
    expect_error_mentions([] { dist::is_backend_available("nosuch"); },
                          {"manifest", "broken.json", "\"name\" and \"library\""});
  }
  fs::remove_all(dir);
  const fs::path not_a_plugin = TS_LAUNCH_WORKER;  // an executable, not a plugin library
  {
    PluginsEnv env(not_a_plugin.string());
    expect_error_mentions([] { dist::is_backend_available("nosuch"); },
                          {"backend plugin", "cannot load"});
  }
  {
    PluginsEnv env("");
    auto store = std::make_shared<dist::HashStore>(kTestTimeout);
    dist::WorldScope scope;
    expect_error_mentions(
        [&] { dist::init_process_group("nosuch", store, 0, 1); },
        {"unknown backend 'nosuch'", "shm", "TESSERA_BACKEND_PLUGINS is not set"});
  }
}

}  // namespace
}  // namespace tessera::testing
