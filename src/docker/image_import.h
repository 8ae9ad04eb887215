// Imports an image from a root filesystem tarball (POST /images/create?fromSrc=-), as
// `docker import` does: how Docker-in-Docker gets its executor image with no registry.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <string>
#include <vector>

#include "core/status.h"

namespace ci::docker {

class EngineClient;

// The import's query: repo and tag of `image_ref`, and each Dockerfile instruction of `changes`
// ("WORKDIR /workspace", "ENV PATH=..."). Pure, for the tests.
std::string ImportPath(const std::string& image_ref, const std::vector<std::string>& changes);

// Streams `tarball` to the Engine; an error names the tarball and the Engine's message.
boost::asio::awaitable<Status> ImportImage(EngineClient& client, const std::string& tarball,
                                           const std::string& image_ref,
                                           const std::vector<std::string>& changes,
                                           std::chrono::milliseconds total);

}  // namespace ci::docker
