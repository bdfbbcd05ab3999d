// index_select, gather, scatter, scatter_add, index_add, index / index_put_, masked_select,
// nonzero, one_hot, embedding: fast path against the reference on many shapes, dtypes and
// layouts; zero sizes; repeated indices; thread-count independence; error messages.
#include "ops/index_test_util.h"
#include "ops/reference/index_reference.h"

namespace tessera {
namespace {

using namespace tessera::testing;

const std::vector<DimVector>& test_shapes() {
  static const std::vector<DimVector> v = {{1},     {3},       {17},      {7, 3},
                                           {3, 17}, {1, 7, 3}, {5, 3, 7}, {2, 3, 1, 4}};
  return v;
}

// Runs fn with the thread pool at 1 thread and at its default, expecting equal results.
template <class Fn>
void expect_thread_independent(Fn&& fn) {
  const int threads = get_num_threads();
  const Tensor par = fn();
  set_num_threads(1);
  const Tensor ser = fn();
  set_num_threads(threads);
  EXPECT_TRUE(same_values(par, ser));
}

TEST(IndexSelect, MatchesReference) {
  std::mt19937 rng(11);
  for (ScalarType dt : all_test_dtypes()) {
    for (const DimVector& shape : test_shapes()) {
      for (int64_t dim = 0; dim < static_cast<int64_t>(shape.size()); ++dim) {
        for (Layout l : all_layouts()) {
          for (int64_t n : {0, 1, 5, 17}) {
            SCOPED_TRACE(
                fmt::format("{} {} dim {} {} n {}", dtype_name(dt), shape, dim, layout_name(l), n));
            const Tensor a = relayout(random_tensor(shape, dt, rng), l);
            const Tensor idx = random_index({n}, 0, shape[dim], rng);
            EXPECT_TRUE(
                same_values(index_select(a, dim, idx), reference::index_select(a, dim, idx)));
            EXPECT_TRUE(same_values(
                a.index_select(dim - static_cast<int64_t>(shape.size()), idx.to(kInt32)),
                reference::index_select(a, dim, idx)));
          }
        }
      }
    }
  }
}

TEST(IndexSelect, LargeRowsThreadIndependent) {
  std::mt19937 rng(12);
  const Tensor a = random_tensor({1000, 67}, kFloat32, rng);
  const Tensor idx = random_index({2000}, 0, 1000, rng);
  expect_thread_independent([&] { return index_select(a, 0, idx); });
  EXPECT_TRUE(same_values(index_select(a, 0, idx), reference::index_select(a, 0, idx)));
  EXPECT_TRUE(same_values(index_select(a.t(), 1, idx), reference::index_select(a.t(), 1, idx)));
  const Tensor idx2 = random_index({500}, 0, 67, rng);
  EXPECT_TRUE(same_values(index_select(a, 1, idx2), reference::index_select(a, 1, idx2)));
}

TEST(IndexSelect, RowCopyPathWithOuterDims) {
  // Rows of >= 64 bytes after dim take the memcpy-with-prefetch path, others the gather kernel.
  std::mt19937 rng(29);
  for (ScalarType dt : {kFloat32, kFloat64, kBFloat16, kInt64}) {
    const Tensor a = random_tensor({3, 50, 40}, dt, rng);
    const Tensor idx = random_index({70}, 0, 50, rng);
    for (const Tensor& x : {a, a.narrow(2, 0, 32), relayout(a, Layout::kTransposed)}) {
      EXPECT_TRUE(same_values(index_select(x, 1, idx), reference::index_select(x, 1, idx)));
      EXPECT_TRUE(same_values(index_select(x, 0, idx.narrow(0, 0, 5).remainder(3)),
                              reference::index_select(x, 0, idx.narrow(0, 0, 5).remainder(3))));
    }
  }
  EXPECT_THROW_MSG(index_select(ones({3, 50, 40}, kFloat32), 1, tessera::tensor<int64_t>({3, 50})),
                   IndexError,
                   "index_select(): index 50 is out of bounds for dimension 1 with size 50");
}

TEST(IndexSelect, ZeroDimAndZeroSizeAndFloat8) {
  const Tensor s = scalar_tensor(5.0);
  EXPECT_EQ(index_select(s, 0, tessera::tensor<int64_t>({0})).dim(), 0);
  EXPECT_EQ(index_select(ones({4, 0}, kFloat32), 0, tessera::tensor<int64_t>({1, 3})).sizes().vec(),
            (DimVector{2, 0}));
  EXPECT_EQ(index_select(ones({0, 3}, kFloat32), 0, empty({0}, kInt64)).sizes().vec(),
            (DimVector{0, 3}));
  const Tensor bytes = arange(1, 13).to(kUInt8).reshape({4, 3});
  const Tensor idx = tessera::tensor<int64_t>({3, 0, 3});
  EXPECT_EQ(to_vec(index_select(bytes.view(kFloat8_e5m2), 0, idx).view(kUInt8)),
            to_vec(index_select(bytes, 0, idx)));
  EXPECT_EQ(to_vec(index_select(arange(5), 0, scalar_tensor(2, kInt64))),
            (std::vector<int64_t>{2}));
}

TEST(IndexSelect, Errors) {
  const Tensor a = arange(5.0);
  EXPECT_THROW_MSG(index_select(a, 0, tessera::tensor<int64_t>({7})), IndexError,
                   "index_select(): index 7 is out of bounds for dimension 0 with size 5");
  EXPECT_THROW_MSG(index_select(a, 0, tessera::tensor<int64_t>({-1})), IndexError,
                   "index_select(): index -1 is out of bounds for dimension 0 with size 5");
  EXPECT_THROW_MSG(
      index_select(a, 0, tessera::tensor<float>({1.f})), TypeError,
      "index_select(): argument 'index' expected dtype int32 or int64, but got float32");
  EXPECT_THROW_MSG(index_select(a, 0, zeros({1, 1}, kInt64)), IndexError,
                   "index_select(): argument 'index' is supposed to be a vector");
  EXPECT_THROW_MSG(index_select(a, 1, tessera::tensor<int64_t>({0})), IndexError, "index_select()");
  EXPECT_THROW_MSG(index_select(ones({3, 0}, kFloat32), 1, tessera::tensor<int64_t>({0})),
                   IndexError, "index 0 is out of bounds for dimension 1 with size 0");
}

TEST(Gather, MatchesReference) {
  std::mt19937 rng(13);
  for (ScalarType dt : all_test_dtypes()) {
    for (const DimVector& shape : test_shapes()) {
      for (int64_t dim = 0; dim < static_cast<int64_t>(shape.size()); ++dim) {
        for (Layout l : all_layouts()) {
          SCOPED_TRACE(fmt::format("{} {} dim {} {}", dtype_name(dt), shape, dim, layout_name(l)));
          const Tensor a = relayout(random_tensor(shape, dt, rng), l);
          // Index no larger than a outside dim, any size along dim.
          DimVector ishape = shape;
          for (size_t d = 0; d < ishape.size(); ++d)
            ishape[d] = static_cast<int64_t>(d) == dim ? 6 : std::max<int64_t>(1, shape[d] - 1);
          const Tensor idx = relayout(random_index(ishape, 0, shape[dim], rng), l);
          EXPECT_TRUE(same_values(gather(a, dim, idx), reference::gather(a, dim, idx)));
          EXPECT_TRUE(same_values(a.gather(dim, idx), reference::gather(a, dim, idx)));
        }
      }
    }
  }
}

TEST(Gather, ExpandedIndexLargeAndZeroDim) {
  std::mt19937 rng(14);
  const Tensor a = random_tensor({400, 300}, kFloat64, rng);
  const Tensor idx = random_index({400, 1}, 0, 300, rng).expand({400, 250});
  EXPECT_TRUE(same_values(gather(a, 1, idx), reference::gather(a, 1, idx)));
  const Tensor idx0 = random_index({500, 300}, 0, 400, rng);
  expect_thread_independent([&] { return gather(a, 0, idx0); });
  EXPECT_TRUE(same_values(gather(a, 0, idx0), reference::gather(a, 0, idx0)));
  EXPECT_EQ(gather(scalar_tensor(3.0), 0, scalar_tensor(0, kInt64)).item<double>(), 3.0);
  EXPECT_EQ(gather(ones({3}, kFloat32), 0, scalar_tensor(0, kInt64)).dim(), 0);
  EXPECT_EQ(gather(ones({3, 4}, kFloat32), 0, zeros({0, 5}, kInt64)).sizes().vec(),
            (DimVector{0, 5}));
}

TEST(Gather, Errors) {
  const Tensor a = arange(5.0);
  EXPECT_THROW_MSG(gather(a, 0, tessera::tensor<int64_t>({7})), IndexError,
                   "gather(): index 7 is out of bounds for dimension 0 with size 5");
  EXPECT_THROW_MSG(gather(a, 0, tessera::tensor<int64_t>({-1})), IndexError,
                   "gather(): index -1 is out of bounds for dimension 0 with size 5");
  EXPECT_THROW_MSG(gather(a, 0, tessera::tensor<int32_t>({1})), TypeError,
                   "gather(): argument 'index' expected dtype int64, but got int32");
  EXPECT_THROW_MSG(gather(ones({3, 4}, kFloat32), 0, zeros({2, 5}, kInt64)), RuntimeError,
                   "Size does not match at dimension 1 expected index [2, 5] to be smaller than "
                   "self [3, 4] apart from dimension 0");
  EXPECT_THROW_MSG(gather(ones({3, 4}, kFloat32), 0, zeros({2}, kInt64)), RuntimeError,
                   "Index tensor must have the same number of dimensions");
}

TEST(Scatter, MatchesReferenceWithUniqueIndices) {
  // Unique destinations per column so the assignment order cannot matter.
  std::mt19937 rng(15);
  for (ScalarType dt : all_test_dtypes()) {
    for (const DimVector& shape : test_shapes()) {
      for (int64_t dim = 0; dim < static_cast<int64_t>(shape.size()); ++dim) {
        for (Layout l : all_layouts()) {
          SCOPED_TRACE(fmt::format("{} {} dim {} {}", dtype_name(dt), shape, dim, layout_name(l)));
          const Tensor a = relayout(random_tensor(shape, dt, rng), l);
          // A prefix of a per-column permutation along dim: unique destinations.
          const int64_t m = std::max<int64_t>(1, shape[dim] / 2);
          DimVector ishape = shape;
          ishape[dim] = m;
          const Tensor perm =
              argsort(random_tensor(shape, kFloat64, rng, 0, 1000000), dim).narrow(dim, 0, m);
          const Tensor idx = relayout(perm, l);
          const Tensor src = relayout(random_tensor(ishape, dt, rng), l);
          EXPECT_TRUE(same_values(scatter(a, dim, idx, src), reference::scatter(a, dim, idx, src)));
          const Tensor fill = full(ishape, 1, dt);
          EXPECT_TRUE(
              same_values(a.scatter(dim, idx, Scalar(1)), reference::scatter(a, dim, idx, fill)));
        }
      }
    }
  }
}

TEST(Scatter, RepeatedIndicesLastWinsAndValueCast) {
  const Tensor a = zeros({5});
  const Tensor idx = tessera::tensor<int64_t>({1, 1, 3, 1});
  const Tensor src = tessera::tensor<float>({1.f, 2.f, 3.f, 4.f});
  EXPECT_EQ(to_dvec(scatter(a, 0, idx, src)), (std::vector<double>{0, 4, 0, 3, 0}));
  EXPECT_EQ(to_vec(scatter(zeros({3, 4}, kInt32), 0, tessera::tensor<int64_t>({2}).view({1, 1}),
                           Scalar(1.5))),
            (std::vector<int64_t>{0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0}));
  // Empty index: a copy of self; 0-d everything.
  EXPECT_TRUE(same_values(scatter(a, 0, empty({0}, kInt64), src), a));
  EXPECT_EQ(
      scatter(scalar_tensor(1.0), 0, scalar_tensor(0, kInt64), scalar_tensor(5.0)).item<double>(),
      5.0);
  // The input is not modified.
  EXPECT_EQ(to_dvec(a), std::vector<double>(5, 0.0));
}

TEST(Scatter, Errors) {
  const Tensor a = zeros({3, 4});
  EXPECT_THROW_MSG(scatter(a, 0, zeros({2, 5}, kInt64), ones({2, 5}, kFloat32)), RuntimeError,
                   "Expected index [2, 5] to be smaller than self [3, 4] apart from dimension 0 "
                   "and to be smaller size than src [2, 5]");
  EXPECT_THROW_MSG(scatter(a, 0, zeros({2, 3}, kInt64), ones({2, 3}, kFloat64)), TypeError,
                   "scatter(): expected self.dtype to be equal to src.dtype");
  EXPECT_THROW_MSG(scatter(a, 0, zeros({2, 3}, kInt32), ones({2, 3}, kFloat32)), TypeError,
                   "scatter(): argument 'index' expected dtype int64, but got int32");
  EXPECT_THROW_MSG(scatter(a, 0, full({1, 1}, -1, kInt64), ones({2, 3}, kFloat32)), IndexError,
                   "scatter(): index -1 is out of bounds for dimension 0 with size 3");
  EXPECT_THROW_MSG(scatter(a, 1, full({1, 1}, 5, kInt64), Scalar(1.5)), IndexError,
                   "scatter(): index 5 is out of bounds for dimension 1 with size 4");
  EXPECT_THROW_MSG(scatter_add(a, 0, full({1, 1}, 3, kInt64), ones({1, 1}, kFloat32)), IndexError,
                   "scatter_add(): index 3 is out of bounds for dimension 0 with size 3");
}

TEST(ScatterAdd, MatchesReference) {
  std::mt19937 rng(16);
  for (ScalarType dt : all_test_dtypes()) {
    for (const DimVector& shape : test_shapes()) {
      for (int64_t dim = 0; dim < static_cast<int64_t>(shape.size()); ++dim) {
        for (Layout l : all_layouts()) {
          SCOPED_TRACE(fmt::format("{} {} dim {} {}", dtype_name(dt), shape, dim, layout_name(l)));
          const Tensor a = relayout(random_tensor(shape, dt, rng, -3, 3), l);
          DimVector ishape = shape;
          ishape[dim] = 9;  // more entries than slots: repeated indices
          const Tensor idx = relayout(random_index(ishape, 0, shape[dim], rng), l);
          const Tensor src = relayout(random_tensor(ishape, dt, rng, -3, 3), l);
          const Tensor got = scatter_add(a, dim, idx, src);
          // bool adds as logical or; the float64 reference's nonzero sums convert to true.
          EXPECT_TRUE(same_values(got, reference::scatter_add(a, dim, idx, src)));
          EXPECT_TRUE(same_values(a.scatter_add(dim, idx, src), got));
        }
      }
    }
  }
}

TEST(ScatterAdd, ThreadIndependentWithManyDuplicates) {
  std::mt19937 rng(17);
  const Tensor a = zeros({64, 300});
  const Tensor idx = random_index({600, 300}, 0, 64, rng);
  Generator gen(17);
  const Tensor src = randn({600, 300}, kFloat32, &gen);
  expect_thread_independent([&] { return scatter_add(a, 0, idx, src); });
  EXPECT_TRUE(
      same_values(scatter_add(a, 0, idx, src), reference::scatter_add(a, 0, idx, src), 1e-4));
}

TEST(IndexAdd, MatchesReference) {
  std::mt19937 rng(18);
  for (ScalarType dt : all_test_dtypes()) {
    if (dt == kBool) continue;
    for (const DimVector& shape : test_shapes()) {
      for (int64_t dim = 0; dim < static_cast<int64_t>(shape.size()); ++dim) {
        for (Layout l : all_layouts()) {
          SCOPED_TRACE(fmt::format("{} {} dim {} {}", dtype_name(dt), shape, dim, layout_name(l)));
          const Tensor a = relayout(random_tensor(shape, dt, rng, -3, 3), l);
          DimVector sshape = shape;
          sshape[dim] = 7;
          const Tensor idx = random_index({7}, 0, shape[dim], rng);
          const Tensor src = relayout(random_tensor(sshape, dt, rng, -3, 3), l);
          const double alpha = is_floating_point(dt) ? 0.5 : 2.0;
          EXPECT_TRUE(same_values(index_add(a, dim, idx, src, alpha),
                                  reference::index_add(a, dim, idx, src, alpha)));
          EXPECT_TRUE(same_values(a.index_add(dim, idx.to(kInt32), src),
                                  reference::index_add(a, dim, idx, src, 1.0)));
        }
      }
    }
  }
}

TEST(IndexAdd, BroadcastSourceBoolAlphaAndLarge) {
  // PyTorch 1.13 broadcasts each source slice to the destination slice.
  const Tensor out =
      index_add(zeros({5, 3}), 0, tessera::tensor<int64_t>({1, 1}), ones({2}, kFloat32));
  EXPECT_EQ(to_dvec(out), (std::vector<double>{0, 0, 0, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0}));
  const Tensor ints =
      index_add(zeros({5}, kInt64), 0, tessera::tensor<int64_t>({1, 1}), ones({2}, kInt64), 2.5);
  EXPECT_EQ(to_vec(ints), (std::vector<int64_t>{0, 4, 0, 0, 0}));  // alpha truncated to 2
  const Tensor b =
      index_add(zeros({3}, kBool), 0, tessera::tensor<int64_t>({1, 1}), ones({2}, kBool));
  EXPECT_EQ(to_vec(b), (std::vector<int64_t>{0, 1, 0}));
  EXPECT_EQ(index_add(scalar_tensor(1.0, kFloat64), 0, tessera::tensor<int64_t>({0, 0}),
                      tessera::tensor<double>({5.0, 2.0}))
                .item<double>(),
            8.0);
  std::mt19937 rng(19);
  const Tensor big = random_tensor({100, 512}, kFloat32, rng);
  const Tensor idx = random_index({1500}, 0, 100, rng);
  const Tensor src = random_tensor({1500, 512}, kFloat32, rng, -3, 3);
  expect_thread_independent([&] { return index_add(big, 0, idx, src); });
  EXPECT_TRUE(same_values(index_add(big, 0, idx, src), reference::index_add(big, 0, idx, src)));
}

TEST(IndexAdd, Errors) {
  EXPECT_THROW_MSG(index_add(zeros({5}), 0, tessera::tensor<int64_t>({7}), ones({1}, kFloat32)),
                   IndexError, "index_add(): index 7 is out of bounds for dimension 0 with size 5");
  EXPECT_THROW_MSG(index_add(zeros({5}), 0, tessera::tensor<int64_t>({-1}), ones({1}, kFloat32)),
                   IndexError, "index -1 is out of bounds");
  EXPECT_THROW_MSG(index_add(zeros({5}), 0, tessera::tensor<int64_t>({1, 1}), ones({2}, kFloat64)),
                   TypeError, "self (float32) and source (float64) must have the same scalar type");
  EXPECT_THROW_MSG(
      index_add(zeros({5, 3}), 0, tessera::tensor<int64_t>({1, 1}), ones({3, 3}, kFloat32)),
      RuntimeError, "Number of indices (2) should be equal to source.size(dim): (3)");
  EXPECT_THROW_MSG(
      index_add(zeros({5, 3}), 0, tessera::tensor<int64_t>({1, 1}), ones({2, 2}, kFloat32)),
      RuntimeError, "does not broadcast");
  EXPECT_THROW_MSG(index_add(zeros({5, 3}), 0, zeros({1, 2}, kInt64), ones({2, 3}, kFloat32)),
                   IndexError, "is supposed to be a vector");
}

// ---- advanced indexing ----------------------------------------------------------------------

TEST(Index, LeadingIndicesMatchReference) {
  std::mt19937 rng(20);
  for (ScalarType dt : all_test_dtypes()) {
    for (const DimVector& shape : {DimVector{5}, DimVector{7, 3}, DimVector{4, 5, 6}}) {
      for (size_t k = 1; k <= shape.size(); ++k) {
        for (Layout l : all_layouts()) {
          SCOPED_TRACE(fmt::format("{} {} k {} {}", dtype_name(dt), shape, k, layout_name(l)));
          const Tensor a = relayout(random_tensor(shape, dt, rng), l);
          std::vector<Tensor> idx;
          std::vector<std::optional<Tensor>> opt;
          for (size_t d = 0; d < k; ++d) {
            idx.push_back(random_index({2, 3}, -shape[d], shape[d], rng));  // negatives wrap
            opt.emplace_back(idx.back());
          }
          EXPECT_TRUE(same_values(index(a, opt), reference::index_leading(a, idx)));
        }
      }
    }
  }
}

TEST(Index, ShapesLikeTorch) {
  const Tensor a = arange(24.0).reshape({2, 3, 4});
  const Tensor i2 = tessera::tensor<int64_t>({1, 0});
  const Tensor i21 = tessera::tensor<int64_t>({3, 0}).view({2, 1});
  // Non-adjacent advanced indices go first: [2, 2] + [3].
  EXPECT_EQ(index(a, {i2, std::nullopt, i21}).sizes().vec(), (DimVector{2, 2, 3}));
  // Adjacent ones stay in place: [2] + [2, 2].
  EXPECT_EQ(index(a, {std::nullopt, i2, i21}).sizes().vec(), (DimVector{2, 2, 2}));
  EXPECT_EQ(index(a, {std::nullopt, i2}).sizes().vec(), (DimVector{2, 2, 4}));
  // Values: a[:, [1, 0], [[3], [0]]][b, i, j] = a[b, [1,0][j], [[3],[0]][i]].
  const Tensor r = index(a, {std::nullopt, i2, i21});
  EXPECT_EQ(to_dvec(r.select(0, 1)), (std::vector<double>{19, 15, 16, 12}));
  // Masks.
  EXPECT_EQ(index(a, {ones({2, 3}, kBool)}).sizes().vec(), (DimVector{6, 4}));
  EXPECT_EQ(index(a, {ones({2, 3}, kUInt8)}).sizes().vec(), (DimVector{6, 4}));
  const Tensor mask = tessera::tensor<bool>({true, false, true, false});
  EXPECT_EQ(to_dvec(index(a, {std::nullopt, std::nullopt, mask}).select(0, 0)),
            (std::vector<double>{0, 2, 4, 6, 8, 10}));
  EXPECT_EQ(index(a.select(0, 0), {scalar_tensor(true)}).sizes().vec(), (DimVector{1, 3, 4}));
  EXPECT_EQ(index(a.select(0, 0), {scalar_tensor(false)}).sizes().vec(), (DimVector{0, 3, 4}));
  EXPECT_EQ(index(a, {scalar_tensor(1, kInt64)}).sizes().vec(), (DimVector{3, 4}));
  // Zero size.
  EXPECT_EQ(index(a, {empty({0}, kInt64)}).sizes().vec(), (DimVector{0, 3, 4}));
  EXPECT_EQ(index(zeros({0, 3}), {std::nullopt, tessera::tensor<int64_t>({2})}).sizes().vec(),
            (DimVector{0, 1}));
}

TEST(Index, LargeThreadIndependent) {
  std::mt19937 rng(21);
  const Tensor a = random_tensor({2000, 40}, kFloat32, rng);
  const Tensor i = random_index({50000}, -2000, 2000, rng);
  expect_thread_independent([&] { return index(a, {i}); });
  EXPECT_TRUE(same_values(index(a, {i}), reference::index_leading(a, {i})));
  const Tensor j = random_index({700}, -40, 40, rng);
  expect_thread_independent([&] { return index(a, {std::nullopt, j}); });
}

TEST(Index, Errors) {
  const Tensor a = arange(5.0);
  EXPECT_THROW_MSG(index(a, {tessera::tensor<int64_t>({-1, 9})}), IndexError,
                   "index(): index 9 is out of bounds for dimension 0 with size 5");
  EXPECT_THROW_MSG(index(a, {tessera::tensor<int32_t>({0})}), IndexError,
                   "tensors used as indices must be long, byte or bool tensors");
  EXPECT_THROW_MSG(index(a, {tessera::tensor<bool>({true})}), IndexError,
                   "The shape of the mask [1] at index 0 does not match the shape of the indexed "
                   "tensor [5] at index 0");
  const Tensor m = arange(6.0).reshape({2, 3});
  EXPECT_THROW_MSG(index(m, {tessera::tensor<int64_t>({0, 1}), tessera::tensor<int64_t>({0, 1}),
                             tessera::tensor<int64_t>({0})}),
                   IndexError, "too many indices for tensor of dimension 2");
  EXPECT_THROW_MSG(
      index(m, {tessera::tensor<int64_t>({0, 1}), tessera::tensor<int64_t>({0, 1, 2})}),
      RuntimeError, "index()");
}

TEST(IndexPut, MatchesReferenceAccumulateAndAssign) {
  std::mt19937 rng(22);
  for (ScalarType dt : all_test_dtypes()) {
    for (const DimVector& shape : {DimVector{5}, DimVector{7, 3}, DimVector{4, 5, 6}}) {
      for (Layout l : all_layouts()) {
        SCOPED_TRACE(fmt::format("{} {} {}", dtype_name(dt), shape, layout_name(l)));
        const Tensor a = relayout(random_tensor(shape, dt, rng, -3, 3), l);
        // Repeated indices accumulate.
        const Tensor i = random_index({11}, -shape[0], shape[0], rng);
        DimVector vshape = {11};
        vshape.insert(vshape.end(), shape.begin() + 1, shape.end());
        const Tensor v = relayout(random_tensor(vshape, dt, rng, -3, 3), l);
        const Tensor got = index_put(a, {i}, v, /*accumulate=*/true);
        if (dt != kBool) {
          EXPECT_TRUE(same_values(got, reference::index_put_leading(a, {i}, v, true)));
        }
        // Unique indices assign.
        const Tensor u = argsort(random_tensor({shape[0]}, kFloat64, rng, 0, 1000000));
        DimVector ushape = shape;
        const Tensor uv = random_tensor(ushape, dt, rng);
        EXPECT_TRUE(
            same_values(index_put(a, {u}, uv), reference::index_put_leading(a, {u}, uv, false)));
      }
    }
  }
}

TEST(IndexPut, InPlaceBroadcastValuesAndRepeats) {
  const Tensor a = zeros({5});
  index_put_(a, {tessera::tensor<int64_t>({1, 1, 1})}, scalar_tensor(1.0f), true);
  EXPECT_EQ(to_dvec(a), (std::vector<double>{0, 3, 0, 0, 0}));
  const Tensor m = zeros({3, 4}, kInt64);
  index_put_(m, {std::nullopt, tessera::tensor<int64_t>({0, -1})},
             tessera::tensor<int64_t>({7, 8}));
  EXPECT_EQ(to_vec(m), (std::vector<int64_t>{7, 0, 0, 8, 7, 0, 0, 8, 7, 0, 0, 8}));
  const Tensor b = zeros({5}, kBool);
  index_put_(b, {tessera::tensor<int64_t>({1, 1})}, scalar_tensor(true), true);
  EXPECT_EQ(to_vec(b), (std::vector<int64_t>{0, 1, 0, 0, 0}));
  // Mask assignment, and values that alias the destination.
  const Tensor c = arange(6.0).reshape({2, 3});
  index_put_(c, {c.gt(2.0)}, scalar_tensor(-1.0));
  EXPECT_EQ(to_dvec(c), (std::vector<double>{0, 1, 2, -1, -1, -1}));
  const Tensor d = arange(4.0);
  index_put_(d, {tessera::tensor<int64_t>({3, 2, 1, 0})}, d);
  EXPECT_EQ(to_dvec(d), (std::vector<double>{3, 2, 1, 0}));
  // Large accumulate with many repeats is thread-count independent.
  std::mt19937 rng(23);
  const Tensor i = random_index({5000}, 0, 50, rng);
  Generator gen(23);
  const Tensor v = randn({5000, 64}, kFloat32, &gen);
  expect_thread_independent([&] { return index_put(zeros({50, 64}), {i}, v, true); });
  EXPECT_TRUE(same_values(index_put(zeros({50, 64}), {i}, v, true),
                          reference::index_put_leading(zeros({50, 64}), {i}, v, true), 1e-4));
}

TEST(IndexPut, Errors) {
  EXPECT_THROW_MSG(index_put_(zeros({2, 3}).expand({4, 2, 3}), {tessera::tensor<int64_t>({0})},
                              scalar_tensor(1.0f)),
                   RuntimeError,
                   "unsupported operation: more than one element of the written-to tensor refers "
                   "to a single memory location");
  EXPECT_THROW_MSG(
      index_put_(zeros({5}), {tessera::tensor<int64_t>({0})}, scalar_tensor(1.0, kFloat64)),
      TypeError,
      "index put requires the source and destination dtypes match, got "
      "float32 for the destination and float64 for the source");
  EXPECT_THROW_MSG(index_put(arange(5.0), {tessera::tensor<int64_t>({1, 2})}, ones({3}, kFloat32)),
                   RuntimeError,
                   "shape mismatch: value tensor of shape [3] cannot be broadcast "
                   "to indexing result of shape [2]");
  EXPECT_THROW_MSG(index_put(zeros({5}), {tessera::tensor<int64_t>({5})}, scalar_tensor(1.0f)),
                   IndexError,
                   "index_put_(): index 5 is out of bounds for dimension 0 with size 5");
}

// ---- masks --------------------------------------------------------------------------------

TEST(MaskedSelect, MatchesLoopOnShapesDtypesLayouts) {
  std::mt19937 rng(24);
  for (ScalarType dt : all_test_dtypes()) {
    for (const DimVector& shape : test_shapes()) {
      for (Layout l : all_layouts()) {
        SCOPED_TRACE(fmt::format("{} {} {}", dtype_name(dt), shape, layout_name(l)));
        const Tensor a = relayout(random_tensor(shape, dt, rng), l);
        const Tensor mask = relayout(random_tensor(shape, kBool, rng), l);
        const std::vector<double> av = to_dvec(a);
        const std::vector<int64_t> mv = to_vec(mask);
        std::vector<double> want;
        for (size_t i = 0; i < av.size(); ++i)
          if (mv[i]) want.push_back(av[i]);
        const Tensor got = masked_select(a, mask);
        EXPECT_EQ(got.dtype(), dt);
        EXPECT_EQ(to_dvec(got), want);
        EXPECT_EQ(to_dvec(a.masked_select(mask.to(kUInt8))), want);
      }
    }
  }
}

TEST(MaskedSelect, BroadcastLargeAndErrors) {
  EXPECT_EQ(to_dvec(masked_select(arange(6.0).reshape({2, 3}),
                                  tessera::tensor<bool>({true, false, true}))),
            (std::vector<double>{0, 2, 3, 5}));
  EXPECT_EQ(to_dvec(masked_select(arange(3.0), ones({2, 3}, kBool))),
            (std::vector<double>{0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(masked_select(zeros({3, 2}), scalar_tensor(true)).numel(), 6);
  EXPECT_EQ(masked_select(zeros({0, 2}), scalar_tensor(true)).sizes().vec(), (DimVector{0}));
  std::mt19937 rng(25);
  const Tensor a = random_tensor({700, 301}, kFloat32, rng);
  const Tensor m = random_tensor({700, 301}, kBool, rng);
  expect_thread_independent([&] { return masked_select(a.t(), m.t()); });
  EXPECT_THROW_MSG(masked_select(arange(3.0), tessera::tensor<int64_t>({1, 0, 1})), TypeError,
                   "masked_select(): argument 'mask' expected dtype bool or uint8, but got int64");
  EXPECT_THROW_MSG(masked_select(arange(3.0), ones({2, 4}, kBool)), RuntimeError, "masked_select");
}

TEST(Nonzero, MatchesLoop) {
  std::mt19937 rng(26);
  for (ScalarType dt : all_test_dtypes()) {
    for (const DimVector& shape : test_shapes()) {
      for (Layout l : all_layouts()) {
        SCOPED_TRACE(fmt::format("{} {} {}", dtype_name(dt), shape, layout_name(l)));
        const Tensor a = relayout(random_tensor(shape, dt, rng, -1, 1), l);
        const std::vector<double> av = to_dvec(a);
        std::vector<int64_t> want;
        for (size_t i = 0; i < av.size(); ++i) {
          if (av[i] == 0) continue;
          int64_t rem = static_cast<int64_t>(i);
          std::vector<int64_t> c(shape.size());
          for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
            c[d] = rem % shape[d];
            rem /= shape[d];
          }
          want.insert(want.end(), c.begin(), c.end());
        }
        const Tensor got = a.nonzero();
        EXPECT_EQ(got.dtype(), kInt64);
        EXPECT_EQ(got.size(1), static_cast<int64_t>(shape.size()));
        EXPECT_EQ(to_vec(got), want);
      }
    }
  }
}

TEST(Nonzero, SpecialsZeroDimLarge) {
  EXPECT_EQ(to_vec(nonzero(tessera::tensor<double>({NAN, 0.0, -0.0, 1.0}))),
            (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(nonzero(scalar_tensor(3.0)).sizes().vec(), (DimVector{1, 0}));
  EXPECT_EQ(nonzero(scalar_tensor(0.0)).sizes().vec(), (DimVector{0, 0}));
  EXPECT_EQ(nonzero(zeros({2, 0})).sizes().vec(), (DimVector{0, 2}));
  std::mt19937 rng(27);
  const Tensor a = random_tensor({300, 250}, kInt32, rng, -1, 1);
  expect_thread_independent([&] { return nonzero(a.t()); });
}

TEST(OneHot, ValuesAndErrors) {
  const Tensor r = one_hot(tessera::tensor<int64_t>({0, 2}));
  EXPECT_EQ(r.dtype(), kInt64);
  EXPECT_EQ(r.sizes().vec(), (DimVector{2, 3}));
  EXPECT_EQ(to_vec(r), (std::vector<int64_t>{1, 0, 0, 0, 0, 1}));
  EXPECT_EQ(to_vec(one_hot(scalar_tensor(1, kInt64), 3)), (std::vector<int64_t>{0, 1, 0}));
  EXPECT_EQ(one_hot(empty({0}, kInt64), 3).sizes().vec(), (DimVector{0, 3}));
  EXPECT_EQ(one_hot(tessera::tensor<int64_t>({1, 0, 1, 1}).reshape({2, 2}).t(), 2).sizes().vec(),
            (DimVector{2, 2, 2}));
  EXPECT_EQ(to_vec(one_hot(tessera::tensor<int64_t>({1, 0, 1, 1}).reshape({2, 2}).t(), 2)),
            (std::vector<int64_t>{0, 1, 0, 1, 1, 0, 0, 1}));
  EXPECT_THROW_MSG(one_hot(tessera::tensor<int64_t>({0, 2}), 2), RuntimeError,
                   "class values must be smaller than num_classes (2), but got 2");
  EXPECT_THROW_MSG(one_hot(tessera::tensor<int64_t>({0, -1})), RuntimeError,
                   "class values must be non-negative, but got -1");
  EXPECT_THROW_MSG(one_hot(tessera::tensor<int32_t>({0, 1})), TypeError,
                   "one_hot(): argument 'indices' expected dtype int64");
  EXPECT_THROW_MSG(one_hot(empty({0}, kInt64)), RuntimeError, "from an empty tensor");
}

TEST(Embedding, LookupShapesAndErrors) {
  std::mt19937 rng(28);
  const Tensor w = random_tensor({10, 4}, kFloat32, rng);
  const Tensor idx = random_index({3, 5}, 0, 10, rng);
  const Tensor e = embedding(w, idx);
  EXPECT_EQ(e.sizes().vec(), (DimVector{3, 5, 4}));
  EXPECT_TRUE(same_values(e.reshape({15, 4}), reference::index_select(w, 0, idx.reshape({15}))));
  EXPECT_TRUE(same_values(embedding(w.t().contiguous().t(), idx.to(kInt32), 0), e));
  EXPECT_EQ(embedding(w, scalar_tensor(1, kInt64)).sizes().vec(), (DimVector{4}));
  EXPECT_EQ(embedding(w, empty({0, 2}, kInt64)).sizes().vec(), (DimVector{0, 2, 4}));
  EXPECT_THROW_MSG(embedding(w, tessera::tensor<int64_t>({5, 10})), IndexError,
                   "embedding(): index 10 is out of bounds for dimension 0 with size 10");
  EXPECT_THROW_MSG(embedding(w, tessera::tensor<int64_t>({-1})), IndexError,
                   "embedding(): index -1 is out of bounds");
  EXPECT_THROW_MSG(
      embedding(w, tessera::tensor<float>({1.f})), TypeError,
      "embedding(): argument 'indices' expected dtype int64 or int32, but got float32");
  EXPECT_THROW_MSG(embedding(ones({3}, kFloat32), tessera::tensor<int64_t>({1})), RuntimeError,
                   "embedding(): argument 'weight' expected a 2-D tensor");
  EXPECT_THROW_MSG(embedding(w, idx, 10), ValueError,
                   "embedding(): argument 'padding_idx' expected a value in [-10, 9], but got 10");
}

}  // namespace
}  // namespace tessera
