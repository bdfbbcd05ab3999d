// tessera::linalg against PyTorch 1.13 (tests/linalg/linalg_reference.py): the same inputs, in
// the same dtype, through both. Values are compared by relative Frobenius error (a tolerance
// of 300 n eps of the dtype on well-conditioned inputs); LAPACK's pivots must agree exactly in
// double precision; where PyTorch raises, Tessera must raise too.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "linalg_test_util.h"
#include "torch_reference.h"

namespace tessera::linalg_test {
namespace {

namespace la = tessera::linalg;
using testing::Json;
using Outputs = std::vector<Tensor>;

struct Call {
  std::string id, op;
  std::vector<std::string> inputs;
  Json kwargs;
  std::function<Outputs()> run;
  int64_t n = 1;           // matrix order, for the tolerance
  bool exact_ints = true;  // integer outputs (pivots, info) must match exactly
};

class LinalgVsTorch : public ::testing::Test {
 protected:
  void put(const std::string& name, const Tensor& t) {
    tensors_[name] = t;
    spec_["tensors"][name] = testing::tensor_to_json(t);
  }
  void add(Call c) { calls_.push_back(std::move(c)); }

  // Runs every call through PyTorch and Tessera and compares.
  void check_all() {
    for (const Call& c : calls_)
      spec_["calls"].push_back({{"id", c.id},
                                {"op", c.op},
                                {"inputs", c.inputs},
                                {"kwargs", c.kwargs.is_null() ? Json::object() : c.kwargs}});
    const Json ref = testing::run_reference_script(
        std::string(TS_ORACLE_DIR) + "/../linalg/linalg_reference.py", spec_);
    ASSERT_FALSE(ref.is_null());
    int compared = 0, raised = 0;
    for (const Call& c : calls_) {
      SCOPED_TRACE(c.id);
      const Json& r = ref.at(c.id);
      if (r.contains("error")) {
        ++raised;
        try {
          c.run();
          ADD_FAILURE() << "PyTorch raised (" << r["error"] << ") but Tessera did not";
        } catch (const Error&) {
        }
        continue;
      }
      Outputs got;
      try {
        got = c.run();
      } catch (const Error& e) {
        ADD_FAILURE() << "Tessera raised: " << e.what();
        continue;
      }
      const auto& want = r["outputs"];
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        const Tensor w = testing::tensor_from_json(want[i]);
        ASSERT_EQ(got[i].sizes(), w.sizes()) << "output " << i;
        if (!is_floating_point(got[i].dtype()) && !is_complex(got[i].dtype())) {
          if (c.exact_ints) {
            EXPECT_TRUE(equal(got[i].to(kFloat64), w))
                << "output " << i << "\ngot " << got[i] << "\nwant " << w;
          }
          continue;
        }
        const LMat g = to_lmat(got[i].to(kComplex128).reshape({-1, 1}));
        const LMat e = to_lmat(w.to(kComplex128).reshape({-1, 1}));
        const double tol = 300.0 * double(c.n) * eps_of(got[i].dtype());
        EXPECT_LE(double(frob_diff(g, e)), tol * std::max(1.0, double(frob(e))))
            << "output " << i << "\ngot " << got[i] << "\nwant " << w;
        ++compared;
      }
    }
    EXPECT_GT(compared, 100);
    EXPECT_GT(raised, 5);
  }

  std::map<std::string, Tensor> tensors_;
  std::vector<Call> calls_;
  Json spec_ = Json{{"tensors", Json::object()}, {"calls", Json::array()}};
};

TEST_F(LinalgVsTorch, EveryOpEveryDtype) {
  manual_seed(31);
  for (ScalarType dt : {kFloat32, kFloat64, kComplex64, kComplex128}) {
    const bool dbl = to_real_type(dt) == kFloat64;
    for (int64_t n : {1, 3, 17, 64, 130}) {
      const std::string p = fmt::format("{}/{}/", dt, n);
      const Tensor A = make_matrix({2}, n, dt, Kind::kRandom);
      // |det| of a Gaussian matrix grows like sqrt(n!): scaled by 1/sqrt(n) it stays finite.
      const Tensor As = A.mul(1.0 / std::sqrt(double(n)));
      const Tensor H = make_matrix({2}, n, dt, Kind::kRandom, true);
      const Tensor B = gaussian({2, n, 3}, dt), Br = gaussian({2, 3, n}, dt),
                   b = gaussian({2, n}, dt);
      Tensor T = gaussian({2, n, n}, dt).mul(1.0 / std::sqrt(double(n)));
      T.diagonal(0, -2, -1).add_(2);
      const Tensor Tu = T.triu(), Tl = T.tril();
      const Tensor L = la::cholesky(H), U = la::cholesky(H, true);
      auto [LU, piv] = la::lu_factor(A);
      for (auto& [k, v] : std::map<std::string, Tensor>{{"A", A},
                                                        {"As", As},
                                                        {"H", H},
                                                        {"B", B},
                                                        {"Br", Br},
                                                        {"b", b},
                                                        {"Tu", Tu},
                                                        {"Tl", Tl},
                                                        {"L", L},
                                                        {"U", U},
                                                        {"LU", LU},
                                                        {"piv", piv}})
        put(p + k, v);
      auto in = [&](std::initializer_list<const char*> names) {
        std::vector<std::string> v;
        for (const char* s : names) v.push_back(p + s);
        return v;
      };
      auto one = [](Tensor t) { return Outputs{t}; };
      add({p + "cholesky", "cholesky", in({"H"}), {}, [=] { return one(la::cholesky(H)); }, n});
      add({p + "cholesky_upper",
           "cholesky",
           in({"H"}),
           {{"upper", true}},
           [=] { return one(la::cholesky(H, true)); },
           n});
      add({p + "cholesky_ex",
           "cholesky_ex",
           in({"H"}),
           {},
           [=] {
             auto [l, info] = la::cholesky_ex(H);
             return Outputs{l, info};
           },
           n});
      add({p + "cholesky_solve",
           "cholesky_solve",
           in({"B", "L"}),
           {},
           [=] { return one(la::cholesky_solve(B, L)); },
           n});
      add({p + "cholesky_solve_upper",
           "cholesky_solve",
           in({"B", "U"}),
           {{"upper", true}},
           [=] { return one(la::cholesky_solve(B, U, true)); },
           n});
      add({p + "cholesky_inverse",
           "cholesky_inverse",
           in({"L"}),
           {},
           [=] { return one(la::cholesky_inverse(L)); },
           n});
      add({p + "cholesky_inverse_upper",
           "cholesky_inverse",
           in({"U"}),
           {{"upper", true}},
           [=] { return one(la::cholesky_inverse(U, true)); },
           n});
      add({p + "trsm_upper_left",
           "solve_triangular",
           in({"Tu", "B"}),
           {{"upper", true}},
           [=] { return one(la::solve_triangular(Tu, B, true)); },
           n});
      add({p + "trsm_lower_right_unit",
           "solve_triangular",
           in({"Tl", "Br"}),
           {{"upper", false}, {"left", false}, {"unitriangular", true}},
           [=] { return one(la::solve_triangular(Tl, Br, false, false, true)); },
           n});
      add({p + "lu_factor",
           "lu_factor",
           in({"A"}),
           {},
           [=] {
             auto [lu, pv] = la::lu_factor(A);
             return Outputs{lu, pv};
           },
           n,
           dbl});
      add({p + "lu_factor_ex",
           "lu_factor_ex",
           in({"A"}),
           {},
           [=] {
             auto [lu, pv, info] = la::lu_factor_ex(A);
             return Outputs{lu, pv, info};
           },
           n,
           dbl});
      if (dbl) {
        add({p + "lu",
             "lu",
             in({"A"}),
             {},
             [=] {
               auto [P, Lf, Uf] = la::lu(A);
               return Outputs{P, Lf, Uf};
             },
             n});
      }
      add({p + "lu_unpack",
           "lu_unpack",
           in({"LU", "piv"}),
           {},
           [=] {
             auto [P, Lf, Uf] = la::lu_unpack(LU, piv);
             return Outputs{P, Lf, Uf};
           },
           n});
      for (int v = 0; v < 4; ++v) {
        const bool left = v & 1, adj = v & 2;
        add({p + fmt::format("lu_solve_left{}_adjoint{}", left, adj),
             "lu_solve",
             in({"LU", "piv", left ? "B" : "Br"}),
             {{"left", left}, {"adjoint", adj}},
             [=] { return one(la::lu_solve(LU, piv, left ? B : Br, left, adj)); },
             n});
      }
      add({p + "solve", "solve", in({"A", "B"}), {}, [=] { return one(la::solve(A, B)); }, n});
      add({p + "solve_vector",
           "solve",
           in({"A", "b"}),
           {},
           [=] { return one(la::solve(A, b)); },
           n});
      add({p + "solve_right",
           "solve",
           in({"A", "Br"}),
           {{"left", false}},
           [=] { return one(la::solve(A, Br, false)); },
           n});
      add({p + "inv", "inv", in({"A"}), {}, [=] { return one(la::inv(A)); }, n});
      add({p + "det", "det", in({"As"}), {}, [=] { return one(la::det(As)); }, n});
      add({p + "slogdet",
           "slogdet",
           in({"As"}),
           {},
           [=] {
             auto [s, l] = la::slogdet(As);
             return Outputs{s, l};
           },
           n});
    }
    // Inputs PyTorch rejects.
    const std::string p = fmt::format("{}/bad/", dt);
    Tensor notpd = eye(3, 3, dt).expand({2, 3, 3}).contiguous();
    notpd[1].select(0, 2).select(0, 2).fill_(-1);
    Tensor sing = eye(3, 3, dt).expand({2, 3, 3}).contiguous();
    sing[1].select(1, 1).zero_();
    const Tensor rect = ones({2, 3}, dt), rhs = ones({2, 3, 1}, dt);
    for (auto& [k, v] : std::map<std::string, Tensor>{{"notpd", notpd},
                                                      {"sing", sing},
                                                      {"rect", rect},
                                                      {"rhs", rhs},
                                                      {"rhs_wrong", ones({2, 4, 1}, dt)}})
      put(p + k, v);
    auto bad = [&](const std::string& id, const std::string& op, std::vector<std::string> names,
                   std::function<void()> fn) {
      for (auto& s : names) s = p + s;
      add({p + id, op, names, {}, [fn] {
             fn();
             return Outputs{};
           }});
    };
    bad("cholesky_notpd", "cholesky", {"notpd"}, [=] { la::cholesky(notpd); });
    bad("cholesky_rect", "cholesky", {"rect"}, [=] { la::cholesky(rect); });
    bad("solve_singular", "solve", {"sing", "rhs"}, [=] { la::solve(sing, rhs); });
    bad("solve_shape", "solve", {"sing", "rhs_wrong"}, [=] {
      la::solve(sing, ones({2, 4, 1}, dt));
    });
    bad("inv_singular", "inv", {"sing"}, [=] { la::inv(sing); });
    bad("lu_factor_singular", "lu_factor", {"sing"}, [=] { la::lu_factor(sing); });
    bad("det_rect", "det", {"rect"}, [=] { la::det(rect); });
    bad("cholesky_inverse_singular", "cholesky_inverse", {"sing"},
        [=] { la::cholesky_inverse(sing); });
  }
  check_all();
}

// ---- QR and least squares
// ------------------------------------------------------------------------

// gelsy is compared on full-rank inputs only: PyTorch 1.13 hands LAPACK's gelsy an
// uninitialized jpvt, whose nonzero entries pin columns to the front, so its rank (and
// solution) for rank-deficient input or an explicit rcond changes from call to call
// (pytorch/pytorch#71222, #92537). test_qr.cpp compares those cases with LAPACK directly.
TEST_F(LinalgVsTorch, QrHouseholderProductAndLstsq) {
  manual_seed(32);
  for (ScalarType dt : {kFloat32, kFloat64, kComplex64, kComplex128}) {
    for (auto [m, n] : {std::pair<int64_t, int64_t>{1, 1},
                        {6, 4},
                        {4, 6},
                        {17, 17},
                        {70, 40},
                        {40, 70},
                        {130, 130}}) {
      const std::string p = fmt::format("{}/{}x{}/", dt, m, n);
      const Tensor A = gaussian({2, m, n}, dt), B = gaussian({2, m, 3}, dt),
                   b = gaussian({2, m}, dt);
      auto [a, tau] = la::geqrf(A);
      for (auto& [key, v] :
           std::map<std::string, Tensor>{{"A", A}, {"B", B}, {"b", b}, {"a", a}, {"tau", tau}})
        put(p + key, v);
      auto in = [&](std::initializer_list<const char*> names) {
        std::vector<std::string> v;
        for (const char* s : names) v.push_back(p + s);
        return v;
      };
      auto pair = [](std::tuple<Tensor, Tensor> t) {
        return Outputs{std::get<0>(t), std::get<1>(t)};
      };
      auto four = [](std::tuple<Tensor, Tensor, Tensor, Tensor> t) {
        return Outputs{std::get<0>(t), std::get<1>(t), std::get<2>(t), std::get<3>(t)};
      };
      for (const char* mode : {"reduced", "complete", "r"})
        add({p + "qr_" + mode,
             "qr",
             in({"A"}),
             {{"mode", mode}},
             [=] { return pair(la::qr(A, mode)); },
             std::max(m, n)});
      add({p + "geqrf",
           "geqrf",
           in({"A"}),
           {},
           [=] { return pair(la::geqrf(A)); },
           std::max(m, n)});
      if (m >= n)
        add({p + "householder_product",
             "householder_product",
             in({"a", "tau"}),
             {},
             [=] { return Outputs{la::householder_product(a, tau)}; },
             m});
      for (const char* drv : {"gels", "gelsy", "gelsd", "gelss"}) {
        add({p + "lstsq_" + drv,
             "lstsq",
             in({"A", "B"}),
             {{"driver", drv}},
             [=] { return four(la::lstsq(A, B, std::nullopt, drv)); },
             std::max(m, n)});
        add({p + "lstsq_vector_" + drv,
             "lstsq",
             in({"A", "b"}),
             {{"driver", drv}},
             [=] { return four(la::lstsq(A, b, std::nullopt, drv)); },
             std::max(m, n)});
      }
      add({p + "lstsq_default",
           "lstsq",
           in({"A", "B"}),
           {},
           [=] { return four(la::lstsq(A, B)); },
           std::max(m, n)});
    }
    // Inputs PyTorch rejects.
    const std::string p = fmt::format("{}/qr_bad/", dt);
    Tensor sing = zeros({5, 3}, dt);
    sing.select(1, 0).fill_(1);
    const Tensor vec = ones({3}, dt), mat = ones({5, 3}, dt), rhs = ones({5, 2}, dt);
    for (auto& [key, v] : std::map<std::string, Tensor>{{"sing", sing},
                                                        {"vec", vec},
                                                        {"mat", mat},
                                                        {"rhs", rhs},
                                                        {"rhs4", ones({4, 2}, dt)},
                                                        {"tau4", ones({4}, dt)},
                                                        {"rhs3d", ones({2, 5, 2}, dt)}})
      put(p + key, v);
    auto bad = [&](const std::string& id, const std::string& op, std::vector<std::string> names,
                   Json kwargs, std::function<void()> fn) {
      for (auto& s : names) s = p + s;
      add({p + id, op, names, kwargs, [fn] {
             fn();
             return Outputs{};
           }});
    };
    bad("qr_vector", "qr", {"vec"}, {}, [=] { la::qr(vec); });
    bad("qr_mode", "qr", {"mat"}, {{"mode", "full"}}, [=] { la::qr(mat, "full"); });
    bad("geqrf_vector", "geqrf", {"vec"}, {}, [=] { la::geqrf(vec); });
    bad("householder_tau", "householder_product", {"mat", "tau4"}, {},
        [=] { la::householder_product(mat, ones({4}, dt)); });
    bad("lstsq_gels_rank", "lstsq", {"sing", "rhs"}, {{"driver", "gels"}},
        [=] { la::lstsq(sing, rhs, std::nullopt, "gels"); });
    bad("lstsq_driver", "lstsq", {"mat", "rhs"}, {{"driver", "gelsx"}},
        [=] { la::lstsq(mat, rhs, std::nullopt, "gelsx"); });
    bad("lstsq_rows", "lstsq", {"mat", "rhs4"}, {}, [=] { la::lstsq(mat, ones({4, 2}, dt)); });
    bad("lstsq_dims", "lstsq", {"mat", "rhs3d"}, {}, [=] { la::lstsq(mat, ones({2, 5, 2}, dt)); });
  }
  check_all();
}

}  // namespace
}  // namespace tessera::linalg_test
