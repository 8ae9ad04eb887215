// Sessions' snapshots in the file store (docs/sessions.md): each is a tar of the sandbox's
// writable trees made inside the sandbox, the Python state in it, plus a record saying whose it
// is, what the session was and what did not come with it. Both are store files of kind
// "snapshot": counted against the owner's share, never shown by /v1/files nor swept by
// FILE_TTL_SEC, seen by every replica sharing the store.
#pragma once

#include <openssl/evp.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/json.h"
#include "core/status.h"
#include "daemon/files/file_store.h"

namespace ci::daemon {

struct SnapshotRecord {
  std::string id;    // a pause: the session's id; a named snapshot: "snap-<hex>"
  std::string kind;  // "pause" | "named" | "fork" (deleted once the forks started)
  std::string client;
  std::string name;     // a named snapshot's name as given ("" none)
  std::string session;  // the session it was taken from
  double created_at = 0;
  // A pause: the session's own times, its end while paused (SESSION_PAUSE_TTL_SEC) and the
  // seconds of its TTL it had left.
  double session_created_at = 0;
  double expires_at = 0;
  double running_left = 0;
  double hard_left = 0;  // and of the most it could have been given (SessionManager::SetExpiry)
  bool egress = false;   // the session had a proxy, with these rules (EgressRule::ToString)
  std::vector<std::string> egress_allow;
  std::vector<std::string> egress_deny;
  std::string data_file;  // the tar's store id
  uint64_t data_bytes = 0;
  std::string data_sha256;  // hex
  bool python = false;      // the tar holds the interpreter's state (kPythonStatePath)
  // What did not come with it, one entry each ("python global 'sock': cannot pickle ...").
  std::vector<std::string> lost;
  // A pause: what a front keeps with the session (SessionManager::Attach), back on its resume.
  std::string attachment;
};
template <typename V, json::Message<SnapshotRecord> M>
void Fields(V& v, M& m) {
  v("id", m.id);
  v("kind", m.kind);
  v("client", m.client);
  v("name", m.name);
  v("session", m.session);
  v("created_at", m.created_at);
  v("session_created_at", m.session_created_at);
  v("expires_at", m.expires_at);
  v("running_left", m.running_left);
  v("hard_left", m.hard_left);
  v("egress", m.egress);
  v("egress_allow", m.egress_allow);
  v("egress_deny", m.egress_deny);
  v("data_file", m.data_file);
  v("data_bytes", m.data_bytes);
  v("data_sha256", m.data_sha256);
  v("python", m.python);
  v("lost", m.lost);
  v.Optional("attachment", m.attachment);
}

// Where the interpreter's state lies in the sandbox while it is packed and unpacked.
inline constexpr std::string_view kPythonStatePath = "/tmp/.ci-python-state";

class SnapshotStore {
 public:
  explicit SnapshotStore(FileStore& store) : store_(store) {}

  // A snapshot's tar being written: at most max_bytes, counted against `client`'s share.
  class Writer {
   public:
    ~Writer();
    Status Write(std::string_view data);
    uint64_t bytes() const { return upload_->bytes_written(); }
    FileStore::Full full() const { return upload_->full(); }
    bool over_max() const { return over_max_; }  // refused for its max_bytes

   private:
    friend class SnapshotStore;
    Writer(std::unique_ptr<FileStore::Upload> upload, uint64_t max_bytes);
    std::unique_ptr<FileStore::Upload> upload_;
    uint64_t max_bytes_;
    bool over_max_ = false;
    EVP_MD_CTX* digest_;
  };
  Result<std::unique_ptr<Writer>> Begin(const std::string& client, uint64_t max_bytes);
  // Publishes the tar and the record (its data fields filled in here).
  Result<SnapshotRecord> Save(Writer& data, SnapshotRecord record);

  // The record `id` (nullopt: none, or unreadable: logged).
  std::optional<SnapshotRecord> Find(std::string_view id) const;
  // Every record of `kind`.
  std::vector<SnapshotRecord> List(std::string_view kind) const;
  // The record and its tar.
  void Remove(const SnapshotRecord& record);
  // The tar pinned for reading once its size and digest are those recorded; else an error
  // saying what is wrong with it (the snapshot is left as it is).
  Result<std::shared_ptr<const FileStore::Pinned>> OpenData(const SnapshotRecord& record) const;

 private:
  std::optional<std::string> RecordFileOf(std::string_view id) const;
  FileStore& store_;
};

// "snap-" and 24 hex digits: a named snapshot's id.
Result<std::string> NewSnapshotId();

}  // namespace ci::daemon
