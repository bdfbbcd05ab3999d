// The dump format, both directions. The reader trusts nothing: every field is checked for
// presence, type and range before use, and errors name the file, the field's path
// ("entries[3].input_sizes[0]"), what was expected and what was there.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <limits>

#include "distributed/flight_recorder/trace.h"
#include "tessera/core/error.h"
#include "tessera/distributed/flight_recorder.h"

namespace tessera::distributed::fr {

namespace {

using Json = nlohmann::json;

Json optional_int(const std::optional<int64_t>& v) {
  return v ? Json(*v) : Json(nullptr);
}

Json entry_json(const TraceEntry& e) {
  return Json{{"record_id", e.record_id},
              {"group", e.group},
              {"generation", e.generation},
              {"op_id", e.op_id},
              {"collective_seq_id", e.collective_seq_id},
              {"p2p_seq_id", e.p2p_seq_id},
              {"is_p2p", e.is_p2p},
              {"op", e.op},
              {"input_sizes", e.input_sizes},
              {"input_dtypes", e.input_dtypes},
              {"output_sizes", e.output_sizes},
              {"output_dtypes", e.output_dtypes},
              {"root", e.root},
              {"tag", e.tag},
              {"reduce_op", e.reduce_op.empty() ? Json(nullptr) : Json(e.reduce_op)},
              {"async_op", e.async_op},
              {"state", e.state},
              {"time_created_ns", e.time_created_ns},
              {"time_started_ns", optional_int(e.time_started_ns)},
              {"time_completed_ns", optional_int(e.time_completed_ns)},
              {"timeout_ms", e.timeout_ms},
              {"error", e.error.empty() ? Json(nullptr) : Json(e.error)}};
}

// A JSON value and where it is, for errors.
class Field {
 public:
  Field(const Json& value, std::string path, const std::string& source)
      : value_(value), path_(std::move(path)), source_(source) {}

  [[noreturn]] void fail(std::string_view expected) const {
    TS_THROW(ValueError, "fr-trace: {}: field '{}' must be {}, but got {}", source_, path_,
             expected, describe());
  }

  Field at(const char* key) const {
    if (!value_.is_object()) fail("an object");
    const auto it = value_.find(key);
    TS_CHECK(it != value_.end(), ValueError, "fr-trace: {}: field '{}' is missing", source_,
             path_.empty() ? std::string(key) : path_ + "." + key);
    return Field(*it, path_.empty() ? std::string(key) : path_ + "." + key, source_);
  }
  Field at(size_t i) const { return Field(value_[i], fmt::format("{}[{}]", path_, i), source_); }

  bool is_null() const { return value_.is_null(); }
  const Json& json() const { return value_; }
  const std::string& path() const { return path_; }
  const std::string& source() const { return source_; }

  int64_t integer(int64_t lo = std::numeric_limits<int64_t>::min(),
                  int64_t hi = std::numeric_limits<int64_t>::max()) const {
    const auto range = fmt::format("an integer in [{}, {}]", lo, hi);
    if (value_.is_number_unsigned()) {
      const uint64_t u = value_.get<uint64_t>();
      if (u > static_cast<uint64_t>(hi)) fail(range);
      return static_cast<int64_t>(u);
    }
    if (!value_.is_number_integer()) fail(range);
    const int64_t v = value_.get<int64_t>();
    if (v < lo || v > hi) fail(range);
    return v;
  }
  std::optional<int64_t> optional_integer(int64_t lo, int64_t hi) const {
    if (is_null()) return std::nullopt;
    return integer(lo, hi);
  }
  std::string string() const {
    if (!value_.is_string()) fail("a string");
    return value_.get<std::string>();
  }
  std::string optional_string() const { return is_null() ? std::string() : string(); }
  bool boolean() const {
    if (!value_.is_boolean()) fail("true or false");
    return value_.get<bool>();
  }
  size_t array_size() const {
    if (!value_.is_array()) fail("a list");
    return value_.size();
  }

 private:
  std::string describe() const {
    std::string text = value_.dump();
    if (text.size() > 60) text = text.substr(0, 57) + "...";
    return fmt::format("{} {}", value_.type_name(), text);
  }

  const Json& value_;
  std::string path_;
  const std::string& source_;
};

constexpr int64_t kMaxRank = 1 << 24;
constexpr int64_t kNonNegative = std::numeric_limits<int64_t>::max();

std::vector<std::string> strings(const Field& f) {
  std::vector<std::string> out(f.array_size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = f.at(i).string();
  return out;
}

std::vector<std::vector<int64_t>> size_lists(const Field& f) {
  std::vector<std::vector<int64_t>> out(f.array_size());
  for (size_t i = 0; i < out.size(); ++i) {
    const Field sizes = f.at(i);
    out[i].resize(sizes.array_size());
    for (size_t d = 0; d < out[i].size(); ++d) out[i][d] = sizes.at(d).integer(0, kNonNegative);
  }
  return out;
}

TraceEntry parse_entry(const Field& f) {
  TraceEntry e;
  e.record_id = f.at("record_id").integer(0, kNonNegative);
  e.group = f.at("group").string();
  e.generation = f.at("generation").integer(0, kNonNegative);
  e.op_id = f.at("op_id").integer(0, kNonNegative);
  e.collective_seq_id = f.at("collective_seq_id").integer(0, kNonNegative);
  e.p2p_seq_id = f.at("p2p_seq_id").integer(0, kNonNegative);
  e.is_p2p = f.at("is_p2p").boolean();
  e.op = f.at("op").string();
  e.input_sizes = size_lists(f.at("input_sizes"));
  e.input_dtypes = strings(f.at("input_dtypes"));
  e.output_sizes = size_lists(f.at("output_sizes"));
  e.output_dtypes = strings(f.at("output_dtypes"));
  TS_CHECK(e.input_sizes.size() == e.input_dtypes.size() &&
               e.output_sizes.size() == e.output_dtypes.size(),
           ValueError,
           "fr-trace: {}: field '{}' must have one dtype per tensor, but has {} input sizes and "
           "{} input dtypes, {} output sizes and {} output dtypes",
           f.source(), f.path(), e.input_sizes.size(), e.input_dtypes.size(), e.output_sizes.size(),
           e.output_dtypes.size());
  e.root = f.at("root").integer(-1, kMaxRank);
  e.tag = f.at("tag").integer();
  e.reduce_op = f.at("reduce_op").optional_string();
  e.async_op = f.at("async_op").boolean();
  const Field state = f.at("state");
  e.state = state.string();
  if (std::find(std::begin(kStates), std::end(kStates), e.state) == std::end(kStates))
    state.fail("one of scheduled, started, completed, error, timed out");
  e.time_created_ns = f.at("time_created_ns").integer(0, kNonNegative);
  e.time_started_ns = f.at("time_started_ns").optional_integer(0, kNonNegative);
  e.time_completed_ns = f.at("time_completed_ns").optional_integer(0, kNonNegative);
  e.timeout_ms = f.at("timeout_ms").integer(0, kNonNegative);
  e.error = f.at("error").optional_string();
  return e;
}

TraceGroup parse_group(const Field& f) {
  TraceGroup g;
  const Field ranks = f.at("ranks");
  g.ranks.resize(ranks.array_size());
  for (size_t i = 0; i < g.ranks.size(); ++i)
    g.ranks[i] = static_cast<int>(ranks.at(i).integer(0, kMaxRank));
  g.backend = f.at("backend").string();
  const Field dropped = f.at("last_dropped");
  if (!dropped.is_null()) {
    g.last_dropped = DroppedRecord{dropped.at("record_id").integer(0, kNonNegative),
                                   dropped.at("collective_seq_id").integer(0, kNonNegative),
                                   dropped.at("p2p_seq_id").integer(0, kNonNegative)};
  }
  g.last_enqueued_collective = f.at("last_enqueued_collective").integer(0, kNonNegative);
  g.last_completed_collective = f.at("last_completed_collective").integer(0, kNonNegative);
  g.last_enqueued_p2p = f.at("last_enqueued_p2p").integer(0, kNonNegative);
  return g;
}

}  // namespace

std::string to_json_text(const TraceDump& dump) {
  Json groups = Json::object();
  for (const auto& [name, g] : dump.groups) {
    Json dropped = nullptr;
    if (g.last_dropped) {
      dropped = Json{{"record_id", g.last_dropped->record_id},
                     {"collective_seq_id", g.last_dropped->collective_seq_id},
                     {"p2p_seq_id", g.last_dropped->p2p_seq_id}};
    }
    groups[name] = Json{{"ranks", g.ranks},
                        {"backend", g.backend},
                        {"last_dropped", dropped},
                        {"last_enqueued_collective", g.last_enqueued_collective},
                        {"last_completed_collective", g.last_completed_collective},
                        {"last_enqueued_p2p", g.last_enqueued_p2p}};
  }
  Json entries = Json::array();
  for (const auto& e : dump.entries) entries.push_back(entry_json(e));
  const Json doc{{"format", kFlightRecorderFormat},
                 {"version", kFlightRecorderVersion},
                 {"rank", dump.rank},
                 {"host", dump.host},
                 {"pid", dump.pid},
                 {"job_id", dump.job_id},
                 {"reason", dump.reason},
                 {"dump_time_ns", dump.dump_time_ns},
                 {"buffer_size", dump.buffer_size},
                 {"groups", groups},
                 {"entries", entries}};
  // Invalid UTF-8 in an error message must not make the dump fail: replace it.
  return doc.dump(1, ' ', false, Json::error_handler_t::replace) + "\n";
}

TraceDump parse_dump(std::string_view text, const std::string& source) {
  Json doc;
  try {
    doc = Json::parse(text.begin(), text.end());
  } catch (const Json::parse_error& e) {
    TS_THROW(ValueError, "fr-trace: {}: not valid JSON (byte {}): {}", source, e.byte, e.what());
  }
  const Field root(doc, "", source);
  if (!doc.is_object()) root.fail("a JSON object (a Flight Recorder dump)");
  const Field format = root.at("format");
  TS_CHECK(format.json().is_string() && format.string() == kFlightRecorderFormat, ValueError,
           "fr-trace: {}: not a Tessera Flight Recorder dump (field 'format' must be '{}', but "
           "got {})",
           source, kFlightRecorderFormat, format.json().dump());
  const int64_t version = root.at("version").integer();
  TS_CHECK(version == kFlightRecorderVersion, ValueError,
           "fr-trace: {}: dump format version {} is not supported (this reader knows version {})",
           source, version, kFlightRecorderVersion);
  TraceDump d;
  d.source = source;
  d.rank = static_cast<int>(root.at("rank").integer(0, kMaxRank));
  d.host = root.at("host").string();
  d.pid = root.at("pid").integer(0, kNonNegative);
  d.job_id = root.at("job_id").string();
  d.reason = root.at("reason").string();
  d.dump_time_ns = root.at("dump_time_ns").integer(0, kNonNegative);
  d.buffer_size = root.at("buffer_size").integer(1, kNonNegative);
  const Field groups = root.at("groups");
  if (!groups.json().is_object()) groups.fail("an object of groups by name");
  for (const auto& [name, value] : groups.json().items())
    d.groups[name] = parse_group(Field(value, "groups." + name, source));
  const Field entries = root.at("entries");
  const size_t n = entries.array_size();
  for (size_t i = 0; i < n; ++i) {
    TraceEntry e = parse_entry(entries.at(i));
    TS_CHECK(d.groups.count(e.group), ValueError,
             "fr-trace: {}: field 'entries[{}].group' names group '{}', which the header does "
             "not list",
             source, i, e.group);
    d.entries.push_back(std::move(e));
  }
  return d;
}

}  // namespace tessera::distributed::fr
