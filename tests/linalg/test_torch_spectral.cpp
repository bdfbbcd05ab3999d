// eigh / eigvalsh / svd / svdvals / pinv / matrix_rank / matrix_norm / cond against PyTorch 1.13
// (tests/linalg/linalg_reference.py) on the same inputs in the same dtype. Vectors are compared
// gauge-invariantly: eigenvalues and singular values against PyTorch's, the vectors through
// the residuals in test_spectral_ops.cpp; everything else (pinv, rank, norms, cond) directly.
// Where PyTorch raises, Tessera must raise too.
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "spectral_test_util.h"
#include "torch_reference.h"

namespace tessera::linalg_test {
namespace {

namespace la = tessera::linalg;
using testing::Json;

struct Case {
  std::string id, op, input;
  Json kwargs;
  std::function<Tensor()> run;  // Tessera's value to compare
  int output = 0;               // which of PyTorch's outputs it is
  double tol_scale = 1;         // in units of 300 n eps of the dtype, relative to the value
};

TEST(LinalgVsTorchSpectral, ValuesAndDerivedFunctions) {
  manual_seed(61);
  Json spec{{"tensors", Json::object()}, {"calls", Json::array()}};
  std::vector<Case> cases;
  std::map<std::string, int64_t> order;
  const double inf = std::numeric_limits<double>::infinity();
  for (ScalarType dt : {kFloat32, kFloat64, kComplex64, kComplex128}) {
    for (auto [m, n] : std::vector<std::pair<int64_t, int64_t>>{
             {1, 1}, {5, 5}, {12, 7}, {7, 12}, {40, 40}, {70, 70}}) {
      const std::string p = fmt::format("{}/{}x{}/", dt, m, n);
      Tensor A = empty({2, m, n}, dt);
      A[0].copy_(spectral_matrix(m, n, dt, SKind::kRandom));
      A[1].copy_(spectral_matrix(m, n, dt, SKind::kRankDeficient));
      spec["tensors"][p + "A"] = testing::tensor_to_json(A);
      const int64_t big = std::max(m, n);
      auto add = [&](std::string name, std::string op, Json kw, std::function<Tensor()> fn,
                     int output = 0, double scale = 1, std::string input = "A") {
        cases.push_back({p + name, op, p + input, kw, fn, output, scale});
        order[p + name] = big;
      };
      add("svdvals", "svdvals", {}, [=] { return la::svdvals(A); });
      add(
          "svd_S", "svd", {{"full_matrices", false}},
          [=] { return std::get<1>(la::svd(A, false)); }, 1);
      // pinv of a rank-deficient matrix depends on the cut-off; of a full-rank one it does not.
      add(
          "pinv", "pinv", {}, [=] { return la::pinv(A); }, 0, 10);
      add("matrix_rank", "matrix_rank", {}, [=] { return la::matrix_rank(A); });
      add("matrix_rank_atol", "matrix_rank", {{"atol", 1.0}, {"rtol", 0.0}},
          [=] { return la::matrix_rank(A, 1.0, 0.0); });
      for (const char* ord : {"fro", "nuc"})
        add(fmt::format("matrix_norm_{}", ord), "matrix_norm", {{"ord", ord}},
            [=] { return la::matrix_norm(A, ord); });
      for (double ord : {2.0, -2.0, 1.0, -1.0, inf, -inf}) {
        const Json o = std::isinf(ord) ? Json(ord > 0 ? "inf" : "-inf") : Json(ord);
        add(fmt::format("matrix_norm_{}", ord), "matrix_norm", {{"ord", o}},
            [=] { return la::matrix_norm(A, ord); });
      }
      add(
          "cond", "cond", {}, [=] { return la::cond(A.narrow(0, 0, 1)); }, 0, 1e3, "Acond");
      spec["tensors"][p + "Acond"] = testing::tensor_to_json(A.narrow(0, 0, 1));
      if (m == n) {
        Tensor H = empty({2, n, n}, dt);
        H[0].copy_(spectral_matrix(n, n, dt, SKind::kRandom, true));
        H[1].copy_(spectral_matrix(n, n, dt, SKind::kIllConditioned, true));
        spec["tensors"][p + "H"] = testing::tensor_to_json(H);
        add(
            "eigvalsh", "eigvalsh", {}, [=] { return la::eigvalsh(H); }, 0, 1, "H");
        add(
            "eigvalsh_U", "eigvalsh", {{"UPLO", "U"}}, [=] { return la::eigvalsh(H, "U"); }, 0, 1,
            "H");
        add(
            "eigh_w", "eigh", {}, [=] { return std::get<0>(la::eigh(H)); }, 0, 1, "H");
        add(
            "pinv_hermitian", "pinv", {{"hermitian", true}},
            [=] { return la::pinv(H.narrow(0, 0, 1), {}, {}, true); }, 0, 10, "H0");
        spec["tensors"][p + "H0"] = testing::tensor_to_json(H.narrow(0, 0, 1));
        add(
            "matrix_rank_hermitian", "matrix_rank", {{"hermitian", true}},
            [=] { return la::matrix_rank(H, {}, {}, true); }, 0, 1, "H");
        for (const char* pp : {"fro", "nuc"})
          add(
              fmt::format("cond_{}", pp), "cond", {{"p", pp}},
              [=] { return la::cond(H.narrow(0, 0, 1), pp); }, 0, 1e3, "H0");
        for (double pp : {1.0, -inf})
          add(
              fmt::format("cond_{}", pp), "cond", {{"p", std::isinf(pp) ? Json("-inf") : Json(pp)}},
              [=] { return la::cond(H.narrow(0, 0, 1), pp); }, 0, 1e3, "H0");
      }
    }
    // Bad input that PyTorch rejects.
    const std::string p = fmt::format("{}/bad/", dt);
    Tensor nan = eye(3, 3, dt).expand({2, 3, 3}).contiguous();
    nan[1].select(0, 1).select(0, 1).fill_(std::numeric_limits<double>::quiet_NaN());
    spec["tensors"][p + "nan"] = testing::tensor_to_json(nan);
    spec["tensors"][p + "rect"] = testing::tensor_to_json(ones({2, 3}, dt));
    spec["tensors"][p + "vec"] = testing::tensor_to_json(ones({3}, dt));
    auto bad = [&](std::string name, std::string op, std::string input, Json kw,
                   std::function<void()> fn) {
      cases.push_back({p + name, op, p + input, kw, [fn] {
                         fn();
                         return Tensor();
                       }});
    };
    bad("svd_nan", "svd", "nan", {}, [=] { la::svd(nan); });
    bad("eigh_nan", "eigh", "nan", {}, [=] { la::eigh(nan); });
    bad("eigh_rect", "eigh", "rect", {}, [=] { la::eigh(ones({2, 3}, dt)); });
    bad("eigh_uplo", "eigh", "nan", {{"UPLO", "X"}}, [=] { la::eigh(nan, "X"); });
    bad("svd_vec", "svd", "vec", {}, [=] { la::svd(ones({3}, dt)); });
    bad("norm_ord", "matrix_norm", "rect", {{"ord", 3}}, [=] {
      la::matrix_norm(ones({2, 3}, dt), 3);
    });
    bad("cond_rect", "cond", "rect", {{"p", "fro"}}, [=] { la::cond(ones({2, 3}, dt), "fro"); });
  }
  for (const Case& c : cases)
    spec["calls"].push_back({{"id", c.id},
                             {"op", c.op},
                             {"inputs", {c.input}},
                             {"kwargs", c.kwargs.is_null() ? Json::object() : c.kwargs}});
  const Json ref = testing::run_reference_script(
      std::string(TS_ORACLE_DIR) + "/../linalg/linalg_reference.py", spec);
  ASSERT_FALSE(ref.is_null());
  int compared = 0, raised = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.id);
    const Json& r = ref.at(c.id);
    if (r.contains("error") || r.contains("nonfinite")) {
      // PyTorch raised, or (complex eigh of a NaN matrix) returned NaNs: Tessera raises.
      ++raised;
      EXPECT_THROW(c.run(), Error) << "PyTorch: " << r;
      continue;
    }
    const Tensor got = c.run();
    const Tensor want = testing::tensor_from_json(r["outputs"][c.output]);
    ASSERT_EQ(got.sizes(), want.sizes());
    if (!is_floating_point(got.dtype()) && !is_complex(got.dtype())) {
      EXPECT_TRUE(equal(got.to(kFloat64), want.to(kFloat64))) << got << "\nwant " << want;
      ++compared;
      continue;
    }
    const LMat g = to_lmat(got.to(kComplex128).reshape({-1, 1}));
    const LMat e = to_lmat(want.to(kComplex128).reshape({-1, 1}));
    const double tol = 300.0 * double(order[c.id]) * eps_of(got.dtype()) * c.tol_scale;
    EXPECT_LE(double(frob_diff(g, e)), tol * std::max(1.0, double(frob(e))))
        << "got " << got << "\nwant " << want;
    ++compared;
  }
  EXPECT_GT(compared, 200);
  EXPECT_GT(raised, 20);
}

}  // namespace
}  // namespace tessera::linalg_test
