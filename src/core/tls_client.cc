#include "core/tls_client.h"

#include <openssl/ssl.h>

namespace ci {
namespace {

namespace ssl = boost::asio::ssl;
using boost::system::error_code;

boost::asio::const_buffer Bytes(const std::string& s) {
  return boost::asio::buffer(s.data(), s.size());
}

Status Failed(std::string what, const std::string& file, const error_code& ec) {
  if (!file.empty()) what += " " + file;
  return Status::Error(what + ": " + ec.message());
}

}  // namespace

Result<std::shared_ptr<ssl::context>> MakeTlsClientContext(const TlsClientSettings& s) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_client);
  if (::SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION) != 1) {
    return Status::Error("cannot require TLS 1.2");
  }
  ctx->set_password_callback([](size_t, ssl::context::password_purpose) { return std::string(); });
  error_code ec;
  if (!s.cert_pem.empty() || !s.cert_file.empty()) {
    if (!s.cert_pem.empty()) {
      ctx->use_certificate_chain(Bytes(s.cert_pem), ec);
    } else {
      ctx->use_certificate_chain_file(s.cert_file, ec);
    }
    if (ec) return Failed("the client certificate", s.cert_file, ec);
    if (!s.key_pem.empty()) {
      ctx->use_private_key(Bytes(s.key_pem), ssl::context::pem, ec);
    } else {
      ctx->use_private_key_file(s.key_file, ssl::context::pem, ec);
    }
    if (ec) return Failed("the client key", s.key_file, ec);
  }
  if (!s.verify) {
    ctx->set_verify_mode(ssl::verify_none);
    return ctx;
  }
  if (!s.ca_pem.empty()) {
    ctx->add_certificate_authority(Bytes(s.ca_pem), ec);
  } else if (!s.ca_file.empty()) {
    ctx->load_verify_file(s.ca_file, ec);
  } else {
    ctx->set_default_verify_paths(ec);
  }
  if (ec) return Failed("the CA certificates", s.ca_file, ec);
  ctx->set_verify_mode(ssl::verify_peer);
  return ctx;
}

}  // namespace ci
