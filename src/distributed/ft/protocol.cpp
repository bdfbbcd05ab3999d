// The Lighthouse's and Managers' texts in the store (protocol.h).
#include "distributed/ft/protocol.h"

#include <fmt/format.h>

#include <charconv>
#include <sstream>

namespace tessera::distributed::ft {

namespace {

[[noreturn]] void malformed(const char* what, const std::string& text) {
  TS_THROW(distributed::DistStoreError, "fault tolerance: malformed {} in the store: '{}'", what,
           text.substr(0, 200));
}

int64_t to_int(std::string_view s, const char* what, const std::string& text) {
  int64_t v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty()) malformed(what, text);
  return v;
}

int to_replica_id(std::string_view s, const char* what, const std::string& text) {
  const int64_t v = to_int(s, what, text);
  if (v < 0 || v > INT32_MAX) malformed(what, text);
  return static_cast<int>(v);
}

}  // namespace

std::string heartbeat_key(int id) {
  return fmt::format("ft/hb/{}", id);
}
std::string request_key(int id) {
  return fmt::format("ft/req/{}", id);
}
std::string answer_key(int id, int64_t seq) {
  return fmt::format("ft/ans/{}/{}", id, seq);
}
std::string quorum_key(int64_t round) {
  return fmt::format("ft/quorum/{}", round);
}

std::string format_request(const Request& r) {
  const int state = r.finishing ? 3 : r.leaving ? 2 : r.failed ? 1 : 0;
  return fmt::format("{} {} {} {}", r.seq, r.step, state, r.handle);
}

Request parse_request(const std::string& text) {
  std::istringstream in(text);
  std::string seq, step, failed, handle;
  if (!(in >> seq >> step >> failed >> handle) || failed.size() != 1 || failed[0] < '0' ||
      failed[0] > '3')
    malformed("quorum request", text);
  return {to_int(seq, "quorum request", text),
          to_int(step, "quorum request", text),
          failed == "1",
          failed == "2",
          failed == "3",
          handle};
}

std::string format_mark(const Mark& m) {
  return fmt::format("{} {}", m.id, m.restarting ? 1 : 0);
}

Mark parse_mark(const std::string& text) {
  std::istringstream in(text);
  std::string id, restarting, extra;
  if (!(in >> id >> restarting) || (in >> extra) || (restarting != "0" && restarting != "1"))
    malformed("dead replica mark", text);
  return {to_replica_id(id, "dead replica mark", text), restarting == "1"};
}

Registration parse_registration(const std::string& text) {
  std::istringstream in(text);
  std::string id, seq, extra;
  if (!(in >> id >> seq) || (in >> extra)) malformed("registration", text);
  return {to_replica_id(id, "registration", text), to_int(seq, "registration", text)};
}

std::string format_quorum(const Quorum& q) {
  std::string s =
      fmt::format("{} {} {} {}\n", q.quorum_id, q.max_step, q.members.size(), q.final ? 1 : 0);
  for (const auto& m : q.members) s += fmt::format("{} {} {}\n", m.id, m.step, m.handle);
  return s;
}

Quorum parse_quorum(const std::string& text, int64_t round) {
  std::istringstream in(text);
  Quorum q;
  q.round = round;
  std::string id, max_step, n, final;
  if (!(in >> id >> max_step >> n >> final) || (final != "0" && final != "1"))
    malformed("quorum", text);
  q.quorum_id = to_int(id, "quorum", text);
  q.max_step = to_int(max_step, "quorum", text);
  q.final = final == "1";
  const int64_t count = to_int(n, "quorum", text);
  if (count < 1 || count > 1 << 20) malformed("quorum", text);
  for (int64_t i = 0; i < count; ++i) {
    std::string mid, step, handle;
    if (!(in >> mid >> step >> handle)) malformed("quorum", text);
    q.members.push_back(
        {static_cast<int>(to_int(mid, "quorum", text)), to_int(step, "quorum", text), handle});
  }
  return q;
}

std::vector<int> parse_ids(const std::string& text) {
  std::vector<int> ids;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find(',', pos);
    if (end == std::string::npos) end = text.size();
    ids.push_back(static_cast<int>(
        to_int(std::string_view(text).substr(pos, end - pos), "list of dead replicas", text)));
    pos = end + 1;
  }
  return ids;
}

void set_text(Store& store, const std::string& key, const std::string& text) {
  store.set(key, Bytes(text.begin(), text.end()));
}

std::string get_text(Store& store, const std::string& key) {
  const Bytes b = store.get(key);
  return std::string(b.begin(), b.end());
}

void append_slot(Store& store, const char* count_key, const char* prefix, const std::string& text) {
  const int64_t slot = store.add(count_key, 1) - 1;
  set_text(store, fmt::format("{}{}", prefix, slot), text);
}

std::vector<std::string> read_new_slots(Store& store, const char* count_key, const char* prefix,
                                        int64_t& seen) {
  std::vector<std::string> texts;
  const int64_t n = store.add(count_key, 0);
  for (; seen < n; ++seen) {
    const std::string key = fmt::format("{}{}", prefix, seen);
    if (!store.check({key})) break;  // its writer is between its add and its set
    texts.push_back(get_text(store, key));
  }
  return texts;
}

}  // namespace tessera::distributed::ft
