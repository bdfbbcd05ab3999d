// The store keys and texts shared by the Lighthouse and the Managers (see ft.h). Texts are
// parsed strictly: anything malformed is a DistStoreError naming the key's text.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/distributed/store.h"

namespace tessera::distributed::ft {

inline constexpr const char* kRegisteredKey = "ft/registered";  // slots handed out
inline constexpr const char* kRegisterPrefix = "ft/reg/";       // slot -> replica id
inline constexpr const char* kRequestCountKey = "ft/requests";  // bumped after each request
inline constexpr const char* kDeadKey = "ft/dead";
inline constexpr const char* kStaleKey = "ft/stale";      // dead because their heartbeat stopped
inline constexpr const char* kMarkCountKey = "ft/marks";  // slots handed out to launchers
inline constexpr const char* kMarkPrefix = "ft/mark/";    // slot -> "<id> <restarting 0|1>"

std::string heartbeat_key(int id);
std::string request_key(int id);
std::string answer_key(int id, int64_t seq);
std::string quorum_key(int64_t round);

struct Request {
  int64_t seq = 0;
  int64_t step = 0;
  bool failed = false;     // the replica's last step failed to commit (or its set-up failed)
  bool leaving = false;    // the replica leaves the job (its Manager is being destroyed)
  bool finishing = false;  // it has finished the job at `step` and stays only to heal others
  std::string handle;      // its group's reconfigure handle
};
std::string format_request(const Request& r);
Request parse_request(const std::string& text);

// A replica's registration: "<id> <first request number>".
struct Registration {
  int id = 0;
  int64_t first_seq = 0;
};
Registration parse_registration(const std::string& text);

// A launcher's "replica <id> died" (LighthouseClient::mark_dead): "<id> <restarting 0|1>".
struct Mark {
  int id = 0;
  bool restarting = false;
};
std::string format_mark(const Mark& m);
Mark parse_mark(const std::string& text);

struct Member {
  int id = 0;
  int64_t step = 0;
  std::string handle;
};
struct Quorum {
  int64_t round = 0;
  int64_t quorum_id = 0;
  int64_t max_step = 0;
  // Every live replica asked as finishing: the job is over and nobody needs this round.
  bool final = false;
  std::vector<Member> members;  // by replica id
};
std::string format_quorum(const Quorum& q);
Quorum parse_quorum(const std::string& text, int64_t round);
// The ids in "1,3" (empty text: none).
std::vector<int> parse_ids(const std::string& text);

void set_text(Store& store, const std::string& key, const std::string& text);
std::string get_text(Store& store, const std::string& key);

// A queue of texts in the store (registrations, launchers' marks): a writer takes a slot from
// `count_key`, then sets "<prefix><slot>". The reader takes the texts after slot `seen`, in
// order, advancing `seen`, and stops at a slot whose writer is between its add and its set.
void append_slot(Store& store, const char* count_key, const char* prefix, const std::string& text);
std::vector<std::string> read_new_slots(Store& store, const char* count_key, const char* prefix,
                                        int64_t& seen);

}  // namespace tessera::distributed::ft
