// Status and Result<T>: errors carried as values below the HTTP layer, with a message chain
// ("staging files: writing a.txt: No space left on device").
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace ci {

class Status {
 public:
  Status() = default;
  static Status Error(std::string message) { return Status(std::move(message)); }
  static Status Errno(std::string what, int err);  // "what: strerror(err)"
  // The backend cannot take work now but may later (image being pulled, quota, no node): the
  // API answers 503 "Executor capacity unavailable (<reason>): <message>" with Retry-After.
  static Status Unavailable(std::string reason, std::string message) {
    Status s(std::move(message));
    s.unavailable_reason_ = std::move(reason);
    return s;
  }

  // The sandbox is gone (its processes ended, its container stopped): nothing can run in it any
  // more. A session answers 410 and is ended.
  static Status Gone(std::string message) {
    Status s(std::move(message));
    s.gone_ = true;
    return s;
  }

  // The same error, saying that the program of the request never started (the sandbox was gone
  // before it): nothing of the request ran, so it may run in another sandbox.
  Status NotStarted() const {
    Status s = *this;
    s.not_started_ = true;
    return s;
  }

  bool ok() const { return !message_.has_value(); }
  bool gone() const { return gone_; }
  bool not_started() const { return not_started_; }
  const std::string& message() const { return *message_; }
  bool unavailable() const { return !unavailable_reason_.empty(); }
  const std::string& unavailable_reason() const { return unavailable_reason_; }
  // Prefixes context: Status::Error("x").Context("staging") -> "staging: x". Keeps the kind.
  Status Context(const std::string& what) const {
    if (ok()) return *this;
    Status s(what + ": " + *message_);
    s.unavailable_reason_ = unavailable_reason_;
    s.gone_ = gone_;
    s.not_started_ = not_started_;
    return s;
  }

 private:
  explicit Status(std::string message) : message_(std::move(message)) {}
  std::optional<std::string> message_;
  std::string unavailable_reason_;  // non-empty: Unavailable
  bool gone_ = false;
  bool not_started_ = false;
};

template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}       // NOLINT(google-explicit-constructor)
  Result(Status error) : v_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return v_.index() == 0; }
  T& value() & { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  const T& value() const& { return std::get<0>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<1>(v_);
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace ci
