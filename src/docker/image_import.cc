#include "docker/image_import.h"

#include <rapidjson/document.h>

#include "core/json.h"
#include "core/query_escape.h"
#include "docker/engine_client.h"
#include "docker/image_watch.h"

namespace ci::docker {

std::string ImportPath(const std::string& image_ref, const std::vector<std::string>& changes) {
  ImageName name = SplitImageRef(image_ref);
  std::string path = "/images/create?fromSrc=-&repo=" + QueryEscape(name.repo) +
                     "&tag=" + QueryEscape(name.tag.empty() ? "latest" : name.tag);
  for (const std::string& c : changes) path += "&changes=" + QueryEscape(c);
  return path;
}

boost::asio::awaitable<Status> ImportImage(EngineClient& client, const std::string& tarball,
                                           const std::string& image_ref,
                                           const std::vector<std::string>& changes,
                                           std::chrono::milliseconds total) {
  std::string path = ImportPath(image_ref, changes);
  std::string error;
  // Each line is {"status": "sha256:..."} or {"errorDetail": {...}, "error": "..."}.
  LineSink on_line = [&error](std::string_view line) {
    rapidjson::Document doc;
    std::string why;
    if (ParseJson(line, doc, why) && doc.IsObject() && doc.HasMember("error") &&
        doc["error"].IsString()) {
      error = doc["error"].GetString();
      return false;
    }
    return true;
  };
  auto r = co_await client.UploadFile(path, tarball, "application/x-tar", on_line, total,
                                      std::chrono::seconds(120));
  std::string what = "importing " + tarball + " as " + image_ref;
  if (!r.ok()) co_return Status::Error(what + ": " + r.status().message());
  if (!r->ok()) co_return HttpError(what, *r);
  if (!error.empty()) co_return Status::Error(what + ": " + error);
  co_return Status();
}

}  // namespace ci::docker
