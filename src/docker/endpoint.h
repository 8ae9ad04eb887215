// Where the Docker Engine is and how to talk to it, from the environment with the docker CLI's
// semantics (wire-protocols.md B): DOCKER_HOST, DOCKER_API_VERSION, DOCKER_CERT_PATH,
// DOCKER_TLS_VERIFY, DOCKER_TLS. Pure: the environment and the file-existence probe are injected.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/env_reader.h"
#include "core/status.h"

namespace ci::docker {

struct Endpoint {
  enum class Kind { kUnix, kTcp };
  Kind kind = Kind::kUnix;
  std::string socket_path = "/var/run/docker.sock";  // kUnix
  std::string host;                                  // kTcp
  uint16_t port = 0;                                 // kTcp
  std::string base_path;  // "tcp://h:p/base" prefixes every request path ("" or "/base")
  bool tls = false;
  bool tls_verify = false;  // verify the daemon's certificate against ca.pem
  std::string cert_path;    // holds ca.pem, cert.pem, key.pem when tls
  std::string api_version;  // DOCKER_API_VERSION: fixed, no negotiation ("" = negotiate)

  std::string Describe() const;  // "unix:///var/run/docker.sock", "tcp://h:2376 (TLS)"
};

using PathExists = std::function<bool(const std::string&)>;

// Resolution: DOCKER_HOST when non-empty; else /var/run/docker.sock when it exists; else the
// rootless socket $XDG_RUNTIME_DIR/docker.sock when that exists; else /var/run/docker.sock (so
// the error names the usual place). TLS (tcp only): DOCKER_TLS_VERIFY non-empty turns on TLS
// with verification, DOCKER_TLS non-empty TLS without it, DOCKER_CERT_PATH (default ~/.docker)
// holds the files. A tcp host without a port gets 2376 with TLS, 2375 without.
Result<Endpoint> ResolveEndpoint(const EnvLookup& getenv, const PathExists& exists);

// "1.41" -> 141 (major*100 + minor); -1 when not MAJOR.MINOR (a leading 'v' is accepted).
int ParseApiVersion(const std::string& v);

}  // namespace ci::docker
