// A running executor pod as the exec-driven sandbox drives it (container/container_api.h): every
// exec a WebSocket of its own (api_client.h), stdout and stderr from channels 1 and 2 as they
// arrive, the exit code from channel 3's Status, stdin closed with v5's close signal, or on v4
// (which cannot half-close stdin) cut after exactly the bytes the caller said it writes.
// Removal is the executor's (a DELETE with grace 0, confirmed), given as a function.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "container/container_api.h"
#include "k8s/api_client.h"

namespace ci::k8s {

// What the API server negotiates, learnt from the first exec (the same for every pod).
struct ExecProtocolMemo {
  bool known = false;
  bool v5 = false;
};

struct PodRef {
  std::string namespace_;
  std::string name;
  std::string container;  // the program's (pod_spec.h kExecutorContainer)
  // The SandboxClaim the pod is a sandbox of (sandbox_claims.h), if any: removing the pod
  // deletes the claim (the controller would make a deleted sandbox's pod again).
  std::string claim = {};
};

// Starts the pod's removal; the sandbox calls it from Destroy and Kill (twice is harmless).
using RemovePod = std::function<void(const PodRef&)>;

std::shared_ptr<container::ContainerApi> MakePodContainer(std::shared_ptr<ApiClient> client,
                                                          PodRef pod,
                                                          std::shared_ptr<ExecProtocolMemo> memo,
                                                          RemovePod remove);

// On v4, `cmd` with its stdin cut after `size` bytes: bash makes `head -c size` the reader of
// the exec's stdin and execs `cmd` on the pipe, so the program reads EOF after them (no process
// stays between the exec and the program). Pure.
std::vector<std::string> ExactStdinArgv(const std::vector<std::string>& cmd, uint64_t size);

}  // namespace ci::k8s
