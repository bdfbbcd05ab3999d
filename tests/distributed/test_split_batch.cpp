// split_group, batch_isend_irecv and the coalesced collectives through the free functions, with
// ranks as threads on shm.
#include "dist_test_util.h"

namespace tessera::testing {
namespace {

TEST(SplitGroup, EachRankGetsItsSplitAndOthersGetNone) {
  run_world(5, [](int r) {
    auto g = dist::split_group(nullptr, {{2, 0}, {1, 3}});
    if (r == 4) {
      EXPECT_EQ(g, nullptr);  // the no-color call
    } else {
      ASSERT_NE(g, nullptr);
      const std::vector<int> want = r % 2 == 0 ? std::vector<int>{0, 2} : std::vector<int>{1, 3};
      EXPECT_EQ(g->global_ranks(), want);
      EXPECT_EQ(dist::get_rank(g), r < 2 ? 0 : 1);
      Tensor t = filled(kFloat64, 3, [&](int64_t i) { return r + i; });
      dist::all_reduce(t, dist::ReduceOp::SUM, g);
      const double base = r % 2 == 0 ? 2 : 4;
      EXPECT_EQ(as_doubles(t), (std::vector<double>{base, base + 2, base + 4}));
    }
    // A second split of the same parent is a new set of groups.
    auto all = dist::split_group(nullptr, {{0, 1, 2, 3, 4}});
    ASSERT_NE(all, nullptr);
    Tensor one = filled(kInt32, 1, [](int64_t) { return 1; });
    dist::all_reduce(one, dist::ReduceOp::SUM, all);
    EXPECT_EQ(as_doubles(one)[0], 5);
  });
}

TEST(SplitGroup, SplitsASubgroupAndNamesBadArguments) {
  run_world(4, [](int r) {
    auto sub = dist::new_group({1, 2, 3});
    if (r == 0) {
      expect_error_mentions(
          [&] {
            dist::split_group(sub, {{1}, {2, 3}});
          },
          {"split_group", "not a member", "parent group"});
    } else {
      auto g = dist::split_group(sub, {{1}, {3, 2}});
      ASSERT_NE(g, nullptr);
      EXPECT_EQ(dist::get_world_size(g), r == 1 ? 1 : 2);
      Tensor t = filled(kFloat32, 2, [&](int64_t) { return r; });
      dist::all_reduce(t, dist::ReduceOp::MAX, g);
      EXPECT_EQ(as_doubles(t)[0], r == 1 ? 1 : 3);
      expect_error_mentions(
          [&] {
            dist::split_group(sub, {{0, 1}, {2, 3}});
          },
          {"split_ranks[0]", "rank 0", "not in the parent group", "1, 2, 3"});
    }
    expect_error_mentions(
        [&] {
          dist::split_group(nullptr, {{0, 1}, {1, 2}});
        },
        {"rank 1", "more than one", "disjoint"});
    expect_error_mentions(
        [&] {
          dist::split_group(nullptr, {{0, 1}, {}});
        },
        {"split_ranks[1]", "empty"});
    expect_error_mentions([&] { dist::split_group(nullptr, {}); }, {"split_ranks", "at least one"});
  });
}

TEST(BatchIsendIrecv, ExchangesWithBothNeighboursInOneBatch) {
  run_world(4, [](int r) {
    const int n = 4, next = (r + 1) % n, prev = (r + n - 1) % n;
    Tensor to_next = filled(kFloat32, 5, [&](int64_t i) { return 10 * r + i; });
    Tensor to_prev = filled(kFloat32, 3, [&](int64_t i) { return -10 * r - i; });
    Tensor from_prev = zeros({5}), from_next = zeros({3});
    using K = dist::P2POp::Kind;
    auto works = dist::batch_isend_irecv({{K::kIrecv, from_prev, prev, nullptr, 1},
                                          {K::kIsend, to_next, next, nullptr, 1},
                                          {K::kIsend, to_prev, prev, nullptr, 2},
                                          {K::kIrecv, from_next, next, nullptr, 2}});
    ASSERT_EQ(works.size(), 4u);
    for (auto& w : works) EXPECT_TRUE(w->wait());
    EXPECT_EQ(as_doubles(from_prev),
              as_doubles(filled(kFloat32, 5, [&](int64_t i) { return 10 * prev + i; })));
    EXPECT_EQ(as_doubles(from_next),
              as_doubles(filled(kFloat32, 3, [&](int64_t i) { return -10 * next - i; })));
  });
}

TEST(BatchIsendIrecv, ABadListIssuesNothing) {
  run_world(2, [](int r) {
    using K = dist::P2POp::Kind;
    const int peer = 1 - r;
    auto sub = dist::new_group({0, 1});
    // The second op names a rank outside the group: the first (a send) must not go out.
    expect_error_mentions(
        [&] {
          dist::batch_isend_irecv({{K::kIsend, full({2}, 99.0), peer, nullptr, 0},
                                   {K::kIrecv, zeros({2}), 5, nullptr, 0}});
        },
        {"global rank 5 is not in the group"});
    expect_error_mentions(
        [&] {
          dist::batch_isend_irecv({{K::kIsend, full({2}, 99.0), peer, nullptr, 0},
                                   {K::kIrecv, zeros({2}), peer, sub, 0}});
        },
        {"batch_isend_irecv", "same group", "op 1"});
    expect_error_mentions([&] { dist::batch_isend_irecv({}); }, {"p2p_op_list", "at least one"});
    // Had a 99 gone out, this receive would get it.
    Tensor got = zeros({2});
    auto works = dist::batch_isend_irecv(
        {{K::kIsend, full({2}, static_cast<double>(r)), peer}, {K::kIrecv, got, peer}});
    for (auto& w : works) EXPECT_TRUE(w->wait());
    EXPECT_EQ(as_doubles(got), (std::vector<double>{double(peer), double(peer)}));
  });
}

TEST(AllReduceCoalesced, ReducesEveryTensorInOneCollective) {
  run_world(3, [](int r) {
    Tensor a = filled(kFloat64, 6, [&](int64_t i) { return r + i; }).view({2, 3});
    Tensor b = filled(kFloat64, 12, [&](int64_t i) { return r * i; }).view({3, 4}).t();  // strided
    Tensor c = full({}, static_cast<double>(r + 1), kFloat64);
    const uint64_t before = dist::group_world()->collective_seq_id();
    dist::all_reduce_coalesced({a, b, c});
    EXPECT_EQ(dist::group_world()->collective_seq_id(), before + 1);  // one collective
    EXPECT_EQ(as_doubles(a.reshape({-1})), (std::vector<double>{3, 6, 9, 12, 15, 18}));
    std::vector<double> want_b;
    for (int64_t j = 0; j < 4; ++j)  // b = (r * [3x4 iota]).t(), summed over r = 0, 1, 2
      for (int64_t i = 0; i < 3; ++i) want_b.push_back(3.0 * (i * 4 + j));
    EXPECT_EQ(as_doubles(b.contiguous().reshape({-1})), want_b);
    EXPECT_EQ(c.item<double>(), 6);
    // async, then wait; MAX
    Tensor d = filled(kInt64, 4, [&](int64_t i) { return r * 10 + i; });
    auto w = dist::all_reduce_coalesced({d}, dist::ReduceOp::MAX, nullptr, true);
    EXPECT_TRUE(w->wait());
    EXPECT_EQ(as_doubles(d), (std::vector<double>{20, 21, 22, 23}));
    expect_error_mentions(
        [&] {
          dist::all_reduce_coalesced({a, d});
        },
        {"all_reduce_coalesced", "one dtype", "tensors[1]", "int64"});
    expect_error_mentions([&] { dist::all_reduce_coalesced({}); }, {"tensors", "at least one"});
  });
}

// Two pairs of different sizes, one of them written through a strided view, in one collective.
TEST(AllGatherIntoTensorCoalesced, GathersEveryPairInOneCollective) {
  run_world(3, [](int r) {
    const Tensor a = filled(kFloat64, 2, [&](int64_t i) { return 10 * r + i; });
    const Tensor b = filled(kFloat64, 3, [&](int64_t i) { return 100 * r + i; }).view({3, 1});
    Tensor oa = zeros({6}, TensorOptions(kFloat64));
    Tensor ob_storage = zeros({3, 3}, TensorOptions(kFloat64));
    Tensor ob = ob_storage.t();  // strided
    const uint64_t before = dist::group_world()->collective_seq_id();
    dist::all_gather_into_tensor_coalesced({oa, ob}, {a, b});
    EXPECT_EQ(dist::group_world()->collective_seq_id(), before + 1);
    EXPECT_EQ(as_doubles(oa), (std::vector<double>{0, 1, 10, 11, 20, 21}));
    EXPECT_EQ(as_doubles(ob.contiguous().reshape({-1})),
              (std::vector<double>{0, 1, 2, 100, 101, 102, 200, 201, 202}));
    auto w = dist::all_gather_into_tensor_coalesced({oa}, {a}, nullptr, true);
    EXPECT_TRUE(w->wait());
    expect_error_mentions(
        [&] { dist::all_gather_into_tensor_coalesced({zeros({5}, TensorOptions(kFloat64))}, {a}); },
        {"all_gather_into_tensor_coalesced", "outputs[0]", "6 elements", "5"});
    expect_error_mentions(
        [&] {
          dist::all_gather_into_tensor_coalesced({oa}, {a, b});
        },
        {"as many outputs as inputs", "1 and 2"});
    expect_error_mentions(
        [&] {
          dist::all_gather_into_tensor_coalesced({oa, zeros({9}, TensorOptions(kFloat32))}, {a, b});
        },
        {"one dtype", "outputs[1]", "float32"});
  });
}

TEST(ReduceScatterTensorCoalesced, ReducesEveryPairInOneCollective) {
  run_world(3, [](int r) {
    // inputs[0]: 3 chunks of 2, inputs[1]: 3 chunks of 1; rank r contributes (r + 1) * value.
    const Tensor a = filled(kFloat64, 6, [&](int64_t i) { return (r + 1) * (i + 1.0); });
    const Tensor b = filled(kFloat64, 3, [&](int64_t i) { return (r + 1) * (10.0 + i); });
    Tensor oa = zeros({2}, TensorOptions(kFloat64)), ob = zeros({1, 1}, TensorOptions(kFloat64));
    const uint64_t before = dist::group_world()->collective_seq_id();
    dist::reduce_scatter_tensor_coalesced({oa, ob}, {a, b});
    EXPECT_EQ(dist::group_world()->collective_seq_id(), before + 1);
    // sum over r of (r + 1) = 6: chunk r of each input, times 6.
    EXPECT_EQ(as_doubles(oa), (std::vector<double>{6.0 * (2 * r + 1), 6.0 * (2 * r + 2)}));
    EXPECT_EQ(as_doubles(ob.reshape({-1})), (std::vector<double>{6.0 * (10 + r)}));
    auto w =
        dist::reduce_scatter_tensor_coalesced({oa, ob}, {a, b}, dist::ReduceOp::MAX, nullptr, true);
    EXPECT_TRUE(w->wait());
    EXPECT_EQ(as_doubles(oa), (std::vector<double>{3.0 * (2 * r + 1), 3.0 * (2 * r + 2)}));
    expect_error_mentions([&] { dist::reduce_scatter_tensor_coalesced({oa}, {b}); },
                          {"reduce_scatter_tensor_coalesced", "inputs[0]", "6 elements", "3"});
  });
}

TEST(BackendSpec, ACpuEntryChoosesTheBackendAndOtherDevicesAreRefused) {
  run_world(
      2,
      [](int r) {
        EXPECT_EQ(dist::get_backend(), "shm");
        auto g = dist::new_group({0, 1}, std::nullopt, "cpu:lazy");
        EXPECT_EQ(g->backend_name(), "lazy");
        Tensor t = full({2}, static_cast<double>(r + 1));
        dist::all_reduce(t, dist::ReduceOp::SUM, g);
        EXPECT_EQ(as_doubles(t)[0], 3);
        expect_error_mentions(
            [] {
              dist::new_group({0, 1}, std::nullopt, "cpu:shm,cuda:nccl");
            },
            {"cpu:shm,cuda:nccl", "cuda", "CPU only"});
        expect_error_mentions(
            [] {
              dist::new_group({0, 1}, std::nullopt, "cpu:shm,cpu:gloo");
            },
            {"names the cpu twice"});
        expect_error_mentions(
            [] {
              dist::new_group({0, 1}, std::nullopt, "cpu:");
            },
            {"'device:backend'", "'cpu:'"});
      },
      "cpu:shm");
}

}  // namespace
}  // namespace tessera::testing
