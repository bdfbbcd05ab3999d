// The Flight Recorder: entries and states, the ring buffer's dropped records, dumps on error,
// timeout, SIGUSR1 and request, and fr-trace on the dumps of real jobs (through `tessera
// launch`) and of ranks as threads.
#include <signal.h>

#include <fstream>
#include <sstream>

#include "dist_test_util.h"
#include "distributed/flight_recorder/trace.h"
#include "launch_test_util.h"
#include "tessera/distributed/flight_recorder.h"

namespace tessera::testing {
namespace {

using namespace std::chrono_literals;

dist::FlightRecorderOptions recorder_options(const std::string& dir = "", size_t size = 100) {
  dist::FlightRecorderOptions o;
  o.buffer_size = size;
  o.dump_dir = dir;
  o.job_id = "test-job";
  return o;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(FlightRecorder, EntriesRecordOpsStatesAndTimes) {
  run_world(2, [](int r) {
    dist::FlightRecorder recorder(recorder_options());
    recorder.attach(dist::group_world());
    Tensor x = filled(kFloat32, 5, [](int64_t) { return 1; });
    dist::all_reduce(x, dist::ReduceOp::MAX);
    Tensor y = empty({2, 2}, TensorOptions(kInt64));
    dist::broadcast(y, 1, nullptr, /*async_op=*/true)->wait();
    Tensor m = empty({3}, TensorOptions(kFloat16));
    if (r == 0) {
      dist::send(m, 1);
    } else {
      dist::recv(m, 0);
    }
    const auto d = dist::fr::parse_dump(recorder.dump_json("checking"), "rank dump");
    EXPECT_EQ(d.rank, r);
    EXPECT_EQ(d.job_id, "test-job");
    EXPECT_EQ(d.reason, "checking");
    ASSERT_EQ(d.groups.count("default"), 1u);
    EXPECT_EQ(d.groups.at("default").ranks, (std::vector<int>{0, 1}));
    EXPECT_EQ(d.groups.at("default").backend, "shm");
    EXPECT_FALSE(d.groups.at("default").last_dropped.has_value());
    EXPECT_EQ(d.groups.at("default").last_enqueued_collective, 2);
    EXPECT_EQ(d.groups.at("default").last_completed_collective, 2);
    EXPECT_EQ(d.groups.at("default").last_enqueued_p2p, 1);
    ASSERT_EQ(d.entries.size(), 3u);
    const auto& ar = d.entries[0];
    EXPECT_EQ(ar.op, "all_reduce");
    EXPECT_EQ(ar.reduce_op, "MAX");
    EXPECT_EQ(ar.collective_seq_id, 1);
    EXPECT_EQ(ar.input_sizes, (std::vector<std::vector<int64_t>>{{5}}));
    EXPECT_EQ(ar.input_dtypes, (std::vector<std::string>{"float32"}));
    EXPECT_FALSE(ar.async_op);
    EXPECT_EQ(ar.state, "completed");
    EXPECT_EQ(ar.timeout_ms, kTestTimeout.count());
    ASSERT_TRUE(ar.time_started_ns && ar.time_completed_ns);
    EXPECT_LE(ar.time_created_ns, *ar.time_started_ns);
    EXPECT_LE(*ar.time_started_ns, *ar.time_completed_ns);
    EXPECT_EQ(d.entries[1].op, "broadcast");
    EXPECT_EQ(d.entries[1].root, 1);
    EXPECT_TRUE(d.entries[1].async_op);
    EXPECT_EQ(d.entries[1].output_dtypes, (std::vector<std::string>{"int64"}));
    EXPECT_EQ(d.entries[2].op, r == 0 ? "send" : "recv");
    EXPECT_TRUE(d.entries[2].is_p2p);
    EXPECT_EQ(d.entries[2].p2p_seq_id, 1);
    EXPECT_EQ(d.entries[2].collective_seq_id, 2);
    EXPECT_EQ(d.entries[2].state, "completed");
    for (size_t i = 0; i < 3; ++i) EXPECT_EQ(d.entries[i].record_id, static_cast<int64_t>(i));
  });
}

TEST(FlightRecorder, TheRingBufferKeepsTheNewestAndNamesTheLastDropped) {
  run_world(1, [](int) {
    dist::FlightRecorder recorder(recorder_options("", 3));
    recorder.attach(dist::group_world());
    recorder.attach(dist::group_world());  // a second attach does not record twice
    Tensor x = empty({1}, TensorOptions(kFloat32));
    for (int i = 0; i < 5; ++i) dist::all_reduce(x);
    const auto d = dist::fr::parse_dump(recorder.dump_json(), "dump");
    ASSERT_EQ(d.entries.size(), 3u);
    EXPECT_EQ(d.entries[0].record_id, 2);
    EXPECT_EQ(d.entries[0].collective_seq_id, 3);
    EXPECT_EQ(d.entries[2].collective_seq_id, 5);
    ASSERT_TRUE(d.groups.at("default").last_dropped.has_value());
    EXPECT_EQ(d.groups.at("default").last_dropped->record_id, 1);
    EXPECT_EQ(d.groups.at("default").last_dropped->collective_seq_id, 2);
  });
}

TEST(FlightRecorder, ARefusedOpIsAnErrorEntry) {
  run_world(1, [](int) {
    dist::FlightRecorder recorder(recorder_options());
    recorder.attach(dist::group_world());
    Tensor strided = empty({3, 3}, TensorOptions(kFloat32)).transpose(0, 1);
    EXPECT_THROW(dist::all_reduce(strided), ValueError);
    const auto d = dist::fr::parse_dump(recorder.dump_json(), "dump");
    ASSERT_EQ(d.entries.size(), 1u);
    EXPECT_EQ(d.entries[0].state, "error");
    EXPECT_NE(d.entries[0].error.find("must be contiguous"), std::string::npos);
  });
}

// Ranks as threads, one recorder each, dumping into one directory.
TEST(FlightRecorder, MismatchedSizesDumpOnErrorAndFrTraceNamesTheMismatch) {
  TempDir dir("fr-mismatch");
  run_world(2, [&](int r) {
    dist::FlightRecorder recorder(recorder_options(dir.path.string()));
    recorder.attach(dist::group_world());
    Tensor ok = empty({4}, TensorOptions(kFloat32));
    dist::all_reduce(ok);
    Tensor bad = empty({r == 0 ? 10 : 20}, TensorOptions(kFloat32));
    EXPECT_THROW(dist::all_reduce(bad), dist::DistBackendError);
    EXPECT_TRUE(recorder.flush(30s));
    EXPECT_EQ(recorder.dumps_written(), 1u);
    EXPECT_EQ(recorder.dump_path(), (dir.path / fmt::format("fr_rank{}.json", r)).string());
  });
  const std::string report = dist::fr_trace(dir.path.string());
  for (const char* word :
       {"ranks 0, 1; job test-job", "dumped error in all_reduce #2 of group 'default'",
        "group 'default' (ranks 0, 1; backend shm)",
        "first disagreement at collective #2: mismatched input sizes",
        "rank 0: #2 all_reduce(SUM), inputs [10] float32, outputs [10] float32, state error",
        "rank 1: #2 all_reduce(SUM), inputs [20] float32, outputs [20] float32, state error"})
    EXPECT_NE(report.find(word), std::string::npos) << "'" << word << "' missing from:\n" << report;
}

// Two ranks, each with a Flight Recorder dumping into dir, after one agreed all_reduce of x
// (float32 [4]): fn(rank, recorder, x, options), where options time an all_reduce out after
// `timeout`.
void after_one_all_reduce(const TempDir& dir, dist::Milliseconds timeout,
                          const std::function<void(int, dist::FlightRecorder&, Tensor&,
                                                   const dist::AllreduceOptions&)>& fn) {
  run_world(2, [&](int r) {
    dist::FlightRecorder recorder(recorder_options(dir.path.string()));
    recorder.attach(dist::group_world());
    Tensor x = empty({4}, TensorOptions(kFloat32));
    dist::all_reduce(x);
    dist::AllreduceOptions o;
    o.timeout = timeout;
    fn(r, recorder, x, o);
  });
}

TEST(FlightRecorder, ATimeoutDumpsAndFrTraceNamesTheMissingRank) {
  TempDir dir("fr-timeout");
  after_one_all_reduce(dir, 300ms, [](int r, auto& recorder, Tensor& x, const auto& o) {
    if (r == 0) {
      EXPECT_THROW(dist::group_world()->allreduce(x, o)->wait(), dist::DistTimeoutError);
      EXPECT_TRUE(recorder.flush(30s));
      EXPECT_EQ(recorder.dumps_written(), 1u);
    } else {
      std::this_thread::sleep_for(500ms);
      recorder.dump("rank 1 skipped it");
    }
  });
  const std::string report = dist::fr_trace(dir.path.string());
  for (const char* word :
       {"dumped timeout of all_reduce #2 of group 'default'", "dumped rank 1 skipped it",
        "first disagreement at collective #2: missing ranks: 1",
        "rank 0: #2 all_reduce(SUM), inputs [4] float32", "state timed out",
        "rank 1: no collective #2; its last before it: #1 all_reduce(SUM)"})
    EXPECT_NE(report.find(word), std::string::npos) << "'" << word << "' missing from:\n" << report;
}

// flush() right after a failed op must wait for that op's dump: the failure's completion
// callback requests it on the completing thread, and a flush() that ran between the entry
// turning terminal and the request once returned without it (the process then ended
// undumped). Many timeouts in a row, each followed at once by flush().
TEST(FlightRecorder, FlushAfterAFailedOpWaitsForItsDump) {
  TempDir dir("fr-flush-race");
  after_one_all_reduce(dir, 2ms, [](int r, auto& recorder, Tensor& x, const auto& o) {
    if (r == 0) {
      for (uint64_t i = 1; i <= 200; ++i) {
        EXPECT_THROW(dist::group_world()->allreduce(x, o)->wait(), dist::DistError);
        ASSERT_TRUE(recorder.flush(30s));
        ASSERT_EQ(recorder.dumps_written(), i) << "the dump of failed op " << i;
      }
    }
  });
}

TEST(FlightRecorder, AgreeingRanksAreReportedAsSuch) {
  TempDir dir("fr-agree");
  run_world(3, [&](int) {
    dist::FlightRecorder recorder(recorder_options(dir.path.string()));
    recorder.attach(dist::group_world());
    Tensor x = empty({6}, TensorOptions(kFloat64));
    dist::all_reduce(x);
    dist::barrier();
    dist::all_reduce(x, dist::ReduceOp::MIN);
    recorder.dump();
  });
  const std::string report = dist::fr_trace(dir.path.string());
  EXPECT_NE(report.find("3 collective(s) from #1 on: every rank agrees"), std::string::npos)
      << report;
  EXPECT_NE(report.find("last collective #3 all_reduce: rank 0 completed, rank 1 completed, "
                        "rank 2 completed"),
            std::string::npos)
      << report;
  EXPECT_EQ(report.find("disagreement"), std::string::npos) << report;
}

TEST(FlightRecorder, FrTraceMatchesSendsWithRecvsAndNamesTheUnmatched) {
  TempDir dir("fr-p2p");
  run_world(3, [&](int r) {
    dist::FlightRecorder recorder(recorder_options(dir.path.string()));
    recorder.attach(dist::group_world());
    if (r == 0) {
      dist::send(filled(kFloat32, 3, [](int64_t i) { return i; }), 1);
      // Fits the ring, so it completes, but rank 2 never receives it.
      EXPECT_TRUE(dist::isend(zeros({2}), 2, nullptr, 7)->wait());
    } else if (r == 1) {
      Tensor got = zeros({3});
      dist::recv(got, 0);
    }
    dist::barrier();
    recorder.dump();
  });
  const std::string report = dist::fr_trace(dir.path.string());
  for (const char* word :
       {"point-to-point: 1 send/recv pair(s) match; unmatched:",
        "rank 0 send #2 (to 2, tag 7, [2] float32, state completed): rank 2 has no matching recv"})
    EXPECT_NE(report.find(word), std::string::npos) << "'" << word << "' missing from:\n" << report;
}

TEST(FlightRecorder, SigusrOneRequestsADump) {
  TempDir dir("fr-signal");
  run_world(1, [&](int) {
    dist::FlightRecorder recorder(recorder_options(dir.path.string()));
    recorder.attach(dist::group_world());
    recorder.install_signal_handler();
    dist::FlightRecorder other(recorder_options(dir.path.string()));
    expect_error_mentions([&] { other.install_signal_handler(); },
                          {"another Flight Recorder handles SIGUSR1 already"});
    dist::barrier();
    ASSERT_EQ(::raise(SIGUSR1), 0);
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (recorder.dumps_written() == 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(5ms);
    ASSERT_EQ(recorder.dumps_written(), 1u);
    const auto d = dist::fr::parse_dump(read_file(recorder.dump_path()), "signal dump");
    EXPECT_EQ(d.reason, "SIGUSR1");
    ASSERT_EQ(d.entries.size(), 1u);
    EXPECT_EQ(d.entries[0].op, "barrier");
  });
  // The recorder is gone, and so is its handler: the previous disposition is back.
  struct sigaction now {};
  ::sigaction(SIGUSR1, nullptr, &now);
  EXPECT_EQ(now.sa_handler, SIG_DFL);
}

TEST(FlightRecorder, BadOptionsAndRequestsAreExplained) {
  expect_error_mentions([] { dist::FlightRecorder r(recorder_options("", 0)); },
                        {"FlightRecorder()", "'buffer_size' must be in [1, 16777216]", "got 0"});
  dist::FlightRecorder no_dir(recorder_options());
  expect_error_mentions([&] { no_dir.dump(); }, {"FlightRecorder.dump()", "no dump directory"});
  expect_error_mentions([&] { no_dir.attach(nullptr); },
                        {"FlightRecorder.attach()", "'group' must not be null"});
  ::setenv("TESSERA_FR_BUFFER_SIZE", "lots", 1);
  expect_error_mentions([] { dist::flight_recorder_options_from_env(); },
                        {"TESSERA_FR_BUFFER_SIZE must be an integer", "'lots'"});
  ::setenv("TESSERA_FR_BUFFER_SIZE", "0", 1);
  EXPECT_FALSE(dist::flight_recorder_options_from_env().has_value());
  ::setenv("TESSERA_FR_BUFFER_SIZE", "64", 1);
  ::setenv("TESSERA_FR_DUMP_DIR", "/tmp/somewhere", 1);
  const auto o = dist::flight_recorder_options_from_env();
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->buffer_size, 64u);
  EXPECT_EQ(o->dump_dir, "/tmp/somewhere");
  ::unsetenv("TESSERA_FR_BUFFER_SIZE");
  ::unsetenv("TESSERA_FR_DUMP_DIR");
}

// ---- real jobs through `tessera launch` -------------------------------------------------------

ShellResult run_fr_job(const TempDir& dir, const std::string& scenario) {
  return run_shell(fmt::format(
      "TESSERA_FR_BUFFER_SIZE=100 TESSERA_FR_DUMP_DIR={0} {1} launch --nproc-per-node 2 "
      "--master-port 0 --run-id fr-job -- {2} {3} && {1} fr-trace {0}",
      dir.path.string(), kTesseraCli, kLaunchWorker, scenario));
}

TEST(FlightRecorderJob, ADifferentSizeAllReduceIsNamedByFrTrace) {
  TempDir dir("fr-job-mismatch");
  const auto r = run_fr_job(dir, "fr-mismatch");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (const char* word :
       {"ranks 0, 1; job fr-job", "first disagreement at collective #2: mismatched input sizes",
        "rank 0: #2 all_reduce(SUM), inputs [10] float32",
        "rank 1: #2 all_reduce(SUM), inputs "
        "[20] float32",
        "dumped error in all_reduce #2 of group 'default'"})
    EXPECT_NE(r.output.find(word), std::string::npos) << "'" << word << "' missing from:\n"
                                                      << r.output;
}

TEST(FlightRecorderJob, ARankThatSkipsACollectiveIsNamedByFrTrace) {
  TempDir dir("fr-job-skip");
  const auto r = run_fr_job(dir, "fr-skip");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (const char* word :
       {"first disagreement at collective #2: missing ranks: 1",
        "rank 0: #2 all_reduce(SUM), inputs [8] float32", "state timed out",
        "rank 1: no collective #2; its last before it: #1", "dumped timeout of all_reduce #2",
        "dumped rank 1 skipped collective #2"})
    EXPECT_NE(r.output.find(word), std::string::npos) << "'" << word << "' missing from:\n"
                                                      << r.output;
}

}  // namespace
}  // namespace tessera::testing
