// ImageWatch against a fake Engine on a unix socket whose answers come when the test says: the
// orders of answers a loaded machine produces (an inspect asked before a pull, answered during
// it) are made here on purpose.
#include "docker/image_watch.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <deque>
#include <memory>
#include <optional>
#include <string>

#include "common/await.h"
#include "docker/engine_client.h"

namespace ci::docker {
namespace {

namespace http = boost::beast::http;
using boost::asio::use_awaitable;
using local = boost::asio::local::stream_protocol;
using namespace std::chrono_literals;

// Answers /_ping at once; image inspects and pulls are held until the test releases them, in
// the order they came.
class FakeEngine {
 public:
  explicit FakeEngine(boost::asio::io_context& io)
      : io_(io), path_("/tmp/ci-fake-engine-" + std::to_string(::getpid()) + ".sock") {
    ::unlink(path_.c_str());
    acceptor_ = std::make_unique<local::acceptor>(io, local::endpoint(path_));
    boost::asio::co_spawn(io, Accept(), boost::asio::detached);
  }
  ~FakeEngine() { ::unlink(path_.c_str()); }

  Endpoint endpoint() const {
    Endpoint e;
    e.socket_path = path_;
    return e;
  }
  // Requests of `kind` ("inspect", "pull") received and not yet answered.
  size_t held(const std::string& kind) const {
    size_t n = 0;
    for (const auto& h : held_) n += h->kind == kind;
    return n;
  }
  size_t pulls() const { return pulls_; }
  // Answers the oldest (or the newest) held request of `kind` with `status`; a pull's 200 is a
  // finished pull.
  void Release(const std::string& kind, int status, bool newest = false) {
    auto match = [&](const std::shared_ptr<Held>& h) { return h->kind == kind; };
    auto it = std::find_if(held_.begin(), held_.end(), match);
    if (newest) {
      auto r = std::find_if(held_.rbegin(), held_.rend(), match);
      it = r == held_.rend() ? held_.end() : std::prev(r.base());
    }
    if (it == held_.end()) {
      ADD_FAILURE() << "no " << kind << " request is held";
      return;
    }
    (*it)->status = status;
    (*it)->go.cancel();
    held_.erase(it);
  }

 private:
  struct Held {
    explicit Held(boost::asio::io_context& io)
        : go(io, std::chrono::steady_clock::time_point::max()) {}
    std::string kind;
    int status = 0;
    boost::asio::steady_timer go;
  };

  boost::asio::awaitable<void> Accept() {
    for (;;) {
      local::socket s = co_await acceptor_->async_accept(use_awaitable);
      boost::asio::co_spawn(io_, Serve(std::move(s)), boost::asio::detached);
    }
  }

  boost::asio::awaitable<void> Serve(local::socket s) {
    boost::beast::flat_buffer buf;
    http::request<http::string_body> req;
    boost::system::error_code ec;
    co_await http::async_read(s, buf, req, boost::asio::redirect_error(use_awaitable, ec));
    if (ec) co_return;
    http::response<http::string_body> res;
    res.version(11);
    res.set(http::field::connection, "close");
    res.set("Api-Version", "1.45");
    std::string target(req.target());
    if (target.ends_with("/_ping")) {
      res.result(200);
      res.body() = "OK";
    } else {
      auto h = std::make_shared<Held>(io_);
      h->kind = target.find("/images/create") != std::string::npos ? "pull" : "inspect";
      if (h->kind == "pull") ++pulls_;
      held_.push_back(h);
      co_await h->go.async_wait(boost::asio::redirect_error(use_awaitable, ec));
      res.result(h->status);
      res.body() = h->kind == "pull"  ? R"({"status":"Status: Downloaded newer image"})"
                   : h->status == 404 ? R"({"message":"No such image"})"
                                      : "{}";
    }
    res.set(http::field::content_type, "application/json");
    res.prepare_payload();
    co_await http::async_write(s, res, boost::asio::redirect_error(use_awaitable, ec));
  }

  boost::asio::io_context& io_;
  std::string path_;
  std::unique_ptr<local::acceptor> acceptor_;
  std::deque<std::shared_ptr<Held>> held_;
  size_t pulls_ = 0;
};

class ImageWatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    client_ = std::make_shared<EngineClient>(io_.get_executor(), engine_.endpoint(), 10s);
    ASSERT_TRUE(testing_support::AwaitOn(io_, client_->Negotiate()).ok());
  }
  std::shared_ptr<ImageWatch> Watch(std::chrono::milliseconds period) {
    ImageWatchOptions o;
    o.image = "example.org/tiny:v1";
    o.period = period;
    return std::make_shared<ImageWatch>(io_.get_executor(), client_, o);
  }
  // Starts `body` (a coroutine lambda) on the test's io_context.
  template <typename F>
  void Spawn(F body) {
    boost::asio::co_spawn(io_, std::move(body), boost::asio::detached);
  }
  // Runs the io_context until `done` holds: every step is a local socket's, so the bound is only
  // there to end a test whose condition never comes.
  template <typename F>
  void RunUntil(F done) {
    io_.restart();
    auto give_up = std::chrono::steady_clock::now() + 10s;
    while (!done() && std::chrono::steady_clock::now() < give_up) io_.run_one_for(100ms);
    ASSERT_TRUE(done());
  }

  boost::asio::io_context io_;
  FakeEngine engine_{io_};
  std::shared_ptr<EngineClient> client_;
};

// CI's failure (a loaded machine): an execution's first look (Known) was asked before the
// health check's and answered after the watchdog's pull had begun; its 404 put the image back
// to "missing", so /health never said "pulling it".
TEST_F(ImageWatchTest, AnInspectAskedBeforeAPullAndAnsweredDuringItIsStale) {
  auto watch = Watch(60s);
  bool known = false;
  std::optional<Status> first;
  Spawn([&]() -> boost::asio::awaitable<void> {
    co_await watch->Known();
    known = true;
  });
  RunUntil([&] { return engine_.held("inspect") == 1; });
  Spawn([&]() -> boost::asio::awaitable<void> { first = co_await watch->Check(); });
  RunUntil([&] { return engine_.held("inspect") == 2; });
  engine_.Release("inspect", 404, /*newest=*/true);  // the health check's: the watchdog pulls
  RunUntil([&] { return first.has_value() && engine_.held("pull") == 1; });
  ASSERT_EQ(watch->phase(), ImageWatch::Phase::kPulling);

  engine_.Release("inspect", 404);  // Known's, asked before the pull
  RunUntil([&] { return known; });
  EXPECT_EQ(watch->phase(), ImageWatch::Phase::kPulling);
  Status during = testing_support::AwaitOn(io_, watch->Check());
  EXPECT_NE(during.message().find("pulling it"), std::string::npos) << during.message();
  EXPECT_FALSE(watch->Usable().ok());

  engine_.Release("pull", 200);
  RunUntil([&] { return engine_.held("inspect") == 1; });  // the pull's own confirmation
  engine_.Release("inspect", 200);
  RunUntil([&] { return watch->phase() == ImageWatch::Phase::kPresent; });
  EXPECT_TRUE(watch->Usable().ok());
  EXPECT_EQ(engine_.pulls(), 1u);
}

// Without a watchdog every health check inspects and pulls: two at once pull once, and the
// second, whose 404 came after the first's pull had begun, says the pull is under way.
TEST_F(ImageWatchTest, HealthChecksWithoutAWatchdogPullOnce) {
  auto watch = Watch(0ms);
  std::optional<Status> a, b;
  Spawn([&]() -> boost::asio::awaitable<void> { a = co_await watch->Check(); });
  RunUntil([&] { return engine_.held("inspect") == 1; });
  Spawn([&]() -> boost::asio::awaitable<void> { b = co_await watch->Check(); });
  RunUntil([&] { return engine_.held("inspect") == 2; });
  engine_.Release("inspect", 404);
  RunUntil([&] { return engine_.held("pull") == 1; });
  engine_.Release("inspect", 404);
  RunUntil([&] { return b.has_value(); });
  EXPECT_NE(b->message().find("pulling it"), std::string::npos) << b->message();
  EXPECT_EQ(engine_.pulls(), 1u);

  engine_.Release("pull", 200);
  RunUntil([&] { return engine_.held("inspect") == 1; });
  engine_.Release("inspect", 200);
  RunUntil([&] { return a.has_value(); });
  EXPECT_TRUE(a->ok()) << a->message();
  EXPECT_EQ(engine_.pulls(), 1u);
}

}  // namespace
}  // namespace ci::docker
