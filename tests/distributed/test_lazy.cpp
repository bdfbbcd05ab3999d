// The lazy backend: channels made on first use, in the background, so a ring of first sends
// completes; collectives on a lazily made full communicator; errors and abort.
#include <chrono>

#include "dist_test_util.h"

namespace tessera::testing {
namespace {

using namespace std::chrono_literals;

TEST(LazyBackend, ARingOfFirstSendsCompletesAndCollectivesWork) {
  run_world(
      4,
      [](int r) {
        EXPECT_EQ(dist::get_backend(), "lazy");
        const int n = 4, next = (r + 1) % n, prev = (r + n - 1) % n;
        for (int round = 0; round < 3; ++round) {  // round 0 sets the channels up
          Tensor out = filled(kFloat32, 6, [&](int64_t i) { return 100 * round + 10 * r + i; });
          Tensor in = zeros({6});
          auto s = dist::isend(out, next);
          auto v = dist::irecv(in, prev);
          EXPECT_TRUE(s->wait());
          EXPECT_TRUE(v->wait());
          EXPECT_EQ(as_doubles(in), as_doubles(filled(kFloat32, 6, [&](int64_t i) {
                      return 100 * round + 10 * prev + i;
                    })));
        }
        Tensor t = filled(kFloat64, 3, [&](int64_t i) { return r * i; });
        dist::all_reduce(t);
        EXPECT_EQ(as_doubles(t), (std::vector<double>{0, 6, 12}));
        // Two messages to one peer, queued before its channel exists, keep their order.
        if (r == 0) {
          auto a = dist::isend(full({2}, 1.0), 2, nullptr, 7);
          auto b = dist::isend(full({2}, 2.0), 2, nullptr, 7);
          EXPECT_TRUE(a->wait());
          EXPECT_TRUE(b->wait());
        } else if (r == 2) {
          Tensor first = zeros({2}), second = zeros({2});
          dist::recv(first, 0, nullptr, 7);
          dist::recv(second, 0, nullptr, 7);
          EXPECT_EQ(as_doubles(first)[0], 1);
          EXPECT_EQ(as_doubles(second)[0], 2);
        }
      },
      "lazy");
}

TEST(LazyBackend, BadPeersAreRefused) {
  run_world(
      2,
      [](int r) {
        expect_error_mentions([&] { dist::isend(zeros({1}), r); },
                              {"send", "'dst'", "must not be this rank", std::to_string(r)});
        auto g = dist::group_world();
        expect_error_mentions([&] { g->backend().recv(zeros({1}), 5, {}); },
                              {"recv", "'src'", "[0, 2)", "5"});
      },
      "lazy");
}

TEST(LazyBackend, AbortFailsAnOpWaitingForItsChannel) {
  run_world(
      2,
      [](int r) {
        if (r != 0) return;  // rank 1 never sets up the channel
        Tensor in = zeros({1});
        auto w = dist::irecv(in, 1);
        EXPECT_FALSE(w->is_completed());
        dist::group_world()->abort("test abort");
        expect_error_mentions([&] { w->wait(); }, {"lazy group", "aborted", "test abort"});
        expect_error_mentions([&] { dist::isend(in, 1); }, {"aborted"});
      },
      "lazy", 2000ms);  // the pending set-up gives up after this
}

}  // namespace
}  // namespace tessera::testing
