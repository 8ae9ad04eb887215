#include "core/short_id.h"

#include <gtest/gtest.h>

namespace ci {
namespace {

TEST(ShortId, LogsKeepAPrefixOfEveryUuid) {
  EXPECT_EQ(ShortId("0f3c2a1b-1111-4222-8333-444455556666"), "0f3c2a1b...");
  EXPECT_EQ(WithShortIds("/v1/sessions/0f3c2a1b-1111-4222-8333-444455556666/execute"),
            "/v1/sessions/0f3c2a1b.../execute");
  EXPECT_EQ(WithShortIds("/v1/files/AAAAAAAA-1111-4222-8333-444455556666?x=0f3c2a1b-1111-4222-"
                         "8333-444455556666"),
            "/v1/files/AAAAAAAA...?x=0f3c2a1b...");
  // Session ids: the prefix stays, the random part is cut.
  EXPECT_EQ(ShortId("code-session-75140f473ec4ae465bba62099169ef75"), "code-session-75140f47...");
  EXPECT_EQ(WithShortIds("/v1/sessions/code-session-75140f473ec4ae465bba62099169ef75/bash"),
            "/v1/sessions/code-session-75140f47.../bash");
  // Not an id: kept as it is.
  EXPECT_EQ(WithShortIds("/v1/sessions/not-a-session"), "/v1/sessions/not-a-session");
  EXPECT_EQ(WithShortIds("0f3c2a1b-1111-4222-8333-44445555666"),
            "0f3c2a1b-1111-4222-8333-44445555666");
}

}  // namespace
}  // namespace ci
