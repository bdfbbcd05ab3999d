// The Flight Recorder: a ring buffer of the last N ops of every attached ProcessGroup, fed
// only by the groups' pre/post hooks (hooks.h), so it works for every backend. It is dumped
// as versioned JSON when an op times out or fails, on SIGUSR1 and on request; `tessera
// fr-trace DIR` (fr_trace below) merges the dumps of all ranks and names the first
// collective where the ranks disagree.
//
// Enabling it for a job: TESSERA_FR_BUFFER_SIZE=N (entries kept; 0 or unset: off) and
// TESSERA_FR_DUMP_DIR=DIR (where the dumps go; unset: dumps only on request, as text).
// init_process_group and new_group then attach every group to the process's recorder
// (global_flight_recorder()), and SIGUSR1 dumps it.
//
// Dump format (version 1), one file per rank, DIR/fr_rank<R>.json:
//   {"format": "tessera-flight-recorder", "version": 1, "rank", "host", "pid", "job_id",
//    "reason", "dump_time_ns", "buffer_size",
//    "groups": {NAME: {"ranks": [global ranks], "backend",
//                      "last_dropped": null | {"record_id", "collective_seq_id", "p2p_seq_id"},
//                      "last_enqueued_collective", "last_completed_collective",
//                      "last_enqueued_p2p"}},
//    "entries": [{"record_id", "group", "op_id", "collective_seq_id", "p2p_seq_id", "is_p2p",
//                 "op", "input_sizes", "input_dtypes", "output_sizes", "output_dtypes",
//                 "root", "tag", "reduce_op", "async_op", "state", "time_created_ns",
//                 "time_started_ns", "time_completed_ns", "timeout_ms", "error"}]}
// state is "scheduled" (issued, not started), "started", "completed", "error" or "timed out";
// times are wall-clock nanoseconds since the Unix epoch (null when not reached); "last_dropped"
// is the newest entry of the group that the ring buffer overwrote, so a reader knows which
// sequence ids a rank can no longer show.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "tessera/distributed/process_group.h"

namespace tessera::distributed {

inline constexpr const char* kFlightRecorderFormat = "tessera-flight-recorder";
inline constexpr int kFlightRecorderVersion = 1;

struct FlightRecorderOptions {
  size_t buffer_size = 2000;  // entries kept, across groups
  std::string dump_dir;       // empty: no files (dump_json() still works)
  int rank = -1;              // the process's global rank; -1: taken from the first group
  std::string job_id;         // the header's job id
  bool dump_on_timeout = true;
  bool dump_on_error = true;
};

class FlightRecorder {
 public:
  explicit FlightRecorder(FlightRecorderOptions options);
  // Removes its hooks, writes the dumps still requested, stops its dump thread.
  ~FlightRecorder();
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  // Records `group`'s ops from now on (a non-member group, or one attached already, is
  // ignored). Its members, name and backend go into the dump's header.
  void attach(const ProcessGroupPtr& group);

  // The buffer as dump text, now.
  std::string dump_json(const std::string& reason = "on request") const;
  // Writes the dump file now and returns its path. DistError when there is no dump directory
  // or the file cannot be written.
  std::string dump(const std::string& reason = "on request");
  // Asks the dump thread to write the dump (what timeouts, errors and SIGUSR1 do).
  void request_dump(const std::string& reason);
  // Waits until every op that has finished is recorded (its failure, if any, has requested
  // its dump) and every dump requested so far has been written (or failed); false when
  // `timeout` passed first.
  bool flush(Milliseconds timeout);
  // How many dump files this recorder has written.
  uint64_t dumps_written() const;
  // Makes SIGUSR1 request a dump of this recorder (the handler only writes to a pipe). One
  // recorder at a time; the previous handler comes back when this recorder is destroyed.
  void install_signal_handler();

  const FlightRecorderOptions& options() const;
  std::string dump_path() const;  // DIR/fr_rank<R>.json

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

// The options TESSERA_FR_BUFFER_SIZE, TESSERA_FR_DUMP_DIR and TESSERA_JOB_ID ask for; nullopt
// when TESSERA_FR_BUFFER_SIZE is unset or 0. ValueError when it is not an integer in
// [0, 16777216].
std::optional<FlightRecorderOptions> flight_recorder_options_from_env();

// The process's recorder, made on first use from TESSERA_FR_BUFFER_SIZE, TESSERA_FR_DUMP_DIR
// and TESSERA_JOB_ID (with a SIGUSR1 handler when a dump directory is set); null when
// TESSERA_FR_BUFFER_SIZE is unset or 0. ValueError when the variables are malformed.
std::shared_ptr<FlightRecorder> global_flight_recorder();

// `tessera fr-trace DIR`: reads every *.json dump in `dir` and returns the report: per group,
// the first collective where the ranks disagree (missing ranks; mismatched op, root, reduce
// op, sizes or dtypes) and what each rank was doing then, or that they all agree; and the
// point-to-point messages matched send with recv per pair of ranks and tag, naming the first
// unmatched or mismatched one of each pair. ValueError naming the file and the field when a dump is
// malformed.
std::string fr_trace(const std::string& dir);

}  // namespace tessera::distributed
