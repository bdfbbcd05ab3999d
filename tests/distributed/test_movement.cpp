// broadcast, all_gather, gather, scatter, all_to_all_single, barrier and send/recv on every
// dtype (float4 included: these ops move bytes), on every backend (shm at world sizes 1-7, gloo
// at 1-5). Rank r's byte i is a formula of (r, i), so every expected buffer is known in closed
// form.
#include "dist_test_util.h"

namespace tessera::testing {
namespace {

uint8_t pattern(int r, int64_t i) {
  return static_cast<uint8_t>(r * 31 + i * 7 + 1);
}

Tensor rank_tensor(ScalarType dtype, int r, int64_t numel) {
  return with_bytes(dtype, numel, [&](int64_t i) { return pattern(r, i); });
}

std::vector<uint8_t> rank_bytes(ScalarType dtype, int r, int64_t numel) {
  return bytes_of(rank_tensor(dtype, r, numel));
}

// One element, an odd count, and enough elements to take several 4 KiB pieces.
constexpr int64_t kCounts[] = {1, 13, 1201};

class Movement : public ::testing::TestWithParam<BackendCase> {};

TEST_P(Movement, BroadcastFromEachRoot) {
  const int n = GetParam().world;
  run_ranks(GetParam(), [&](int r, dist::Backend& b) {
    for (ScalarType dtype : all_dtypes()) {
      for (int root : {0, n / 2, n - 1}) {
        for (int64_t numel : kCounts) {
          Tensor t = rank_tensor(dtype, r, numel);
          dist::BroadcastOptions o;
          o.root_rank = root;
          b.broadcast(t, o)->wait();
          EXPECT_EQ(bytes_of(t), rank_bytes(dtype, root, numel))
              << "broadcast " << dtype_name(dtype) << " root " << root << " rank " << r;
        }
      }
    }
  });
}

TEST_P(Movement, AllGatherListAndIntoTensor) {
  const int n = GetParam().world;
  run_ranks(GetParam(), [&](int r, dist::Backend& b) {
    for (ScalarType dtype : all_dtypes()) {
      for (int64_t numel : kCounts) {
        Tensor in = rank_tensor(dtype, r, numel);
        std::vector<Tensor> outs;
        for (int k = 0; k < n; ++k) outs.push_back(empty({numel}, TensorOptions(dtype)));
        b.allgather(outs, in, {})->wait();
        Tensor flat = empty({numel * n}, TensorOptions(dtype));
        b.allgather_into_tensor(flat, in, {})->wait();
        std::vector<uint8_t> want_flat;
        for (int k = 0; k < n; ++k) {
          const auto want = rank_bytes(dtype, k, numel);
          EXPECT_EQ(bytes_of(outs[k]), want)
              << "all_gather " << dtype_name(dtype) << " from rank " << k;
          want_flat.insert(want_flat.end(), want.begin(), want.end());
        }
        EXPECT_EQ(bytes_of(flat), want_flat) << "all_gather_into_tensor " << dtype_name(dtype);
      }
    }
  });
}

TEST_P(Movement, GatherAndScatter) {
  const int n = GetParam().world;
  run_ranks(GetParam(), [&](int r, dist::Backend& b) {
    for (ScalarType dtype : all_dtypes()) {
      for (int root : {0, n - 1}) {
        for (int64_t numel : kCounts) {
          std::vector<Tensor> outs;
          if (r == root)
            for (int k = 0; k < n; ++k) outs.push_back(empty({numel}, TensorOptions(dtype)));
          dist::GatherOptions g;
          g.root_rank = root;
          b.gather(outs, rank_tensor(dtype, r, numel), g)->wait();
          for (int k = 0; k < static_cast<int>(outs.size()); ++k)
            EXPECT_EQ(bytes_of(outs[k]), rank_bytes(dtype, k, numel))
                << "gather " << dtype_name(dtype);

          // The root scatters the tensor of "rank n + k" to rank k.
          std::vector<Tensor> ins;
          if (r == root)
            for (int k = 0; k < n; ++k) ins.push_back(rank_tensor(dtype, n + k, numel));
          Tensor out = empty({numel}, TensorOptions(dtype));
          dist::ScatterOptions s;
          s.root_rank = root;
          b.scatter(out, ins, s)->wait();
          EXPECT_EQ(bytes_of(out), rank_bytes(dtype, n + r, numel))
              << "scatter " << dtype_name(dtype);
        }
      }
    }
  });
}

// Rank r sends (r + 2j + f) % 4 rows to rank j (some zero), rows of 3 elements; every element
// encodes (sender, receiver, row, column).
int64_t rows_between(int src, int dst, int flavour) {
  return (src + 2 * dst + flavour) % 4;
}

TEST_P(Movement, AllToAllSingleUnevenSplits) {
  const int n = GetParam().world;
  run_ranks(GetParam(), [&](int r, dist::Backend& b) {
    for (ScalarType dtype : {kInt32, kFloat64, kBFloat16, kUInt8}) {
      for (int flavour = 0; flavour < 3; ++flavour) {
        std::vector<int64_t> in_splits, out_splits;
        int64_t in_rows = 0, out_rows = 0;
        for (int j = 0; j < n; ++j) {
          in_splits.push_back(rows_between(r, j, flavour));
          out_splits.push_back(rows_between(j, r, flavour));
          in_rows += in_splits.back();
          out_rows += out_splits.back();
        }
        const auto value = [](int src, int dst, int64_t row, int64_t col) {
          return static_cast<double>((src * 7 + dst * 3 + row * 5 + col) % 50);
        };
        Tensor in = empty({in_rows, 3}, TensorOptions(kFloat64));
        for (int j = 0, row = 0; j < n; ++j)
          for (int64_t k = 0; k < in_splits[j]; ++k, ++row)
            for (int c = 0; c < 3; ++c) in.data_ptr<double>()[row * 3 + c] = value(r, j, k, c);
        std::vector<double> want;
        for (int j = 0; j < n; ++j)
          for (int64_t k = 0; k < out_splits[j]; ++k)
            for (int c = 0; c < 3; ++c) want.push_back(value(j, r, k, c));
        Tensor out = empty({out_rows, 3}, TensorOptions(dtype));
        b.alltoall_base(out, in.to(dtype), out_splits, in_splits, {})->wait();
        EXPECT_EQ(as_doubles(out), want)
            << "all_to_all_single " << dtype_name(dtype) << " rank " << r;
      }
      // Even splits (no split sizes given), big enough for several rounds.
      Tensor in = empty({int64_t{n} * 700}, TensorOptions(dtype));
      Tensor src = filled(kFloat64, n * 700, [&](int64_t i) { return (r * 13 + i) % 97; });
      in.copy_(src);
      Tensor out = empty({int64_t{n} * 700}, TensorOptions(dtype));
      b.alltoall_base(out, in, {}, {}, {})->wait();
      std::vector<double> want;
      for (int j = 0; j < n; ++j)
        for (int64_t i = 0; i < 700; ++i) want.push_back((j * 13 + r * 700 + i) % 97);
      EXPECT_EQ(as_doubles(out), want) << "all_to_all_single even " << dtype_name(dtype);
    }
  });
}

TEST_P(Movement, SendRecvWithTagsInAnyOrder) {
  const int n = GetParam().world;
  run_ranks(GetParam(), [&](int r, dist::Backend& b) {
    const int next = (r + 1) % n, prev = (r + n - 1) % n;
    for (ScalarType dtype : all_dtypes()) {
      // Two messages to the next rank (tags 1 then 2, the second larger than the ring); the
      // receiver posts tag 2 first, so tag 1 must wait in the stash.
      Tensor a = rank_tensor(dtype, r, 5), big = rank_tensor(dtype, r + 100, 3000);
      dist::SendRecvOptions t1, t2;
      t1.tag = 1;
      t2.tag = 2;
      auto s1 = b.send(a, next, t1);
      auto s2 = b.send(big, next, t2);
      Tensor got_big = empty({3000}, TensorOptions(dtype));
      Tensor got_a = empty({5}, TensorOptions(dtype));
      auto r2 = b.recv(got_big, prev, t2);
      auto r1 = b.recv(got_a, prev, t1);
      for (auto& w : {s1, s2, r2, r1}) EXPECT_TRUE(w->wait());
      EXPECT_EQ(bytes_of(got_a), rank_bytes(dtype, prev, 5)) << "recv tag 1 " << dtype_name(dtype);
      EXPECT_EQ(bytes_of(got_big), rank_bytes(dtype, prev + 100, 3000))
          << "recv tag 2 " << dtype_name(dtype);
    }
  });
}

TEST_P(Movement, ManyAsyncOpsCompleteInOrder) {
  const int n = GetParam().world;
  run_ranks(GetParam(), [&](int r, dist::Backend& b) {
    std::vector<Tensor> ts;
    std::vector<dist::WorkPtr> works;
    for (int k = 0; k < 50; ++k) {
      ts.push_back(filled(kInt64, 9, [&](int64_t i) { return r * 1000 + k * 10 + i; }));
      works.push_back(b.allreduce(ts.back(), {}));
      if (k % 10 == 0) works.push_back(b.barrier({}));
    }
    for (auto& w : works) EXPECT_TRUE(w->wait());
    const double ranks_sum = n * (n - 1) / 2.0;
    for (int k = 0; k < 50; ++k) {
      const auto got = as_doubles(ts[k]);
      for (int64_t i = 0; i < 9; ++i) EXPECT_EQ(got[i], ranks_sum * 1000 + n * (k * 10 + i));
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Backends, Movement, ::testing::ValuesIn(backend_cases()),
                         backend_case_name);

TEST(ShmMovementErrors, BadArgumentsNameTheOpAndBothValues) {
  run_ranks(2, [&](int r, dist::Backend& b) {
    Tensor t = empty({4}, TensorOptions(kFloat32));
    dist::BroadcastOptions o;
    o.root_rank = 2;
    expect_error_mentions([&] { b.broadcast(t, o); }, {"broadcast", "root_rank", "[0, 2)", "2"});
    expect_error_mentions([&] { b.allgather({t}, t, {}); },
                          {"all_gather", "tensor_list", "one tensor per rank (2)", "got 1"});
    expect_error_mentions(
        [&] {
          b.allgather({t, empty({5}, TensorOptions(kFloat32))}, t, {});
        },
        {"all_gather", "tensor_list[1]", "4 elements", "got 5"});
    expect_error_mentions(
        [&] { b.allgather_into_tensor(empty({7}, TensorOptions(kFloat32)), t, {}); },
        {"all_gather_into_tensor", "8 elements", "got 7"});
    expect_error_mentions(
        [&] {
          b.alltoall_base(t, t.clone(), {1, 1}, {3, 2}, {});
        },
        {"all_to_all_single", "input_split_sizes", "sum to dim 0 (4)", "5"});
    expect_error_mentions([&] { b.send(t, 5, {}); }, {"send", "dst", "[0, 2)", "5"});
    b.barrier({})->wait();
  });
}

// From 128 KiB per rank, shm's all_gather, gather, broadcast and all_to_all (its largest
// block) and all_reduce (from 512 KiB per rank's block) read the peers' tensors directly
// (process_vm_readv; all_reduce writes its reduced block into them with process_vm_writev;
// here the ranks are threads of one process, so each reads and writes its own address space).
// `single_copy[r]` is rank r's ShmOptions::single_copy: a rank with it off turns the single-copy
// form off for the whole group at the first such op, and the results stay right before and after.
void large_moves(const std::vector<bool>& single_copy) {
  const int n = static_cast<int>(single_copy.size());
  auto store = std::make_shared<dist::HashStore>(kTestTimeout);
  run_threads(n, [&](int r) {
    dist::ShmOptions o = small_buffers();
    o.single_copy = single_copy[static_cast<size_t>(r)];
    auto b = dist::make_shm_backend(store, r, n, kTestTimeout, o);
    // 160 KiB and an odd count above the threshold, in two dtypes (the count decides).
    for (const auto& [dtype, numel] :
         {std::pair{kFloat32, int64_t{40000}}, std::pair{kUInt8, int64_t{131073}},
          std::pair{kFloat32, int64_t{40000}}}) {
      Tensor in = rank_tensor(dtype, r, numel);
      std::vector<Tensor> outs;
      for (int k = 0; k < n; ++k) outs.push_back(empty({numel}, TensorOptions(dtype)));
      b->allgather(outs, in, {})->wait();
      Tensor flat = empty({numel * n}, TensorOptions(dtype));
      b->allgather_into_tensor(flat, in, {})->wait();
      std::vector<uint8_t> want_flat;
      for (int k = 0; k < n; ++k) {
        const auto want = rank_bytes(dtype, k, numel);
        EXPECT_EQ(bytes_of(outs[k]), want) << "all_gather from rank " << k << " on rank " << r;
        want_flat.insert(want_flat.end(), want.begin(), want.end());
      }
      EXPECT_EQ(bytes_of(flat), want_flat) << "all_gather_into_tensor on rank " << r;
      for (int root : {0, n - 1}) {
        std::vector<Tensor> gathered;
        if (r == root)
          for (int k = 0; k < n; ++k) gathered.push_back(empty({numel}, TensorOptions(dtype)));
        dist::GatherOptions g;
        g.root_rank = root;
        b->gather(gathered, in, g)->wait();
        for (int k = 0; k < static_cast<int>(gathered.size()); ++k)
          EXPECT_EQ(bytes_of(gathered[k]), rank_bytes(dtype, k, numel)) << "gather at " << root;
        Tensor t = rank_tensor(dtype, r, numel);
        dist::BroadcastOptions bo;
        bo.root_rank = root;
        b->broadcast(t, bo)->wait();
        EXPECT_EQ(bytes_of(t), rank_bytes(dtype, root, numel)) << "broadcast from " << root;
      }
    }
    // all_to_all_single, uneven: rank r sends 20000 * (1 + (r + j) % 3) + j float32 to rank j
    // (80-240 KiB: some blocks below the threshold, the largest above it).
    const auto count = [](int src, int dst) {
      return int64_t{20000} * (1 + (src + dst) % 3) + dst;
    };
    std::vector<int64_t> in_splits, out_splits;
    for (int j = 0; j < n; ++j) {
      in_splits.push_back(count(r, j));
      out_splits.push_back(count(j, r));
    }
    const auto value = [](int src, int dst, int64_t i) {
      return static_cast<float>((src * 1009 + dst * 101 + i) % 8191);
    };
    std::vector<float> in_values, want;
    for (int j = 0; j < n; ++j)
      for (int64_t i = 0; i < in_splits[static_cast<size_t>(j)]; ++i)
        in_values.push_back(value(r, j, i));
    for (int j = 0; j < n; ++j)
      for (int64_t i = 0; i < out_splits[static_cast<size_t>(j)]; ++i)
        want.push_back(value(j, r, i));
    Tensor in = from_blob(in_values.data(), {static_cast<int64_t>(in_values.size())},
                          TensorOptions(kFloat32));
    Tensor out = empty({static_cast<int64_t>(want.size())}, TensorOptions(kFloat32));
    b->alltoall_base(out, in, out_splits, in_splits, {})->wait();
    EXPECT_TRUE(std::equal(want.begin(), want.end(), out.data_ptr<float>()))
        << "all_to_all_single on rank " << r;
    // all_reduce from 512 KiB per rank's block: AVG of fractions, folded in rank order then
    // divided, as the segment form does, so every rank gets the same bits.
    const int64_t big = 140000 * int64_t{n} + 5;
    const auto frac = [](int src, int64_t i) {
      return static_cast<float>((src * 37 + i) % 1000) / 7.f;
    };
    Tensor sum = empty({big}, TensorOptions(kFloat32));
    for (int64_t i = 0; i < big; ++i) sum.data_ptr<float>()[i] = frac(r, i);
    dist::AllreduceOptions ao;
    ao.reduce_op = dist::ReduceOp::AVG;
    b->allreduce(sum, ao)->wait();
    int64_t wrong = 0;
    for (int64_t i = 0; i < big; ++i) {
      float acc = frac(0, i);
      for (int k = 1; k < n; ++k) acc = acc + frac(k, i);
      if (sum.data_ptr<float>()[i] != acc / static_cast<float>(n)) ++wrong;
    }
    EXPECT_EQ(wrong, 0) << "all_reduce AVG on rank " << r;
    // reduce_scatter from 512 KiB per block: one flat input (reduce_scatter_tensor) reads the
    // peers' blocks directly; separate inputs (the list form, here on rank 0 only in the
    // third call) make every rank decline, and the segment form runs; the fourth call reads
    // directly again. SUM folded in rank order either way.
    const int64_t block = 131072 + 3;
    Tensor flat_in = empty({block * n}, TensorOptions(kFloat32));
    for (int64_t i = 0; i < block * n; ++i) flat_in.data_ptr<float>()[i] = frac(r, i);
    std::vector<Tensor> list_in;
    for (int j = 0; j < n; ++j) list_in.push_back(flat_in.narrow(0, j * block, block).clone());
    for (int call = 0; call < 4; ++call) {
      Tensor part = empty({block}, TensorOptions(kFloat32));
      const bool list = call == 1 || (call == 2 && r == 0);
      if (list) {
        b->reduce_scatter(part, list_in, {})->wait();
      } else {
        b->reduce_scatter_tensor(part, flat_in, {})->wait();
      }
      int64_t off = 0;
      for (int64_t i = 0; i < block; ++i) {
        float acc = frac(0, r * block + i);
        for (int k = 1; k < n; ++k) acc = acc + frac(k, r * block + i);
        if (part.data_ptr<float>()[i] != acc) ++off;
      }
      EXPECT_EQ(off, 0) << "reduce_scatter call " << call << " on rank " << r;
    }
    b->shutdown();
  });
}

TEST(ShmSingleCopy, LargeMovesReadThePeersDirectly) {
  large_moves({true, true, true});
}

TEST(ShmSingleCopy, ARankWithoutItTurnsItOffForTheGroup) {
  large_moves({true, false, true});
}

// all_to_all's first step carries a rank's split sizes (16 bits each) and whole input in the
// header's payload when they fit (32 bytes), else in the half's data. Rank 0 sends and
// receives a few bytes (payload) while ranks 1 and 2 exchange 200 KB (data, the single-copy
// size): rank 0 publishes no single-copy source, so every rank moves the rows through the
// segment, rank 0's bytes included. Then every rank's sizes fit, and rank 0 expects a
// other counts than ranks 1 and 2 send: every rank reports it, and the group stays usable.
TEST(ShmAllToAll, PayloadAndDataLayoutsInOneExchange) {
  dist::ShmOptions o = small_buffers();
  o.buffer_bytes = 1 << 16;
  run_ranks(
      3,
      [&](int r, dist::Backend& b) {
        const auto count = [](int src, int dst) -> int64_t {
          if (src == 0 || dst == 0) return src == dst ? 2 : 1;
          return src == dst ? 3 : 50000;
        };
        const auto value = [](int src, int dst, int64_t i) {
          return static_cast<double>((src * 1009 + dst * 101 + i) % 8191);
        };
        std::vector<int64_t> in_splits, out_splits;
        std::vector<double> send, want;
        for (int j = 0; j < 3; ++j) {
          in_splits.push_back(count(r, j));
          out_splits.push_back(count(j, r));
          for (int64_t i = 0; i < count(r, j); ++i) send.push_back(value(r, j, i));
          for (int64_t i = 0; i < count(j, r); ++i) want.push_back(value(j, r, i));
        }
        Tensor in = filled(kFloat32, static_cast<int64_t>(send.size()),
                           [&](int64_t i) { return send[static_cast<size_t>(i)]; });
        Tensor out = full({static_cast<int64_t>(want.size())}, -1.0, kFloat32);
        EXPECT_TRUE(b.alltoall_base(out, in, out_splits, in_splits, {})->wait());
        EXPECT_EQ(as_doubles(out), want) << "rank " << r;

        // All three in the payload: rank r sends r + j + 1 bytes to rank j.
        std::vector<int64_t> tiny_in, tiny_out;
        for (int j = 0; j < 3; ++j) {
          tiny_in.push_back(r + j + 1);
          tiny_out.push_back(j + r + 1);
        }
        Tensor bytes_in = filled(kUInt8, 3 * r + 6, [&](int64_t i) { return 10 * r + i; });
        Tensor bytes_out = full({3 * r + 6}, 0, kUInt8);
        EXPECT_TRUE(b.alltoall_base(bytes_out, bytes_in, tiny_out, tiny_in, {})->wait());
        std::vector<double> want_bytes;
        for (int j = 0; j < 3; ++j) {
          const int64_t skip = r * (r + 1) / 2 + r * j;  // rank j's bytes for ranks below r
          for (int64_t i = 0; i < j + r + 1; ++i) want_bytes.push_back(10 * j + skip + i);
        }
        EXPECT_EQ(as_doubles(bytes_out), want_bytes) << "rank " << r;

        if (r == 0) tiny_out[1] -= 1, tiny_out[2] += 1;
        auto work = b.alltoall_base(bytes_out, bytes_in, tiny_out, tiny_in, {});
        expect_error_mentions([&] { work->wait(); },
                              {"all_to_all", "rank 1 sends 2 elements to rank 0",
                               "rank 0 expects 1 elements from rank 1"});
        EXPECT_TRUE(b.barrier({})->wait());
      },
      o);
}

}  // namespace
}  // namespace tessera::testing
