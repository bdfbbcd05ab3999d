// Seeded fuzzing of the TCPStore message parser: random mutations of valid frames and random
// bytes must give a frame, a need for more bytes, or a clear error; never a crash or a read
// past the buffer (the ASan build checks that), and valid frames must round-trip. Store
// addresses (reconfigure handles carry them from other processes) likewise.
#include <random>

#include "dist_test_util.h"
#include "distributed/store/address.h"
#include "distributed/store/protocol.h"

namespace tessera::testing {
namespace {

using dist::Bytes;
using dist::detail::MsgType;
using dist::detail::PayloadWriter;

std::vector<Bytes> valid_frames() {
  std::vector<Bytes> out;
  out.push_back(
      dist::detail::encode_frame(MsgType::HELLO, 1, PayloadWriter().str("secret").take()));
  out.push_back(
      dist::detail::encode_frame(MsgType::SET, 2, PayloadWriter().str("key").str("value").take()));
  out.push_back(dist::detail::encode_frame(MsgType::GET, 3, PayloadWriter().str("key").take()));
  out.push_back(
      dist::detail::encode_frame(MsgType::ADD, 4, PayloadWriter().str("n").i64(-7).take()));
  out.push_back(dist::detail::encode_frame(MsgType::COMPARE_SET, 5,
                                           PayloadWriter().str("k").str("old").str("new").take()));
  out.push_back(dist::detail::encode_frame(MsgType::WAIT, 6,
                                           PayloadWriter().i64(2).str("a").str("b").take()));
  out.push_back(dist::detail::encode_frame(MsgType::CHECK, 7, PayloadWriter().i64(0).take()));
  out.push_back(dist::detail::encode_frame(MsgType::DELETE, 8, PayloadWriter().str("k").take()));
  out.push_back(dist::detail::encode_frame(MsgType::NUM_KEYS, 9, {}));
  return out;
}

// Parses everything in `buf` as a server would; returns how many frames decoded cleanly.
int parse_all(const Bytes& buf) {
  constexpr uint32_t kMax = 1 << 16;
  size_t pos = 0;
  int decoded = 0;
  while (pos < buf.size()) {
    const auto f = dist::detail::parse_frame(buf.data() + pos, buf.size() - pos, kMax);
    if (f.status == dist::detail::ParsedFrame::kNeedMore) break;
    if (f.status == dist::detail::ParsedFrame::kError) {
      EXPECT_FALSE(f.error.empty());
      break;
    }
    EXPECT_LE(f.frame_bytes, buf.size() - pos);
    try {
      dist::detail::decode_request(f.header, buf.data() + pos + dist::detail::kFrameHeaderBytes);
      ++decoded;
    } catch (const dist::DistStoreError& e) {
      EXPECT_NE(std::string(e.what()), "");
    }
    pos += f.frame_bytes;
  }
  return decoded;
}

TEST(StoreFuzz, ValidFramesRoundTrip) {
  Bytes all;
  for (const auto& f : valid_frames()) all.insert(all.end(), f.begin(), f.end());
  EXPECT_EQ(parse_all(all), 9);
  // Fed one byte more at a time, the parser asks for more until each frame is whole.
  const Bytes first = valid_frames()[1];
  for (size_t n = 0; n < first.size(); ++n)
    EXPECT_EQ(dist::detail::parse_frame(first.data(), n, 1 << 16).status,
              dist::detail::ParsedFrame::kNeedMore);
  const auto req = dist::detail::decode_request(
      dist::detail::parse_frame(first.data(), first.size(), 1 << 16).header,
      first.data() + dist::detail::kFrameHeaderBytes);
  EXPECT_EQ(req.keys, std::vector<std::string>{"key"});
  EXPECT_EQ(req.value, Bytes({'v', 'a', 'l', 'u', 'e'}));
}

TEST(StoreFuzz, MutatedAndRandomMessagesNeverCrash) {
  std::mt19937_64 rng(20240601);
  const auto frames = valid_frames();
  int decoded = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    Bytes buf = frames[rng() % frames.size()];
    switch (rng() % 4) {
      case 0:  // flip random bytes (lengths, types, magic, payload)
        for (int k = 0, n = 1 + rng() % 4; k < n; ++k) buf[rng() % buf.size()] ^= uint8_t(rng());
        break;
      case 1:  // truncate
        buf.resize(rng() % buf.size());
        break;
      case 2: {  // overwrite a length field inside the payload with something huge or odd
        if (buf.size() > 20) {
          const size_t at = 16 + rng() % (buf.size() - 19);
          const uint32_t v = rng() % 3 == 0 ? 0xffffffffu : uint32_t(rng() % 64);
          for (int b = 0; b < 4 && at + b < buf.size(); ++b) buf[at + b] = uint8_t(v >> (8 * b));
        }
        break;
      }
      default:  // random bytes after a valid header prefix
        for (size_t i = 8; i < buf.size(); ++i) buf[i] = uint8_t(rng());
    }
    if (rng() % 2) {  // sometimes a second frame follows
      const auto& next = frames[rng() % frames.size()];
      buf.insert(buf.end(), next.begin(), next.end());
    }
    decoded += parse_all(buf);
  }
  EXPECT_GT(decoded, 0);  // the mutations also let valid frames through
}

TEST(StoreFuzz, MutatedStoreAddressesParseOrSayWhy) {
  const std::vector<std::string> valid = {"tcp://127.0.0.1:29500", "tcp://[::1]:80#group%2F0",
                                          "file:///tmp/a%23b/c#p#q%25",
                                          "hash://123/45#reconfigure/x"};
  for (const auto& a : valid) EXPECT_NO_THROW(dist::detail::parse_store_address(a)) << a;
  const std::string alphabet = "%#:/0123456789abcdefxyzAF ,\x01";
  std::mt19937_64 rng(20261204);
  int parsed = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string a = valid[rng() % valid.size()];
    for (int k = 0, n = 1 + static_cast<int>(rng() % 4); k < n; ++k) {
      const size_t at = rng() % (a.size() + 1);
      switch (rng() % 3) {
        case 0:
          if (at < a.size()) a[at] = alphabet[rng() % alphabet.size()];
          break;
        case 1:
          a.insert(at, 1, static_cast<char>(rng() % 256));
          break;
        default:
          a.resize(at);
      }
    }
    try {
      const auto p = dist::detail::parse_store_address(a);
      ++parsed;
      // What parses escapes back to text that parses the same way.
      for (const auto& prefix : p.prefixes) {
        const auto again = dist::detail::parse_store_address(
            "hash://1/1#" + dist::detail::escape_address_part(prefix));
        EXPECT_EQ(again.prefixes.at(0), prefix);
      }
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find("malformed"), std::string::npos) << e.what();
    }
  }
  EXPECT_GT(parsed, 0);
}

TEST(StoreFuzz, PayloadErrorsNameTheMessageAndOffsets) {
  Bytes payload = PayloadWriter().str("abc").take();
  payload[0] = 50;  // the string claims 50 bytes, 3 follow
  dist::detail::FrameHeader h{dist::detail::kStoreProtocolVersion,
                              static_cast<uint16_t>(MsgType::GET), 1,
                              static_cast<uint32_t>(payload.size())};
  expect_error_mentions([&] { dist::detail::decode_request(h, payload.data()); },
                        {"malformed GET message", "50 bytes", "offset 0", "3 bytes remain"});
  h.type = 77;
  expect_error_mentions([&] { dist::detail::decode_request(h, payload.data()); },
                        {"request type 77"});
  Bytes wait = PayloadWriter().i64(-1).take();
  h = {1, static_cast<uint16_t>(MsgType::WAIT), 1, static_cast<uint32_t>(wait.size())};
  expect_error_mentions([&] { dist::detail::decode_request(h, wait.data()); },
                        {"malformed WAIT message", "keys", "-1"});
}

}  // namespace
}  // namespace tessera::testing
