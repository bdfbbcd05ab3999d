// The Flight Recorder's dump, as data: what the recorder writes and fr-trace reads. The
// field names and the format's rules live here once (trace_format.cpp), so the writer and
// the reader cannot drift apart. The layout is in include/tessera/distributed/flight_recorder.h.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::distributed::fr {

struct TraceEntry {
  int64_t record_id = 0;
  // The group's name; "<name>@g<N>" for generation N > 0 of a reconfigured group, whose
  // members and sequence numbers are its own (fr-trace analyses each generation apart).
  std::string group;
  int64_t generation = 0;
  int64_t op_id = 0;
  int64_t collective_seq_id = 0;
  int64_t p2p_seq_id = 0;
  bool is_p2p = false;
  std::string op;
  std::vector<std::vector<int64_t>> input_sizes, output_sizes;
  std::vector<std::string> input_dtypes, output_dtypes;
  int64_t root = -1;      // root, or the peer of a send/recv (a group rank)
  int64_t tag = 0;        // send/recv's tag
  std::string reduce_op;  // empty: none
  bool async_op = true;
  std::string state;  // one of kStates
  int64_t time_created_ns = 0;
  std::optional<int64_t> time_started_ns, time_completed_ns;
  int64_t timeout_ms = 0;
  std::string error;  // empty: none

  int64_t seq_id() const { return is_p2p ? p2p_seq_id : collective_seq_id; }
};

inline constexpr std::string_view kStates[] = {"scheduled", "started", "completed", "error",
                                               "timed out"};

struct DroppedRecord {
  int64_t record_id = 0;
  int64_t collective_seq_id = 0;
  int64_t p2p_seq_id = 0;
};

struct TraceGroup {
  std::vector<int> ranks;  // global ranks, in group-rank order
  std::string backend;
  std::optional<DroppedRecord> last_dropped;
  int64_t last_enqueued_collective = 0;
  int64_t last_completed_collective = 0;
  int64_t last_enqueued_p2p = 0;
};

struct TraceDump {
  std::string source;  // the file it came from (errors and reports name it)
  int rank = 0;
  std::string host;
  int64_t pid = 0;
  std::string job_id;
  std::string reason;
  int64_t dump_time_ns = 0;
  int64_t buffer_size = 0;
  std::map<std::string, TraceGroup> groups;
  std::vector<TraceEntry> entries;
};

// Writes `dump` as format version 1.
std::string to_json_text(const TraceDump& dump);
// Reads and validates a dump; ValueError "fr-trace: SOURCE: ..." naming the field, what was
// expected and what was found when anything is malformed.
TraceDump parse_dump(std::string_view text, const std::string& source);

// The fr-trace report for the dumps of one job (see fr_trace() in flight_recorder.h).
// ValueError when two dumps claim the same rank.
std::string analyze(std::vector<TraceDump> dumps);

// Every *.json file of `dir`, parsed; ValueError when there is none or one is malformed.
std::vector<TraceDump> load_dumps(const std::string& dir);

}  // namespace tessera::distributed::fr
