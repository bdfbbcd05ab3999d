// fr-trace: merge the dumps of all ranks and find, per group, the first collective where the
// ranks disagree.
//
// Matching: every rank numbers a group's collectives 1, 2, 3, ... in issue order, so the
// entries with equal collective_seq_id on the members of a group are one collective. A
// rank's ring buffer may have overwritten its oldest entries; its header says up to which
// sequence id ("last_dropped"), and the analysis starts after the newest such id of any rank,
// where every rank can still show what it did. Walking the sequence ids that any rank
// recorded, in order, the first id where a member has no entry (it never issued the
// collective: a skipped call or a rank stuck before it) or where members disagree on the op,
// root, reduce op, dtypes or sizes is reported, with what each member was doing then.
// Point-to-point: messages between two ranks with one tag arrive in order, so per group,
// ordered pair and tag the k-th send of the sender is the k-th recv of the receiver; the first
// send without its recv (a receiver that never posted it: the sender waits or its message
// stays unread), recv without its send, or pair that disagrees on size or dtype is reported
// per pair. Pairs where a rank's ring buffer dropped point-to-point records cannot be matched
// (their oldest messages are gone) and are named as such.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <tuple>

#include "distributed/flight_recorder/trace.h"
#include "tessera/core/error.h"
#include "tessera/distributed/flight_recorder.h"

namespace tessera::distributed::fr {

namespace {

std::string tensors(const std::vector<std::vector<int64_t>>& sizes,
                    const std::vector<std::string>& dtypes) {
  if (sizes.empty()) return "none";
  std::vector<std::string> parts;
  for (size_t i = 0; i < sizes.size() && i < dtypes.size(); ++i)
    parts.push_back(fmt::format("[{}] {}", fmt::join(sizes[i], ", "), dtypes[i]));
  return fmt::format("{}", fmt::join(parts, ", "));
}

std::string describe(const TraceEntry& e) {
  std::string s = fmt::format("#{} {}", e.collective_seq_id, e.op);
  if (!e.reduce_op.empty()) s += fmt::format("({})", e.reduce_op);
  s += fmt::format(", inputs {}, outputs {}", tensors(e.input_sizes, e.input_dtypes),
                   tensors(e.output_sizes, e.output_dtypes));
  if (e.root >= 0) s += fmt::format(", root {}", e.root);
  s += fmt::format(", state {}", e.state);
  if (!e.error.empty()) {
    std::string error = e.error.substr(0, 240);
    if (error.size() < e.error.size()) error += "...";
    s += fmt::format(" ({})", error);
  }
  return s;
}

// What must agree across ranks for op `op` (gather's outputs and scatter's inputs exist on
// the root only; all_to_all_single may split unevenly, so only its dtypes must agree).
struct Agreement {
  bool inputs = true, outputs = true, sizes = true;
};
Agreement agreement_for(const std::string& op) {
  Agreement a;
  if (op == "gather") a.outputs = false;
  if (op == "scatter") a.inputs = false;
  if (op == "all_to_all_single") a.sizes = false;
  return a;
}

// The first way in which `entries` (one per rank, all present) disagree; empty when none.
std::string disagreement(const std::map<int, const TraceEntry*>& entries) {
  const TraceEntry& first = *entries.begin()->second;
  const auto differ = [&](auto field) {
    for (const auto& [rank, e] : entries)
      if (field(*e) != field(first)) return true;
    return false;
  };
  if (differ([](const TraceEntry& e) { return e.op; })) return "mismatched op";
  if (differ([](const TraceEntry& e) { return e.reduce_op; })) return "mismatched reduce op";
  if (differ([](const TraceEntry& e) { return e.root; })) return "mismatched root";
  const Agreement a = agreement_for(first.op);
  if (a.inputs && differ([](const TraceEntry& e) { return e.input_dtypes; }))
    return "mismatched input dtypes";
  if (a.outputs && differ([](const TraceEntry& e) { return e.output_dtypes; }))
    return "mismatched output dtypes";
  if (a.sizes && a.inputs && differ([](const TraceEntry& e) { return e.input_sizes; }))
    return "mismatched input sizes";
  if (a.sizes && a.outputs && differ([](const TraceEntry& e) { return e.output_sizes; }))
    return "mismatched output sizes";
  return "";
}

void analyze_group(const std::string& name, const std::vector<const TraceDump*>& dumps,
                   std::string& out) {
  // Members according to the lowest rank that has the group; the others must agree.
  const TraceGroup* reference = nullptr;
  for (const TraceDump* d : dumps) {
    if (const auto it = d->groups.find(name); it != d->groups.end()) {
      reference = &it->second;
      break;
    }
  }
  if (!reference) return;
  out += fmt::format("group '{}' (ranks {}; backend {})\n", name, fmt::join(reference->ranks, ", "),
                     reference->backend);
  std::map<int, const TraceDump*> present;
  std::vector<int> absent;
  for (const int member : reference->ranks) {
    const TraceDump* found = nullptr;
    for (const TraceDump* d : dumps)
      if (d->rank == member && d->groups.count(name)) found = d;
    if (found) {
      present[member] = found;
    } else {
      absent.push_back(member);
    }
  }
  for (const auto& [rank, d] : present) {
    const auto& ranks = d->groups.at(name).ranks;
    if (ranks != reference->ranks)
      out += fmt::format("  rank {} disagrees on the members: it lists ranks {}\n", rank,
                         fmt::join(ranks, ", "));
  }
  if (!absent.empty())
    out += fmt::format("  no dump from ranks {} (dead, or never reached the dump)\n",
                       fmt::join(absent, ", "));

  // Each rank's collectives by sequence id; where every rank can still show its entries.
  std::map<int, std::map<int64_t, const TraceEntry*>> colls;
  int64_t start = 1;
  std::set<int64_t> seqs;
  for (const auto& [rank, d] : present) {
    auto& mine = colls[rank];
    for (const auto& e : d->entries) {
      if (e.group != name || e.is_p2p) continue;
      if (!mine.emplace(e.collective_seq_id, &e).second)
        out += fmt::format("  rank {} recorded collective #{} twice (the later entry is ignored)\n",
                           rank, e.collective_seq_id);
      seqs.insert(e.collective_seq_id);
    }
    const auto& dropped = d->groups.at(name).last_dropped;
    if (dropped) start = std::max(start, dropped->collective_seq_id + 1);
  }
  if (present.empty()) return;
  int64_t checked = 0;
  for (auto it = seqs.lower_bound(start); it != seqs.end(); ++it) {
    const int64_t s = *it;
    std::map<int, const TraceEntry*> at;
    std::vector<int> missing;
    for (const auto& [rank, mine] : colls) {
      const auto e = mine.find(s);
      if (e == mine.end()) {
        missing.push_back(rank);
      } else {
        at[rank] = e->second;
      }
    }
    std::string what = missing.empty() ? disagreement(at)
                                       : fmt::format("missing ranks: {} (they did not issue it)",
                                                     fmt::join(missing, ", "));
    if (what.empty()) {
      ++checked;
      continue;
    }
    out += fmt::format("  first disagreement at collective #{}: {}\n", s, what);
    for (const int member : reference->ranks) {
      if (!present.count(member)) {
        out += fmt::format("    rank {}: no dump\n", member);
      } else if (at.count(member)) {
        out += fmt::format("    rank {}: {}\n", member, describe(*at[member]));
      } else {
        const auto& mine = colls[member];
        const auto before = mine.lower_bound(s);
        out += fmt::format("    rank {}: no collective #{}; its last before it: {}\n", member, s,
                           before == mine.begin() ? std::string("none recorded")
                                                  : describe(*std::prev(before)->second));
      }
    }
    return;
  }
  out += fmt::format("  {} collective(s) from #{} on: every rank agrees\n", checked, start);
  if (!seqs.empty()) {
    // The newest collective: an agreed op that is not completed everywhere is where the job
    // stands (or hangs).
    const int64_t last = *seqs.rbegin();
    std::vector<std::string> states;
    for (const auto& [rank, mine] : colls)
      if (const auto e = mine.find(last); e != mine.end())
        states.push_back(fmt::format("rank {} {}", rank, e->second->state));
    out += fmt::format("  last collective #{} {}: {}\n", last,
                       colls.begin()->second.count(last) ? colls.begin()->second.at(last)->op : "",
                       fmt::join(states, ", "));
  }
}

std::string describe_p2p(int rank, const TraceEntry& e) {
  const bool send = e.op == "send";
  return fmt::format(
      "rank {} {} #{} ({} {}, tag {}, {}, state {})", rank, e.op, e.p2p_seq_id,
      send ? "to" : "from", e.root, e.tag,
      send ? tensors(e.input_sizes, e.input_dtypes) : tensors(e.output_sizes, e.output_dtypes),
      e.state);
}

void analyze_p2p(const std::string& name, const std::vector<const TraceDump*>& dumps,
                 std::string& out) {
  // (sender, receiver, tag) in group ranks -> that pair's sends and recvs in issue order.
  struct Pair {
    std::vector<const TraceEntry*> sends, recvs;
  };
  std::map<std::tuple<int64_t, int64_t, int64_t>, Pair> pairs;
  std::map<int64_t, int> global;  // group rank -> global rank, for the ranks with a dump
  std::set<int64_t> dropped;      // group ranks whose buffers dropped p2p records
  for (const TraceDump* d : dumps) {
    const auto g = d->groups.find(name);
    if (g == d->groups.end()) continue;
    const auto& ranks = g->second.ranks;
    const auto me_it = std::find(ranks.begin(), ranks.end(), d->rank);
    if (me_it == ranks.end()) continue;
    const int64_t me = me_it - ranks.begin();
    global[me] = d->rank;
    if (g->second.last_dropped && g->second.last_dropped->p2p_seq_id > 0) dropped.insert(me);
    std::vector<const TraceEntry*> mine;
    for (const auto& e : d->entries)
      if (e.group == name && e.is_p2p && (e.op == "send" || e.op == "recv")) mine.push_back(&e);
    std::sort(mine.begin(), mine.end(), [](const TraceEntry* a, const TraceEntry* b) {
      return a->p2p_seq_id < b->p2p_seq_id;
    });
    for (const TraceEntry* e : mine) {
      if (e->op == "send") {
        pairs[{me, e->root, e->tag}].sends.push_back(e);
      } else {
        pairs[{e->root, me, e->tag}].recvs.push_back(e);
      }
    }
  }
  if (pairs.empty()) return;
  int64_t matched = 0;
  std::vector<std::string> problems;
  for (const auto& [key, p] : pairs) {
    const auto [from, to, tag] = key;
    if (!global.count(from) || !global.count(to)) {
      problems.push_back(fmt::format("rank {} -> rank {} (tag {}): no dump from rank {}",
                                     global.count(from) ? global[from] : from,
                                     global.count(to) ? global[to] : to, tag,
                                     global.count(from) ? to : from));
      continue;
    }
    const int src = global[from], dst = global[to];
    if (dropped.count(from) || dropped.count(to)) {
      problems.push_back(fmt::format(
          "rank {} -> rank {} (tag {}): cannot match, a ring buffer dropped point-to-point "
          "records",
          src, dst, tag));
      continue;
    }
    const size_t n = std::max(p.sends.size(), p.recvs.size());
    for (size_t k = 0; k < n; ++k) {
      if (k >= p.recvs.size()) {
        problems.push_back(
            fmt::format("{}: rank {} has no matching recv", describe_p2p(src, *p.sends[k]), dst));
        break;
      }
      if (k >= p.sends.size()) {
        problems.push_back(
            fmt::format("{}: rank {} has no matching send", describe_p2p(dst, *p.recvs[k]), src));
        break;
      }
      const TraceEntry &s = *p.sends[k], &r = *p.recvs[k];
      if (s.input_sizes != r.output_sizes || s.input_dtypes != r.output_dtypes) {
        problems.push_back(fmt::format("{} and {}: mismatched size or dtype", describe_p2p(src, s),
                                       describe_p2p(dst, r)));
        break;
      }
      ++matched;
    }
  }
  out += fmt::format("  point-to-point: {} send/recv pair(s) match", matched);
  out += problems.empty() ? "\n" : fmt::format("; unmatched:\n");
  for (const auto& line : problems) out += fmt::format("    {}\n", line);
}

}  // namespace

std::string analyze(std::vector<TraceDump> dumps) {
  TS_CHECK(!dumps.empty(), ValueError, "fr-trace: no dumps to analyze");
  std::sort(dumps.begin(), dumps.end(),
            [](const TraceDump& a, const TraceDump& b) { return a.rank < b.rank; });
  for (size_t i = 1; i < dumps.size(); ++i) {
    TS_CHECK(dumps[i].rank != dumps[i - 1].rank, ValueError,
             "fr-trace: {} and {} are both dumps of rank {}; keep one dump per rank",
             dumps[i - 1].source, dumps[i].source, dumps[i].rank);
  }
  std::vector<int> ranks;
  std::set<std::string> jobs, names;
  std::vector<const TraceDump*> ptrs;
  for (const auto& d : dumps) {
    ranks.push_back(d.rank);
    jobs.insert(d.job_id);
    for (const auto& [name, g] : d.groups) names.insert(name);
    ptrs.push_back(&d);
  }
  std::string out = fmt::format("fr-trace: {} dump(s), ranks {}; job {}\n", dumps.size(),
                                fmt::join(ranks, ", "), fmt::join(jobs, ", "));
  if (jobs.size() > 1) out += "warning: the dumps come from different jobs\n";
  for (const auto& d : dumps)
    out += fmt::format("  rank {}: {} on {} (pid {}), dumped {}\n", d.rank, d.source, d.host, d.pid,
                       d.reason);
  for (const auto& name : names) {
    analyze_group(name, ptrs, out);
    analyze_p2p(name, ptrs, out);
  }
  return out;
}

std::vector<TraceDump> load_dumps(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  TS_CHECK(fs::is_directory(dir, ec), ValueError, "fr-trace: '{}' is not a directory", dir);
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.is_regular_file() && entry.path().extension() == ".json")
      files.push_back(entry.path());
  TS_CHECK(!ec, ValueError, "fr-trace: cannot list '{}': {}", dir, ec.message());
  TS_CHECK(!files.empty(), ValueError, "fr-trace: '{}' holds no *.json dumps", dir);
  std::sort(files.begin(), files.end());
  constexpr uintmax_t kMaxBytes = 1ull << 30;
  std::vector<TraceDump> dumps;
  for (const auto& f : files) {
    const uintmax_t bytes = fs::file_size(f, ec);
    TS_CHECK(!ec && bytes <= kMaxBytes, ValueError,
             "fr-trace: {}: cannot read it or it is larger than 1 GiB ({} bytes)", f.string(),
             ec ? 0 : bytes);
    std::ifstream in(f, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    TS_CHECK(in.good() || in.eof(), ValueError, "fr-trace: {}: cannot read the file", f.string());
    dumps.push_back(parse_dump(text.str(), f.string()));
  }
  return dumps;
}

}  // namespace tessera::distributed::fr

namespace tessera::distributed {

std::string fr_trace(const std::string& dir) {
  return fr::analyze(fr::load_dumps(dir));
}

}  // namespace tessera::distributed
