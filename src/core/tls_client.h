// The one TLS client policy of the daemon's HTTPS clients (the model's, the Kubernetes API's and
// the Docker Engine's): TLS 1.2 at least, a client certificate when given (an encrypted key fails
// instead of prompting), and the server's certificate verified against the given CA or the
// system's trust store, its name checked by SetTlsPeer (tls_peer.h) on each connection.
#pragma once

#include <boost/asio/ssl/context.hpp>
#include <memory>
#include <string>

#include "core/status.h"

namespace ci {

struct TlsClientSettings {
  bool verify = true;  // false: no check of the server at all (an operator's explicit choice)
  // Trust: the CA certificates as PEM text or in a file; neither: the system's trust store
  // (SSL_CERT_FILE / SSL_CERT_DIR when set).
  std::string ca_pem;
  std::string ca_file;
  // The client certificate (chain) and its key, as PEM text or files; none: no certificate.
  std::string cert_pem;
  std::string key_pem;
  std::string cert_file;
  std::string key_file;
};

// The context, or what could not be loaded ("the client key: <why>"); callers say which
// connection it was for.
Result<std::shared_ptr<boost::asio::ssl::context>> MakeTlsClientContext(const TlsClientSettings& s);

}  // namespace ci
