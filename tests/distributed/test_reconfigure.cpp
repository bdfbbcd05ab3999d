// Reconfiguration in place (enable_reconfigure): new memberships for the shm and gloo
// backends, with ranks as threads. Handles travel between the ranks through a side store, as
// they would through a quorum.
#include <atomic>
#include <thread>

#include "dist_test_util.h"
#include "launch_test_util.h"
#include "tessera/distributed/flight_recorder.h"
#include "tessera/distributed/window.h"

namespace tessera::testing {
namespace {

using namespace std::chrono_literals;

// Publishes this rank's handle of `group` (the default one when null) under "<round>/<rank>"
// and returns the handles of `ranks`.
std::vector<std::string> exchange(dist::Store& side, const std::string& round, int rank,
                                  const std::vector<int>& ranks, dist::GroupRef group = nullptr) {
  const std::string mine = dist::get_reconfigure_handle(group);
  side.set(round + "/" + std::to_string(rank), dist::Bytes(mine.begin(), mine.end()));
  std::vector<std::string> handles;
  for (int r : ranks) {
    const std::string key = round + "/" + std::to_string(r);
    side.wait({key}, kTestTimeout);
    const dist::Bytes b = side.get(key);
    handles.emplace_back(b.begin(), b.end());
  }
  return handles;
}

std::vector<int> iota(int n) {
  std::vector<int> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i;
  return v;
}

dist::ReconfigureOptions options(std::string uuid, std::vector<std::string> handles,
                                 bool ordered = true) {
  dist::ReconfigureOptions o;
  o.uuid = std::move(uuid);
  o.handles = std::move(handles);
  o.ordered = ordered;
  return o;
}

// The sum over the group of (global rank + 1), through all_reduce.
double sum_of_ranks() {
  Tensor x = full(
      {5}, static_cast<double>(dist::get_global_rank(dist::group_world(), dist::get_rank()) + 1),
      TensorOptions(kFloat32));
  dist::all_reduce(x);
  return x[4].item<double>();
}

class Reconfigure : public ::testing::TestWithParam<std::string> {};

TEST_P(Reconfigure, SameMembersNewGenerationKeepsWorking) {
  auto side = std::make_shared<dist::HashStore>(kTestTimeout);
  run_world(
      4,
      [&](int r) {
        EXPECT_TRUE(dist::supports_reconfigure());
        EXPECT_EQ(sum_of_ranks(), 10.0);
        EXPECT_EQ(dist::group_world()->generation(), 0u);
        auto w = dist::reconfigure(options("same", exchange(*side, "a", r, iota(4))));
        EXPECT_TRUE(w->wait());
        EXPECT_EQ(dist::group_world()->generation(), 1u);
        EXPECT_EQ(dist::get_rank(), r);
        EXPECT_EQ(dist::get_world_size(), 4);
        EXPECT_EQ(dist::group_world()->global_ranks(), iota(4));
        EXPECT_EQ(sum_of_ranks(), 10.0);
        EXPECT_EQ(dist::get_backend(), GetParam());
      },
      GetParam(), kTestTimeout, /*enable_reconfigure=*/true);
}

TEST_P(Reconfigure, RanksFollowTheOrderOfTheHandles) {
  auto side = std::make_shared<dist::HashStore>(kTestTimeout);
  run_world(
      4,
      [&](int r) {
        auto handles = exchange(*side, "a", r, {3, 2, 1, 0});
        dist::reconfigure(options("reversed", handles))->wait();
        EXPECT_EQ(dist::get_rank(), 3 - r);
        EXPECT_EQ(dist::group_world()->global_ranks(), (std::vector<int>{3, 2, 1, 0}));
        EXPECT_EQ(dist::get_global_rank(dist::group_world(), 0), 3);
        // Group rank 0 is global rank 3 now: its data wins the broadcast.
        Tensor b = full({3}, static_cast<double>(r), TensorOptions(kInt64));
        dist::broadcast(b, /*src=*/3);
        EXPECT_EQ(b[2].item<int64_t>(), 3);
        EXPECT_EQ(sum_of_ranks(), 10.0);
      },
      GetParam(), kTestTimeout, true);
}

TEST_P(Reconfigure, UnorderedHandlesHandOutEveryRankOnce) {
  auto side = std::make_shared<dist::HashStore>(kTestTimeout);
  std::atomic<int> rank_mask{0};
  run_world(
      4,
      [&](int r) {
        dist::reconfigure(options("unordered", exchange(*side, "a", r, iota(4)), false))->wait();
        const int me = dist::get_rank();
        rank_mask.fetch_or(1 << me);
        EXPECT_EQ(dist::get_global_rank(dist::group_world(), me), r);
        EXPECT_EQ(sum_of_ranks(), 10.0);
      },
      GetParam(), kTestTimeout, true);
  EXPECT_EQ(rank_mask.load(), 0b1111);
}

TEST_P(Reconfigure, SurvivorsShrinkAfterARankFails) {
  auto side = std::make_shared<dist::HashStore>(kTestTimeout);
  run_world(
      4,
      [&](int r) {
        EXPECT_EQ(sum_of_ranks(), 10.0);
        if (r == 3) {  // fails: its communicator aborts and it leaves
          dist::group_world()->abort("rank 3 fails on purpose");
          return;
        }
        // The survivors' next collective fails: rank 3 aborted.
        Tensor x = ones({4}, TensorOptions(kFloat32));
        auto w = dist::all_reduce(x, dist::ReduceOp::SUM, nullptr, /*async_op=*/true);
        EXPECT_THROW(w->wait(), dist::DistError);
        dist::reconfigure(options("survivors", exchange(*side, "s", r, {0, 1, 2})))->wait();
        EXPECT_EQ(dist::get_world_size(), 3);
        EXPECT_EQ(dist::get_rank(), r);
        EXPECT_EQ(sum_of_ranks(), 6.0);
        // And growing back to four works the same way (here with the old rank 3 gone, a
        // fresh uuid and the same three).
        dist::reconfigure(options("again", exchange(*side, "t", r, {2, 0, 1})))->wait();
        EXPECT_EQ(dist::group_world()->generation(), 2u);
        EXPECT_EQ(dist::get_rank(), (r + 1) % 3);
        EXPECT_EQ(sum_of_ranks(), 6.0);
      },
      GetParam(), kTestTimeout, true);
}

// After a reconfigure, new_group and split_group take the global ranks of the current
// members; the groups are named (and rendezvous) per generation, so a second reconfigure's
// groups never meet the first's.
TEST_P(Reconfigure, GroupsAreMadeFromTheCurrentMembers) {
  auto side = std::make_shared<dist::HashStore>(kTestTimeout);
  run_world(
      4,
      [&](int r) {
        if (r == 3) return;  // leaves
        dist::reconfigure(options("three", exchange(*side, "s", r, {0, 1, 2})))->wait();
        for (int round = 0; round < 2; ++round) {
          auto pair = dist::new_group({0, 2});
          ASSERT_NE(pair, nullptr);
          EXPECT_EQ(pair->is_member(), r != 1);
          if (r != 1) {
            Tensor x = full({3}, static_cast<double>(r + 1), TensorOptions(kFloat32));
            dist::all_reduce(x, dist::ReduceOp::SUM, pair);
            EXPECT_EQ(x[2].item<double>(), 4.0) << "round " << round;
          }
          expect_error_mentions([&] { dist::new_group({1, 3}); }, {"new_group", "0, 1, 2", "3"});
          auto split = dist::split_group(nullptr, {{0, 2}, {1}});
          ASSERT_NE(split, nullptr);
          Tensor y = full({2}, static_cast<double>(r + 1), TensorOptions(kFloat32));
          dist::all_reduce(y, dist::ReduceOp::SUM, split);
          EXPECT_EQ(y[1].item<double>(), r == 1 ? 2.0 : 4.0) << "round " << round;
          if (round == 0)  // a new generation with the same members: groups start afresh
            dist::reconfigure(options("again", exchange(*side, "t", r, {2, 0, 1})))->wait();
        }
      },
      GetParam(), kTestTimeout, true);
}

TEST_P(Reconfigure, PendingWorkIsRevokedWithTheReasonAndAbortHooksRun) {
  auto side = std::make_shared<dist::HashStore>(kTestTimeout);
  // Rank 1 reconfigures only after rank 0 has: its reconfigure closes the old connections, and
  // had it gone first rank 0's recv would fail on the closed connection (an error, but a
  // different one) before rank 0 revoked it.
  std::atomic<bool> rank0_revoked{false};
  run_world(
      2,
      [&](int r) {
        std::vector<std::string> reasons;
        std::mutex mutex;
        auto hook = dist::group_world()->backend().register_abort_hook([&](const std::string& why) {
          std::lock_guard lock(mutex);
          reasons.push_back(why);
        });
        Tensor never = empty({4}, TensorOptions(kFloat32));
        dist::WorkPtr pending;
        if (r == 0) pending = dist::irecv(never, 1, nullptr, /*tag=*/9);  // rank 1 never sends
        const auto handles = exchange(*side, "a", r, iota(2));
        if (r == 1) {
          const auto deadline = std::chrono::steady_clock::now() + kTestTimeout;
          while (!rank0_revoked.load() && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(1ms);
          ASSERT_TRUE(rank0_revoked.load()) << "rank 0 never started its reconfigure";
        }
        auto reconfigured = dist::reconfigure(options("revoke", handles));
        if (r == 0) rank0_revoked.store(true);  // reconfigure() revokes before it returns
        reconfigured->wait();
        if (r == 0) {
          EXPECT_EQ(pending->status(), dist::WorkStatus::ERROR);
          try {
            pending->wait();
            ADD_FAILURE() << "the revoked recv succeeded";
          } catch (const dist::DistError& e) {
            EXPECT_NE(std::string(e.what()).find("reconfiguring"), std::string::npos) << e.what();
          }
        }
        std::lock_guard lock(mutex);
        ASSERT_GE(reasons.size(), 1u);
        EXPECT_NE(reasons[0].find("uuid 'revoke'"), std::string::npos) << reasons[0];
      },
      GetParam(), kTestTimeout, true);
}

TEST_P(Reconfigure, AbortIsGracefulAndAReconfigureFollows) {
  auto side = std::make_shared<dist::HashStore>(kTestTimeout);
  run_world(
      2,
      [&](int r) {
        dist::group_world()->abort("on request");
        Tensor x = ones({2}, TensorOptions(kFloat32));
        EXPECT_THROW(dist::all_reduce(x), dist::DistError);
        dist::reconfigure(options("after-abort", exchange(*side, "a", r, iota(2))))->wait();
        EXPECT_EQ(sum_of_ranks(), 3.0);
      },
      GetParam(), kTestTimeout, true);
}

TEST_P(Reconfigure, AMemberThatNeverJoinsTimesOutAndARetryWorks) {
  auto side = std::make_shared<dist::HashStore>(kTestTimeout);
  run_world(
      2,
      [&](int r) {
        auto handles = exchange(*side, "a", r, iota(2));
        if (r == 1) return;  // never joins
        auto o = options("missing", handles);
        o.timeout = 300ms;
        auto w = dist::reconfigure(o);
        try {
          w->wait();
          ADD_FAILURE() << "a reconfigure without rank 1 succeeded";
        } catch (const dist::DistTimeoutError& e) {
          EXPECT_NE(std::string(e.what()).find("new ranks 1 never joined"), std::string::npos)
              << e.what();
        }
        EXPECT_EQ(w->status(), dist::WorkStatus::TIMED_OUT);
        Tensor x = ones({2}, TensorOptions(kFloat32));
        try {
          dist::all_reduce(x);
          ADD_FAILURE() << "an op after a failed reconfigure ran";
        } catch (const dist::DistBackendError& e) {
          EXPECT_NE(std::string(e.what()).find("last reconfigure failed"), std::string::npos)
              << e.what();
        }
        dist::reconfigure(options("alone", {dist::get_reconfigure_handle()}))->wait();
        EXPECT_EQ(dist::get_world_size(), 1);
        EXPECT_EQ(sum_of_ranks(), 1.0);
      },
      GetParam(), kTestTimeout, true);
}

TEST_P(Reconfigure, HooksAndTheFlightRecorderSeeEachGeneration) {
  auto side = std::make_shared<dist::HashStore>(kTestTimeout);
  run_world(
      2,
      [&](int r) {
        auto g = dist::group_world();
        dist::FlightRecorder recorder(dist::FlightRecorderOptions{});
        recorder.attach(g);
        std::vector<std::pair<uint64_t, uint64_t>> seen;  // generation, collective seq id
        auto pre = g->register_pre_hook([&](const dist::PreHookArgs& a) {
          seen.emplace_back(a.generation, a.collective_seq_id);
        });
        sum_of_ranks();
        sum_of_ranks();
        dist::reconfigure(options("hooks", exchange(*side, "a", r, {1, 0})))->wait();
        sum_of_ranks();
        ASSERT_EQ(seen.size(), 3u);
        EXPECT_EQ(seen[0], std::make_pair(uint64_t{0}, uint64_t{1}));
        EXPECT_EQ(seen[1], std::make_pair(uint64_t{0}, uint64_t{2}));
        EXPECT_EQ(seen[2], std::make_pair(uint64_t{1}, uint64_t{1}));  // numbered afresh
        const std::string dump = recorder.dump_json();
        EXPECT_NE(dump.find("\"default@g1\""), std::string::npos);
        EXPECT_NE(dump.find("\"generation\": 1"), std::string::npos) << dump.substr(0, 2000);
      },
      GetParam(), kTestTimeout, true);
}

TEST_P(Reconfigure, BadOptionsAreRefusedAtOnceAndChangeNothing) {
  auto side = std::make_shared<dist::HashStore>(kTestTimeout);
  run_world(
      2,
      [&](int r) {
        auto handles = exchange(*side, "a", r, iota(2));
        const std::string mine = dist::get_reconfigure_handle();
        const std::string other = handles[static_cast<size_t>(1 - r)];
        EXPECT_EQ(mine.rfind(GetParam() + ":" + std::to_string(r) + ":", 0), 0u) << mine;
        EXPECT_THROW(dist::reconfigure(options("", handles)), ValueError);
        EXPECT_THROW(dist::reconfigure(options("a/b", handles)), ValueError);
        EXPECT_THROW(dist::reconfigure(options("x", {})), ValueError);
        EXPECT_THROW(dist::reconfigure(options("x", {other})), ValueError);  // not mine
        EXPECT_THROW(dist::reconfigure(options("x", {mine, "garbage"})), ValueError);
        EXPECT_THROW(dist::reconfigure(options("x", {mine, mine})), ValueError);
        const std::string wrong_backend = "lazy" + mine.substr(mine.find(':'));
        EXPECT_THROW(dist::reconfigure(options("x", {wrong_backend})), ValueError);
        const std::string store_part = mine.substr(0, mine.rfind(':') + 1);
        EXPECT_THROW(dist::reconfigure(options("x", {mine, store_part + "elsewhere"})),
                     ValueError);  // malformed store address
        const std::string foreign = fmt::format("hash://{}/1", ::getpid() + 1);
        const std::string other_process = GetParam() + ":7:feed:" + foreign;
        expect_error_mentions(
            [&] {
              dist::reconfigure(options("x", {mine, other_process}));
            },
            {"handles[1]", foreign, "cannot reach"});
        // Bytes from outside are printed as \xNN: a NUL neither cuts the message short nor
        // hides what follows it.
        const std::string with_nul = GetParam() + ":9:feed:file:///tmp/a" + std::string(1, '\0') +
                                     "tail" + std::string(1, '\x01');
        expect_error_mentions(
            [&] {
              dist::reconfigure(options("x", {mine, with_nul}));
            },
            {"handles[1]", "/tmp/a\\x00tail\\x01"});
        expect_error_mentions(
            [&] {
              dist::reconfigure(options("x", {mine, std::string("no\x02"
                                                                "colons")}));
            },
            {"'no\\x02colons' is malformed"});
        EXPECT_EQ(sum_of_ranks(), 3.0);  // still generation 0, still working
        EXPECT_EQ(dist::group_world()->generation(), 0u);
        dist::reconfigure(options("ok", handles))->wait();
        EXPECT_THROW(dist::reconfigure(options("ok", handles)), ValueError);  // used uuid
        EXPECT_THROW(dist::new_group({2}), ValueError);                       // not a member
        EXPECT_EQ(sum_of_ranks(), 3.0);
      },
      GetParam(), kTestTimeout, true);
}

// Replicas made on stores of their own (two FileStores and a HashStore here, as torchft's
// replica groups each have one) meet in the store of the smallest address among the handles,
// and meet again in another when the member whose store that was leaves.
TEST_P(Reconfigure, MembersMadeOnDifferentStoresMeetInOne) {
  const TempDir dir("reconfigure-stores");
  auto side = std::make_shared<dist::HashStore>(kTestTimeout);
  std::vector<dist::StorePtr> stores = {
      std::make_shared<dist::FileStore>((dir.path / "replica0").string(), kTestTimeout),
      std::make_shared<dist::FileStore>((dir.path / "replica1").string(), kTestTimeout),
      std::make_shared<dist::HashStore>(kTestTimeout)};
  std::atomic<bool> first_done{false};
  run_threads(3, [&](int r) {
    auto group = dist::new_reconfigurable_group(GetParam(), stores[static_cast<size_t>(r)], r,
                                                kTestTimeout, "replicas");
    const auto sum = [&] {
      Tensor x = full(
          {3}, static_cast<double>(group->global_ranks()[static_cast<size_t>(group->rank())] + 1),
          TensorOptions(kFloat32));
      dist::all_reduce(x, dist::ReduceOp::SUM, group);
      return x[2].item<double>();
    };
    dist::reconfigure(options("all", exchange(*side, "a", r, {0, 1, 2}, group)), group)->wait();
    EXPECT_EQ(group->size(), 3);
    EXPECT_EQ(sum(), 6.0);
    // The rendezvous went through replica 0's store (the smallest address).
    EXPECT_TRUE(stores[0]->check({"reconfigure/all/member/2"}));
    EXPECT_FALSE(stores[2]->check({"reconfigure/all/member/2"}));
    if (r == 0) {
      group.reset();
      first_done = true;
      return;
    }
    dist::reconfigure(options("without0", exchange(*side, "b", r, {1, 2}, group)), group)->wait();
    EXPECT_EQ(group->size(), 2);
    EXPECT_EQ(sum(), 5.0);
    EXPECT_TRUE(stores[1]->check({"reconfigure/without0/member/1"}));
  });
  EXPECT_TRUE(first_done);
}

INSTANTIATE_TEST_SUITE_P(Backends, Reconfigure, ::testing::Values("shm", "gloo"),
                         [](const auto& info) { return info.param; });

// A new window of the world with a float32 tensor of `numel` zeros registered.
std::pair<dist::WindowPtr, Tensor> registered_window(int64_t numel) {
  dist::WindowPtr w = dist::new_window();
  Tensor t = dist::window_empty({numel}, kFloat32);
  w->tensor_register(t);
  return {w, t};
}

// A window belongs to the communicator it was made on. After a reconfigure that renumbers the
// ranks, the old window's ops throw before anything is written (its rank 0 is now another
// process), deregistering releases it locally, and a window made in the new generation works
// with the new ranks. Windows exist on shm (and mpi, which cannot reconfigure).
TEST(ReconfigureWindow, AWindowEndsWithItsGenerationAndANewOneWorks) {
  auto side = std::make_shared<dist::HashStore>(kTestTimeout);
  run_world(
      3,
      [&](int r) {
        auto [old, mine] = registered_window(8);
        old->put(full({1}, r + 1.0, TensorOptions(kFloat32)), (r + 1) % 3, r);
        old->fence();
        const std::vector<double> before = as_doubles(mine);
        EXPECT_EQ(before[size_t((r + 2) % 3)], (r + 2) % 3 + 1.0);

        dist::reconfigure(options("reordered", exchange(*side, "w", r, {2, 0, 1})))->wait();
        const int nr = dist::get_rank();
        EXPECT_EQ(nr, (r + 1) % 3);
        Tensor one = full({1}, 99.0, TensorOptions(kFloat32));
        EXPECT_THROW(old->put(one, 0, 0), dist::DistBackendError);
        const std::vector<std::string> words = {"window (rank", "communicator that has ended",
                                                "reconfigure", "new_window()"};
        expect_error_mentions([&] { old->put(one, 1, 2); }, words);
        expect_error_mentions([&] { old->get(one, 2, 0); }, words);
        expect_error_mentions([&] { old->accumulate(one, 0, 1); }, words);
        expect_error_mentions([&] { old->signal(1); }, words);
        expect_error_mentions([&] { old->wait_signal(2); }, words);
        expect_error_mentions([&] { old->flush(); }, words);
        expect_error_mentions([&] { old->fence(); }, words);
        EXPECT_EQ(old->get_tensor().numel(), 8);  // local queries still answer
        sum_of_ranks();  // every rank has made its attempts: nothing was written through them
        EXPECT_EQ(as_doubles(mine), before);
        old->tensor_deregister();  // alone: nobody to fence with
        EXPECT_FALSE(old->is_registered());

        auto [w, t] = registered_window(4);
        EXPECT_EQ(w->rank(), nr);
        w->put(full({1}, 10.0 + nr, TensorOptions(kFloat32)), (nr + 1) % 3, 0);
        w->wait_signal((nr + 2) % 3);
        EXPECT_EQ(t[0].item<double>(), 10.0 + (nr + 2) % 3);
        w->tensor_deregister();
      },
      "shm", kTestTimeout, true);
}

// A wait_signal in progress when its communicator is aborted ends with the abort, not at its
// deadline.
TEST(ReconfigureWindow, AnAbortEndsAWaitForASignal) {
  auto side = std::make_shared<dist::HashStore>(kTestTimeout);
  run_world(
      2,
      [&](int r) {
        auto [w, mine] = registered_window(4);
        if (r == 0) {
          std::thread aborter([group = dist::group_world()] {
            std::this_thread::sleep_for(100ms);
            group->abort("aborted while rank 0 waits");
          });
          const auto t0 = dist::Clock::now();
          expect_error_mentions(
              [&] { w->wait_signal(1, std::chrono::seconds(30)); },
              {"wait_signal()", "communicator that has ended", "aborted while rank 0 waits"});
          EXPECT_LT(dist::Clock::now() - t0, std::chrono::seconds(10));
          aborter.join();
          side->set("waited", dist::Bytes{1});
        } else {  // never signals; ends its side once rank 0 is done
          side->wait({"waited"}, kTestTimeout);
          dist::group_world()->abort("rank 0 is done");
        }
        w->tensor_deregister();  // each alone
        EXPECT_FALSE(w->is_registered());
      },
      "shm", kTestTimeout, true);
}

TEST(ReconfigureRefused, BackendsThatCannotRefuseTheFlagAndTheCalls) {
  auto store = std::make_shared<dist::HashStore>(kTestTimeout);
  dist::WorldScope scope;
  try {
    dist::init_process_group("lazy", store, 0, 1, kTestTimeout, /*enable_reconfigure=*/true);
    ADD_FAILURE() << "lazy accepted enable_reconfigure";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("backend 'lazy' cannot reconfigure"), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(dist::is_initialized());
  dist::init_process_group("shm", store, 0, 1, kTestTimeout);  // without the flag
  EXPECT_FALSE(dist::supports_reconfigure());
  EXPECT_THROW(dist::get_reconfigure_handle(), dist::DistBackendError);
  EXPECT_THROW(dist::reconfigure(options("u", {"shm:0:x:y"})), dist::DistBackendError);
  dist::destroy_process_group();
}

}  // namespace
}  // namespace tessera::testing
