// Helpers for the tests that run real jobs through `tessera launch`: a shell command bounded
// by timeout(1) with its output and exit code, and a temporary directory.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include <fmt/format.h>

namespace tessera::testing {

// Paths of the `tessera` command and the scenario worker (tests/distributed/workers).
inline constexpr const char* kTesseraCli = TS_TESSERA_CLI;
inline constexpr const char* kLaunchWorker = TS_LAUNCH_WORKER;

struct ShellResult {
  int exit_code = -1;  // the command's exit code (124 when timeout(1) stopped it)
  std::string output;  // stdout and stderr together
};

// Runs `command` with bash, killed after `timeout_s` seconds.
inline ShellResult run_shell(const std::string& command, int timeout_s = 120) {
  const std::string quoted = [&] {
    std::string q = "'";
    for (char c : command) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
  }();
  const std::string full = fmt::format("timeout -k 5 {} bash -c {} 2>&1", timeout_s, quoted);
  ShellResult r;
  FILE* pipe = ::popen(full.c_str(), "r");
  if (!pipe) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) r.output.append(buf, n);
  const int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// A port that was free a moment ago (the kernel's pick for a socket bound to port 0).
inline int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  if (fd >= 0) ::close(fd);
  return port;
}

// `tessera launch OPTIONS -- COMMAND` (COMMAND as shell words).
inline ShellResult run_launch_command(const std::string& options, const std::string& command,
                                      int timeout_s = 120) {
  return run_shell(fmt::format("{} launch {} -- {}", kTesseraCli, options, command), timeout_s);
}

// `tessera launch OPTIONS -- launch_worker SCENARIO`.
inline ShellResult run_launch(const std::string& options, const std::string& scenario,
                              int timeout_s = 120) {
  return run_launch_command(options, fmt::format("{} {}", kLaunchWorker, scenario), timeout_s);
}

// A fresh directory under the system's temporary directory, removed with its contents.
struct TempDir {
  explicit TempDir(const std::string& name)
      : path(std::filesystem::temp_directory_path() /
             fmt::format("tessera-{}-{}", name, ::getpid())) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::filesystem::path path;
};

}  // namespace tessera::testing
