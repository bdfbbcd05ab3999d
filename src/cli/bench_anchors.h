// GEMM anchors beside OpenBLAS for `tessera bench gemm`: BLIS and oneDNN, both Debian packages
// (libblis-dev, libdnnl-dev). Each reports why it is unavailable instead of being faked.
//
// BLIS is loaded with dlopen (RTLD_LOCAL | RTLD_DEEPBIND) and called through its typed API:
// libblis also exports the BLAS/CBLAS symbols, so linking it beside OpenBLAS would let one
// library's sgemm stand in for the other's. oneDNN is linked when CMake finds it (TS_HAVE_DNNL);
// its matmul runs with plain row-major weights or with weights reordered once into the layout
// its kernel prefers ("prepacked", oneDNN's recommended inference set-up).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "cli/bench_util.h"
#include "tessera/core/dtype.h"

namespace tessera::cli {

class BlisAnchor {
 public:
  // The process-wide BLIS, or null with the reason in *why.
  static BlisAnchor* get(std::string* why);
  void set_threads(int threads) const;
  // Which BLIS sub-configuration (kernel set) runs, for the bench notes.
  const std::string& note() const { return note_; }
  // Row-major C (m x n) = A (m x k) B (k x n), float32.
  void sgemm(int64_t m, int64_t n, int64_t k, const float* a, const float* b, float* c) const;

 private:
  using SgemmFn = void (*)(int, int, int64_t, int64_t, int64_t, float*, float*, int64_t, int64_t,
                           float*, int64_t, int64_t, float*, float*, int64_t, int64_t);
  using ThreadsFn = void (*)(int64_t);
  SgemmFn sgemm_ = nullptr;
  ThreadsFn set_threads_ = nullptr;
  std::string note_;
};

// One oneDNN matmul primitive, C (m x n, `out`) = A (m x k, `in`) B (k x n, `in`), row-major.
class DnnlMatmul {
 public:
  // False (with the reason) when Tessera was built without oneDNN.
  static bool available(std::string* why);
  // oneDNN's OpenMP thread count for the primitives that run next.
  static void set_threads(int threads);
  // `b` is read now when `prepacked` (reordered into oneDNN's layout), else at every run().
  // batch > 1: `batch` contiguous row-major problems one after another in a, b and c.
  // b_transposed (batch 1): b holds B^T, n x k row-major (a Linear weight, as a GEMV reads it).
  DnnlMatmul(int64_t m, int64_t k, int64_t n, ScalarType in, ScalarType out, bool prepacked,
             const void* b, int64_t batch = 1, bool b_transposed = false);
  ~DnnlMatmul();
  DnnlMatmul(const DnnlMatmul&) = delete;
  DnnlMatmul& operator=(const DnnlMatmul&) = delete;
  void run(const void* a, void* c);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Contenders for take_turns (bench_util.h) that run an anchor library at t threads and restore
// its thread count after the turn (OpenBLAS to 1: Tessera's other OpenBLAS calls assume one
// thread). After a multi-threaded turn a library's workers keep spinning (OpenMP's for
// milliseconds, OpenBLAS's for 0.1 s or more) and would take a core from the next contender.
// OpenBLAS's workers are ended after its turn (stop_openblas_pool; the next turn's warm-up
// starts them again), and an anchor script ends its process's the same way after each case
// (bench/anchor_common.py); OpenMP's are waited out (settle_s), as OpenBLAS's are where it
// cannot end them. Waiting 0.2 s did not suffice for OpenBLAS's (docs/gemm.md, "Tests and
// benchmarks").
Contender openblas_contender(int t, std::function<void()> run);
Contender blis_contender(const BlisAnchor* blis, int t, std::function<void()> run);
Contender dnnl_contender(std::string impl, int t, std::function<void()> run);
Contender script_contender(AnchorServer* script, int t);

}  // namespace tessera::cli
