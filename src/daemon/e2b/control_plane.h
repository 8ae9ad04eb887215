// E2B's control plane (docs/e2b.md "Control plane"): create, connect, kill, set the timeout, get
// the info of and list sandboxes, each sandbox a session of SessionManager owned by the caller's
// API key (another key's is a 404). A sandbox ends at its timeout whether or not anyone calls.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <map>
#include <string>
#include <string_view>

#include "core/sandbox_spec.h"
#include "daemon/http/http_exchange.h"
#include "daemon/sessions/session_manager.h"

namespace ci::daemon::e2b {

// {"code": status, "message": ...}: the error body every E2B SDK reads.
HttpResponse ErrorBody(int status, std::string_view message);

class ControlPlane {
 public:
  // `spec` is the sessions' sandbox (what getInfo reports of a sandbox's size).
  ControlPlane(const ExecutionService& service, SessionManager& sessions, const SandboxSpec& spec);

  static bool Claims(std::string_view path);
  // Answers a request Claims took; ex.client is the caller.
  boost::asio::awaitable<void> Handle(HttpExchange& ex, uint64_t max_body_mb);

  // The live sandbox `id` of `client`, or nullptr (the sandbox plane's check).
  struct Sandbox {
    std::string id;
    std::string template_id;
    std::string client;
    std::map<std::string, std::string> metadata;
    std::map<std::string, std::string> env_vars;
    std::string access_token;  // envdAccessToken and trafficAccessToken
    double started_at = 0;     // unix seconds
    double end_at = 0;
    bool paused = false;  // its session is frozen or on disk (the next call resumes it)
  };
  boost::asio::awaitable<const Sandbox*> Find(const std::string& id, const std::string& client);
  // The live sandbox `id` whose access token is `token` (compared in constant time), or nullptr.
  boost::asio::awaitable<const Sandbox*> FindByToken(const std::string& id, std::string_view token);
  // By its id alone (128 random bits): only where the SDK sends no token (/contexts).
  boost::asio::awaitable<const Sandbox*> FindById(const std::string& id);

 private:
  boost::asio::awaitable<void> Create(HttpExchange& ex, const std::string& body);
  // By id, never by reference: a request waiting on a session may find its sandbox killed by
  // another meanwhile (each looks it up again after every wait).
  boost::asio::awaitable<void> Connect(HttpExchange& ex, const std::string& id,
                                       const std::string& body);
  boost::asio::awaitable<void> SetTimeout(HttpExchange& ex, const std::string& id,
                                          const std::string& body);
  boost::asio::awaitable<void> List(HttpExchange& ex, bool paged);
  boost::asio::awaitable<void> UpdateNetwork(HttpExchange& ex, const std::string& id,
                                             const std::string& body);
  // Pause, fork and snapshots (docs/e2b.md "Control plane").
  boost::asio::awaitable<void> Pause(HttpExchange& ex, const std::string& id,
                                     const std::string& body);
  boost::asio::awaitable<void> Fork(HttpExchange& ex, const std::string& id,
                                    const std::string& body);
  boost::asio::awaitable<void> Snapshot(HttpExchange& ex, const std::string& id,
                                        const std::string& body);
  // GET /snapshots and DELETE /templates/{id} (a snapshot's).
  boost::asio::awaitable<void> Snapshots(HttpExchange& ex);
  // A new sandbox entry for session `session` like `like` (its template, metadata, env), with a
  // token of its own, attached to its session; nullptr without randomness.
  const Sandbox* AddSandbox(const SessionSummary& session, const Sandbox& like);
  // The entry of sandbox `id`, rebuilt from what is attached to its session when this replica
  // has none (the session was paused to disk before a restart); nullptr when neither has it.
  boost::asio::awaitable<Sandbox*> Recover(const std::string& id);
  // Moves the sandbox's end (and its session's) to `end_at`; an error answer when it cannot.
  boost::asio::awaitable<std::optional<HttpResponse>> MoveEnd(const std::string& id,
                                                              const std::string& client,
                                                              double end_at);
  std::string SandboxJson(const Sandbox& s) const;
  std::string DetailJson(const Sandbox& s, bool listed) const;

  const ExecutionService& service_;
  SessionManager& sessions_;
  const SandboxSpec& spec_;
  std::map<std::string, Sandbox> sandboxes_;  // by id; those whose session ended are dropped
};

}  // namespace ci::daemon::e2b
