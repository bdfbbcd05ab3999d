// safetensors and checkpoints: round trips of every dtype, zero-copy loads, the bytes checked
// by an outside reader (Python's json + NumPy), atomic writes, clear errors for truncated,
// corrupt and foreign files, a seeded fuzz of the parser, and a checkpoint that resumes
// training bit for bit.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tessera/nn/layers.h"
#include "tessera/nn/optim.h"
#include "tessera/nn/serialize.h"
#include "tessera/tessera.h"
#include "test_support.h"

namespace tessera {
namespace {

using testing::expect_error_mentions;
namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/tessera-st-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

std::vector<char> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

void write_file(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

nn::StateDict sample_tensors() {
  manual_seed(11);
  return {{"f32", randn({3, 5})},
          {"bf16", randn({7}).to(kBFloat16)},
          {"f64.t", randn({4, 3}, kFloat64).t()},  // strided: saved contiguous
          {"i64", randint(-100, 100, {2, 2})},
          {"u8", randint(0, 255, {5}, kUInt8)},
          {"bool", randn({3}).gt(0)},
          {"f16", randn({1, 3}).to(kFloat16)},
          {"i8", randint(-100, 100, {3}, kInt8)},
          {"i16", randint(-100, 100, {3}, kInt16)},
          {"i32", randint(-100, 100, {3}, kInt32)},
          {"f8", randn({4}).to(kFloat8_e4m3fn)},
          {"scalar", full({}, 3.5)},
          {"empty", zeros({0, 4})}};
}

TEST(Safetensors, RoundTripEveryDtypeZeroCopy) {
  TempDir dir;
  const auto tensors = sample_tensors();
  nn::save_safetensors(dir.file("a.safetensors"), tensors, {{"note", "hello"}});
  // Nothing but the file: the temporary is renamed away.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator{}), 1);
  const nn::SafetensorsFile f = nn::load_safetensors(dir.file("a.safetensors"));
  EXPECT_EQ(f.metadata.at("note"), "hello");
  ASSERT_EQ(f.tensors.size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    SCOPED_TRACE(name);
    const auto it = std::find_if(f.tensors.begin(), f.tensors.end(),
                                 [&](const auto& e) { return e.first == name; });
    ASSERT_NE(it, f.tensors.end());
    EXPECT_EQ(it->second.dtype(), t.dtype());
    EXPECT_EQ(it->second.sizes(), t.sizes());
    if (t.dtype() == kFloat8_e4m3fn) {
      EXPECT_TRUE(equal(it->second.to(kFloat32), t.to(kFloat32)));
    } else {
      EXPECT_TRUE(equal(it->second, t));
    }
    if (t.numel() > 0) {
      EXPECT_FALSE(it->second.storage()->owns_memory()) << "expected a view of the mapping";
    }
  }
  // Writing into a loaded tensor does not change the file (private mapping).
  f.tensors[0].second.fill_(0);
  const nn::SafetensorsFile again = nn::load_safetensors(dir.file("a.safetensors"));
  EXPECT_FALSE(equal(again.tensors[0].second, f.tensors[0].second));
}

TEST(Safetensors, BytesReadByAnOutsideReader) {
  TempDir dir;
  const std::string path = dir.file("b.safetensors");
  manual_seed(12);
  const Tensor a = randn({2, 3}, kFloat64), b = randint(0, 9, {4}, kInt32);
  nn::save_safetensors(path, {{"a", a}, {"b", b}}, {{"k", "v"}});
  // The spec's layout, decoded with Python's json and NumPy only.
  const std::string script = dir.file("read.py");
  std::ofstream(script) << R"(import json, struct, sys
import numpy as np
raw = open(sys.argv[1], 'rb').read()
n = struct.unpack('<Q', raw[:8])[0]
h = json.loads(raw[8:8 + n])
data = raw[8 + n:]
out = {}
for k, v in h.items():
    if k == '__metadata__':
        out[k] = v
        continue
    dt = {'F64': '<f8', 'I32': '<i4'}[v['dtype']]
    b, e = v['data_offsets']
    out[k] = np.frombuffer(data[b:e], dtype=dt).reshape(v['shape']).tolist()
print(json.dumps(out, sort_keys=True))
)";
  const std::string cmd = fmt::format("{} {} {}", TS_ORACLE_PYTHON, script, path);
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string outp;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) outp.append(buf, n);
  ASSERT_EQ(pclose(p), 0) << outp;
  const auto j = nlohmann::json::parse(outp);
  EXPECT_EQ(j["__metadata__"]["k"], "v");
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t k = 0; k < 3; ++k) EXPECT_EQ(j["a"][i][k].get<double>(), a[i][k].item<double>());
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(j["b"][i].get<int64_t>(), b[i].item<int64_t>());
}

TEST(Safetensors, TruncatedCorruptAndForeignFilesAreRejected) {
  TempDir dir;
  const std::string good = dir.file("g.safetensors");
  nn::save_safetensors(good, {{"w", randn({16})}});
  const std::vector<char> bytes = read_file(good);
  auto with = [&](std::vector<char> b) {
    const std::string p = dir.file("x.safetensors");
    write_file(p, b);
    return p;
  };
  expect_error_mentions([&] { nn::load_safetensors(dir.file("missing")); },
                        {"load_safetensors", "cannot open", "missing"});
  expect_error_mentions(
      [&] {
        nn::load_safetensors(with({bytes.begin(), bytes.end() - 10}));
      },
      {"not a valid safetensors file", "outside", "truncated"});
  expect_error_mentions(
      [&] {
        nn::load_safetensors(with({bytes.begin(), bytes.begin() + 5}));
      },
      {"shorter than the 8-byte header length"});
  std::vector<char> huge = bytes;
  huge[7] = 0x7f;
  expect_error_mentions([&] { nn::load_safetensors(with(huge)); }, {"header length"});
  std::vector<char> garbage = bytes;
  garbage[9] = '#';
  expect_error_mentions([&] { nn::load_safetensors(with(garbage)); }, {"not valid JSON"});
  const std::string text = "some text file, not safetensors at all";
  expect_error_mentions(
      [&] {
        nn::load_safetensors(with({text.begin(), text.end()}));
      },
      {"not a valid safetensors file"});
  std::vector<char> extra = bytes;
  extra.push_back(0);  // a byte no tensor claims
  expect_error_mentions([&] { nn::load_safetensors(with(extra)); }, {"cover 64 of the 65"});
  // A bool byte other than 0 or 1.
  nn::save_safetensors(dir.file("b.safetensors"), {{"m", ones({3}, kBool)}});
  std::vector<char> bad_bool = read_file(dir.file("b.safetensors"));
  bad_bool.back() = 7;
  expect_error_mentions([&] { nn::load_safetensors(with(bad_bool)); },
                        {"BOOL element 2 holds byte 7"});
  expect_error_mentions(
      [&] {
        nn::save_safetensors(dir.file("c"), {{"z", zeros({2}, kComplex64)}});
      },
      {"save_safetensors", "complex64"});
}

// Random byte flips, insertions and truncations of a valid file: every outcome is a parsed
// file or a tessera::Error, never a crash (this runs under ASan+UBSan in make test).
TEST(Safetensors, FuzzedBytesNeverCrash) {
  TempDir dir;
  nn::save_safetensors(dir.file("f.safetensors"), sample_tensors(), {{"a", "b"}});
  const std::vector<char> base = read_file(dir.file("f.safetensors"));
  const char* seed_env = std::getenv("TESSERA_FUZZ_SEED");
  std::mt19937_64 rng(seed_env ? std::strtoull(seed_env, nullptr, 10) : 20261130);
  int parsed = 0, rejected = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::vector<char> b = base;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % b.size();
      switch (rng() % 4) {
        case 0:
          b[at] = static_cast<char>(rng());
          break;
        case 1:
          b.resize(at);
          break;
        case 2:
          b.insert(b.begin() + static_cast<std::ptrdiff_t>(at), static_cast<char>(rng()));
          break;
        default:
          b[at % std::min<size_t>(b.size(), 200)] = "{}[]\":,0123456789 "[rng() % 19];
          break;
      }
      if (b.empty()) break;
    }
    try {
      const auto f = nn::parse_safetensors(b.data(), b.size(), "fuzz");
      for (const auto& [name, t] : f.tensors) (void)t.sum();  // touch every byte
      ++parsed;
    } catch (const Error&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 0);
  RecordProperty("parsed", parsed);
}

struct Tiny : nn::Module {
  Tiny() : Module("Tiny") { fc = register_module("fc", std::make_shared<nn::Linear>(6, 3)); }
  Tensor forward(const Tensor& x) override { return fc->forward(x).tanh(); }
  std::shared_ptr<nn::Linear> fc;
};

TEST(Checkpoint, ResumesTrainingBitForBit) {
  TempDir dir;
  auto train = [](Tiny& m, optim::Optimizer& opt, int steps) {
    for (int i = 0; i < steps; ++i) {
      const Tensor x = randn({8, 6});  // draws from the default generator: its state matters
      square(m.forward(x)).mean().backward();
      opt.step();
      opt.zero_grad();
    }
  };
  manual_seed(3);
  Tiny a;
  optim::AdamW oa(a.parameters(), {.lr = 0.01});
  train(a, oa, 4);
  nn::save_checkpoint(dir.file("ck.safetensors"), a, &oa, 4, {{"model", "tiny"}});
  train(a, oa, 3);  // the reference continuation

  manual_seed(999);  // a different process state
  Tiny b;
  optim::AdamW ob(b.parameters(), {.lr = 0.5});
  const nn::CheckpointInfo info = nn::load_checkpoint(dir.file("ck.safetensors"), b, &ob);
  EXPECT_EQ(info.step, 4);
  EXPECT_EQ(info.metadata.at("model"), "tiny");
  train(b, ob, 3);
  EXPECT_TRUE(equal(a.fc->weight, b.fc->weight));
  EXPECT_TRUE(equal(a.fc->bias, b.fc->bias));

  // Another model shape, a plain safetensors file, a damaged checkpoint: clear errors.
  struct Other : nn::Module {
    Other() : Module("Other") { register_module("fc", std::make_shared<nn::Linear>(5, 3)); }
  } other;
  expect_error_mentions(
      [&] { nn::load_checkpoint(dir.file("ck.safetensors"), other, nullptr); },
      {"Error(s) in loading state_dict for Other", "size mismatch for fc.weight"});
  nn::save_safetensors(dir.file("plain.safetensors"), {{"w", zeros({2})}});
  expect_error_mentions([&] { nn::load_checkpoint(dir.file("plain.safetensors"), b, nullptr); },
                        {"not a Tessera checkpoint"});
}

}  // namespace
}  // namespace tessera
