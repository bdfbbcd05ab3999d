#include "oracle/oracle_cases.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#ifndef TS_ORACLE_PYTHON
#define TS_ORACLE_PYTHON "/usr/bin/python3"
#endif
#ifndef TS_ORACLE_DIR
#define TS_ORACLE_DIR "tests/oracle"
#endif

namespace fs = std::filesystem;

namespace tessera::oracle {
namespace {

std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// FNV-1a: the cache key changes whenever a script changes.
uint64_t fnv1a(const std::string& s, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

DimVector to_dims(const nlohmann::json& j) {
  DimVector d;
  for (const auto& v : j) d.push_back(v.get<int64_t>());
  return d;
}

// Generates the cases into `root/<key>` unless present; returns that directory. A file lock
// serialises concurrent test processes; other keys' directories are removed.
std::string ensure_generated(const fs::path& root, const std::string& key, int seed) {
  fs::create_directories(root);
  const fs::path lock_path = root / ".lock";
  int fd = ::open(lock_path.c_str(), O_CREAT | O_RDWR, 0644);
  if (fd < 0) throw std::runtime_error("oracle: cannot open " + lock_path.string());
  ::flock(fd, LOCK_EX);
  struct Unlock {
    int fd;
    ~Unlock() {
      ::flock(fd, LOCK_UN);
      ::close(fd);
    }
  } unlock{fd};

  const fs::path dir = root / key;
  if (fs::exists(dir / "index.json")) return dir.string();
  const fs::path failed = root / (key + ".failed");  // a failed run is not retried per test
  if (fs::exists(failed)) throw std::runtime_error(read_text(failed));
  for (const auto& e : fs::directory_iterator(root))
    if (e.path().filename() != ".lock") fs::remove_all(e.path());
  const fs::path tmp = root / (key + ".tmp");
  fs::create_directories(tmp);
  const fs::path log = root / "make_cases.log";
  const std::string cmd =
      fmt::format("'{}' '{}/make_cases.py' '{}' --seed {} > '{}' 2>&1", TS_ORACLE_PYTHON,
                  TS_ORACLE_DIR, tmp.string(), seed, log.string());
  const int rc = std::system(cmd.c_str());
  if (rc != 0) {
    throw std::runtime_error(
        fmt::format("oracle: `{}` failed (status {}):\n{}", cmd, rc, read_text(log)));
  }
  fs::rename(tmp, dir);
  return dir.string();
}

fs::path cache_root() {
  if (const char* env = std::getenv("TESSERA_ORACLE_CACHE")) return fs::path(env);
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) return exe.parent_path() / "oracle-cache";
  return fs::temp_directory_path() / "tessera-oracle-cache";
}

std::complex<double> load_element(const uint8_t* p, ScalarType t) {
  auto rd = [p]<class T>(T*) {
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
  };
  switch (t) {
    case ScalarType::Bool:
      return {static_cast<double>(p[0] != 0), 0};
    case ScalarType::UInt8:
      return {static_cast<double>(rd((uint8_t*)nullptr)), 0};
    case ScalarType::Int8:
      return {static_cast<double>(rd((int8_t*)nullptr)), 0};
    case ScalarType::Int16:
      return {static_cast<double>(rd((int16_t*)nullptr)), 0};
    case ScalarType::Int32:
      return {static_cast<double>(rd((int32_t*)nullptr)), 0};
    // int64 beyond 2^53 loses bits here; the exact comparison below re-reads them.
    case ScalarType::Int64:
      return {static_cast<double>(rd((int64_t*)nullptr)), 0};
    case ScalarType::Float16:
      return {detail::f16_bits_to_f32(rd((uint16_t*)nullptr)), 0};
    case ScalarType::BFloat16:
      return {detail::bf16_bits_to_f32(rd((uint16_t*)nullptr)), 0};
    case ScalarType::Float32:
      return {rd((float*)nullptr), 0};
    case ScalarType::Float64:
      return {rd((double*)nullptr), 0};
    case ScalarType::Complex64: {
      auto v = rd((std::complex<float>*)nullptr);
      return {v.real(), v.imag()};
    }
    case ScalarType::Complex128:
      return rd((std::complex<double>*)nullptr);
    default:
      throw std::runtime_error(fmt::format("oracle: cannot read dtype {}", t));
  }
}

int64_t storage_size(ScalarType t) {
  switch (t) {
    case ScalarType::Bool:
    case ScalarType::UInt8:
    case ScalarType::Int8:
      return 1;
    case ScalarType::Int16:
    case ScalarType::Float16:
    case ScalarType::BFloat16:
      return 2;
    case ScalarType::Int32:
    case ScalarType::Float32:
      return 4;
    case ScalarType::Int64:
    case ScalarType::Float64:
    case ScalarType::Complex64:
      return 8;
    case ScalarType::Complex128:
      return 16;
    default:
      throw std::runtime_error(fmt::format("oracle: unsupported dtype {}", t));
  }
}

int64_t numel_of(IntArrayRef shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

std::string index_string(int64_t flat, IntArrayRef shape) {
  std::vector<int64_t> idx(shape.size());
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    idx[d] = shape[d] ? flat % shape[d] : 0;
    flat = shape[d] ? flat / shape[d] : 0;
  }
  return fmt::format("[{}]", fmt::join(idx, ", "));
}

std::string value_string(std::complex<double> v, ScalarType t) {
  if (is_complex(t)) return fmt::format("({:.9g}{:+.9g}j)", v.real(), v.imag());
  return fmt::format("{:.9g}", v.real());
}

bool is_nan(std::complex<double> v) {
  return std::isnan(v.real()) || std::isnan(v.imag());
}

}  // namespace

// ---- parsing -------------------------------------------------------------------------------

ScalarType parse_dtype(const std::string& name) {
  static const std::pair<const char*, ScalarType> kNames[] = {
      {"bool", kBool},       {"uint8", kUInt8},         {"int8", kInt8},
      {"int16", kInt16},     {"int32", kInt32},         {"int64", kInt64},
      {"float16", kFloat16}, {"bfloat16", kBFloat16},   {"float32", kFloat32},
      {"float64", kFloat64}, {"complex64", kComplex64}, {"complex128", kComplex128}};
  for (const auto& [n, t] : kNames)
    if (name == n) return t;
  throw std::runtime_error("oracle: unknown dtype '" + name + "'");
}

double parse_double(const nlohmann::json& v) {
  if (v.is_string()) {
    const auto s = v.get<std::string>();
    if (s == "inf") return INFINITY;
    if (s == "-inf") return -INFINITY;
    if (s == "nan") return NAN;
    throw std::runtime_error("oracle: bad number '" + s + "'");
  }
  return v.get<double>();
}

Scalar parse_scalar(const nlohmann::json& v) {
  if (v.is_boolean()) return Scalar(v.get<bool>());
  if (v.is_number_integer()) return Scalar(v.get<int64_t>());
  if (v.is_object())
    return Scalar(std::complex<double>(parse_double(v["re"]), parse_double(v["im"])));
  return Scalar(parse_double(v));
}

// ---- the case set --------------------------------------------------------------------------

const CaseSet& CaseSet::get() {
  static const CaseSet* set = [] {
    int seed = 1234;
    if (const char* env = std::getenv("TESSERA_ORACLE_SEED")) seed = std::atoi(env);
    const std::string scripts = read_text(fs::path(TS_ORACLE_DIR) / "make_cases.py") +
                                read_text(fs::path(TS_ORACLE_DIR) / "oracle_suites.py");
    const std::string key = fmt::format("{:016x}-{}", fnv1a(scripts), seed);
    return new CaseSet(ensure_generated(cache_root(), key, seed));
  }();
  return *set;
}

CaseSet::CaseSet(const std::string& dir) : dir_(dir) {
  const auto index = nlohmann::json::parse(read_text(fs::path(dir) / "index.json"));
  if (index.at("version").get<int>() != 1)
    throw std::runtime_error("oracle: index.json has an unknown version");
  for (const auto& s : index.at("skipped")) skipped_.push_back(s.get<std::string>());
  {
    const fs::path blob_path = fs::path(dir) / index.at("blob").get<std::string>();
    std::ifstream f(blob_path, std::ios::binary);
    blob_.resize(fs::file_size(blob_path));
    f.read(reinterpret_cast<char*>(blob_.data()), static_cast<std::streamsize>(blob_.size()));
    if (!f) throw std::runtime_error("oracle: cannot read " + blob_path.string());
  }
  for (const auto& c : index.at("cases")) {
    Case k;
    k.id = c.at("id");
    k.family = c.at("family");
    k.op = c.at("op");
    k.oracle = c.at("oracle");
    k.args = c.at("args");
    if (!c.at("error").is_null()) k.error = c.at("error").get<std::string>();
    for (const auto& i : c.at("inputs")) {
      InputSpec s;
      s.dtype = parse_dtype(i.at("dtype"));
      s.base_shape = to_dims(i.at("base_shape"));
      s.offset = i.at("offset");
      s.recipe = i.at("recipe");
      s.shape = to_dims(i.at("shape"));
      k.inputs.push_back(std::move(s));
    }
    for (const auto& o : c.at("outputs")) {
      OutputSpec s;
      s.dtype = parse_dtype(o.at("dtype"));
      s.store = parse_dtype(o.at("store"));
      s.shape = to_dims(o.at("shape"));
      s.offset = o.at("offset");
      const std::string cmp = o.at("cmp");
      s.cmp = cmp == "exact" ? Cmp::kExact : cmp == "reduce" ? Cmp::kReduce : Cmp::kClose;
      if (o.contains("scale_offset")) s.scale_offset = o.at("scale_offset").get<int64_t>();
      if (o.contains("alt_offset")) s.alt_offset = o.at("alt_offset").get<int64_t>();
      k.outputs.push_back(std::move(s));
    }
    cases_.push_back(std::move(k));
  }
}

Tensor CaseSet::make_input(const InputSpec& spec) const {
  Tensor t = empty(spec.base_shape, spec.dtype);
  const size_t nbytes = static_cast<size_t>(numel_of(spec.base_shape) * storage_size(spec.dtype));
  if (spec.offset + nbytes > blob_.size()) throw std::runtime_error("oracle: input past the blob");
  if (nbytes) std::memcpy(t.data_ptr(), blob_.data() + spec.offset, nbytes);
  for (const auto& step : spec.recipe) {
    const std::string op = step.at("op");
    if (op == "transpose") {
      t = t.transpose(step.at("dim0"), step.at("dim1"));
    } else if (op == "permute") {
      t = t.permute(to_dims(step.at("dims")));
    } else if (op == "expand") {
      t = t.expand(to_dims(step.at("size")));
    } else if (op == "slice") {
      auto opt = [&](const char* k) -> std::optional<int64_t> {
        if (step.at(k).is_null()) return std::nullopt;
        return step.at(k).get<int64_t>();
      };
      t = t.slice(step.at("dim"), opt("start"), opt("end"), step.at("step"));
    } else {
      throw std::runtime_error("oracle: unknown recipe step " + op);
    }
  }
  return t;
}

std::vector<std::complex<double>> CaseSet::expected(const OutputSpec& spec) const {
  const int64_t n = numel_of(spec.shape), es = storage_size(spec.store);
  if (spec.offset + n * es > static_cast<int64_t>(blob_.size()))
    throw std::runtime_error("oracle: output past the blob");
  std::vector<std::complex<double>> out(n);
  for (int64_t i = 0; i < n; ++i)
    out[i] = load_element(blob_.data() + spec.offset + i * es, spec.store);
  return out;
}

std::vector<std::complex<double>> CaseSet::expected_alt(const OutputSpec& spec) const {
  OutputSpec alt = spec;
  alt.offset = *spec.alt_offset;
  return expected(alt);
}

std::vector<double> CaseSet::scale(const OutputSpec& spec) const {
  std::vector<double> out;
  if (!spec.scale_offset) return out;
  const int64_t n = numel_of(spec.shape);
  out.resize(n);
  for (int64_t i = 0; i < n; ++i)
    out[i] = load_element(blob_.data() + *spec.scale_offset + i * 4, kFloat32).real();
  return out;
}

// ---- reading and comparing -----------------------------------------------------------------

std::vector<std::complex<double>> read_elements(const Tensor& t) {
  const int64_t n = t.numel(), nd = t.dim(), es = storage_size(t.dtype());
  std::vector<std::complex<double>> out(n);
  if (n == 0) return out;
  const auto* base = static_cast<const uint8_t*>(t.data_ptr());
  std::vector<int64_t> idx(nd, 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t off = 0;
    for (int64_t d = 0; d < nd; ++d) off += idx[d] * t.stride(d);
    out[i] = load_element(base + off * es, t.dtype());
    for (int64_t d = nd - 1; d >= 0; --d) {
      if (++idx[d] < t.size(d)) break;
      idx[d] = 0;
    }
  }
  return out;
}

Tolerance tolerance_for(ScalarType t) {
  // rtol/atol: torch.testing.assert_close's defaults; rtol_acc: accumulation in float32
  // (float16/bfloat16/float32) or float64, relative to the sum of magnitudes.
  switch (t) {
    case ScalarType::Float16:
      return {1e-3, 1e-5, 1e-5};
    case ScalarType::BFloat16:
      return {1.6e-2, 1e-5, 1e-5};
    case ScalarType::Float32:
    case ScalarType::Complex64:
      return {1.3e-6, 1e-5, 1e-5};
    case ScalarType::Float64:
    case ScalarType::Complex128:
      return {1e-7, 1e-7, 1e-12};
    default:
      return {0, 0, 0};
  }
}

namespace {

// Compares values (want: expected, have: Tessera's) under spec's mode; "" when they match.
std::string compare_values(const CaseSet& set, const OutputSpec& spec, const Tensor& got,
                           const std::vector<std::complex<double>>& want,
                           const std::vector<std::complex<double>>& have) {
  const auto scale = set.scale(spec);
  const Tolerance tol = tolerance_for(spec.dtype);
  const bool integral = !is_floating_point(spec.dtype) && !is_complex(spec.dtype);
  std::vector<int64_t> bad;
  int64_t worst = -1;
  double worst_excess = -1, max_abs = 0, max_rel = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const auto w = want[i], h = have[i];
    bool ok;
    double excess = 0;
    if (is_nan(w) || is_nan(h)) {
      ok = is_nan(w) == is_nan(h);
      excess = ok ? 0 : INFINITY;
    } else if (spec.cmp == Cmp::kExact || integral) {
      ok = w == h;
      excess = ok ? 0 : std::abs(w - h);
      if (std::isfinite(excess)) {
        max_abs = std::max(max_abs, excess);
        if (std::abs(w) > 0) max_rel = std::max(max_rel, excess / std::abs(w));
      }
    } else if (std::isinf(w.real()) || std::isinf(w.imag()) || std::isinf(h.real()) ||
               std::isinf(h.imag())) {
      ok = w == h;
      excess = ok ? 0 : INFINITY;
    } else {
      const double err = std::abs(w - h);
      double bound = tol.atol + tol.rtol * std::abs(w);
      if (spec.cmp == Cmp::kReduce)
        bound += tol.rtol_acc * (scale.empty() ? std::abs(w) : std::max(scale[i], std::abs(w)));
      ok = err <= bound;
      excess = err / bound;
      max_abs = std::max(max_abs, err);
      if (std::abs(w) > 0) max_rel = std::max(max_rel, err / std::abs(w));
    }
    if (!ok) {
      bad.push_back(static_cast<int64_t>(i));
      if (excess > worst_excess) {
        worst_excess = excess;
        worst = static_cast<int64_t>(i);
      }
    }
  }
  // int64 values above 2^53 collapse in double: compare the integers themselves too.
  if (bad.empty() && spec.dtype == kInt64 && spec.store == kInt64 && !want.empty()) {
    const auto* base = static_cast<const uint8_t*>(got.data_ptr());
    std::vector<int64_t> idx(got.dim(), 0);
    for (size_t i = 0; i < want.size(); ++i) {
      int64_t off = 0, w, h;
      for (int64_t d = 0; d < got.dim(); ++d) off += idx[d] * got.stride(d);
      std::memcpy(&h, base + off * 8, 8);
      std::memcpy(&w, set.blob_data() + spec.offset + i * 8, 8);
      if (w != h) {
        return fmt::format("int64 element {} differs: expected {}, got {}",
                           index_string(static_cast<int64_t>(i), spec.shape), w, h);
      }
      for (int64_t d = got.dim() - 1; d >= 0; --d) {
        if (++idx[d] < got.size(d)) break;
        idx[d] = 0;
      }
    }
  }
  if (bad.empty()) return "";
  return fmt::format(
      "{} of {} elements differ ({}); max abs err {:.3g}, max rel err {:.3g}; worst at {}: "
      "expected {}, got {}",
      bad.size(), want.size(),
      spec.cmp == Cmp::kExact || integral ? "exact"
      : spec.cmp == Cmp::kReduce          ? "reduce"
                                          : "close",
      max_abs, max_rel, index_string(worst, spec.shape), value_string(want[worst], spec.dtype),
      value_string(have[worst], spec.dtype));
}

}  // namespace

std::string compare_output(const CaseSet& set, const OutputSpec& spec, const Tensor& got) {
  if (!got.defined()) return "result is an undefined tensor";
  if (got.dtype() != spec.dtype)
    return fmt::format("dtype: expected {}, got {}", spec.dtype, got.dtype());
  if (!(got.sizes() == IntArrayRef(spec.shape)))
    return fmt::format("shape: expected [{}], got [{}]", fmt::join(spec.shape, ", "),
                       fmt::join(got.sizes(), ", "));
  const auto have = read_elements(got);
  std::string why = compare_values(set, spec, got, set.expected(spec), have);
  if (why.empty() || !spec.alt_offset) return why;
  const std::string alt = compare_values(set, spec, got, set.expected_alt(spec), have);
  if (alt.empty()) return "";
  return why + " | against PyTorch's own low-precision rounding: " + alt;
}

}  // namespace tessera::oracle
