// TensorIterator: the one place that handles broadcasting, type promotion, output allocation,
// memory-overlap checks, dimension reordering and coalescing for elementwise ops. After
// build(), an op is a loop body over raw pointers:
//
//   auto iter = TensorIteratorConfig("add").add_output(out).add_input(a).add_input(b).build();
//   iter.for_each([](char** data, const int64_t* strides, int64_t n0, int64_t n1) { ... });
//
// Operands are numbered outputs first, then inputs. Dimensions are stored fastest-moving
// first (dim 0 is the innermost loop). A loop body receives, for a block of n1 rows of n0
// elements, data[arg] (the first element of the block) and strides[arg] (bytes between
// elements along dim 0) followed by strides[ntensors + arg] (bytes between rows).
//
// Promotion: with promote_inputs_to_common_dtype, inputs are converted to the common dtype
// (PyTorch's result_type) before the loop; with cast_common_dtype_to_outputs, an output whose
// dtype differs is computed in the common dtype and copied back when for_each finishes.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/function_ref.h"
#include "tessera/core/parallel.h"
#include "tessera/core/tensor.h"

namespace tessera {

// Output size from which cheap kernels write around the cache (non-temporal stores): larger
// than the last-level caches of the machines we run on. Measured on 64M float32 (one thread):
// streaming makes add 1.35x faster but gelu 1.1x slower (the stores then compete with a long
// computation), so only cheap ops ask for it (cpu_kernel_vec<S, true>, softmax's last pass).
inline constexpr int64_t kStreamOutputBytes = int64_t{32} << 20;

struct IterOperand {
  Tensor tensor;    // what the loop reads or writes (may be a converted temporary)
  Tensor original;  // the caller's output when `tensor` is a temporary
  bool is_output = false;
  bool allocated = false;          // an output the iterator made (a fresh tensor: version 0)
  bool is_wrapped_scalar = false;  // a number passed as a Scalar (promotes by category only)
  ScalarType wrapped_dtype = ScalarType::Undefined;  // the dtype it promotes as (default dtype)
  char* data = nullptr;
};

class TensorIterator;

class TensorIteratorConfig {
 public:
  explicit TensorIteratorConfig(std::string_view op_name) : op_name_(op_name) {}
  // An undefined tensor is allocated with the broadcast shape and the result dtype.
  TensorIteratorConfig& add_output(const Tensor& t);
  TensorIteratorConfig& add_input(const Tensor& t);
  // A number: a 0-dim tensor of its natural dtype that takes part in promotion by category.
  TensorIteratorConfig& add_input(const Scalar& s);
  TensorIteratorConfig& promote_inputs_to_common_dtype(bool v) {
    promote_inputs_ = v;
    return *this;
  }
  TensorIteratorConfig& cast_common_dtype_to_outputs(bool v) {
    cast_outputs_ = v;
    return *this;
  }
  // Promote integer and bool inputs to the default float dtype (true division, exp, ...).
  TensorIteratorConfig& promote_integer_inputs_to_float(bool v) {
    int_to_float_ = v;
    return *this;
  }
  // Forces the computation dtype (inputs are converted to it).
  TensorIteratorConfig& common_dtype(ScalarType t) {
    forced_common_ = t;
    return *this;
  }
  // dtype of allocated outputs when it differs from the common dtype (bool for comparisons).
  TensorIteratorConfig& output_dtype(ScalarType t) {
    output_dtype_ = t;
    return *this;
  }
  // Inputs of the common dtype are required (no promotion): mismatches are a TypeError.
  TensorIteratorConfig& check_all_same_dtype(bool v) {
    same_dtype_ = v;
    return *this;
  }
  TensorIteratorConfig& resize_outputs(bool v) {
    resize_outputs_ = v;
    return *this;
  }
  TensorIterator build();

 private:
  friend class TensorIterator;
  std::string op_name_;
  std::vector<IterOperand> operands_;
  int num_outputs_ = 0;
  bool promote_inputs_ = true;
  bool cast_outputs_ = true;
  bool int_to_float_ = false;
  bool same_dtype_ = false;
  bool resize_outputs_ = true;
  std::optional<ScalarType> forced_common_;
  std::optional<ScalarType> output_dtype_;
};

class TensorIterator {
 public:
  using Loop2d = FunctionRef<void(char** data, const int64_t* strides, int64_t n0, int64_t n1)>;

  int ndim() const { return static_cast<int>(shape_.size()); }
  IntArrayRef shape() const { return shape_; }  // iteration order, fastest first
  int64_t numel() const { return numel_; }
  int ntensors() const { return static_cast<int>(ops_.size()); }
  int noutputs() const { return num_outputs_; }
  int ninputs() const { return ntensors() - num_outputs_; }
  ScalarType common_dtype() const { return common_dtype_; }
  ScalarType dtype(int arg) const { return ops_[arg].tensor.dtype(); }
  ScalarType input_dtype(int i = 0) const { return dtype(num_outputs_ + i); }
  // The result for output i (the caller's tensor, or the one allocated by build()).
  const Tensor& output(int i = 0) const;
  const Tensor& input(int i = 0) const { return ops_[num_outputs_ + i].tensor; }
  char* data_ptr(int arg) const { return ops_[arg].data; }
  int64_t stride_bytes(int arg, int dim) const { return strides_[dim * ntensors() + arg]; }
  // All operands dense and in iteration order (one dimension after coalescing).
  bool is_contiguous() const;
  // The operand is the same element everywhere (every stride zero).
  bool is_scalar(int arg) const;
  std::string_view op_name() const { return op_name_; }

  // Runs loop over every element, on the thread pool when numel() >= grain_size, then
  // copies temporaries back into outputs of a different dtype.
  void for_each(Loop2d loop, int64_t grain_size = kGrainSize);
  // Runs loop over the linear range [begin, end) of elements (in iteration order).
  void serial_for_each(Loop2d loop, int64_t begin, int64_t end) const;
  // Copies computed temporaries into outputs of another dtype (for_each does it itself).
  void cast_outputs();

 private:
  friend class TensorIteratorConfig;
  void compute_shape(const TensorIteratorConfig& cfg);
  void compute_types(TensorIteratorConfig& cfg);
  void allocate_or_check_outputs(const TensorIteratorConfig& cfg);
  void compute_strides_and_reorder();
  void coalesce_dimensions();
  void check_overlap() const;

  std::string op_name_;
  std::vector<IterOperand> ops_;
  int num_outputs_ = 0;
  DimVector shape_;               // broadcast shape, then iteration order
  DimVector broadcast_shape_;     // in the tensors' dim order
  std::vector<int64_t> strides_;  // [ndim][ntensors], bytes
  std::vector<int> perm_;         // iteration dim i is tensor dim perm_[i]
  int64_t numel_ = 0;
  ScalarType common_dtype_ = ScalarType::Undefined;
  ScalarType out_dtype_for_alloc_ = ScalarType::Undefined;
  bool outputs_cast_ = false;
};

}  // namespace tessera

namespace tessera {

// PyTorch's result_type rule: tensors with dimensions decide the dtype; 0-dim tensors and
// then wrapped numbers only raise the category (bool < integer < floating < complex).
class ResultTypeState {
 public:
  void update(const Tensor& t, bool is_wrapped_scalar);
  void update(const Scalar& s);
  // A wrapped number that promotes as `dtype` (its category counts, not its width).
  void update_wrapped(ScalarType dtype);
  ScalarType result() const;

 private:
  ScalarType dim_ = ScalarType::Undefined;
  ScalarType zero_dim_ = ScalarType::Undefined;
  ScalarType wrapped_ = ScalarType::Undefined;
};

}  // namespace tessera
