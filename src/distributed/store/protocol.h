// The TCPStore wire format (version 1), and its parser. Pure functions on byte buffers, so the
// parser can be fuzzed without sockets.
//
// Every message is a frame:
//   u32 magic 0x54535354 ("TSST" little-endian) | u16 version | u16 type | u32 request id |
//   u32 payload length | payload
// All integers are little-endian. Payload fields are `str` (u32 length + bytes) and `i64`.
// A client's first frame must be HELLO carrying the job secret; the server answers OK, or
// ERROR and closes the connection. Each request is answered by exactly one response with the
// same request id; WAIT is answered when its keys exist (the client's deadline bounds it).
//
//   request       payload                      response
//   HELLO         str secret                   OK | ERROR
//   SET           str key, str value           OK
//   GET           str key                      VALUE str | NOT_FOUND
//   ADD           str key, i64 amount          INT i64
//   COMPARE_SET   str key, str exp, str want   VALUE str
//   WAIT / CHECK  i64 n, n x str key           OK / INT (1 when all exist, else 0)
//   DELETE        str key                      INT (1 when it existed)
//   NUM_KEYS      (empty)                      INT
// A malformed frame, an unknown type, a version other than 1 or a payload above the server's
// limit is answered with ERROR (its text says what was wrong) and the connection is closed.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/distributed/store.h"

namespace tessera::distributed::detail {

inline constexpr uint32_t kStoreMagic = 0x54535354u;
inline constexpr uint16_t kStoreProtocolVersion = 1;
inline constexpr size_t kFrameHeaderBytes = 16;
inline constexpr size_t kMaxKeysPerRequest = 1u << 16;

enum class MsgType : uint16_t {
  // requests
  HELLO = 1,
  SET = 2,
  GET = 3,
  ADD = 4,
  COMPARE_SET = 5,
  WAIT = 6,
  CHECK = 7,
  DELETE = 8,
  NUM_KEYS = 9,
  // responses
  OK = 100,
  VALUE = 101,
  INT = 102,
  NOT_FOUND = 103,
  ERROR = 104,
};
std::string_view msg_type_name(uint16_t type);

struct FrameHeader {
  uint16_t version = 0;
  uint16_t type = 0;
  uint32_t request_id = 0;
  uint32_t payload_bytes = 0;
};

struct ParsedFrame {
  enum Status { kNeedMore, kFrame, kError } status = kNeedMore;
  FrameHeader header;
  size_t frame_bytes = 0;  // header + payload, when status is kFrame
  std::string error;       // when status is kError
};

// Looks at the start of `data`: a complete frame, a need for more bytes, or an error (bad
// magic, version, or a payload longer than max_payload). Never reads past data + n.
ParsedFrame parse_frame(const uint8_t* data, size_t n, uint32_t max_payload);

Bytes encode_frame(MsgType type, uint32_t request_id, const Bytes& payload);

class PayloadWriter {
 public:
  PayloadWriter& str(std::string_view s);
  PayloadWriter& bytes(const Bytes& b);
  PayloadWriter& i64(int64_t v);
  Bytes take() { return std::move(out_); }

 private:
  Bytes out_;
};

// Reads fields in order; throws DistStoreError naming `what` when the payload is too short,
// a length runs past its end, or (finish) bytes are left over.
class PayloadReader {
 public:
  PayloadReader(const uint8_t* data, size_t n, std::string_view what)
      : p_(data), n_(n), what_(what) {}
  std::string str();
  Bytes bytes();
  int64_t i64();
  void finish() const;

 private:
  uint32_t u32();
  const uint8_t* p_;
  size_t n_;
  size_t pos_ = 0;
  std::string_view what_;
};

// A request decoded from a frame's payload (fields unused by a type stay empty).
struct StoreRequest {
  MsgType type = MsgType::HELLO;
  std::vector<std::string> keys;
  Bytes value;    // SET value, COMPARE_SET expected, HELLO secret
  Bytes desired;  // COMPARE_SET desired
  int64_t amount = 0;
};
// Throws DistStoreError for an unknown type or a malformed payload.
StoreRequest decode_request(const FrameHeader& header, const uint8_t* payload);

// Compares in time that depends only on the lengths, never on where the inputs differ.
bool constant_time_equal(std::string_view a, std::string_view b);

}  // namespace tessera::distributed::detail
