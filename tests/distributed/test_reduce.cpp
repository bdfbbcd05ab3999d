// all_reduce, reduce and reduce_scatter on every dtype and reduce op, on every backend (shm at
// world sizes 1-7, gloo at 1-5) against closed-form results: each rank's input is a formula of
// (rank, index), so every rank can compute what all the others hold and fold it itself.
#include <cmath>

#include "dist_test_util.h"

namespace tessera::testing {
namespace {

using dist::ReduceOp;

// Small values that every dtype holds (after its own rounding), per op.
double input_value(ScalarType dtype, ReduceOp op, int r, int64_t i) {
  const bool boolean = dtype == kBool;
  switch (op) {
    case ReduceOp::SUM:
    case ReduceOp::AVG:
      return boolean ? ((r + i) % 3 == 0) : (r + 1) * (i % 3 + 1);
    case ReduceOp::PRODUCT:
      return boolean ? ((r + i) % 4 != 0) : ((r + i) % 3 == 0 ? 2 : 1);
    case ReduceOp::MIN:
    case ReduceOp::MAX: {
      if (boolean) return (r + i) % 3 == 0;
      const bool is_unsigned = dtype == kUInt8;
      return static_cast<double>((r * 5 + i * 3) % 11) - (is_unsigned ? 0 : 5);
    }
    default:
      return boolean ? (r + i) % 2 : (r * 37 + i * 11) % 64;
  }
}

double fold(ReduceOp op, double a, double b, bool boolean) {
  switch (op) {
    case ReduceOp::SUM:
    case ReduceOp::AVG:
      return boolean ? (a != 0 || b != 0) : a + b;
    case ReduceOp::PRODUCT:
      return boolean ? (a != 0 && b != 0) : a * b;
    case ReduceOp::MIN:
      return std::min(a, b);
    case ReduceOp::MAX:
      return std::max(a, b);
    case ReduceOp::BAND:
      return static_cast<double>(int64_t(a) & int64_t(b));
    case ReduceOp::BOR:
      return static_cast<double>(int64_t(a) | int64_t(b));
    case ReduceOp::BXOR:
      return static_cast<double>(int64_t(a) ^ int64_t(b));
  }
  return 0;
}

Tensor input(ScalarType dtype, ReduceOp op, int r, int64_t numel) {
  return filled(dtype, numel, [&](int64_t i) { return input_value(dtype, op, r, i); });
}

// The reduction of every rank's input (as the dtype holds it), rounded to the dtype.
std::vector<double> expected(ScalarType dtype, ReduceOp op, int n, int64_t numel) {
  std::vector<double> acc = as_doubles(input(dtype, op, 0, numel));
  for (int r = 1; r < n; ++r) {
    const auto v = as_doubles(input(dtype, op, r, numel));
    for (int64_t i = 0; i < numel; ++i) acc[i] = fold(op, acc[i], v[i], dtype == kBool);
  }
  if (op == ReduceOp::AVG)
    for (auto& x : acc) x /= n;
  return as_doubles(filled(dtype, numel, [&](int64_t i) { return acc[i]; }));
}

std::vector<ReduceOp> ops_for(ScalarType dtype) {
  if (is_complex(dtype)) return {ReduceOp::SUM, ReduceOp::AVG, ReduceOp::PRODUCT};
  if (is_floating_point(dtype))
    return {ReduceOp::SUM, ReduceOp::AVG, ReduceOp::PRODUCT, ReduceOp::MIN, ReduceOp::MAX};
  return {ReduceOp::SUM,  ReduceOp::PRODUCT, ReduceOp::MIN, ReduceOp::MAX,
          ReduceOp::BAND, ReduceOp::BOR,     ReduceOp::BXOR};
}

std::vector<ScalarType> reducible_dtypes() {
  std::vector<ScalarType> out;
  for (auto d : all_dtypes())
    if (!is_packed(d)) out.push_back(d);
  return out;
}

void expect_equal(const std::vector<double>& got, const std::vector<double>& want,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i] && !(std::isnan(got[i]) && std::isnan(want[i]))) {
      ADD_FAILURE() << what << ": element " << i << " is " << got[i] << ", expected " << want[i];
      return;
    }
  }
}

class Reduce : public ::testing::TestWithParam<BackendCase> {};

// 1 element, an odd count through the one-step path, and a count that takes many pipelined
// pieces of the 4 KiB buffer (5001 elements are 5001-80016 bytes).
constexpr int64_t kCounts[] = {1, 17, 5001};

TEST_P(Reduce, AllReduceEveryDtypeAndOp) {
  const int n = GetParam().world;
  run_ranks(GetParam(), [&](int r, dist::Backend& b) {
    for (ScalarType dtype : reducible_dtypes()) {
      for (ReduceOp op : ops_for(dtype)) {
        for (int64_t numel : kCounts) {
          Tensor t = input(dtype, op, r, numel);
          dist::AllreduceOptions o;
          o.reduce_op = op;
          ASSERT_TRUE(b.allreduce(t, o)->wait());
          expect_equal(as_doubles(t), expected(dtype, op, n, numel),
                       fmt::format("all_reduce {} {} n={} numel={} rank {}", dtype,
                                   dist::reduce_op_name(op), n, numel, r));
        }
      }
    }
  });
}

TEST_P(Reduce, ReduceToEachRootLeavesOthersUnchanged) {
  const int n = GetParam().world;
  run_ranks(GetParam(), [&](int r, dist::Backend& b) {
    for (ScalarType dtype : {kInt32, kBFloat16, kFloat64, kComplex64}) {
      for (int root : {0, n - 1}) {
        for (int64_t numel : kCounts) {
          const ReduceOp op = ReduceOp::SUM;
          Tensor t = input(dtype, op, r, numel);
          const auto before = as_doubles(t);
          dist::ReduceOptions o;
          o.root_rank = root;
          b.reduce(t, o)->wait();
          expect_equal(
              as_doubles(t), r == root ? expected(dtype, op, n, numel) : before,
              fmt::format("reduce {} root {} n={} numel={} rank {}", dtype, root, n, numel, r));
        }
      }
    }
  });
}

TEST_P(Reduce, ReduceScatterListAndTensor) {
  const int n = GetParam().world;
  run_ranks(GetParam(), [&](int r, dist::Backend& b) {
    for (ScalarType dtype : reducible_dtypes()) {
      for (ReduceOp op : {ReduceOp::SUM, is_complex(dtype) ? ReduceOp::PRODUCT : ReduceOp::MAX}) {
        for (int64_t numel : {int64_t{1}, int64_t{333}}) {
          // Block j of rank r's input is the formula at indices j*numel + i.
          Tensor whole = input(dtype, op, r, numel * n);
          std::vector<Tensor> list;
          for (int j = 0; j < n; ++j) list.push_back(whole.narrow(0, j * numel, numel).clone());
          const auto all = expected(dtype, op, n, numel * n);
          const std::vector<double> mine(all.begin() + r * numel, all.begin() + (r + 1) * numel);
          dist::ReduceScatterOptions o;
          o.reduce_op = op;
          Tensor out = empty({numel}, TensorOptions(dtype));
          b.reduce_scatter(out, list, o)->wait();
          expect_equal(as_doubles(out), mine, fmt::format("reduce_scatter {} n={}", dtype, n));
          Tensor out2 = empty({numel}, TensorOptions(dtype));
          b.reduce_scatter_tensor(out2, whole, o)->wait();
          expect_equal(as_doubles(out2), mine,
                       fmt::format("reduce_scatter_tensor {} n={}", dtype, n));
        }
      }
    }
  });
}

TEST_P(Reduce, DefaultSizedBuffersAgree) {
  // The default 1 MiB halves: a tensor of 600k float32 takes the pipelined path in 3 pieces.
  const int n = GetParam().world;
  run_ranks(
      GetParam(),
      [&](int r, dist::Backend& b) {
        const int64_t numel = 600'000;
        Tensor t = input(kFloat32, ReduceOp::SUM, r, numel);
        b.allreduce(t, {})->wait();
        expect_equal(as_doubles(t), expected(kFloat32, ReduceOp::SUM, n, numel), "all_reduce");
      },
      dist::ShmOptions{});
}

INSTANTIATE_TEST_SUITE_P(Backends, Reduce, ::testing::ValuesIn(backend_cases()), backend_case_name);

TEST(ShmReduceErrors, RejectsOpsADtypeCannotReduce) {
  run_ranks(1, [&](int, dist::Backend& b) {
    dist::AllreduceOptions o;
    o.reduce_op = ReduceOp::BAND;
    expect_error_mentions([&] { b.allreduce(empty({4}, TensorOptions(kFloat32)), o); },
                          {"all_reduce", "BAND", "float32"});
    o.reduce_op = ReduceOp::AVG;
    expect_error_mentions([&] { b.allreduce(empty({4}, TensorOptions(kInt32)), o); },
                          {"all_reduce", "AVG", "int32"});
    o.reduce_op = ReduceOp::MAX;
    expect_error_mentions([&] { b.allreduce(empty({4}, TensorOptions(kComplex64)), o); },
                          {"all_reduce", "MAX", "complex64"});
    o.reduce_op = ReduceOp::SUM;
    expect_error_mentions([&] { b.allreduce(empty({4}, TensorOptions(kFloat4_e2m1fn_x2)), o); },
                          {"all_reduce", "float4"});
    Tensor strided = empty({4, 4}, TensorOptions(kFloat32)).t();
    expect_error_mentions([&] { b.allreduce(strided, o); }, {"all_reduce", "contiguous"});
  });
}

}  // namespace
}  // namespace tessera::testing
