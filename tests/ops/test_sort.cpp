// sort, argsort, topk, unique: against the counting reference on many shapes, dtypes and
// layouts (ties everywhere: values are small integers), NaN / signed zero / inf ordering,
// zero sizes, thread-count independence and error messages.
#include "ops/index_test_util.h"
#include "ops/reference/index_reference.h"

namespace tessera {
namespace {

using namespace tessera::testing;

const std::vector<DimVector>& sort_shapes() {
  static const std::vector<DimVector> v = {{1},    {3},     {7},       {17},
                                           {7, 3}, {3, 17}, {2, 5, 7}, {4, 1, 9}};
  return v;
}

TEST(Sort, MatchesStableReference) {
  std::mt19937 rng(31);
  for (ScalarType dt : all_test_dtypes()) {
    for (const DimVector& shape : sort_shapes()) {
      for (int64_t dim = 0; dim < static_cast<int64_t>(shape.size()); ++dim) {
        for (Layout l : all_layouts()) {
          for (bool desc : {false, true}) {
            SCOPED_TRACE(fmt::format("{} {} dim {} {} desc {}", dtype_name(dt), shape, dim,
                                     layout_name(l), desc));
            const Tensor a = relayout(random_tensor(shape, dt, rng, -5, 5), l);
            auto [v, i] = sort(a, dim, desc);
            auto [rv, ri] = reference::sort(a, dim, desc);
            EXPECT_TRUE(same_values(v, rv));
            EXPECT_TRUE(same_values(i, ri));
            EXPECT_TRUE(same_values(a.argsort(dim - static_cast<int64_t>(shape.size()), desc), ri));
          }
        }
      }
    }
  }
}

TEST(Sort, NanInfSignedZero) {
  std::mt19937 rng(32);
  for (ScalarType dt : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    for (const DimVector& shape : {DimVector{17}, DimVector{5, 33}, DimVector{40, 3}}) {
      for (bool desc : {false, true}) {
        SCOPED_TRACE(fmt::format("{} {} desc {}", dtype_name(dt), shape, desc));
        const Tensor a = random_special(shape, dt, rng);
        for (int64_t dim = 0; dim < static_cast<int64_t>(shape.size()); ++dim) {
          auto [v, i] = sort(a, dim, desc);
          auto [rv, ri] = reference::sort(a, dim, desc);
          EXPECT_TRUE(same_values(v, rv));
          EXPECT_TRUE(same_values(i, ri));
        }
      }
    }
  }
  // The torch 1.13 example: -0.0 and 0.0 tie (stable), NaN is largest.
  const Tensor x = tessera::tensor<float>({1.f, NAN, 3.f, NAN, 2.f, -0.0f, 0.0f});
  EXPECT_EQ(to_vec(std::get<1>(sort(x))), (std::vector<int64_t>{5, 6, 0, 4, 2, 1, 3}));
  EXPECT_EQ(to_vec(std::get<1>(x.sort(-1, /*descending=*/true))),
            (std::vector<int64_t>{1, 3, 2, 4, 0, 5, 6}));
  // Values come back bit-exact: the first is -0.0.
  EXPECT_TRUE(std::signbit(std::get<0>(sort(x))[0].item<float>()));
}

TEST(Sort, RadixRowsMatchStableReference) {
  // Rows of 512 and more take the radix path; the reference is the counting sort.
  std::mt19937 rng(38);
  for (ScalarType dt : all_test_dtypes()) {
    for (bool desc : {false, true}) {
      SCOPED_TRACE(fmt::format("{} desc {}", dtype_name(dt), desc));
      const Tensor ints = random_tensor({2, 700}, dt, rng, -30, 30);
      for (const Tensor& a : {ints, relayout(ints, Layout::kTransposed)}) {
        auto [v, i] = sort(a, 1, desc);
        auto [rv, ri] = reference::sort(a, 1, desc);
        EXPECT_TRUE(same_values(v, rv));
        EXPECT_TRUE(same_values(i, ri));
      }
      if (is_floating_point(dt)) {
        const Tensor sp = random_special({600, 2}, dt, rng);
        auto [v, i] = sort(sp, 0, desc);
        auto [rv, ri] = reference::sort(sp, 0, desc);
        EXPECT_TRUE(same_values(v, rv));
        EXPECT_TRUE(same_values(i, ri));
      }
    }
  }
  // Wide-range int64 keys use every radix pass; std::stable_sort is the reference here (float64
  // cannot hold these values exactly).
  std::mt19937_64 rng64(39);
  std::vector<int64_t> wide(1000);
  for (size_t k = 0; k < wide.size(); ++k) {
    wide[k] = k % 7 == 0    ? std::numeric_limits<int64_t>::min()
              : k % 11 == 0 ? std::numeric_limits<int64_t>::max()
                            : static_cast<int64_t>(rng64());
  }
  for (bool desc : {false, true}) {
    std::vector<int64_t> order(wide.size());
    for (size_t k = 0; k < order.size(); ++k) order[k] = static_cast<int64_t>(k);
    std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) {
      return desc ? wide[x] > wide[y] : wide[x] < wide[y];
    });
    auto [v, i] = sort(tessera::tensor<int64_t>(wide), 0, desc);
    EXPECT_EQ(to_vec(i), order);
    std::vector<int64_t> want;
    for (int64_t k : order) want.push_back(wide[k]);
    EXPECT_EQ(to_vec(v), want);
  }
}

TEST(Sort, LargeRowsAndManyRowsThreadIndependent) {
  std::mt19937 rng(33);
  const Tensor big = random_tensor({100003}, kFloat32, rng, -1000, 1000);
  auto [v, i] = sort(big);
  const std::vector<double> vv = to_dvec(v);
  const std::vector<int64_t> iv = to_vec(i);
  const std::vector<double> src = to_dvec(big);
  for (size_t k = 1; k < vv.size(); ++k) {
    ASSERT_LE(vv[k - 1], vv[k]);
    if (vv[k - 1] == vv[k]) {
      ASSERT_LT(iv[k - 1], iv[k]);  // stable
    }
  }
  for (size_t k = 0; k < vv.size(); ++k) ASSERT_EQ(src[iv[k]], vv[k]);
  const Tensor rows = random_tensor({2000, 60}, kInt32, rng, -10, 10);
  const int threads = get_num_threads();
  auto par = sort(rows.t(), 0, true);
  set_num_threads(1);
  auto ser = sort(rows.t(), 0, true);
  set_num_threads(threads);
  EXPECT_TRUE(same_values(std::get<1>(par), std::get<1>(ser)));
  EXPECT_TRUE(same_values(std::get<0>(par), std::get<0>(ser)));
}

TEST(Sort, ZeroDimZeroSizeErrors) {
  auto [v, i] = sort(scalar_tensor(3.0));
  EXPECT_EQ(v.dim(), 0);
  EXPECT_EQ(i.item<int64_t>(), 0);
  EXPECT_EQ(std::get<0>(sort(zeros({0, 3}), 0)).sizes().vec(), (DimVector{0, 3}));
  EXPECT_EQ(std::get<1>(sort(zeros({2, 0}), 1)).dtype(), kInt64);
  EXPECT_EQ(to_vec(std::get<1>(sort(tessera::tensor<bool>({true, false, true})))),
            (std::vector<int64_t>{1, 0, 2}));
  EXPECT_THROW_MSG(sort(ones({3}, kFloat32), 1), IndexError, "sort()");
  EXPECT_THROW_MSG(sort(ones({3}, kComplex64)), TypeError, "sort()");
}

TEST(Topk, MatchesReference) {
  std::mt19937 rng(34);
  for (ScalarType dt : all_test_dtypes()) {
    if (dt == kBool) continue;
    for (const DimVector& shape : sort_shapes()) {
      for (int64_t dim = 0; dim < static_cast<int64_t>(shape.size()); ++dim) {
        for (Layout l : all_layouts()) {
          const Tensor a = relayout(random_tensor(shape, dt, rng, -5, 5), l);
          for (int64_t k : {int64_t{0}, int64_t{1}, shape[dim] / 2, shape[dim]}) {
            for (bool largest : {true, false}) {
              SCOPED_TRACE(fmt::format("{} {} dim {} {} k {} largest {}", dtype_name(dt), shape,
                                       dim, layout_name(l), k, largest));
              auto [v, i] = topk(a, k, dim, largest);
              auto [rv, ri] = reference::topk(a, k, dim, largest);
              EXPECT_TRUE(same_values(v, rv));
              EXPECT_TRUE(same_values(i, ri));
            }
          }
        }
      }
    }
  }
}

TEST(Topk, TiesNanLargeAndErrors) {
  // Ties: the lowest indices first.
  auto [v, i] = topk(tessera::tensor<float>({1.f, 3.f, 3.f, 2.f, 3.f}), 2);
  EXPECT_EQ(to_dvec(v), (std::vector<double>{3, 3}));
  EXPECT_EQ(to_vec(i), (std::vector<int64_t>{1, 2}));
  const Tensor x = tessera::tensor<float>({1.f, NAN, 3.f, NAN, 2.f});
  EXPECT_EQ(to_vec(std::get<1>(topk(x, 3))), (std::vector<int64_t>{1, 3, 2}));
  EXPECT_EQ(to_vec(std::get<1>(x.topk(3, -1, /*largest=*/false))), (std::vector<int64_t>{0, 4, 2}));
  std::mt19937 rng(35);
  for (ScalarType dt : {kFloat32, kFloat16}) {
    const Tensor s = random_special({9, 41}, dt, rng);
    for (bool largest : {true, false}) {
      auto [sv, si] = topk(s, 7, 1, largest);
      auto [rv, ri] = reference::topk(s, 7, 1, largest);
      EXPECT_TRUE(same_values(sv, rv));
      EXPECT_TRUE(same_values(si, ri));
    }
  }
  const Tensor big = random_tensor({64, 5000}, kFloat32, rng, -100, 100);
  auto [bv, bi] = topk(big, 10, 1);
  auto [sv, si] = sort(big, 1, true);
  EXPECT_TRUE(same_values(bv, sv.narrow(1, 0, 10).contiguous()));
  EXPECT_TRUE(same_values(bi, si.narrow(1, 0, 10).contiguous()));
  auto [zv, zi] = topk(scalar_tensor(3.0), 1);
  EXPECT_EQ(zv.dim(), 0);
  EXPECT_EQ(zi.item<int64_t>(), 0);
  EXPECT_EQ(std::get<0>(topk(zeros({0, 4}), 2)).sizes().vec(), (DimVector{0, 2}));
  EXPECT_THROW_MSG(
      topk(ones({3}, kFloat32), 4), RuntimeError,
      "topk(): selected index k out of range: argument 'k' expected a value in [0, 3], "
      "but got 4");
  EXPECT_THROW_MSG(topk(ones({3}, kFloat32), -1), RuntimeError, "selected index k out of range");
  EXPECT_THROW_MSG(topk(ones({3}, kBool), 1), TypeError, "topk()");
}

TEST(Unique, FlatSortedInverseCounts) {
  std::mt19937 rng(36);
  for (ScalarType dt : all_test_dtypes()) {
    for (const DimVector& shape : sort_shapes()) {
      for (Layout l : all_layouts()) {
        SCOPED_TRACE(fmt::format("{} {} {}", dtype_name(dt), shape, layout_name(l)));
        const Tensor a = relayout(random_tensor(shape, dt, rng, -4, 4), l);
        auto [u, inv, cnt] = unique(a, true, true, true);
        const std::vector<double> av = to_dvec(a), uv = to_dvec(u);
        const std::vector<int64_t> iv = to_vec(inv), cv = to_vec(cnt);
        EXPECT_EQ(u.dtype(), dt);
        EXPECT_EQ(inv.sizes().vec(), shape);
        ASSERT_EQ(cv.size(), uv.size());
        std::vector<int64_t> recount(uv.size(), 0);
        for (size_t k = 1; k < uv.size(); ++k) EXPECT_LT(uv[k - 1], uv[k]);
        for (size_t k = 0; k < av.size(); ++k) {
          ASSERT_LT(iv[k], static_cast<int64_t>(uv.size()));
          EXPECT_EQ(uv[iv[k]], av[k]);
          ++recount[iv[k]];
        }
        EXPECT_EQ(recount, cv);
      }
    }
  }
}

TEST(Unique, LargeMatchesStdSort) {
  std::mt19937 rng(40);
  for (ScalarType dt : {kInt64, kFloat32, kInt16, kBFloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor a = random_tensor({5000}, dt, rng, -100, 100);
    auto [u, inv, cnt] = unique(a, true, true, true);
    std::vector<double> av = to_dvec(a);
    std::vector<double> want = av;
    std::sort(want.begin(), want.end());
    want.erase(std::unique(want.begin(), want.end()), want.end());
    EXPECT_EQ(to_dvec(u), want);
    const std::vector<int64_t> iv = to_vec(inv);
    for (size_t k = 0; k < av.size(); ++k) ASSERT_EQ(want[iv[k]], av[k]);
    EXPECT_EQ(cnt.sum().item<int64_t>(), 5000);
  }
}

TEST(Unique, NanBoolZeroDimAndOptionalOutputs) {
  auto [u, inv, cnt] = unique(tessera::tensor<float>({3.f, 1.f, NAN, 1.f, NAN}), true, true, true);
  // Every NaN is its own value (as PyTorch 1.13); Tessera puts them last.
  const std::vector<double> uv = to_dvec(u);
  ASSERT_EQ(uv.size(), 4u);
  EXPECT_EQ(uv[0], 1.0);
  EXPECT_EQ(uv[1], 3.0);
  EXPECT_TRUE(std::isnan(uv[2]) && std::isnan(uv[3]));
  EXPECT_EQ(to_vec(inv), (std::vector<int64_t>{1, 0, 2, 0, 3}));
  EXPECT_EQ(to_vec(cnt), (std::vector<int64_t>{2, 1, 1, 1}));
  auto [bu, binv, bcnt] = unique(tessera::tensor<bool>({true, false, true}), true, false, true);
  EXPECT_EQ(to_vec(bu), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(binv.numel(), 0);  // not requested: empty, as torch
  EXPECT_EQ(to_vec(bcnt), (std::vector<int64_t>{1, 2}));
  auto [su, sinv, scnt] = unique(scalar_tensor(3.0), true, true, true);
  EXPECT_EQ(su.sizes().vec(), (DimVector{1}));
  EXPECT_EQ(sinv.dim(), 0);
  EXPECT_EQ(to_vec(scnt), (std::vector<int64_t>{1}));
  EXPECT_EQ(std::get<0>(unique(zeros({0, 3}))).sizes().vec(), (DimVector{0}));
  EXPECT_THROW_MSG(unique(ones({2}, kComplex64)), TypeError, "unique()");
}

TEST(Unique, AlongDim) {
  const Tensor a = tessera::tensor<int64_t>({1, 2, 0, 1, 1, 2}).reshape({3, 2});
  auto [u, inv, cnt] = unique(a, true, true, true, 0);
  EXPECT_EQ(u.sizes().vec(), (DimVector{2, 2}));
  EXPECT_EQ(to_vec(u), (std::vector<int64_t>{0, 1, 1, 2}));
  EXPECT_EQ(to_vec(inv), (std::vector<int64_t>{1, 0, 1}));
  EXPECT_EQ(to_vec(cnt), (std::vector<int64_t>{1, 2}));
  auto [u1, inv1, cnt1] = unique(a, true, true, true, 1);
  EXPECT_EQ(u1.sizes().vec(), (DimVector{3, 2}));
  EXPECT_EQ(to_vec(u1), to_vec(a));
  EXPECT_EQ(to_vec(inv1), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(to_vec(cnt1), (std::vector<int64_t>{1, 1}));
  // Columns of a transposed, strided input; -1 wraps.
  std::mt19937 rng(37);
  for (ScalarType dt : {kFloat32, kInt32, kBFloat16, kBool}) {
    for (Layout l : all_layouts()) {
      const Tensor m = relayout(random_tensor({3, 40}, dt, rng, 0, 1), l);
      auto [mu, minv, mcnt] = unique(m, true, true, true, -1);
      EXPECT_EQ(mu.size(0), 3);
      EXPECT_EQ(mcnt.sum().item<int64_t>(), 40);
      // Reconstruct: mu[:, inv] == m.
      EXPECT_TRUE(same_values(index_select(mu, 1, minv), m));
      // Sorted lexicographically, strictly increasing columns.
      const Tensor cols = mu.t().contiguous().to(kFloat64);
      for (int64_t c = 1; c < cols.size(0); ++c) {
        const std::vector<double> p = to_dvec(cols[c - 1]), q = to_dvec(cols[c]);
        EXPECT_TRUE(std::lexicographical_compare(p.begin(), p.end(), q.begin(), q.end()));
      }
    }
  }
  // Rows with NaN are never merged.
  const Tensor n = tessera::tensor<float>({1.f, NAN, 1.f, NAN}).reshape({2, 2});
  EXPECT_EQ(std::get<0>(unique(n, true, false, false, 0)).size(0), 2);
  // Zero sizes: only the selected dim may be empty.
  auto [eu, einv, ecnt] = unique(zeros({0, 3}), true, true, true, 0);
  EXPECT_EQ(eu.sizes().vec(), (DimVector{0, 3}));
  EXPECT_EQ(einv.numel(), 0);
  EXPECT_THROW_MSG(unique(zeros({3, 0}), true, false, false, 0), RuntimeError,
                   "There are 0 sized dimensions, and they aren't selected");
  EXPECT_THROW_MSG(unique(scalar_tensor(3.0), true, false, false, 0), IndexError,
                   "unique(): Dimension specified as 0 but tensor has no dimensions");
}

}  // namespace
}  // namespace tessera
