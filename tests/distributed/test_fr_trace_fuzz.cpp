// Seeded fuzzing of the Flight Recorder's trace reader (as test_store_fuzz.cpp does for the
// store protocol): mutated dumps, byte-wise and field-wise, must parse or give a clear
// "fr-trace: SOURCE: ..." error; never a crash or a read past the buffer (the ASan build
// checks that). Dumps that parse must survive the analysis too. Then one test per error
// message.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <random>

#include "dist_test_util.h"
#include "distributed/flight_recorder/trace.h"
#include "launch_test_util.h"
#include "tessera/distributed/flight_recorder.h"

namespace tessera::testing {
namespace {

using Json = nlohmann::json;
namespace fr = dist::fr;

fr::TraceDump sample_dump(int rank) {
  fr::TraceDump d;
  d.rank = rank;
  d.host = "host";
  d.pid = 100 + rank;
  d.job_id = "job";
  d.reason = "on request";
  d.dump_time_ns = 1'700'000'000'000'000'000;
  d.buffer_size = 8;
  fr::TraceGroup g;
  g.ranks = {0, 1};
  g.backend = "shm";
  g.last_dropped = fr::DroppedRecord{0, 0, 0};
  g.last_enqueued_collective = 2;
  g.last_completed_collective = 1;
  d.groups["default"] = g;
  g.last_dropped.reset();
  g.ranks = {1};
  d.groups["group1"] = g;
  for (int i = 0; i < 3; ++i) {
    fr::TraceEntry e;
    e.record_id = i + 1;
    e.group = i == 2 ? "group1" : "default";
    e.op_id = 10 + i;
    e.collective_seq_id = i + 1;
    e.op = i == 1 ? "broadcast" : "all_reduce";
    e.input_sizes = e.output_sizes = {{4, 2}};
    e.input_dtypes = e.output_dtypes = {"float32"};
    e.reduce_op = i == 1 ? "" : "SUM";
    e.root = i == 1 ? 0 : -1;
    e.state = i == 0 ? "completed" : "started";
    e.time_created_ns = 5;
    e.time_started_ns = 6;
    if (i == 0) e.time_completed_ns = 7;
    e.timeout_ms = 1000;
    e.error = i == 2 ? "a \"quoted\" error\n" : "";
    d.entries.push_back(e);
  }
  return d;
}

// A random JSON value of a random type.
Json random_value(std::mt19937_64& rng) {
  switch (rng() % 8) {
    case 0:
      return nullptr;
    case 1:
      return static_cast<int64_t>(rng());  // huge or negative
    case 2:
      return -1;
    case 3:
      return 1.5;
    case 4:
      return "text";
    case 5:
      return Json::array({1, "x", nullptr});
    case 6:
      return Json::object({{"k", 1}});
    default:
      return rng() % 2 == 0;
  }
}

// Replaces, removes or extends one node of `doc`, picked by a random walk from the root.
void mutate_field(Json& doc, std::mt19937_64& rng) {
  Json* node = &doc;
  for (int depth = 0; depth < 6; ++depth) {
    if (!(node->is_object() || node->is_array()) || node->empty() || rng() % 4 == 0) break;
    auto it = node->begin();
    std::advance(it, static_cast<long>(rng() % node->size()));
    if (node->is_object() && rng() % 5 == 0) {  // remove a key
      node->erase(it);
      return;
    }
    node = &*it;
  }
  if (node->is_array() && rng() % 3 == 0) {
    node->push_back(random_value(rng));
  } else {
    *node = random_value(rng);
  }
}

// Parses `text` as a dump: success, or a ValueError that names the source.
bool parses(const std::string& text) {
  try {
    const auto d = fr::parse_dump(text, "fuzz.json");
    fr::analyze({d, fr::parse_dump(fr::to_json_text(sample_dump(1 - d.rank % 2)), "other.json")});
    return true;
  } catch (const ValueError& e) {
    const std::string what = e.what();
    EXPECT_TRUE(what.rfind("fr-trace: fuzz.json: ", 0) == 0 ||
                what.find("are both dumps of rank") != std::string::npos)
        << what;
    return false;
  }
}

TEST(FrTraceFuzz, ValidDumpsRoundTrip) {
  const fr::TraceDump d = sample_dump(0);
  const fr::TraceDump back = fr::parse_dump(fr::to_json_text(d), "dump");
  EXPECT_EQ(fr::to_json_text(back), fr::to_json_text(d));
  EXPECT_EQ(back.entries[2].error, "a \"quoted\" error\n");
  EXPECT_FALSE(back.entries[1].time_completed_ns.has_value());
  EXPECT_EQ(back.groups.at("default").last_dropped->record_id, 0);
}

TEST(FrTraceFuzz, MutatedDumpsNeverCrash) {
  std::mt19937_64 rng(20261130);
  const std::string valid = fr::to_json_text(sample_dump(0));
  const Json doc = Json::parse(valid);
  int ok = 0, refused = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string text;
    if (iter % 2 == 0) {
      Json mutated = doc;
      for (int k = 0, n = 1 + static_cast<int>(rng() % 3); k < n; ++k) mutate_field(mutated, rng);
      text = mutated.dump();
    } else {
      text = valid;
      switch (rng() % 3) {
        case 0:  // flip bytes
          for (int k = 0, n = 1 + static_cast<int>(rng() % 4); k < n; ++k)
            text[rng() % text.size()] ^= static_cast<char>(1 + rng() % 255);
          break;
        case 1:  // truncate
          text.resize(rng() % text.size());
          break;
        default:  // random bytes in the middle
          for (size_t i = rng() % text.size(), n = 0; i < text.size() && n < 16; ++i, ++n)
            text[i] = static_cast<char>(rng());
      }
    }
    (parses(text) ? ok : refused)++;
  }
  EXPECT_GT(refused, 1000);  // most mutations break something
  EXPECT_GT(ok, 10);         // and some still read (a changed value of the right kind)
}

void expect_dump_error(const std::function<void(Json&)>& change,
                       const std::vector<std::string>& words) {
  Json doc = Json::parse(fr::to_json_text(sample_dump(0)));
  change(doc);
  expect_error_mentions([&] { fr::parse_dump(doc.dump(), "rank0.json"); }, words);
}

TEST(FrTraceErrors, MalformedDumpsNameTheFileAndTheField) {
  expect_error_mentions([] { fr::parse_dump("{\"format\": ", "rank0.json"); },
                        {"fr-trace: rank0.json: not valid JSON (byte"});
  expect_error_mentions([] { fr::parse_dump("[1, 2]", "rank0.json"); },
                        {"rank0.json", "must be a JSON object", "array"});
  expect_dump_error(
      [](Json& d) { d["format"] = "something-else"; },
      {"not a Tessera Flight Recorder dump", "'tessera-flight-recorder'", "\"something-else\""});
  expect_dump_error([](Json& d) { d["version"] = 2; },
                    {"dump format version 2 is not supported", "knows version 1"});
  expect_dump_error([](Json& d) { d.erase("rank"); }, {"rank0.json", "field 'rank' is missing"});
  expect_dump_error([](Json& d) { d["rank"] = "zero"; },
                    {"field 'rank' must be an integer in [0, 16777216]", "got string \"zero\""});
  expect_dump_error([](Json& d) { d["entries"][1]["input_sizes"][0][1] = -3; },
                    {"field 'entries[1].input_sizes[0][1]' must be an integer in [0,", "-3"});
  expect_dump_error([](Json& d) { d["entries"][0]["state"] = "finished"; },
                    {"field 'entries[0].state' must be one of scheduled, started, completed, "
                     "error, timed out",
                     "\"finished\""});
  expect_dump_error([](Json& d) { d["entries"][0]["group"] = "nowhere"; },
                    {"'entries[0].group' names group 'nowhere', which the header does not list"});
  expect_dump_error([](Json& d) { d["entries"][0]["input_dtypes"].push_back("int8"); },
                    {"field 'entries[0]' must have one dtype per tensor", "1 input sizes and 2"});
  expect_dump_error([](Json& d) { d["groups"]["default"]["last_dropped"] = 7; },
                    {"field 'groups.default.last_dropped' must be an object", "number 7"});
  expect_dump_error([](Json& d) { d["entries"] = Json::object(); },
                    {"field 'entries' must be a list"});
}

TEST(FrTraceErrors, DirectoriesAndDuplicateRanksAreExplained) {
  expect_error_mentions([] { dist::fr_trace("/nonexistent/fr"); },
                        {"fr-trace: '/nonexistent/fr' is not a directory"});
  TempDir dir("fr-errors");
  expect_error_mentions([&] { dist::fr_trace(dir.path.string()); }, {"holds no *.json dumps"});
  const std::string text = fr::to_json_text(sample_dump(0));
  std::ofstream(dir.path / "a.json") << text;
  std::ofstream(dir.path / "b.json") << text;
  expect_error_mentions([&] { dist::fr_trace(dir.path.string()); },
                        {"a.json and", "b.json are both dumps of rank 0"});
  std::ofstream(dir.path / "b.json") << "not json";
  expect_error_mentions([&] { dist::fr_trace(dir.path.string()); }, {"b.json: not valid JSON"});
  const auto r = run_shell(fmt::format("{} fr-trace {}", kTesseraCli, dir.path.string()));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("tessera: error: fr-trace:"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace tessera::testing
