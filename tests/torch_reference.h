// Running a PyTorch 1.13 reference script from a test (the outside oracle of tests/nn and
// tests/linalg): tensors go out and come back as JSON, {"shape", "data"} with float64 data, plus
// "imag" (the imaginary parts) for complex tensors and "dtype" (PyTorch's dtype name).
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tessera/tessera.h"

namespace tessera::testing {

using Json = nlohmann::json;

inline Json tensor_to_json(const Tensor& t) {
  const Tensor d = t.detach();
  const Tensor re = (d.is_complex() ? d.real() : d).to(kFloat64).contiguous();
  const double* p = re.data_ptr<double>();
  Json j{{"shape", d.sizes().vec()},
         {"dtype", fmt::format("{}", d.dtype())},
         {"data", std::vector<double>(p, p + re.numel())}};
  if (d.is_complex()) {
    const Tensor im = d.imag().to(kFloat64).contiguous();
    const double* q = im.data_ptr<double>();
    j["imag"] = std::vector<double>(q, q + im.numel());
  }
  return j;
}

// float64 (or complex128 when the JSON has "imag").
inline Tensor tensor_from_json(const Json& j) {
  const DimVector shape = j["shape"].get<DimVector>();
  const Tensor re = tensor<double>(j["data"].get<std::vector<double>>()).reshape(shape);
  if (!j.contains("imag")) return re;
  const Tensor im = tensor<double>(j["imag"].get<std::vector<double>>()).reshape(shape);
  return complex(re, im);
}

// Runs `/usr/bin/python3 script IN.json OUT.json` with `in` as IN; returns OUT parsed (null
// when the script failed, which is also a test failure). The oracle process itself crashing
// (killed by a signal: PyTorch 1.13's lstsq segfaulted once in a CI run, and not in 5 reruns
// of the same seeded input) is retried once, saying so; a second crash fails the test.
inline Json run_reference_script(const std::string& script, const Json& in) {
  char dir[] = "/tmp/tessera-ref-XXXXXX";
  EXPECT_NE(mkdtemp(dir), nullptr);
  const std::string in_path = std::string(dir) + "/in.json";
  const std::string out_path = std::string(dir) + "/out.json";
  std::ofstream(in_path) << in.dump();
  const std::string cmd =
      fmt::format("{} {} {} {} 2>&1", TS_ORACLE_PYTHON, script, in_path, out_path);
  int rc = std::system(cmd.c_str());
  // /bin/sh reports a child killed by signal N as exit status 128 + N.
  if (rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) > 128) {
    std::fprintf(stderr, "the oracle crashed (signal %d); running it once more: %s\n",
                 WEXITSTATUS(rc) - 128, cmd.c_str());
    rc = std::system(cmd.c_str());
  }
  EXPECT_EQ(rc, 0) << cmd;
  Json out;
  if (std::ifstream f(out_path); f) out = Json::parse(f);
  std::remove(in_path.c_str());
  std::remove(out_path.c_str());
  rmdir(dir);
  return out;
}

}  // namespace tessera::testing
