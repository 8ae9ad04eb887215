#include "daemon/backends/backends.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>

namespace ci::daemon {
namespace {

TEST(Backends, AnUnknownBackendIsAnErrorNamingTheAvailableOnes) {
  boost::asio::io_context io;
  Config c;
  c.executor_backend = "kubernetes";
  auto made = MakeExecutor(c, io.get_executor());
  ASSERT_FALSE(made.ok());
  EXPECT_EQ(made.status().message(),
            "EXECUTOR_BACKEND=kubernetes is not available in this build yet; use 'local', "
            "'docker'");
}

TEST(Backends, DoctorHasASectionPerOtherBackend) {
  auto sections = BackendDoctorSections();
  ASSERT_EQ(sections.size(), 2u);
  EXPECT_NE(sections[0].title.find("EXECUTOR_BACKEND=docker"), std::string::npos);
  EXPECT_NE(sections[1].title.find("EXECUTOR_BACKEND=kubernetes"), std::string::npos);
}

}  // namespace
}  // namespace ci::daemon
