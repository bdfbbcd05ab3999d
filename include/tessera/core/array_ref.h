// ArrayRef<T>: a non-owning view of a contiguous run of T, as c10::ArrayRef. It accepts a
// braced list, so `zeros({2, 3})` and `x.permute({1, 0})` read as they do in libtorch.
// It never owns memory: do not keep one beyond the call it was passed to.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <vector>

namespace tessera {

template <class T>
class ArrayRef {
 public:
  constexpr ArrayRef() = default;
  constexpr ArrayRef(const T& one) : data_(&one), size_(1) {}  // NOLINT: implicit as c10
  constexpr ArrayRef(const T* data, size_t size) : data_(data), size_(size) {}
  ArrayRef(const std::vector<T>& v) : data_(v.data()), size_(v.size()) {}  // NOLINT
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winit-list-lifetime"
  // Valid for the full-expression that holds the braced list: the call it is passed to.
  constexpr ArrayRef(std::initializer_list<T> l)  // NOLINT
      : data_(l.begin() == l.end() ? nullptr : l.begin()), size_(l.size()) {}
#pragma GCC diagnostic pop
  constexpr ArrayRef(std::span<const T> s) : data_(s.data()), size_(s.size()) {}  // NOLINT

  constexpr const T* data() const {
    return data_;
  }
  constexpr size_t size() const {
    return size_;
  }
  constexpr bool empty() const {
    return size_ == 0;
  }
  constexpr const T* begin() const {
    return data_;
  }
  constexpr const T* end() const {
    return data_ + size_;
  }
  constexpr const T& operator[](size_t i) const {
    return data_[i];
  }
  constexpr const T& front() const {
    return data_[0];
  }
  constexpr const T& back() const {
    return data_[size_ - 1];
  }
  std::vector<T> vec() const {
    return std::vector<T>(begin(), end());
  }

  friend bool operator==(ArrayRef a, ArrayRef b) {
    if (a.size_ != b.size_) return false;
    for (size_t i = 0; i < a.size_; ++i)
      if (!(a.data_[i] == b.data_[i])) return false;
    return true;
  }

 private:
  const T* data_ = nullptr;
  size_t size_ = 0;
};

using IntArrayRef = ArrayRef<int64_t>;

}  // namespace tessera
