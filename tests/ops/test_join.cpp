// cat, stack, split, chunk, tril, triu: shapes, dtypes (promotion), layouts, zero sizes and
// error messages.
#include "ops/index_test_util.h"
#include "ops/reference/index_reference.h"

namespace tessera {
namespace {

using namespace tessera::testing;

// Checks that out is the concatenation of parts along dim (values through float64).
void expect_concatenation(const Tensor& out, const std::vector<Tensor>& parts, int64_t dim) {
  int64_t off = 0;
  for (const Tensor& p : parts) {
    if (p.dim() == 1 && p.size(0) == 0) continue;
    const Tensor piece = out.narrow(dim, off, p.size(dim));
    EXPECT_TRUE(same_values(piece, p.to(out.dtype())));
    off += p.size(dim);
  }
  EXPECT_EQ(off, out.size(dim));
}

TEST(Cat, ShapesDtypesLayouts) {
  std::mt19937 rng(1);
  const std::vector<DimVector> shapes = {{1}, {3}, {7, 17}, {3, 1, 5}, {17, 3, 7}, {2, 3, 4, 5}};
  for (ScalarType dt : all_test_dtypes()) {
    for (const DimVector& shape : shapes) {
      for (int64_t dim = 0; dim < static_cast<int64_t>(shape.size()); ++dim) {
        for (Layout l : all_layouts()) {
          SCOPED_TRACE(fmt::format("{} {} dim {} {}", dtype_name(dt), shape, dim, layout_name(l)));
          std::vector<Tensor> parts;
          for (int64_t extent : {int64_t{1}, int64_t{3}, int64_t{0}, int64_t{7}}) {
            DimVector s = shape;
            s[dim] = extent;
            parts.push_back(relayout(random_tensor(s, dt, rng), l));
          }
          const Tensor out = cat(parts, dim);
          EXPECT_EQ(out.dtype(), dt);
          EXPECT_TRUE(out.is_contiguous());
          expect_concatenation(out, parts, dim);
          // Negative dim is the same op.
          EXPECT_TRUE(same_values(cat(parts, dim - static_cast<int64_t>(shape.size())), out));
        }
      }
    }
  }
}

TEST(Cat, LargeParallelMatchesSerial) {
  std::mt19937 rng(2);
  const Tensor a = random_tensor({300, 257}, kFloat32, rng);
  const Tensor b = random_tensor({300, 100}, kFloat32, rng);
  const Tensor c = random_tensor({300, 1}, kFloat32, rng);
  const int threads = get_num_threads();
  const Tensor par = cat({a, b, c}, 1);
  set_num_threads(1);
  const Tensor ser = cat({a, b, c}, 1);
  set_num_threads(threads);
  EXPECT_TRUE(same_values(par, ser));
  expect_concatenation(par, {a, b, c}, 1);
}

TEST(Cat, PromotesLikeTorch) {
  EXPECT_EQ(cat({ones({2}, kBool), ones({2}, kInt8)}).dtype(), kInt8);
  EXPECT_EQ(cat({ones({2}, kFloat16), ones({2}, kBFloat16)}).dtype(), kFloat32);
  EXPECT_EQ(cat({ones({2}, kInt32), ones({2}, kFloat16)}).dtype(), kFloat16);
  EXPECT_EQ(cat({ones({2}, kInt64), ones({2}, kUInt8)}).dtype(), kInt64);
  EXPECT_EQ(cat({ones({2}, kFloat32), ones({2}, kFloat64)}).dtype(), kFloat64);
  const Tensor mixed = cat({full({2, 2}, 3, kInt32), full({1, 2}, 0.5, kFloat32)});
  EXPECT_EQ(mixed.dtype(), kFloat32);
  EXPECT_EQ(to_dvec(mixed), (std::vector<double>{3, 3, 3, 3, 0.5, 0.5}));
}

TEST(Cat, SkipsLegacyEmptyTensors) {
  // torch.cat skips 1-d size-0 tensors in the shape checks but not in dtype promotion.
  const Tensor out = cat({zeros({0}, kFloat64), ones({2, 3}, kFloat32)}, 1);
  EXPECT_EQ(out.dtype(), kFloat64);
  EXPECT_EQ(out.sizes().vec(), (DimVector{2, 3}));
  const Tensor only_empty = cat({zeros({0}), zeros({0})}, 1);
  EXPECT_EQ(only_empty.sizes().vec(), (DimVector{0}));
  EXPECT_EQ(cat({zeros({0, 3}), ones({2, 3}, kFloat32)}, 0).sizes().vec(), (DimVector{2, 3}));
}

TEST(Cat, ZeroSize) {
  EXPECT_EQ(cat({zeros({0, 4}), zeros({0, 4})}, 0).sizes().vec(), (DimVector{0, 4}));
  EXPECT_EQ(cat({zeros({0, 4}), zeros({0, 2})}, 1).sizes().vec(), (DimVector{0, 6}));
  EXPECT_EQ(cat({zeros({3, 0}), zeros({3, 0})}, 0).sizes().vec(), (DimVector{6, 0}));
}

TEST(Cat, ExpandedAndTransposedInputs) {
  std::mt19937 rng(3);
  const Tensor row = random_tensor({1, 5}, kFloat32, rng);
  const Tensor expanded = row.expand({4, 5});
  const Tensor t = random_tensor({5, 3}, kFloat32, rng).t();
  const Tensor out = cat({expanded, t}, 0);
  expect_concatenation(out, {expanded, t}, 0);
}

TEST(Cat, Errors) {
  EXPECT_THROW_MSG(cat({}), RuntimeError, "cat(): expected a non-empty list of Tensors");
  EXPECT_THROW_MSG(cat({scalar_tensor(1.0), ones({2}, kFloat32)}), RuntimeError,
                   "zero-dimensional tensor (at position 0) cannot be concatenated");
  EXPECT_THROW_MSG(cat({ones({2, 3}, kFloat32), ones({2, 4}, kFloat32)}), RuntimeError,
                   "Sizes of tensors must match except in dimension 0. Expected size 3 but got "
                   "size 4 for tensor number 1 in the list.");
  EXPECT_THROW_MSG(cat({ones({2, 3}, kFloat32), ones({2, 3, 1}, kFloat32)}), RuntimeError,
                   "Tensors must have same number of dimensions: got 2 and 3");
  EXPECT_THROW_MSG(cat({ones({2, 3}, kFloat32)}, 2), IndexError, "cat()");
  EXPECT_THROW_MSG(cat({zeros({2, 0}), ones({2, 3}, kFloat32)}, 0), RuntimeError,
                   "Expected size 0 but got size 3 for tensor number 1");
}

TEST(Stack, ShapesAndDims) {
  std::mt19937 rng(4);
  for (ScalarType dt : {kFloat32, kInt64, kBool, kBFloat16}) {
    const Tensor a = random_tensor({3, 7}, dt, rng);
    const Tensor b = relayout(random_tensor({3, 7}, dt, rng), Layout::kTransposed);
    for (int64_t dim : {0, 1, 2, -1, -3}) {
      const Tensor s = stack({a, b}, dim);
      const int64_t d = dim < 0 ? dim + 3 : dim;
      DimVector want = {3, 7};
      want.insert(want.begin() + d, 2);
      EXPECT_EQ(s.sizes().vec(), want);
      EXPECT_TRUE(same_values(s.select(d, 0), a));
      EXPECT_TRUE(same_values(s.select(d, 1), b));
    }
  }
  EXPECT_EQ(stack({ones({2, 3}, kInt32), ones({2, 3}, kFloat32)}, 2).dtype(), kFloat32);
  EXPECT_EQ(stack({scalar_tensor(1.0), scalar_tensor(2.0)}).sizes().vec(), (DimVector{2}));
  EXPECT_EQ(stack({zeros({0, 2}), zeros({0, 2})}, 1).sizes().vec(), (DimVector{0, 2, 2}));
}

TEST(Stack, Errors) {
  EXPECT_THROW_MSG(stack({}), RuntimeError, "stack(): expects a non-empty TensorList");
  EXPECT_THROW_MSG(stack({ones({2, 3}, kFloat32), ones({2, 4}, kFloat32)}), RuntimeError,
                   "expects each tensor to be equal size, but got [2, 3] at entry 0 and [2, 4] at "
                   "entry 1");
  EXPECT_THROW_MSG(stack({ones({2, 3}, kFloat32)}, 3), IndexError, "stack()");
}

TEST(Split, SizesAndViews) {
  const Tensor a = arange(10).reshape({5, 2});
  auto parts = split(a, 2);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0].sizes().vec(), (DimVector{2, 2}));
  EXPECT_EQ(parts[2].sizes().vec(), (DimVector{1, 2}));
  EXPECT_EQ(to_vec(parts[2]), (std::vector<int64_t>{8, 9}));
  EXPECT_TRUE(parts[1].is_alias_of(a));
  auto cols = a.split(1, -1);
  ASSERT_EQ(cols.size(), 2u);
  EXPECT_EQ(to_vec(cols[1]), (std::vector<int64_t>{1, 3, 5, 7, 9}));
  auto uneven = a.split(DimVector{1, 0, 4}, 0);
  ASSERT_EQ(uneven.size(), 3u);
  EXPECT_EQ(uneven[1].size(0), 0);
  EXPECT_EQ(uneven[2].size(0), 4);
  EXPECT_EQ(split(zeros({0}), 0).size(), 1u);
  EXPECT_EQ(split(zeros({0}), 2).size(), 1u);
  EXPECT_EQ(split(a, 7).size(), 1u);
}

TEST(Split, Errors) {
  EXPECT_THROW_MSG(split(ones({5}, kFloat32), -1), RuntimeError,
                   "split_size be non-negative, but got split_size=-1");
  EXPECT_THROW_MSG(split(ones({5}, kFloat32), 0), RuntimeError,
                   "split_size can only be 0 if dimension size is 0, but got dimension size of 5");
  EXPECT_THROW_MSG(split(ones({5}, kFloat32), DimVector{2, 2}), RuntimeError,
                   "expects split_sizes to sum exactly to 5 (input tensor's size at dimension 0), "
                   "but got split_sizes=[2, 2]");
  EXPECT_THROW_MSG(split(ones({5}, kFloat32), DimVector{6, -1}), RuntimeError,
                   "only non-negative entries, but got split_sizes=[6, -1]");
  EXPECT_THROW_MSG(split(scalar_tensor(1.0), 1), RuntimeError,
                   "expects at least a 1-dimensional tensor");
  EXPECT_THROW_MSG(split(ones({2, 3}, kFloat32), 1, 2), IndexError, "split()");
}

TEST(Chunk, SizesLikeTorch) {
  auto sizes_of = [](const std::vector<Tensor>& v) {
    std::vector<int64_t> s;
    for (const Tensor& t : v) s.push_back(t.size(0));
    return s;
  };
  EXPECT_EQ(sizes_of(chunk(ones({5}, kFloat32), 3)), (std::vector<int64_t>{2, 2, 1}));
  EXPECT_EQ(sizes_of(chunk(ones({6}, kFloat32), 4)), (std::vector<int64_t>{2, 2, 2}));
  EXPECT_EQ(sizes_of(chunk(ones({0}, kFloat32), 3)), (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(sizes_of(ones({17}, kFloat32).chunk(17)), std::vector<int64_t>(17, 1));
  EXPECT_EQ(sizes_of(ones({3}, kFloat32).chunk(7)), (std::vector<int64_t>{1, 1, 1}));
  EXPECT_THROW_MSG(chunk(ones({5}, kFloat32), 0), RuntimeError,
                   "expects `chunks` to be greater than 0, got: 0");
  EXPECT_THROW_MSG(chunk(scalar_tensor(1.0), 1), RuntimeError,
                   "expects at least a 1-dimensional tensor");
}

TEST(Triangular, MatchesReference) {
  std::mt19937 rng(5);
  const std::vector<DimVector> shapes = {{1, 1}, {3, 7}, {7, 3}, {17, 17}, {2, 3, 5}, {2, 1, 4, 4}};
  for (ScalarType dt : all_test_dtypes()) {
    for (const DimVector& shape : shapes) {
      for (Layout l : all_layouts()) {
        const Tensor a = relayout(random_tensor(shape, dt, rng), l);
        for (int64_t diag : {-100, -3, -1, 0, 1, 2, 100}) {
          SCOPED_TRACE(
              fmt::format("{} {} {} diag {}", dtype_name(dt), shape, layout_name(l), diag));
          EXPECT_TRUE(same_values(tril(a, diag), reference::triangle(a, diag, true)));
          EXPECT_TRUE(same_values(a.triu(diag), reference::triangle(a, diag, false)));
        }
      }
    }
  }
}

TEST(Triangular, LargeAndZeroSizeAndErrors) {
  std::mt19937 rng(6);
  const Tensor a = random_tensor({3, 130, 257}, kFloat32, rng);
  EXPECT_TRUE(same_values(tril(a, 5), reference::triangle(a, 5, true)));
  EXPECT_TRUE(
      same_values(triu(a.transpose(1, 2), -7), reference::triangle(a.transpose(1, 2), -7, false)));
  EXPECT_EQ(tril(zeros({0, 3})).sizes().vec(), (DimVector{0, 3}));
  EXPECT_EQ(triu(zeros({2, 0, 3})).sizes().vec(), (DimVector{2, 0, 3}));
  const int64_t big = std::numeric_limits<int64_t>::max();
  EXPECT_TRUE(same_values(tril(a, big), a));
  EXPECT_TRUE(same_values(triu(a, -big), a));
  EXPECT_THROW_MSG(tril(ones({3}, kFloat32)), RuntimeError,
                   "tril(): argument 'input' expected a tensor "
                   "with at least 2 dimensions, but got 1 dims");
  EXPECT_THROW_MSG(triu(scalar_tensor(1.0)), RuntimeError, "triu()");
}

TEST(Triangular, Float8MovesBytes) {
  // No arithmetic on the elements: any dtype works, float8 included.
  const Tensor bytes = arange(1, 17).to(kUInt8).reshape({4, 4});
  const Tensor f8 = bytes.view(kFloat8_e4m3fn);
  EXPECT_EQ(to_vec(tril(f8).view(kUInt8)), to_vec(tril(bytes)));
}

}  // namespace
}  // namespace tessera
