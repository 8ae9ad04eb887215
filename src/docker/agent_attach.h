// The agent's stream over Docker (container/agent_transport.h): a container's attach (stream=1,
// stdin, stdout and stderr, no tty), hijacked, its stdcopy frames told apart.
#pragma once

#include <memory>

#include "container/agent_transport.h"
#include "docker/engine_client.h"

namespace ci::docker {

std::unique_ptr<container::AgentTransport> DockerAttachTransport(std::unique_ptr<RawStream> stream);

}  // namespace ci::docker
