// The bench-ft-worker's per-rank logs (<dir>/rank<R>.log, lines described in bench_ft.cpp),
// read back by `tessera bench ft` and by the fault-injection tests.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace tessera::cli {

struct FtRankLog {
  std::vector<std::pair<int64_t, int64_t>> commits;  // step, wall ns
  std::map<int64_t, std::string> digests;            // step -> weights digest
  std::vector<int64_t> kills;                        // wall ns
  int starts = 0, heals = 0;
  int64_t failed_steps = 0;  // steps that did not commit
  bool done = false;
  // The highest step it reached: committed, healed to, or finished at (a replica that starts
  // late may be healed to the end without committing a step).
  int64_t last_step = 0;
  double final_loss = NAN;
};

// Every rank<R>.log of `dir`, by rank.
inline std::map<int, FtRankLog> read_ft_logs(const std::string& dir) {
  std::map<int, FtRankLog> logs;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("rank", 0) != 0) continue;
    FtRankLog& l = logs[std::stoi(name.substr(4))];
    std::ifstream f(e.path());
    std::string line;
    while (std::getline(f, line)) {
      std::istringstream in(line);
      std::string what;
      in >> what;
      if (what == "commit") {
        int64_t step = 0, ns = 0;
        std::string digest;
        in >> step >> ns >> digest;
        l.commits.emplace_back(step, ns);
        l.digests[step] = digest;
        l.last_step = std::max(l.last_step, step);
      } else if (what == "kill") {
        int64_t ns = 0;
        in >> ns;
        l.kills.push_back(ns);
      } else if (what == "start") {
        ++l.starts;
      } else if (what == "heal") {
        ++l.heals;
      } else if (what == "fail") {
        ++l.failed_steps;
      } else if (what == "done") {
        int64_t step = 0;
        in >> step >> l.final_loss;
        l.done = true;
        l.last_step = std::max(l.last_step, step);
      }
    }
  }
  return logs;
}

}  // namespace tessera::cli
