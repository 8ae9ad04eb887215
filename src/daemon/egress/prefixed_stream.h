// A stream that yields bytes already read from another stream before reading more from it: the
// proxy reads a tunnel's ClientHello to check its server name, then hands the same bytes to
// OpenSSL when it intercepts the tunnel (egress_interception.h). Writes go straight through.
#pragma once

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/post.hpp>
#include <string>
#include <utility>

namespace ci::daemon {

template <typename Next>
class PrefixedStream {
 public:
  using executor_type = typename Next::executor_type;
  using lowest_layer_type = typename Next::lowest_layer_type;

  PrefixedStream(Next& next, std::string prefix) : next_(&next), prefix_(std::move(prefix)) {}

  executor_type get_executor() { return next_->get_executor(); }
  lowest_layer_type& lowest_layer() { return next_->lowest_layer(); }
  const lowest_layer_type& lowest_layer() const { return next_->lowest_layer(); }

  template <typename MutableBuffers, typename Token>
  auto async_read_some(const MutableBuffers& buffers, Token&& token) {
    return boost::asio::async_initiate<Token, void(boost::system::error_code, size_t)>(
        [this](auto handler, const MutableBuffers& into) {
          if (prefix_.empty()) {
            next_->async_read_some(into, std::move(handler));
            return;
          }
          const size_t n = boost::asio::buffer_copy(into, boost::asio::buffer(prefix_));
          prefix_.erase(0, n);
          // Completed later, never inside the initiating call, as asio requires.
          auto ex = boost::asio::get_associated_executor(handler, next_->get_executor());
          boost::asio::post(
              ex, [h = std::move(handler), n]() mutable { h(boost::system::error_code(), n); });
        },
        token, buffers);
  }

  template <typename ConstBuffers, typename Token>
  auto async_write_some(const ConstBuffers& buffers, Token&& token) {
    return next_->async_write_some(buffers, std::forward<Token>(token));
  }

 private:
  Next* next_;
  std::string prefix_;
};

}  // namespace ci::daemon
