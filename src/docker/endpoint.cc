#include "docker/endpoint.h"

#include <cstdlib>
#include <string_view>

namespace ci::docker {
namespace {

std::string Get(const EnvLookup& getenv, const char* name) {
  const char* v = getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

Status Invalid(const std::string& value, const std::string& why) {
  return Status::Error("invalid DOCKER_HOST '" + value + "': " + why);
}

}  // namespace

std::string Endpoint::Describe() const {
  if (kind == Kind::kUnix) return "unix://" + socket_path;
  std::string s = "tcp://" + host + ":" + std::to_string(port) + base_path;
  if (tls) s += tls_verify ? " (TLS, verified)" : " (TLS, not verified)";
  return s;
}

int ParseApiVersion(const std::string& v) {
  std::string_view s(v);
  if (!s.empty() && s.front() == 'v') s.remove_prefix(1);
  size_t dot = s.find('.');
  if (dot == std::string_view::npos || dot == 0 || dot + 1 == s.size()) return -1;
  int major = 0, minor = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i == dot) continue;
    if (s[i] < '0' || s[i] > '9' || (i < dot ? major : minor) > 1000) return -1;
    int& part = i < dot ? major : minor;
    part = part * 10 + (s[i] - '0');
  }
  return major * 100 + minor;
}

Result<Endpoint> ResolveEndpoint(const EnvLookup& getenv, const PathExists& exists) {
  Endpoint e;
  std::string host = Get(getenv, "DOCKER_HOST");
  if (host.empty()) {
    std::string xdg = Get(getenv, "XDG_RUNTIME_DIR");
    if (!exists(e.socket_path) && !xdg.empty() && exists(xdg + "/docker.sock")) {
      e.socket_path = xdg + "/docker.sock";
    }
  } else if (host.rfind("unix://", 0) == 0) {
    e.socket_path = host.substr(7);
    if (e.socket_path.empty() || e.socket_path.front() != '/') {
      return Invalid(host, "expected unix:///absolute/path");
    }
  } else if (host.rfind("tcp://", 0) == 0 || host.rfind("http://", 0) == 0 ||
             host.rfind("https://", 0) == 0) {
    e.kind = Endpoint::Kind::kTcp;
    std::string rest = host.substr(host.find("://") + 3);
    size_t slash = rest.find('/');
    if (slash != std::string::npos) {
      e.base_path = rest.substr(slash);
      rest.resize(slash);
      while (!e.base_path.empty() && e.base_path.back() == '/') e.base_path.pop_back();
    }
    std::string port;
    if (!rest.empty() && rest.front() == '[') {  // [v6]:port
      size_t close = rest.find(']');
      if (close == std::string::npos) return Invalid(host, "unterminated '['");
      e.host = rest.substr(1, close - 1);
      if (close + 1 < rest.size()) {
        if (rest[close + 1] != ':') return Invalid(host, "expected ':' after ']'");
        port = rest.substr(close + 2);
      }
    } else if (size_t colon = rest.rfind(':'); colon != std::string::npos) {
      e.host = rest.substr(0, colon);
      port = rest.substr(colon + 1);
    } else {
      e.host = rest;
    }
    if (e.host.empty()) return Invalid(host, "no host name");
    if (!port.empty()) {
      char* end = nullptr;
      long p = std::strtol(port.c_str(), &end, 10);
      if (*end != '\0' || p < 1 || p > 65535) return Invalid(host, "bad port '" + port + "'");
      e.port = static_cast<uint16_t>(p);
    }
    e.tls_verify = !Get(getenv, "DOCKER_TLS_VERIFY").empty();
    e.tls = e.tls_verify || !Get(getenv, "DOCKER_TLS").empty() || host.rfind("https://", 0) == 0;
    if (e.tls) {
      e.cert_path = Get(getenv, "DOCKER_CERT_PATH");
      if (e.cert_path.empty()) e.cert_path = Get(getenv, "HOME") + "/.docker";
    }
    if (e.port == 0) e.port = e.tls ? 2376 : 2375;
  } else {
    return Invalid(host,
                   "expected unix:///path or tcp://host[:port] (ssh:// and npipe:// are "
                   "not supported)");
  }
  std::string version = Get(getenv, "DOCKER_API_VERSION");
  if (!version.empty()) {
    int v = ParseApiVersion(version);
    if (v < 0) {
      return Status::Error("invalid DOCKER_API_VERSION '" + version + "': expected MAJOR.MINOR");
    }
    e.api_version = std::to_string(v / 100) + "." + std::to_string(v % 100);
  }
  return e;
}

}  // namespace ci::docker
