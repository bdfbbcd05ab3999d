#include "core/iterator.h"

#include "tessera/autograd/function.h"
#include "tessera/autograd/grad_mode.h"

#include <algorithm>
#include <numeric>

#include "core/tensor_make.h"

namespace tessera {

// ---------------------------------------------------------------------------- result type

namespace {

ScalarType promote_skip_undefined(ScalarType a, ScalarType b) {
  if (a == ScalarType::Undefined) return b;
  if (b == ScalarType::Undefined) return a;
  return promote_types(a, b);
}

// Combines a higher-priority result with a lower-priority one: the lower one only matters
// when it is of a higher category.
ScalarType combine_categories(ScalarType higher, ScalarType lower) {
  if (is_complex(higher)) return higher;
  if (is_complex(lower)) {
    if (is_floating_point(higher)) return to_complex_type(higher);
    return lower;
  }
  if (is_floating_point(higher)) return higher;
  if (higher == kBool || is_floating_point(lower)) return promote_skip_undefined(higher, lower);
  if (higher != ScalarType::Undefined) return higher;
  return lower;
}

}  // namespace

void ResultTypeState::update(const Tensor& t, bool is_wrapped_scalar) {
  if (is_wrapped_scalar) {
    wrapped_ = promote_skip_undefined(wrapped_, t.dtype());
  } else if (t.dim() == 0) {
    zero_dim_ = promote_skip_undefined(zero_dim_, t.dtype());
  } else {
    dim_ = promote_skip_undefined(dim_, t.dtype());
  }
}

void ResultTypeState::update(const Scalar& s) {
  update_wrapped(s.default_dtype());
}

void ResultTypeState::update_wrapped(ScalarType dtype) {
  wrapped_ = promote_skip_undefined(wrapped_, dtype);
}

ScalarType ResultTypeState::result() const {
  return combine_categories(dim_, combine_categories(zero_dim_, wrapped_));
}

// ------------------------------------------------------------------------------- config

TensorIteratorConfig& TensorIteratorConfig::add_output(const Tensor& t) {
  TS_INTERNAL_ASSERT(num_outputs_ == static_cast<int>(operands_.size()));
  IterOperand op;
  op.tensor = t;
  op.is_output = true;
  operands_.push_back(std::move(op));
  ++num_outputs_;
  return *this;
}

TensorIteratorConfig& TensorIteratorConfig::add_input(const Tensor& t) {
  TS_CHECK(t.defined(), RuntimeError, "{}(): expected a defined tensor as input {}", op_name_,
           operands_.size() - num_outputs_);
  IterOperand op;
  op.tensor = t;
  operands_.push_back(std::move(op));
  return *this;
}

TensorIteratorConfig& TensorIteratorConfig::add_input(const Scalar& s) {
  // Held at full precision (PyTorch's wrapped numbers are double): converted once to the
  // common dtype, so x.mul(0.9) on float64 multiplies by 0.9, not by float(0.9).
  const ScalarType wide = s.is_complex()          ? ScalarType::Complex128
                          : s.is_floating_point() ? ScalarType::Float64
                                                  : s.default_dtype();
  Tensor t = make_empty({}, wide, op_name_);
  t.fill_(s);
  IterOperand op;
  op.tensor = std::move(t);
  op.is_wrapped_scalar = true;
  op.wrapped_dtype = s.default_dtype();
  operands_.push_back(std::move(op));
  return *this;
}

TensorIterator TensorIteratorConfig::build() {
  // Differentiable ops run their kernels below autograd; anything else reaching a kernel with
  // an input that requires grad has no derivative.
  if (autograd::GradMode::is_enabled() && !autograd::BelowAutogradGuard::active()) {
    std::vector<Tensor> inputs;
    for (const auto& op : operands_)
      if (!op.is_output) inputs.push_back(op.tensor);
    autograd::check_no_grad_needed(inputs, op_name_);
  }
  TensorIterator it;
  it.op_name_ = op_name_;
  it.num_outputs_ = num_outputs_;
  it.compute_shape(*this);
  it.compute_types(*this);
  it.allocate_or_check_outputs(*this);
  it.check_overlap();
  it.compute_strides_and_reorder();
  it.coalesce_dimensions();
  return it;
}

// ------------------------------------------------------------------------------ building

void TensorIterator::compute_shape(const TensorIteratorConfig& cfg) {
  ops_ = cfg.operands_;
  DimVector shape;
  auto merge = [&](const Tensor& t) {
    const int64_t nd = std::max<int64_t>(shape.size(), t.dim());
    DimVector out(nd, 1);
    for (int64_t i = 0; i < nd; ++i) {
      const int64_t a_i = i - (nd - static_cast<int64_t>(shape.size()));
      const int64_t b_i = i - (nd - t.dim());
      const int64_t a = a_i >= 0 ? shape[a_i] : 1;
      const int64_t b = b_i >= 0 ? t.sizes()[b_i] : 1;
      TS_CHECK(a == b || a == 1 || b == 1, RuntimeError,
               "{}(): the size of tensor a ({}) must match the size of tensor b ({}) at "
               "non-singleton dimension {}",
               op_name_, a, b, i);
      out[i] = a == 1 ? b : a;
    }
    shape = std::move(out);
  };
  // Defined outputs take part in the broadcast (inputs broadcast to them, as in x.copy_(y) or
  // x.add_(y)), but an output may not grow: its shape must be the broadcast shape.
  for (const auto& op : ops_)
    if (!op.is_output || op.tensor.defined()) merge(op.tensor);
  for (const auto& op : ops_) {
    if (!op.is_output || !op.tensor.defined()) continue;
    TS_CHECK(op.tensor.sizes() == IntArrayRef(shape), RuntimeError,
             "{}(): output with shape [{}] doesn't match the broadcast shape [{}]", op_name_,
             fmt::join(op.tensor.sizes(), ", "), fmt::join(shape, ", "));
  }
  broadcast_shape_ = shape;
  numel_ = checked_numel(shape, op_name_);
}

void TensorIterator::compute_types(TensorIteratorConfig& cfg) {
  ScalarType common;
  if (cfg.forced_common_) {
    common = *cfg.forced_common_;
  } else {
    ResultTypeState state;
    bool any_input = false;
    for (const auto& op : ops_) {
      if (op.is_output) continue;
      if (op.is_wrapped_scalar) {
        state.update_wrapped(op.wrapped_dtype);
      } else {
        state.update(op.tensor, false);
      }
      any_input = true;
    }
    if (any_input) {
      common = state.result();
    } else {
      // No inputs (fill-like ops): the output decides.
      common =
          ops_.empty() || !ops_[0].tensor.defined() ? get_default_dtype() : ops_[0].tensor.dtype();
    }
  }
  if (cfg.int_to_float_ && is_integral(common, /*include_bool=*/true)) common = get_default_dtype();
  common_dtype_ = common;

  for (auto& op : ops_) {
    if (op.is_output) continue;
    if (cfg.same_dtype_) {
      TS_CHECK(op.tensor.dtype() == common, TypeError,
               "{}(): expected all inputs to have dtype {}, but got {}", op_name_, common,
               op.tensor.dtype());
    }
    if (cfg.promote_inputs_ && op.tensor.dtype() != common) op.tensor = op.tensor.to(common);
  }
}

void TensorIterator::allocate_or_check_outputs(const TensorIteratorConfig& cfg) {
  const ScalarType out_dtype = cfg.output_dtype_.value_or(common_dtype_);
  out_dtype_for_alloc_ = out_dtype;
  for (auto& op : ops_) {
    if (!op.is_output) continue;
    if (!op.tensor.defined()) {  // allocated after the dims are ordered
      op.allocated = true;
      continue;
    }
    if (op.tensor.dtype() == out_dtype || !cfg.cast_outputs_) continue;
    TS_CHECK(cfg.output_dtype_.has_value() || can_cast(common_dtype_, op.tensor.dtype()), TypeError,
             "{}(): result type {} can't be cast to the desired output type {}", op_name_,
             common_dtype_, op.tensor.dtype());
    // Compute in out_dtype into a temporary with the output's geometry; copy back at the end.
    op.original = op.tensor;
    op.tensor = make_empty_strided(op.original.sizes(), op.original.strides(), out_dtype, op_name_);
  }
}

namespace {

// Whether d (elements) is a sum of c_j * stride_j with |c_j| < size_j, over `dims` sorted by
// stride, largest first, each stride larger than the span of the smaller ones (a layout without
// internal overlap). Then at each level only floor(d / s) and the next integer can leave a
// remainder the smaller dims reach.
bool offset_reachable(int64_t d, const std::vector<std::pair<int64_t, int64_t>>& dims, size_t j) {
  if (j == dims.size()) return d == 0;
  const auto [s, n] = dims[j];
  const int64_t q = d / s - (d % s != 0 && (d < 0) != (s < 0) ? 1 : 0);  // floor
  for (const int64_t c : {q, q + 1})
    if (c > -n && c < n && offset_reachable(d - c * s, dims, j + 1)) return true;
  return false;
}

// Two views of one storage whose memory ranges intersect: do they share an element? Exact when
// both have the same sizes, strides and dtype and no internal overlap (sibling slices such as
// two columns of a matrix, interleaved in memory); otherwise assume they do.
bool views_share_elements(const Tensor& a, const Tensor& b) {
  if (a.sizes() != b.sizes() || a.strides() != b.strides() || a.dtype() != b.dtype() ||
      has_internal_overlap(a))
    return true;
  const auto diff = static_cast<const char*>(b.data_ptr()) - static_cast<const char*>(a.data_ptr());
  if (diff % a.element_size() != 0) return true;
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size), largest stride first
  for (int64_t k = 0; k < a.dim(); ++k)
    if (a.sizes()[k] > 1) dims.emplace_back(a.strides()[k], a.sizes()[k]);
  std::sort(dims.begin(), dims.end(), [](const auto& x, const auto& y) { return x > y; });
  return offset_reachable(diff / a.element_size(), dims, 0);
}

}  // namespace

void TensorIterator::check_overlap() const {
  for (const auto& out : ops_) {
    if (!out.is_output || !out.tensor.defined()) continue;
    const Tensor& o = out.original.defined() ? out.original : out.tensor;
    TS_CHECK(!has_internal_overlap(o), RuntimeError,
             "{}(): unsupported operation: more than one element of the written-to tensor "
             "refers to a single memory location. Please clone() the tensor before performing "
             "the operation.",
             op_name_);
    for (const auto& in : ops_) {
      if (in.is_output || !in.tensor.is_alias_of(o)) continue;
      const Tensor& i = in.tensor;
      const bool same = i.data_ptr() == o.data_ptr() && i.sizes() == o.sizes() &&
                        i.strides() == o.strides() && i.dtype() == o.dtype();
      if (same || i.numel() == 0 || o.numel() == 0) continue;
      const char* ib = static_cast<const char*>(i.data_ptr());
      const char* ob = static_cast<const char*>(o.data_ptr());
      const char* ie = ib + storage_extent(i.sizes(), i.strides()) * i.element_size();
      const char* oe = ob + storage_extent(o.sizes(), o.strides()) * o.element_size();
      TS_CHECK(ie <= ob || oe <= ib || !views_share_elements(i, o), RuntimeError,
               "{}(): unsupported operation: some elements of the input tensor and the "
               "written-to tensor refer to a single memory location. Please clone() the tensor "
               "before performing the operation.",
               op_name_);
    }
  }
}

void TensorIterator::compute_strides_and_reorder() {
  const int nd = static_cast<int>(broadcast_shape_.size());
  const int nt = ntensors();
  // Byte strides in tensor dim order, for every operand (undefined outputs: empty for now).
  auto strides_of = [&](const Tensor& t) {
    std::vector<int64_t> s(nd, 0);
    const int offset = nd - static_cast<int>(t.dim());
    for (int d = 0; d < t.dim(); ++d) {
      if (t.sizes()[d] != 1 || broadcast_shape_[offset + d] == 1)
        s[offset + d] = t.strides()[d] * t.element_size();
      if (broadcast_shape_[offset + d] == 1) s[offset + d] = 0;
    }
    return s;
  };
  std::vector<std::vector<int64_t>> tstrides(nt);
  for (int a = 0; a < nt; ++a)
    if (ops_[a].tensor.defined()) tstrides[a] = strides_of(ops_[a].tensor);

  // Iteration order: perm_[0] is the innermost dim. Start from row-major (last dim fastest),
  // then sort by the strides of the first operand that distinguishes two dims.
  perm_.resize(nd);
  for (int i = 0; i < nd; ++i) perm_[i] = nd - 1 - i;
  auto inner_first = [&](int d0, int d1) {  // should d1 come before (inside) d0?
    for (int a = 0; a < nt; ++a) {
      if (tstrides[a].empty()) continue;
      const int64_t s0 = tstrides[a][d0], s1 = tstrides[a][d1];
      if (s0 == 0 || s1 == 0) continue;
      if (s0 != s1) return s1 < s0;
      if (broadcast_shape_[d0] != broadcast_shape_[d1]) return false;
    }
    return false;
  };
  for (int i = 1; i < nd; ++i) {
    for (int j = i; j > 0 && inner_first(perm_[j - 1], perm_[j]); --j)
      std::swap(perm_[j - 1], perm_[j]);
  }

  shape_.resize(nd);
  for (int i = 0; i < nd; ++i) shape_[i] = broadcast_shape_[perm_[i]];

  // Allocate undefined outputs dense in iteration order (so they follow the inputs' layout).
  for (int a = 0; a < nt; ++a) {
    if (ops_[a].tensor.defined()) continue;
    DimVector st(nd);
    int64_t acc = 1;
    for (int i = 0; i < nd; ++i) {
      st[perm_[i]] = acc;
      acc *= std::max<int64_t>(shape_[i], 1);
    }
    ops_[a].tensor = make_empty_strided(broadcast_shape_, st, out_dtype_for_alloc_, op_name_);
    tstrides[a] = strides_of(ops_[a].tensor);
  }

  strides_.assign(static_cast<size_t>(nd) * nt, 0);
  for (int i = 0; i < nd; ++i)
    for (int a = 0; a < nt; ++a) strides_[i * nt + a] = tstrides[a][perm_[i]];
  for (int a = 0; a < nt; ++a) ops_[a].data = static_cast<char*>(ops_[a].tensor.data_ptr());
}

void TensorIterator::coalesce_dimensions() {
  const int nt = ntensors();
  int nd = ndim();
  if (nd <= 1) return;
  int prev = 0;
  for (int cur = 1; cur < nd; ++cur) {
    const int64_t s0 = shape_[prev], s1 = shape_[cur];
    bool can = s0 == 1 || s1 == 1;
    if (!can) {
      can = true;
      for (int a = 0; a < nt && can; ++a)
        can = strides_[prev * nt + a] * s0 == strides_[cur * nt + a];
    }
    if (can) {
      if (s0 == 1)
        for (int a = 0; a < nt; ++a) strides_[prev * nt + a] = strides_[cur * nt + a];
      shape_[prev] = s0 * s1;
    } else {
      ++prev;
      if (prev != cur) {
        shape_[prev] = shape_[cur];
        for (int a = 0; a < nt; ++a) strides_[prev * nt + a] = strides_[cur * nt + a];
      }
    }
  }
  shape_.resize(prev + 1);
  strides_.resize(static_cast<size_t>(prev + 1) * nt);
}

// ------------------------------------------------------------------------------- running

const Tensor& TensorIterator::output(int i) const {
  const IterOperand& op = ops_[i];
  return op.original.defined() ? op.original : op.tensor;
}

bool TensorIterator::is_contiguous() const {
  if (numel_ <= 1) return true;
  if (ndim() != 1) return false;
  for (int a = 0; a < ntensors(); ++a)
    if (strides_[a] != ops_[a].tensor.element_size()) return false;
  return true;
}

bool TensorIterator::is_scalar(int arg) const {
  for (int d = 0; d < ndim(); ++d)
    if (shape_[d] > 1 && strides_[d * ntensors() + arg] != 0) return false;
  return true;
}

void TensorIterator::serial_for_each(Loop2d loop, int64_t begin, int64_t end) const {
  const int nt = ntensors();
  const int nd = ndim();
  char* ptrs[16];
  int64_t loop_strides[32];
  TS_INTERNAL_ASSERT(nt <= 16);
  if (nd == 0) {
    for (int a = 0; a < nt; ++a) ptrs[a] = ops_[a].data, loop_strides[a] = loop_strides[nt + a] = 0;
    if (begin < end) loop(ptrs, loop_strides, 1, 1);
    return;
  }
  for (int a = 0; a < nt; ++a) {
    loop_strides[a] = strides_[a];
    loop_strides[nt + a] = nd > 1 ? strides_[nt + a] : 0;
  }
  // Multi-index of `begin` in iteration order.
  int64_t idx[64];
  TS_INTERNAL_ASSERT(nd <= 64);
  int64_t rem = begin;
  for (int d = 0; d < nd; ++d) {
    idx[d] = rem % shape_[d];
    rem /= shape_[d];
  }
  int64_t pos = begin;
  while (pos < end) {
    for (int a = 0; a < nt; ++a) {
      int64_t off = 0;
      for (int d = 0; d < nd; ++d) off += idx[d] * strides_[d * nt + a];
      ptrs[a] = ops_[a].data + off;
    }
    int64_t advanced;
    if (idx[0] != 0 || end - pos < shape_[0] || nd == 1) {
      const int64_t n = std::min(shape_[0] - idx[0], end - pos);
      loop(ptrs, loop_strides, n, 1);
      advanced = n;
    } else {
      const int64_t rows = std::min((end - pos) / shape_[0], shape_[1] - idx[1]);
      loop(ptrs, loop_strides, shape_[0], rows);
      advanced = rows * shape_[0];
    }
    pos += advanced;
    // Advance the multi-index by `advanced` elements.
    int64_t carry = advanced;
    for (int d = 0; d < nd && carry > 0; ++d) {
      const int64_t v = idx[d] + carry;
      idx[d] = v % shape_[d];
      carry = v / shape_[d];
    }
  }
}

void TensorIterator::for_each(Loop2d loop, int64_t grain_size) {
  if (numel_ > 0) {
    if (numel_ < grain_size || get_num_threads() == 1 || in_parallel_region()) {
      serial_for_each(loop, 0, numel_);
    } else {
      parallel_for(0, numel_, grain_size,
                   [&](int64_t b, int64_t e) { serial_for_each(loop, b, e); });
    }
  }
  cast_outputs();
}

void TensorIterator::cast_outputs() {
  if (outputs_cast_) return;
  outputs_cast_ = true;
  for (auto& op : ops_) {
    if (op.is_output && op.original.defined()) {
      op.original.copy_(op.tensor);
      op.original.bump_version();
    } else if (op.is_output && !op.allocated) {
      op.tensor.bump_version();  // an existing tensor written in place
    }
  }
}

}  // namespace tessera
