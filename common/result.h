// result<T>: a value or an error message, for code that handles untrusted bytes and must never
// throw or assert on them (../shared/STYLE.md 7). A small stand-in for C++23 std::expected.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace hearth {

// An error as one human-readable line that says what is wrong and where.
struct error {
  std::string message;
};

template <typename T>
class result {
 public:
  result(T value) : v_(std::move(value)) {}
  result(error e) : v_(std::move(e)) {}

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() { return value(); }

  const error& err() const { return std::get<1>(v_); }
  const std::string& message() const { return err().message; }

 private:
  std::variant<T, error> v_;
};

// result<void>: success or an error.
template <>
class result<void> {
 public:
  result() = default;
  result(error e) : err_(std::move(e)), ok_(false) {}

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const error& err() const { return err_; }
  const std::string& message() const { return err_.message; }

 private:
  error err_;
  bool ok_ = true;
};

}  // namespace hearth
