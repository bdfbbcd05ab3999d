// PyTorch-style printing: tensor([[1., 2.],
//                                 [3., 4.]], dtype=float64)
// Floats use 4 decimals (or scientific notation when the magnitudes span more than 1e3, or
// leave [1e-4, 1e8)); whole-number floats print as "1."; more than 1000 elements are
// summarised with the first and last 3 entries of each dimension.
#include <cmath>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "core/convert.h"
#include "core/dtype_dispatch.h"
#include "tessera/core/tensor.h"

namespace tessera {

namespace {

constexpr int64_t kThreshold = 1000;
constexpr int64_t kEdgeItems = 3;
constexpr size_t kLineWidth = 80;

struct FloatFormat {
  bool int_mode = true;
  bool sci_mode = false;
  std::string fmt(double v) const {
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    if (sci_mode) return fmt::format("{:.4e}", v);
    if (int_mode) return fmt::format("{:.0f}.", v);
    return fmt::format("{:.4f}", v);
  }
};

FloatFormat choose_format(const std::vector<double>& values) {
  FloatFormat f;
  double max_abs = 0, min_abs = INFINITY;
  bool any = false;
  for (double v : values) {
    if (!std::isfinite(v)) continue;
    if (v != std::nearbyint(v)) f.int_mode = false;
    const double a = std::fabs(v);
    if (a == 0) continue;
    any = true;
    max_abs = std::max(max_abs, a);
    min_abs = std::min(min_abs, a);
  }
  if (f.int_mode) {
    if (any && max_abs > 1e8) f.sci_mode = true;
  } else if (any && (max_abs / min_abs > 1000.0 || max_abs > 1e8 || min_abs < 1e-4)) {
    f.sci_mode = true;
  }
  return f;
}

// Reads element `idx` (multi-index) as double (real part) and imaginary part.
struct Reader {
  const Tensor& t;
  std::pair<double, double> at(const std::vector<int64_t>& idx) const {
    int64_t off = 0;
    for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * t.strides()[d];
    const char* p = static_cast<const char*>(t.data_ptr()) + off * t.element_size();
    return visit_dtype<kAllTypes>(t.dtype(), "print", [&]<class T>() -> std::pair<double, double> {
      const T v = *reinterpret_cast<const T*>(p);
      if constexpr (is_complex_t<T>::value) {
        return {static_cast<double>(v.real()), static_cast<double>(v.imag())};
      } else {
        return {convert<double>(v), 0.0};
      }
    });
  }
};

// Indices printed along a dimension of size n (with -1 marking the "..." gap).
std::vector<int64_t> shown(int64_t n, bool summarize) {
  std::vector<int64_t> out;
  if (summarize && n > 2 * kEdgeItems) {
    for (int64_t i = 0; i < kEdgeItems; ++i) out.push_back(i);
    out.push_back(-1);
    for (int64_t i = n - kEdgeItems; i < n; ++i) out.push_back(i);
  } else {
    for (int64_t i = 0; i < n; ++i) out.push_back(i);
  }
  return out;
}

class Printer {
 public:
  Printer(const Tensor& t, bool summarize) : t_(t), r_{t}, summarize_(summarize) {
    const ScalarType d = t.dtype();
    kind_ = d == kBool              ? Kind::Bool
            : is_complex(d)         ? Kind::Complex
            : is_integral(d, false) ? Kind::Int
                                    : Kind::Float;
    std::vector<double> re, im;
    std::vector<int64_t> idx(t.dim());
    collect(0, idx, re, im);
    re_fmt_ = choose_format(re);
    im_fmt_ = choose_format(im);
    for (size_t i = 0; i < re.size(); ++i)
      width_ = std::max(width_, cell(re[i], im.empty() ? 0 : im[i]).size());
  }

  std::string body() {
    std::vector<int64_t> idx(t_.dim());
    std::string out;
    emit(0, idx, 7, out);
    return out;
  }

 private:
  enum class Kind { Bool, Int, Float, Complex };

  void collect(int64_t d, std::vector<int64_t>& idx, std::vector<double>& re,
               std::vector<double>& im) {
    if (d == t_.dim()) {
      auto [a, b] = r_.at(idx);
      re.push_back(a);
      if (kind_ == Kind::Complex) im.push_back(b);
      return;
    }
    for (int64_t i : shown(t_.sizes()[d], summarize_)) {
      if (i < 0) continue;
      idx[d] = i;
      collect(d + 1, idx, re, im);
    }
  }

  std::string cell(double re, double im) const {
    switch (kind_) {
      case Kind::Bool:
        return re != 0 ? "True" : "False";
      case Kind::Int:
        return fmt::format("{}", static_cast<int64_t>(re));
      case Kind::Float:
        return re_fmt_.fmt(re);
      case Kind::Complex: {
        std::string i = im_fmt_.fmt(std::fabs(im));
        return re_fmt_.fmt(re) + (std::signbit(im) ? "-" : "+") + i + "j";
      }
    }
    return "";
  }

  std::string padded(const std::vector<int64_t>& idx) const {
    auto [a, b] = r_.at(idx);
    std::string c = cell(a, b);
    return std::string(width_ > c.size() ? width_ - c.size() : 0, ' ') + c;
  }

  void emit(int64_t d, std::vector<int64_t>& idx, size_t indent, std::string& out) {
    if (t_.dim() == 0) {
      out += padded(idx);
      return;
    }
    out += '[';
    const auto items = shown(t_.sizes()[d], summarize_);
    if (d == t_.dim() - 1) {
      size_t line = indent + 1;
      for (size_t k = 0; k < items.size(); ++k) {
        std::string s;
        if (items[k] < 0) {
          s = " ...";
        } else {
          idx[d] = items[k];
          s = padded(idx);
        }
        if (k > 0) {
          if (line + 2 + s.size() > kLineWidth) {
            out += ",\n" + std::string(indent + 1, ' ');
            line = indent + 1;
          } else {
            out += ", ";
            line += 2;
          }
        }
        out += s;
        line += s.size();
      }
    } else {
      const std::string sep =
          "," + std::string(t_.dim() - d - 1, '\n') + std::string(indent + 1, ' ');
      for (size_t k = 0; k < items.size(); ++k) {
        if (k > 0) out += sep;
        if (items[k] < 0) {
          out += "...";
          continue;
        }
        idx[d] = items[k];
        emit(d + 1, idx, indent + 1, out);
      }
    }
    out += ']';
  }

  const Tensor& t_;
  Reader r_;
  bool summarize_;
  Kind kind_;
  FloatFormat re_fmt_, im_fmt_;
  size_t width_ = 0;
};

}  // namespace

std::string Tensor::repr() const {
  if (!defined()) return "tensor(undefined)";
  const ScalarType d = dtype();
  std::vector<std::string> suffix;
  std::string body;
  if (is_packed(d)) {
    body = "[...]";
    suffix.push_back(fmt::format("size=({})", fmt::join(sizes(), ", ")));
  } else if (numel() == 0) {
    body = "[]";
    if (dim() != 1)
      suffix.push_back(fmt::format("size=({}{})", fmt::join(sizes(), ", "), dim() == 1 ? "," : ""));
  } else {
    body = Printer(*this, numel() > kThreshold).body();
  }
  const bool default_dtype = d == get_default_dtype() || d == kInt64 || d == kBool ||
                             (d == kComplex64 && get_default_dtype() == kFloat32);
  if (!default_dtype) suffix.push_back(fmt::format("dtype={}", d));
  std::string out = "tensor(" + body;
  for (const auto& s : suffix) out += ", " + s;
  return out + ")";
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  return os << t.repr();
}

}  // namespace tessera
