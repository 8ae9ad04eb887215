#include "runtime/wire/messages.h"

namespace ci::runtime::proto {

bool Decode(std::string_view text, RunRequest* m) {
  return json::Decode(text, m) && (!m->argv.empty() || !m->call.empty() || m->resume);
}

}  // namespace ci::runtime::proto
