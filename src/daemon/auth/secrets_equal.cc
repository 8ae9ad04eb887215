#include "daemon/auth/secrets_equal.h"

#include <openssl/crypto.h>

namespace ci::daemon {

bool SecretsEqual(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace ci::daemon
