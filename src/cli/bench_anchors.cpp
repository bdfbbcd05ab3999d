#include "cli/bench_anchors.h"

#include <cblas.h>
#include <dlfcn.h>

#include <cstdlib>

#include <fmt/format.h>

#if defined(TS_HAVE_DNNL)
#include <oneapi/dnnl/dnnl.hpp>
#endif

#include "tessera/core/error.h"

namespace tessera::cli {

BlisAnchor* BlisAnchor::get(std::string* why) {
  static BlisAnchor anchor;
  static std::string reason = [] {
    // BLIS 0.9 does not recognise CPUs newer than its release (Zen 4/5 among them) and then
    // runs its portable 'generic' kernels, 3-6x slower than its own AVX-512 ones: an anchor
    // that weak would flatter us. Unless the user chose, select the best sub-configuration
    // for this ISA through BLIS_ARCH_TYPE.
    if (!std::getenv("BLIS_ARCH_TYPE")) {
      if (__builtin_cpu_supports("avx512f")) {
        setenv("BLIS_ARCH_TYPE", "skx", 0);
      } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        setenv("BLIS_ARCH_TYPE", "haswell", 0);
      }
    }
    // Debian's BLIS (libblis4-openmp); DEEPBIND keeps its BLAS symbols from binding to ours.
    void* lib = dlopen("libblis.so.4", RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (!lib) return fmt::format("BLIS not installed (libblis-dev): {}", dlerror());
    anchor.sgemm_ = reinterpret_cast<SgemmFn>(dlsym(lib, "bli_sgemm"));
    anchor.set_threads_ = reinterpret_cast<ThreadsFn>(dlsym(lib, "bli_thread_set_num_threads"));
    using InitFn = void (*)();
    const auto init = reinterpret_cast<InitFn>(dlsym(lib, "bli_init"));
    if (!init) return std::string("libblis.so.4 lacks bli_init");
    init();  // the arch queries below read BLIS's global kernel structure
    using ArchIdFn = int (*)();
    using ArchNameFn = const char* (*)(int);
    const auto arch_id = reinterpret_cast<ArchIdFn>(dlsym(lib, "bli_arch_query_id"));
    const auto arch_name = reinterpret_cast<ArchNameFn>(dlsym(lib, "bli_arch_string"));
    if (!anchor.sgemm_ || !anchor.set_threads_ || !arch_id || !arch_name)
      return std::string("libblis.so.4 lacks the typed sgemm or thread/arch queries");
    const char* chosen = std::getenv("BLIS_ARCH_TYPE");
    anchor.note_ = fmt::format("blis ran its '{}' kernels (BLIS_ARCH_TYPE={})",
                               arch_name(arch_id()), chosen ? chosen : "unset");
    return std::string();
  }();
  if (!reason.empty()) {
    if (why) *why = reason;
    return nullptr;
  }
  return &anchor;
}

void BlisAnchor::set_threads(int threads) const {
  set_threads_(threads);
}

void BlisAnchor::sgemm(int64_t m, int64_t n, int64_t k, const float* a, const float* b,
                       float* c) const {
  float one = 1.0f, zero = 0.0f;
  constexpr int kNoTranspose = 0;  // BLIS_NO_TRANSPOSE
  sgemm_(kNoTranspose, kNoTranspose, m, n, k, &one, const_cast<float*>(a), k, 1,
         const_cast<float*>(b), n, 1, &zero, c, n, 1);
}

#if defined(TS_HAVE_DNNL)

namespace {

dnnl::memory::data_type dnnl_type(ScalarType t) {
  switch (t) {
    case ScalarType::Float32:
      return dnnl::memory::data_type::f32;
    case ScalarType::BFloat16:
      return dnnl::memory::data_type::bf16;
    default:
      TS_THROW(TypeError, "bench gemm: oneDNN anchor: expected float32 or bfloat16, got {}", t);
  }
}

}  // namespace

struct DnnlMatmul::Impl {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  dnnl::memory::desc a_md, b_md, c_md;
  dnnl::matmul prim;
  dnnl::memory b_mem;  // oneDNN's layout when prepacked, else a wrapper of the caller's B
};

bool DnnlMatmul::available(std::string*) {
  return true;
}

// oneDNN's runtime here is OpenMP: libgomp, loaded as libdnnl's dependency.
void DnnlMatmul::set_threads(int threads) {
  using SetFn = void (*)(int);
  static const auto set = reinterpret_cast<SetFn>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  TS_CHECK(set, RuntimeError, "bench gemm: oneDNN anchor: omp_set_num_threads not found");
  set(threads);
}

DnnlMatmul::DnnlMatmul(int64_t m, int64_t k, int64_t n, ScalarType in, ScalarType out,
                       bool prepacked, const void* b, int64_t batch, bool b_transposed)
    : impl_(std::make_unique<Impl>()) {
  using tag = dnnl::memory::format_tag;
  using dims = dnnl::memory::dims;
  Impl& s = *impl_;
  const bool batched = batch > 1;
  TS_CHECK(!(batched && b_transposed), ValueError,
           "bench: oneDNN anchor: a transposed B takes batch 1, but got batch {}", batch);
  auto shape = [&](int64_t r, int64_t c) { return batched ? dims{batch, r, c} : dims{r, c}; };
  const tag plain = batched ? tag::abc : tag::ab;
  s.a_md = dnnl::memory::desc(shape(m, k), dnnl_type(in), plain);
  const dnnl::memory::desc b_plain(shape(k, n), dnnl_type(in), b_transposed ? tag::ba : plain);
  s.b_md = prepacked ? dnnl::memory::desc(shape(k, n), dnnl_type(in), tag::any) : b_plain;
  s.c_md = dnnl::memory::desc(shape(m, n), dnnl_type(out), plain);
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(s.a_md, s.b_md, s.c_md), s.engine);
  s.prim = dnnl::matmul(pd);
  dnnl::memory user_b(b_plain, s.engine, const_cast<void*>(b));
  if (prepacked) {
    s.b_mem = dnnl::memory(pd.weights_desc(), s.engine);
    dnnl::reorder(user_b, s.b_mem).execute(s.stream, user_b, s.b_mem);
    s.stream.wait();
  } else {
    s.b_mem = user_b;
  }
}

DnnlMatmul::~DnnlMatmul() = default;

void DnnlMatmul::run(const void* a, void* c) {
  Impl& s = *impl_;
  dnnl::memory a_mem(s.a_md, s.engine, const_cast<void*>(a));
  dnnl::memory c_mem(s.c_md, s.engine, c);
  s.prim.execute(s.stream,
                 {{DNNL_ARG_SRC, a_mem}, {DNNL_ARG_WEIGHTS, s.b_mem}, {DNNL_ARG_DST, c_mem}});
  s.stream.wait();
}

#else

struct DnnlMatmul::Impl {};

bool DnnlMatmul::available(std::string* why) {
  if (why) *why = "oneDNN not found when Tessera was configured (libdnnl-dev)";
  return false;
}

void DnnlMatmul::set_threads(int) {}

DnnlMatmul::DnnlMatmul(int64_t, int64_t, int64_t, ScalarType, ScalarType, bool, const void*,
                       int64_t, bool) {
  TS_THROW(RuntimeError, "bench gemm: Tessera was built without oneDNN");
}

DnnlMatmul::~DnnlMatmul() = default;

void DnnlMatmul::run(const void*, void*) {
  TS_THROW(RuntimeError, "bench gemm: Tessera was built without oneDNN");
}

#endif

namespace {
constexpr double kOpenBlasSpin = 0.2, kOmpSpin = 0.05;
}  // namespace

Contender openblas_contender(int t, std::function<void()> run) {
  // Whether this OpenBLAS's pool can be stopped, learnt once by stopping it (it is idle here).
  static const bool can_stop = stop_openblas_pool();
  const bool stops = t > 1 && can_stop;
  return {.impl = "openblas",
          .run = std::move(run),
          .enter = [t] { openblas_set_num_threads(t); },
          .leave =
              [stops] {
                openblas_set_num_threads(1);
                if (stops) stop_openblas_pool();
              },
          .settle_s = t > 1 && !stops ? kOpenBlasSpin : 0};
}

Contender blis_contender(const BlisAnchor* blis, int t, std::function<void()> run) {
  return {.impl = "blis",
          .run = std::move(run),
          .enter = [blis, t] { blis->set_threads(t); },
          .leave = [blis] { blis->set_threads(1); },
          .settle_s = t > 1 ? kOmpSpin : 0};
}

Contender dnnl_contender(std::string impl, int t, std::function<void()> run) {
  return {.impl = std::move(impl),
          .run = std::move(run),
          .enter = [t] { DnnlMatmul::set_threads(t); },
          .settle_s = t > 1 ? kOmpSpin : 0};
}

Contender script_contender(AnchorServer* script, int t) {
  return {.script = script, .settle_s = t > 1 ? kOmpSpin : 0};
}

}  // namespace tessera::cli
