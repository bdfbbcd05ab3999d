// FileStore: an append-only log in a file shared by processes.
//
// File format (version 1):
//   header  "TSFSTORE" (8 bytes) | u32 version | u32 reserved          (16 bytes)
//   record  u8 kind (1 set, 2 delete) | u32 key length | u32 value length | key | value
// Integers are little-endian. A writer appends one whole record with a single write() under an
// exclusive flock(); readers replay new records under a shared flock(), so they never see half
// a record unless a writer crashed mid-write, which shows as a truncated record (an error).
// flock() locks belong to an open file, so separate FileStores in one process exclude each
// other too; a mutex serialises the threads that share one FileStore.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/chrono.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "distributed/store/address.h"
#include "distributed/store/store_util.h"
#include "tessera/distributed/store.h"

namespace tessera::distributed {

namespace {

constexpr char kMagic[8] = {'T', 'S', 'F', 'S', 'T', 'O', 'R', 'E'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 16;
constexpr uint32_t kMaxField = 1u << 30;
constexpr uint8_t kSet = 1, kDelete = 2;

void put_u32(Bytes& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
uint32_t get_u32(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

}  // namespace

struct FileStore::State {
  std::mutex mutex;
  int fd = -1;
  uint64_t offset = 0;  // bytes of the file already replayed into `map`
  std::unordered_map<std::string, Bytes> map;

  struct Lock {
    Lock(int fd, int mode, const std::string& path) : fd_(fd) {
      while (::flock(fd_, mode) != 0) {
        TS_CHECK(errno == EINTR, distributed::DistStoreError, "FileStore: cannot lock '{}': {}",
                 path, std::strerror(errno));
      }
    }
    ~Lock() { ::flock(fd_, LOCK_UN); }
    int fd_;
  };

  // Reads the records appended since the last call. Caller holds the flock.
  void catch_up(const std::string& path) {
    struct stat st {};
    TS_CHECK(::fstat(fd, &st) == 0, distributed::DistStoreError, "FileStore: cannot stat '{}': {}",
             path, std::strerror(errno));
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    if (size == offset) return;
    Bytes buf(size - offset);
    read_exact(buf.data(), buf.size(), offset, path);
    size_t pos = 0;
    if (offset == 0) {
      TS_CHECK(buf.size() >= kHeaderBytes && std::memcmp(buf.data(), kMagic, 8) == 0,
               distributed::DistStoreError,
               "FileStore: '{}' is not a FileStore file (expected the header \"TSFSTORE\")", path);
      const uint32_t version = get_u32(buf.data() + 8);
      TS_CHECK(version == kVersion, distributed::DistStoreError,
               "FileStore: '{}' has format version {}, but this Tessera reads version {}", path,
               version, kVersion);
      pos = kHeaderBytes;
    }
    while (pos < buf.size()) {
      const uint64_t at = offset + pos;
      TS_CHECK(buf.size() - pos >= 9, distributed::DistStoreError,
               "FileStore: '{}' has a truncated record at offset {}", path, at);
      const uint8_t kind = buf[pos];
      const uint32_t klen = get_u32(&buf[pos + 1]), vlen = get_u32(&buf[pos + 5]);
      TS_CHECK((kind == kSet || kind == kDelete) && klen <= kMaxField && vlen <= kMaxField,
               distributed::DistStoreError,
               "FileStore: '{}' has a malformed record at offset {} (kind {}, key length {}, "
               "value length {})",
               path, at, kind, klen, vlen);
      TS_CHECK(buf.size() - pos - 9 >= uint64_t(klen) + vlen, distributed::DistStoreError,
               "FileStore: '{}' has a truncated record at offset {}", path, at);
      pos += 9;
      std::string key(reinterpret_cast<const char*>(&buf[pos]), klen);
      pos += klen;
      if (kind == kSet) {
        map[key] = Bytes(buf.begin() + static_cast<ptrdiff_t>(pos),
                         buf.begin() + static_cast<ptrdiff_t>(pos + vlen));
      } else {
        map.erase(key);
      }
      pos += vlen;
    }
    offset = size;
  }

  void read_exact(uint8_t* dst, size_t n, uint64_t at, const std::string& path) {
    while (n > 0) {
      const ssize_t r = ::pread(fd, dst, n, static_cast<off_t>(at));
      if (r < 0 && errno == EINTR) continue;
      TS_CHECK(r > 0, distributed::DistStoreError, "FileStore: cannot read '{}': {}", path,
               r == 0 ? "unexpected end of file" : std::strerror(errno));
      dst += r;
      n -= static_cast<size_t>(r);
      at += static_cast<uint64_t>(r);
    }
  }

  // Appends one record. Caller holds the exclusive flock and has caught up.
  void append(uint8_t kind, const std::string& key, const Bytes& value, const std::string& path) {
    TS_CHECK(key.size() <= kMaxField && value.size() <= kMaxField, ValueError,
             "FileStore: keys and values may have at most {} bytes, but got {} and {}", kMaxField,
             key.size(), value.size());
    Bytes rec;
    rec.reserve(9 + key.size() + value.size());
    rec.push_back(kind);
    put_u32(rec, static_cast<uint32_t>(key.size()));
    put_u32(rec, static_cast<uint32_t>(value.size()));
    rec.insert(rec.end(), key.begin(), key.end());
    rec.insert(rec.end(), value.begin(), value.end());
    write_all(rec, path);
    if (kind == kSet) {
      map[key] = value;
    } else {
      map.erase(key);
    }
  }

  void write_all(const Bytes& rec, const std::string& path) {
    size_t done = 0;
    while (done < rec.size()) {
      const ssize_t w =
          ::pwrite(fd, rec.data() + done, rec.size() - done, static_cast<off_t>(offset + done));
      if (w < 0 && errno == EINTR) continue;
      TS_CHECK(w > 0, distributed::DistStoreError, "FileStore: cannot write '{}': {}", path,
               std::strerror(errno));
      done += static_cast<size_t>(w);
    }
    offset += rec.size();
  }
};

FileStore::FileStore(std::string path, Milliseconds timeout)
    : Store(timeout), path_(std::move(path)), state_(std::make_unique<State>()) {
  TS_CHECK(!path_.empty(), ValueError, "FileStore(): argument 'path' must not be empty");
  // Absolute, so that a process with another working directory reaches the same file.
  address_ = "file://" + detail::escape_address_part(
                             std::filesystem::absolute(path_).lexically_normal().string());
  state_->fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  TS_CHECK(state_->fd >= 0, distributed::DistStoreError, "FileStore(): cannot open '{}': {}", path_,
           std::strerror(errno));
  try {
    State::Lock lock(state_->fd, LOCK_EX, path_);
    struct stat st {};
    TS_CHECK(::fstat(state_->fd, &st) == 0, distributed::DistStoreError,
             "FileStore(): cannot stat '{}': {}", path_, std::strerror(errno));
    if (st.st_size == 0) {  // first user: write the header
      Bytes header(kMagic, kMagic + 8);
      put_u32(header, kVersion);
      put_u32(header, 0);
      state_->write_all(header, path_);
    } else {
      state_->catch_up(path_);
    }
  } catch (...) {
    ::close(state_->fd);
    throw;
  }
}

FileStore::~FileStore() {
  if (state_ && state_->fd >= 0) ::close(state_->fd);
}

void FileStore::set(const std::string& key, const Bytes& value) {
  detail::check_key("set", key);
  std::lock_guard guard(state_->mutex);
  State::Lock lock(state_->fd, LOCK_EX, path_);
  state_->catch_up(path_);
  state_->append(kSet, key, value, path_);
}

Bytes FileStore::get(const std::string& key) {
  detail::check_key("get", key);
  wait({key}, timeout());
  std::lock_guard guard(state_->mutex);
  auto it = state_->map.find(key);
  TS_CHECK(it != state_->map.end(), distributed::DistStoreError,
           "FileStore.get(): key '{}' was deleted while the get waited for it", key);
  return it->second;
}

int64_t FileStore::add(const std::string& key, int64_t amount) {
  detail::check_key("add", key);
  std::lock_guard guard(state_->mutex);
  State::Lock lock(state_->fd, LOCK_EX, path_);
  state_->catch_up(path_);
  auto it = state_->map.find(key);
  const int64_t value =
      detail::counter_after_add(key, it == state_->map.end() ? nullptr : &it->second, amount);
  state_->append(kSet, key, detail::format_counter(value), path_);
  return value;
}

Bytes FileStore::compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  detail::check_key("compare_set", key);
  std::lock_guard guard(state_->mutex);
  State::Lock lock(state_->fd, LOCK_EX, path_);
  state_->catch_up(path_);
  auto it = state_->map.find(key);
  detail::CompareSetOutcome o = detail::compare_set_outcome(
      it == state_->map.end() ? nullptr : &it->second, expected, desired);
  if (o.writes) state_->append(kSet, key, desired, path_);
  return std::move(o.result);
}

void FileStore::wait(const std::vector<std::string>& keys, Milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    if (check(keys)) return;
    TS_CHECK(Clock::now() < deadline, distributed::DistTimeoutError,
             "FileStore.wait(): keys {} did not all appear in '{}' within the timeout of {}",
             detail::describe_keys(keys), path_, timeout);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

bool FileStore::check(const std::vector<std::string>& keys) {
  std::lock_guard guard(state_->mutex);
  State::Lock lock(state_->fd, LOCK_SH, path_);
  state_->catch_up(path_);
  for (const auto& k : keys)
    if (!state_->map.count(k)) return false;
  return true;
}

bool FileStore::delete_key(const std::string& key) {
  std::lock_guard guard(state_->mutex);
  State::Lock lock(state_->fd, LOCK_EX, path_);
  state_->catch_up(path_);
  if (!state_->map.count(key)) return false;
  state_->append(kDelete, key, {}, path_);
  return true;
}

int64_t FileStore::num_keys() {
  std::lock_guard guard(state_->mutex);
  State::Lock lock(state_->fd, LOCK_SH, path_);
  state_->catch_up(path_);
  return static_cast<int64_t>(state_->map.size());
}

std::string FileStore::address() const {
  return address_;
}

}  // namespace tessera::distributed
