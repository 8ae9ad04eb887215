#include "core/base64.h"

#include <openssl/evp.h>

#include <cctype>

namespace ci {

std::string Base64Encode(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  int n = ::EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                            reinterpret_cast<const unsigned char*>(bytes.data()),
                            static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

std::optional<std::string> Base64Decode(std::string_view text) {
  std::string in;
  for (char c : text) {
    if (!std::isspace(static_cast<unsigned char>(c))) in += c;
  }
  if (in.size() % 4 != 0) return std::nullopt;
  size_t first_pad = in.find('=');  // only "x=" or "==" at the very end
  if (first_pad != std::string::npos && first_pad + 2 < in.size()) return std::nullopt;
  if (first_pad != std::string::npos && in.back() != '=') return std::nullopt;
  // EVP_DecodeBlock accepts '=' only at the end but counts the padding as zero bytes.
  size_t pad = in.size() >= 2 && in[in.size() - 2] == '=' ? 2 : !in.empty() && in.back() == '=';
  std::string out(in.size() / 4 * 3, '\0');
  int n = ::EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                            reinterpret_cast<const unsigned char*>(in.data()),
                            static_cast<int>(in.size()));
  if (n < 0) return std::nullopt;
  out.resize(static_cast<size_t>(n) - pad);
  return out;
}

}  // namespace ci
