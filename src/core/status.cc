#include "core/status.h"

#include <cstring>

namespace ci {

Status Status::Errno(std::string what, int err) {
  return Status(std::move(what) + ": " + std::strerror(err));
}

}  // namespace ci
