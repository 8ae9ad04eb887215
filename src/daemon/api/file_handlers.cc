// POST/GET /v1/files and GET/DELETE /v1/files/{file_id}.
#include <spdlog/spdlog.h>

#include "core/short_id.h"
#include "daemon/api/handlers.h"
#include "daemon/api/responses.h"
#include "daemon/http/multipart.h"
#include "daemon/service/output_buffer.h"

namespace ci::daemon {
namespace {

constexpr uint64_t kMultipartOverhead = 1 << 20;  // headers and boundaries around the file part

std::string FileSizeError(uint64_t max_mb) {
  return "File size exceeds maximum of " + std::to_string(max_mb) + " MB";
}

// 507 Insufficient Storage: the request was fine, the store (or the key's share) has no room.
std::string StoreFullError(uint64_t max_mb) {
  return "File storage is full (FILE_STORAGE_MAX_MB=" + std::to_string(max_mb) +
         "): delete stored files or raise FILE_STORAGE_MAX_MB";
}

std::string ShareFullError(const std::string& client, uint64_t used, uint64_t share) {
  return "API key '" + client + "' has used its share of the file storage (" +
         std::to_string(used >> 20) + " of " + std::to_string(share >> 20) +
         " MB: files_mb= on its line in API_KEYS_FILE, else FILE_STORAGE_PER_KEY_MB): delete "
         "some of its files";
}

}  // namespace

asio::awaitable<void> ApiHandlers::UploadFile(HttpExchange& ex, const std::string&) {
  const std::string kMissing = "A 'file' form field is required.";
  auto content_type = ex.head().Header("content-type");
  if (!content_type || content_type->find("multipart/form-data") == std::string_view::npos) {
    co_return co_await ex.Respond(ErrorResponse(422, kMissing));
  }
  auto boundary = MultipartParser::BoundaryFromContentType(*content_type);
  if (!boundary.ok())
    co_return co_await ex.Respond(ErrorResponse(422, boundary.status().message()));

  const uint64_t max_bytes = config_.max_file_size_mb << 20;
  const std::string size_error = FileSizeError(config_.max_file_size_mb);
  std::unique_ptr<FileStore::Upload> upload;
  std::string filename;
  bool in_file = false, have_file = false;
  std::optional<FileMeta> committed;
  MultipartParser parser(
      *boundary, {
                     .on_part_begin = [&](const MultipartPartHeaders& h) -> Status {
                       in_file = h.name == "file" && !have_file;
                       if (!in_file) return {};
                       auto u = store_.BeginUpload(max_bytes, ex.client);
                       if (!u.ok()) return u.status();
                       upload = std::move(u).value();
                       filename = SanitizeUtf8(h.filename.value_or(""));  // it is echoed in JSON
                       have_file = true;
                       return {};
                     },
                     .on_part_data = [&](std::string_view data) -> Status {
                       return in_file ? upload->Write(data) : Status();
                     },
                     .on_part_end = [&]() -> Status {
                       if (!in_file) return {};
                       in_file = false;
                       auto meta = upload->Commit(filename);
                       if (!meta.ok()) return meta.status();
                       committed = std::move(meta).value();
                       return {};
                     },
                 });
  Status parse;
  for (;;) {
    BodyChunk chunk = co_await ex.ReadBodyChunk(max_bytes + kMultipartOverhead);
    if (chunk.error == BodyError::kTooLarge) {
      co_return co_await ex.Respond(ErrorResponse(413, size_error));
    }
    if (chunk.error != BodyError::kNone) {
      co_return co_await ex.Respond(ErrorResponse(400, "Invalid request body: incomplete body"));
    }
    if (chunk.end) break;
    parse = parser.Feed(chunk.data);
    if (!parse.ok()) break;
  }
  if (parse.ok()) parse = parser.Finish();
  if (!parse.ok() && committed) store_.Delete(committed->file_id);
  if (!parse.ok() && upload && upload->full() == FileStore::Full::kShare) {
    const uint64_t used = store_.used_bytes_of(ex.client),
                   share = quotas_.For(ex.client).file_bytes;
    spdlog::warn("[{}] upload refused: {}'s share of the file store is full ({} of {} MB used)",
                 ex.head().request_id, ex.client, used >> 20, share >> 20);
    co_return co_await ex.Respond(ErrorResponse(507, ShareFullError(ex.client, used, share)));
  }
  if (!parse.ok() && upload && upload->full() == FileStore::Full::kStore) {
    spdlog::warn("[{}] upload refused: the file store is full ({} of {} MB used)",
                 ex.head().request_id, store_.used_bytes() >> 20, config_.file_storage_max_mb);
    co_return co_await ex.Respond(ErrorResponse(507, StoreFullError(config_.file_storage_max_mb)));
  }
  if (!parse.ok() && parse.message() == size_error) {
    co_return co_await ex.Respond(ErrorResponse(413, size_error));
  }
  if (!parse.ok()) co_return co_await ex.Respond(ErrorResponse(422, parse.message()));
  if (!committed) co_return co_await ex.Respond(ErrorResponse(422, kMissing));
  spdlog::info("[{}] stored file {} ({} bytes)", ex.head().request_id, ShortId(committed->file_id),
               committed->size_bytes);
  co_await ex.Respond(JsonResponse(201, FileMetaJson(*committed, /*with_upload_time=*/false)));
}

asio::awaitable<void> ApiHandlers::ListFiles(HttpExchange& ex, const std::string&) {
  std::vector<FileMeta> mine;
  for (auto& f : store_.List()) {
    if (f.VisibleTo(ex.client)) mine.push_back(std::move(f));
  }
  co_await ex.Respond(JsonResponse(200, FileListJson(mine)));
}

asio::awaitable<void> ApiHandlers::GetFile(HttpExchange& ex, const std::string& id) {
  // Pinned until the response is sent: a delete meanwhile cannot turn it into a 500. Another
  // caller's file is one that does not exist.
  auto pin = store_.Pin(id);
  if (!pin || !pin->meta().VisibleTo(ex.client))
    co_return co_await ex.Respond(ErrorResponse(404, "File with ID '" + id + "' not found"));
  HttpResponse r;
  r.content_type = "application/octet-stream";
  r.file_path = pin->path();
  r.headers.emplace_back("Content-Disposition", AttachmentContentDisposition(pin->meta().filename));
  co_await ex.Respond(std::move(r));
}

asio::awaitable<void> ApiHandlers::DeleteFile(HttpExchange& ex, const std::string& id) {
  auto meta = store_.Get(id);
  if (!meta || !meta->VisibleTo(ex.client) || !store_.Delete(id)) {
    co_return co_await ex.Respond(ErrorResponse(404, "File with ID '" + id + "' not found"));
  }
  co_await ex.Respond(NoContent());
}

}  // namespace ci::daemon
