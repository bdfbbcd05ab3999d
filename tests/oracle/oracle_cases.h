// Reader for the outside-oracle cases that tests/oracle/make_cases.py writes (PyTorch 1.13 and
// NumPy compute; Tessera compares). make_cases.py's docstring defines the format.
//
// CaseSet::get() runs the script once per binary build and script version: the files are
// cached under <test binary dir>/oracle-cache/<script hash>-<seed>/ behind a file lock, so
// the per-test processes that ctest starts share one generation. TESSERA_ORACLE_SEED picks
// another seed.
//
// Comparison (compare_output; an output with an alternative passes when either matches):
//   exact   bit-for-bit values (NaN matches NaN, +0 matches -0): integers, bool, and values
//           an op selects or computes exactly (max, sort, gather, abs, conversions, ...);
//   close   |got - want| <= atol + rtol * |want| with torch.testing's per-dtype defaults;
//   reduce  want is a float64 reference; the bound adds rtol_acc * scale, where scale is the
//           same reduction over |x| (the summation error bound) or |want| when absent.
// Infinities must match exactly and NaN positions must agree in every mode.
#pragma once

#include <complex>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/tessera.h"

namespace tessera::oracle {

struct InputSpec {
  ScalarType dtype = ScalarType::Undefined;
  DimVector base_shape;
  int64_t offset = 0;
  nlohmann::json recipe;  // [{"op": "transpose" | "permute" | "expand" | "slice", ...}]
  DimVector shape;        // the shape after the recipe (for messages)
};

enum class Cmp { kExact, kClose, kReduce };

struct OutputSpec {
  ScalarType dtype = ScalarType::Undefined;  // the dtype PyTorch's result has
  ScalarType store = ScalarType::Undefined;  // the dtype of the stored expected values
  DimVector shape;
  int64_t offset = 0;
  Cmp cmp = Cmp::kClose;
  std::optional<int64_t> scale_offset;  // float32 data of `shape` (reduce only)
  // A second acceptable result (PyTorch's own float16/bfloat16 rounding where it differs from
  // float32-then-round-once); same store dtype.
  std::optional<int64_t> alt_offset;
};

struct Case {
  std::string id, family, op, oracle;
  nlohmann::json args;
  std::optional<std::string> error;  // PyTorch raised this: Tessera must throw tessera::Error
  std::vector<InputSpec> inputs;
  std::vector<OutputSpec> outputs;
};

class CaseSet {
 public:
  // The process-wide case set; generates (or reuses) the files on first use. Throws
  // std::runtime_error with the script's output when generation fails.
  static const CaseSet& get();

  const std::vector<Case>& cases() const { return cases_; }
  const std::vector<std::string>& skipped() const { return skipped_; }
  const std::string& directory() const { return dir_; }
  // Rebuilds an input: a fresh contiguous base tensor filled from the blob, then the recipe
  // applied through Tessera's view ops.
  Tensor make_input(const InputSpec& spec) const;
  // Expected values of an output, as complex<double> in row-major order.
  std::vector<std::complex<double>> expected(const OutputSpec& spec) const;
  std::vector<std::complex<double>> expected_alt(const OutputSpec& spec) const;
  std::vector<double> scale(const OutputSpec& spec) const;
  const uint8_t* blob_data() const { return blob_.data(); }

 private:
  explicit CaseSet(const std::string& dir);
  std::string dir_;
  std::vector<Case> cases_;
  std::vector<std::string> skipped_;
  std::vector<uint8_t> blob_;
};

ScalarType parse_dtype(const std::string& name);
// JSON scalar -> Scalar: integers stay integers, floats doubles, "inf"/"-inf"/"nan" doubles,
// {"re", "im"} complex, booleans bool.
Scalar parse_scalar(const nlohmann::json& v);
double parse_double(const nlohmann::json& v);

// Reads every element of t (any strides) as complex<double>, row-major, without using
// Tessera's copy kernels.
std::vector<std::complex<double>> read_elements(const Tensor& t);

struct Tolerance {
  double rtol, atol, rtol_acc;
};
Tolerance tolerance_for(ScalarType t);

// Returns an empty string when `got` matches, else a one-line description of the worst
// mismatch: dtype/shape disagreement or max error, where, expected and actual values.
std::string compare_output(const CaseSet& set, const OutputSpec& spec, const Tensor& got);

}  // namespace tessera::oracle
