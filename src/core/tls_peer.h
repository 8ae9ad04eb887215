// The TLS peer check shared by the HTTPS clients (the model's, Kubernetes', Docker's): SNI
// for a host name (never for an address), and with verification the certificate must carry the
// name as a DNS SAN or the address as an IP SAN. Header-only; the callers link OpenSSL.
#pragma once

#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

#include <boost/asio/ip/address.hpp>
#include <string>

namespace ci {

// False when OpenSSL refuses the name (the caller says which connection).
inline bool SetTlsPeer(SSL* handle, const std::string& name, bool verify) {
  boost::system::error_code ec;
  boost::asio::ip::make_address(name, ec);
  const bool address = !ec;
  if (!address && ::SSL_set_tlsext_host_name(handle, name.c_str()) != 1) return false;
  if (!verify) return true;
  X509_VERIFY_PARAM* param = ::SSL_get0_param(handle);
  return (address ? ::X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str())
                  : ::X509_VERIFY_PARAM_set1_host(param, name.c_str(), name.size())) == 1;
}

}  // namespace ci
