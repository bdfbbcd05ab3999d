// Pre/post collective hooks on ProcessGroup and abort hooks on Backend, with ranks as threads.
#include <atomic>

#include "dist_test_util.h"

namespace tessera::testing {
namespace {

using namespace std::chrono_literals;

// What one rank's hooks saw.
struct Seen {
  std::vector<dist::PreHookArgs> pre;
  std::vector<std::pair<uint64_t, dist::WorkPtr>> post;  // op id, Work
};

TEST(Hooks, PreAndPostHooksSeeEveryOpWithItsArguments) {
  run_world(2, [](int r) {
    auto g = dist::group_world();
    Seen seen;
    auto pre = g->register_pre_hook([&](const dist::PreHookArgs& a) { seen.pre.push_back(a); });
    auto post = g->register_post_hook(
        [&](const dist::PostHookArgs& a) { seen.post.emplace_back(a.pre.op_id, a.work); });

    Tensor x = filled(kFloat32, 6, [&](int64_t i) { return r + i; });
    auto w = dist::all_reduce(x, dist::ReduceOp::AVG, nullptr, /*async_op=*/true);
    w->wait();
    Tensor b = empty({2, 3}, TensorOptions(kInt64));
    dist::broadcast(b, 1);
    Tensor msg = filled(kBFloat16, 4, [](int64_t) { return 1; });
    if (r == 0) {
      dist::send(msg, 1, nullptr, 7);
    } else {
      dist::recv(msg, 0, nullptr, 7);
    }
    std::vector<Tensor> list = {empty({3}, TensorOptions(kInt32)),
                                empty({3}, TensorOptions(kInt32))};
    dist::all_gather(list, filled(kInt32, 3, [&](int64_t) { return r; }));
    dist::barrier();

    ASSERT_EQ(seen.pre.size(), 5u);
    ASSERT_EQ(seen.post.size(), 5u);
    const auto& ar = seen.pre[0];
    EXPECT_EQ(ar.op_name, "all_reduce");
    EXPECT_EQ(ar.group_name, "default");
    EXPECT_FALSE(ar.is_p2p);
    EXPECT_EQ(ar.collective_seq_id, 1u);
    EXPECT_EQ(ar.p2p_seq_id, 0u);
    EXPECT_TRUE(ar.async_op);
    EXPECT_EQ(ar.reduce_op, dist::ReduceOp::AVG);
    EXPECT_EQ(ar.root, -1);
    ASSERT_EQ(ar.inputs.size(), 1u);
    EXPECT_EQ(ar.inputs[0].sizes, (std::vector<int64_t>{6}));
    EXPECT_EQ(ar.inputs[0].dtype, kFloat32);
    EXPECT_EQ(ar.timeout, kTestTimeout);
    EXPECT_EQ(seen.post[0].second, w);  // the post hook gets the Work the caller gets

    const auto& bc = seen.pre[1];
    EXPECT_EQ(bc.op_name, "broadcast");
    EXPECT_EQ(bc.collective_seq_id, 2u);
    EXPECT_FALSE(bc.async_op);
    EXPECT_EQ(bc.root, 1);
    EXPECT_EQ(bc.outputs[0].sizes, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(bc.outputs[0].dtype, kInt64);
    EXPECT_FALSE(bc.reduce_op.has_value());

    const auto& p2p = seen.pre[2];
    EXPECT_EQ(p2p.op_name, r == 0 ? "send" : "recv");
    EXPECT_TRUE(p2p.is_p2p);
    EXPECT_EQ(p2p.p2p_seq_id, 1u);
    EXPECT_EQ(p2p.collective_seq_id, 2u);  // p2p ops do not advance the collective counter
    EXPECT_EQ(p2p.seq_id(), 1u);
    EXPECT_EQ(p2p.root, 1 - r);
    EXPECT_EQ((r == 0 ? p2p.inputs : p2p.outputs)[0].dtype, kBFloat16);

    const auto& ag = seen.pre[3];
    EXPECT_EQ(ag.op_name, "all_gather");
    EXPECT_EQ(ag.collective_seq_id, 3u);
    EXPECT_EQ(ag.p2p_seq_id, 1u);
    EXPECT_EQ(ag.outputs.size(), 2u);
    EXPECT_EQ(seen.pre[4].op_name, "barrier");
    EXPECT_EQ(seen.pre[4].seq_id(), 4u);
    EXPECT_EQ(g->collective_seq_id(), 4u);
    EXPECT_EQ(g->p2p_seq_id(), 1u);

    for (size_t i = 0; i < 5; ++i) {
      EXPECT_EQ(seen.post[i].first, seen.pre[i].op_id);  // pre and post share the op id
      ASSERT_NE(seen.post[i].second, nullptr);
      EXPECT_TRUE(seen.post[i].second->is_success());
      if (i > 0) {
        EXPECT_GT(seen.pre[i].op_id, seen.pre[i - 1].op_id);
      }
    }
  });
}

TEST(Hooks, RemovedHooksNoLongerRunAndRemovalIsIdempotent) {
  run_world(1, [](int) {
    auto g = dist::group_world();
    int a = 0, b = 0;
    auto ha = g->register_pre_hook([&](const dist::PreHookArgs&) { ++a; });
    auto hb = g->register_post_hook([&](const dist::PostHookArgs&) { ++b; });
    Tensor x = empty({2}, TensorOptions(kFloat32));
    dist::all_reduce(x);
    EXPECT_TRUE(ha.remove());
    EXPECT_FALSE(ha.remove());
    dist::all_reduce(x);
    EXPECT_EQ(a, 1);
    EXPECT_EQ(b, 2);
    EXPECT_TRUE(hb.remove());
    dist::barrier();
    EXPECT_EQ(b, 2);
    EXPECT_FALSE(dist::HookHandle().remove());  // an empty handle removes nothing
    EXPECT_EQ(g->collective_seq_id(), 3u);      // counted with or without hooks
  });
}

TEST(Hooks, HandlesOutliveTheirGroup) {
  dist::HookHandle handle;
  run_world(1, [&](int) {
    handle = dist::group_world()->register_pre_hook([](const dist::PreHookArgs&) {});
  });
  EXPECT_FALSE(handle.remove());  // the group is gone: nothing to remove, no crash
}

TEST(Hooks, ARefusedOpReachesThePostHookWithItsError) {
  run_world(1, [](int) {
    auto g = dist::group_world();
    std::exception_ptr error;
    dist::WorkPtr work = dist::completed_work("placeholder");
    uint64_t pre_id = 0, post_id = 0;
    auto h1 = g->register_pre_hook([&](const dist::PreHookArgs& a) { pre_id = a.op_id; });
    auto h2 = g->register_post_hook([&](const dist::PostHookArgs& a) {
      post_id = a.pre.op_id;
      error = a.error;
      work = a.work;
    });
    Tensor strided = empty({4, 4}, TensorOptions(kFloat32)).transpose(0, 1);
    expect_error_mentions([&] { dist::all_reduce(strided); }, {"all_reduce", "must be contiguous"});
    EXPECT_NE(error, nullptr);
    EXPECT_EQ(work, nullptr);
    EXPECT_EQ(pre_id, post_id);
    EXPECT_EQ(g->collective_seq_id(), 1u);
  });
}

TEST(Hooks, AThrowingPreHookStopsTheOpAndThePostHooksSeeItsError) {
  run_world(1, [](int) {
    auto g = dist::group_world();
    int issued = 0, refused = 0;
    std::string why;
    auto h1 = g->register_pre_hook([](const dist::PreHookArgs& a) {
      TS_CHECK(a.op_name != "barrier", ValueError, "the test's hook refuses {}", a.op_name);
    });
    auto h2 = g->register_post_hook([&](const dist::PostHookArgs& a) {
      if (a.work) {
        ++issued;
        return;
      }
      ++refused;
      try {
        std::rethrow_exception(a.error);
      } catch (const std::exception& e) {
        why = e.what();
      }
    });
    expect_error_mentions([&] { dist::barrier(); }, {"the test's hook refuses barrier"});
    EXPECT_EQ(issued, 0);
    EXPECT_EQ(refused, 1);
    EXPECT_NE(why.find("the test's hook refuses barrier"), std::string::npos) << why;
    Tensor x = empty({1}, TensorOptions(kFloat32));
    dist::all_reduce(x);
    EXPECT_EQ(issued, 1);
  });
}

TEST(Hooks, EmptyHooksAreRefused) {
  run_world(1, [](int) {
    auto g = dist::group_world();
    expect_error_mentions([&] { g->register_pre_hook(nullptr); },
                          {"register_pre_hook()", "'hook' must not be empty"});
    expect_error_mentions([&] { g->register_post_hook(nullptr); },
                          {"register_post_hook()", "'hook' must not be empty"});
    expect_error_mentions([&] { g->backend().register_abort_hook(nullptr); },
                          {"register_abort_hook()", "'hook' must not be empty"});
  });
}

TEST(Hooks, AbortHooksRunOnceOnTheAbortingRankAndOnItsPeers) {
  std::vector<std::atomic<int>> calls(3);
  std::vector<std::string> reasons(3);
  run_ranks(3, [&](int r, dist::Backend& b) {
    auto h = b.register_abort_hook([&, r](const std::string& reason) {
      ++calls[r];
      reasons[r] = reason;
    });
    auto removed = b.register_abort_hook([](const std::string&) { ADD_FAILURE() << "removed"; });
    EXPECT_TRUE(removed.remove());
    Tensor x = empty({100}, TensorOptions(kFloat64));
    if (r == 2) {
      std::this_thread::sleep_for(50ms);
      b.abort("the test aborts rank 2");
      b.abort("a second abort changes nothing");
      return;
    }
    auto w = b.allreduce(x, {});
    expect_error_mentions([&] { w->wait(); }, {"rank 2 aborted"});
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(calls[r].load(), 1) << "rank " << r;
    EXPECT_NE(reasons[r].find(r == 2 ? "the test aborts rank 2" : "rank 2 aborted"),
              std::string::npos)
        << reasons[r];
  }
}

}  // namespace
}  // namespace tessera::testing
