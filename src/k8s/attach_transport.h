// A pod's attach WebSocket as the transport of its agent (container/agent_transport.h): channel 1
// is the agent's stdout (the wire's frames), channel 2 its stderr, and what the daemon writes
// goes to channel 0 in messages of at most 64 KiB. The attach ends when the container's output
// does (a channel-3 Status) or the connection closes. The pod's container has `stdin: true`
// without `stdinOnce`, so an attach that breaks leaves the agent's stdin open: the agent then
// ends by the pod's deadline or the daemon's deletion, not by an EOF (pod_spec.h).
#pragma once

#include <memory>

#include "container/agent_transport.h"
#include "k8s/api_client.h"

namespace ci::k8s {

std::unique_ptr<container::AgentTransport> PodAttachTransport(std::unique_ptr<ExecConnection> conn);

}  // namespace ci::k8s
