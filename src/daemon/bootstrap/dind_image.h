// Docker-in-Docker's executor image: the nested dockerd starts empty, so the image ships the
// executor root as a tarball (packaging/image/build.sh) and startup imports it, once per data
// root and again when the tarball carries another root (its root-key label).
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <string>

#include "core/executor.h"
#include "core/status.h"

namespace ci::daemon {

// Makes `image` exist in the Engine on `socket`: imported from `tarball` (with the Dockerfile
// instructions of `tarball`.changes) unless it is there with the same root key. A missing
// tarball is only a warning: executions fail until someone loads the image.
asio::awaitable<Status> EnsureExecutorImage(asio::any_io_executor ex, const std::string& socket,
                                            const std::string& image, const std::string& tarball);

}  // namespace ci::daemon
