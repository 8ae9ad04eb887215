#include "daemon/backends/backends.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <cstdlib>

namespace ci::daemon {
namespace {

TEST(Backends, AnUnknownBackendIsAnErrorNamingTheAvailableOnes) {
  boost::asio::io_context io;
  Config c;
  c.executor_backend = "podman";
  auto made = MakeExecutor(c, io.get_executor());
  ASSERT_FALSE(made.ok());
  EXPECT_EQ(made.status().message(),
            "EXECUTOR_BACKEND=podman is not available in this build yet; use 'local', "
            "'docker', 'kubernetes'");
}

// No KUBECONFIG, no in-cluster variables and no ~/.kube/config: startup stops, saying where the
// connection was looked for.
TEST(Backends, KubernetesWithoutAConnectionStopsStartup) {
  boost::asio::io_context io;
  Config c;
  c.executor_backend = "kubernetes";
  ::setenv("HOME", "/nonexistent", 1);
  ::unsetenv("KUBECONFIG");
  ::unsetenv("KUBERNETES_SERVICE_HOST");
  auto made = MakeExecutor(c, io.get_executor());
  ASSERT_FALSE(made.ok());
  EXPECT_NE(made.status().message().find("KUBECONFIG"), std::string::npos)
      << made.status().message();
}

TEST(Backends, DoctorHasASectionPerOtherBackend) {
  auto sections = BackendDoctorSections();
  ASSERT_EQ(sections.size(), 2u);
  EXPECT_NE(sections[0].title.find("EXECUTOR_BACKEND=docker"), std::string::npos);
  EXPECT_NE(sections[1].title.find("EXECUTOR_BACKEND=kubernetes"), std::string::npos);
}

}  // namespace
}  // namespace ci::daemon
