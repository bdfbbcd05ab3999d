// The TCPStore wire format: see protocol.h.
#include "distributed/store/protocol.h"

#include <cstring>

namespace tessera::distributed::detail {

namespace {

void put_le(Bytes& out, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
uint64_t get_le(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= uint64_t(p[i]) << (8 * i);
  return v;
}

}  // namespace

std::string_view msg_type_name(uint16_t type) {
  switch (static_cast<MsgType>(type)) {
    case MsgType::HELLO:
      return "HELLO";
    case MsgType::SET:
      return "SET";
    case MsgType::GET:
      return "GET";
    case MsgType::ADD:
      return "ADD";
    case MsgType::COMPARE_SET:
      return "COMPARE_SET";
    case MsgType::WAIT:
      return "WAIT";
    case MsgType::CHECK:
      return "CHECK";
    case MsgType::DELETE:
      return "DELETE";
    case MsgType::NUM_KEYS:
      return "NUM_KEYS";
    case MsgType::OK:
      return "OK";
    case MsgType::VALUE:
      return "VALUE";
    case MsgType::INT:
      return "INT";
    case MsgType::NOT_FOUND:
      return "NOT_FOUND";
    case MsgType::ERROR:
      return "ERROR";
  }
  return "unknown";
}

ParsedFrame parse_frame(const uint8_t* data, size_t n, uint32_t max_payload) {
  ParsedFrame out;
  if (n < 4) return out;
  const uint32_t magic = static_cast<uint32_t>(get_le(data, 4));
  if (magic != kStoreMagic) {
    out.status = ParsedFrame::kError;
    out.error =
        fmt::format("not a Tessera store message: expected the magic 0x{:08x}, but got 0x{:08x}",
                    kStoreMagic, magic);
    return out;
  }
  if (n < kFrameHeaderBytes) return out;
  out.header.version = static_cast<uint16_t>(get_le(data + 4, 2));
  out.header.type = static_cast<uint16_t>(get_le(data + 6, 2));
  out.header.request_id = static_cast<uint32_t>(get_le(data + 8, 4));
  out.header.payload_bytes = static_cast<uint32_t>(get_le(data + 12, 4));
  if (out.header.version != kStoreProtocolVersion) {
    out.status = ParsedFrame::kError;
    out.error = fmt::format("store protocol version {} is not supported (this side speaks {})",
                            out.header.version, kStoreProtocolVersion);
    return out;
  }
  if (out.header.payload_bytes > max_payload) {
    out.status = ParsedFrame::kError;
    out.error = fmt::format("store message of {} bytes exceeds the limit of {} bytes",
                            out.header.payload_bytes, max_payload);
    return out;
  }
  if (n - kFrameHeaderBytes < out.header.payload_bytes) return out;
  out.status = ParsedFrame::kFrame;
  out.frame_bytes = kFrameHeaderBytes + out.header.payload_bytes;
  return out;
}

Bytes encode_frame(MsgType type, uint32_t request_id, const Bytes& payload) {
  TS_CHECK(payload.size() <= UINT32_MAX, ValueError,
           "store: a message may carry at most {} bytes, but got {}", UINT32_MAX, payload.size());
  Bytes out;
  out.reserve(kFrameHeaderBytes + payload.size());
  put_le(out, kStoreMagic, 4);
  put_le(out, kStoreProtocolVersion, 2);
  put_le(out, static_cast<uint16_t>(type), 2);
  put_le(out, request_id, 4);
  put_le(out, payload.size(), 4);
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

PayloadWriter& PayloadWriter::str(std::string_view s) {
  TS_CHECK(s.size() <= UINT32_MAX, ValueError, "store: a field may hold at most {} bytes",
           UINT32_MAX);
  put_le(out_, s.size(), 4);
  out_.insert(out_.end(), s.begin(), s.end());
  return *this;
}

PayloadWriter& PayloadWriter::bytes(const Bytes& b) {
  return str(std::string_view(reinterpret_cast<const char*>(b.data()), b.size()));
}

PayloadWriter& PayloadWriter::i64(int64_t v) {
  put_le(out_, static_cast<uint64_t>(v), 8);
  return *this;
}

uint32_t PayloadReader::u32() {
  TS_CHECK(n_ - pos_ >= 4, distributed::DistStoreError,
           "malformed {} message: expected a 4-byte length at offset {}, but only {} bytes remain",
           what_, pos_, n_ - pos_);
  const uint32_t v = static_cast<uint32_t>(get_le(p_ + pos_, 4));
  pos_ += 4;
  return v;
}

Bytes PayloadReader::bytes() {
  const uint32_t len = u32();
  TS_CHECK(n_ - pos_ >= len, distributed::DistStoreError,
           "malformed {} message: a field of {} bytes at offset {} runs past the end ({} bytes "
           "remain)",
           what_, len, pos_ - 4, n_ - pos_);
  Bytes out(p_ + pos_, p_ + pos_ + len);
  pos_ += len;
  return out;
}

std::string PayloadReader::str() {
  const Bytes b = bytes();
  return std::string(b.begin(), b.end());
}

int64_t PayloadReader::i64() {
  TS_CHECK(n_ - pos_ >= 8, distributed::DistStoreError,
           "malformed {} message: expected an 8-byte integer at offset {}, but only {} bytes "
           "remain",
           what_, pos_, n_ - pos_);
  const auto v = static_cast<int64_t>(get_le(p_ + pos_, 8));
  pos_ += 8;
  return v;
}

void PayloadReader::finish() const {
  TS_CHECK(pos_ == n_, distributed::DistStoreError,
           "malformed {} message: {} unexpected bytes after the last field", what_, n_ - pos_);
}

StoreRequest decode_request(const FrameHeader& header, const uint8_t* payload) {
  StoreRequest req;
  req.type = static_cast<MsgType>(header.type);
  const std::string_view what = msg_type_name(header.type);
  PayloadReader r(payload, header.payload_bytes, what);
  switch (req.type) {
    case MsgType::HELLO:
      req.value = r.bytes();
      break;
    case MsgType::SET:
      req.keys.push_back(r.str());
      req.value = r.bytes();
      break;
    case MsgType::GET:
    case MsgType::DELETE:
      req.keys.push_back(r.str());
      break;
    case MsgType::ADD:
      req.keys.push_back(r.str());
      req.amount = r.i64();
      break;
    case MsgType::COMPARE_SET:
      req.keys.push_back(r.str());
      req.value = r.bytes();
      req.desired = r.bytes();
      break;
    case MsgType::WAIT:
    case MsgType::CHECK: {
      const int64_t n = r.i64();
      TS_CHECK(n >= 0 && static_cast<uint64_t>(n) <= kMaxKeysPerRequest,
               distributed::DistStoreError,
               "malformed {} message: expected between 0 and {} keys, but got {}", what,
               kMaxKeysPerRequest, n);
      for (int64_t i = 0; i < n; ++i) req.keys.push_back(r.str());
      break;
    }
    case MsgType::NUM_KEYS:
      break;
    default:
      TS_THROW(distributed::DistStoreError, "store request type {} is not a known request",
               header.type);
  }
  r.finish();
  for (const auto& k : req.keys)
    TS_CHECK(!k.empty(), distributed::DistStoreError, "malformed {} message: an empty key", what);
  return req;
}

bool constant_time_equal(std::string_view a, std::string_view b) {
  const size_t n = std::max(a.size(), b.size());
  unsigned diff = a.size() != b.size() ? 1u : 0u;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned>(x ^ y);
  }
  return diff == 0;
}

}  // namespace tessera::distributed::detail
