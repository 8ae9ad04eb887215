#include "daemon/egress/egress_policy.h"

#include <gtest/gtest.h>

namespace ci::daemon {
namespace {

using boost::asio::ip::make_address;

EgressPolicy Policy(std::string_view allow, std::string_view deny = "") {
  EgressPolicy p;
  p.allow = ParseEgressRules(allow, "allow").value();
  p.deny = ParseEgressRules(deny, "deny").value();
  return p;
}

TEST(EgressRuleTest, ParsesDomainsWildcardsCidrsAndPorts) {
  for (auto [text, shown] : std::initializer_list<std::pair<const char*, const char*>>{
           {"PyPI.org.", "pypi.org"},
           {"*.pythonhosted.org", "*.pythonhosted.org"},
           {"files.test:8443", "files.test:8443"},
           {"10.0.0.0/8", "10.0.0.0/8"},
           {"192.168.1.7", "192.168.1.7/32"},
           {"2001:db8::1", "2001:db8::1/128"},
           {"[2001:db8::]/32:443", "[2001:db8::]/32:443"},
           {"::ffff:10.1.2.3", "10.1.2.3/32"}}) {
    auto rule = ParseEgressRule(text);
    ASSERT_TRUE(rule.ok()) << text << ": " << rule.status().message();
    EXPECT_EQ(rule->ToString(), shown);
  }
}

TEST(EgressRuleTest, RefusesWhatIsNotARule) {
  for (const char* text :
       {"", "*", "*.", "a*b.com", "*.*.com", "10.0.0.0/33", "::/129", "host:0", "host:99999",
        "host:x", "http://x.org", "x.org/path", "[2001:db8::", "a..b", "-bad-.com:80:80"}) {
    auto rule = ParseEgressRule(text);
    EXPECT_FALSE(rule.ok()) << text;
  }
  auto list = ParseEgressRules("pypi.org, *", "EGRESS_ALLOW");
  ASSERT_FALSE(list.ok());
  EXPECT_NE(list.status().message().find("EGRESS_ALLOW: '*'"), std::string::npos)
      << list.status().message();
}

TEST(EgressPolicyTest, NamesMatchTheirRulesAndDenyWins) {
  EgressPolicy p = Policy("pypi.org, *.pythonhosted.org, api.test:443", "bad.pythonhosted.org");
  EXPECT_TRUE(p.AllowsName("pypi.org", 443));
  EXPECT_TRUE(p.AllowsName("PYPI.ORG", 80));
  EXPECT_FALSE(p.AllowsName("www.pypi.org", 443));  // a domain rule is that name only
  EXPECT_TRUE(p.AllowsName("files.pythonhosted.org", 443));
  EXPECT_FALSE(p.AllowsName("pythonhosted.org", 443));  // "*." is the subdomains
  EXPECT_FALSE(p.AllowsName("evilpythonhosted.org", 443));
  EXPECT_FALSE(p.AllowsName("bad.pythonhosted.org", 443));
  EXPECT_TRUE(p.AllowsName("api.test", 443));
  EXPECT_FALSE(p.AllowsName("api.test", 80));
  EXPECT_FALSE(p.AllowsName("1.2.3.4", 443));  // an address needs a CIDR rule
}

TEST(EgressPolicyTest, AddressesOffThePublicInternetNeedACidrRule) {
  EgressPolicy open = Policy("pypi.org");
  EXPECT_TRUE(open.AllowsAddress(make_address("151.101.0.223"), 443));
  EXPECT_TRUE(open.AllowsAddress(make_address("2a04:4e42::223"), 443));
  for (const char* a : {"127.0.0.1", "10.1.2.3", "172.20.0.1", "192.168.0.1", "169.254.169.254",
                        "100.64.0.1", "0.0.0.0", "224.0.0.1", "255.255.255.255", "::1",
                        "::", "fe80::1", "fd00::1", "::ffff:127.0.0.1", "::ffff:169.254.169.254"}) {
    EXPECT_FALSE(open.AllowsAddress(make_address(a), 443)) << a;
  }
  EgressPolicy lab = Policy("pypi.org, 127.0.0.0/8:8443", "127.0.0.9");
  EXPECT_TRUE(lab.AllowsAddress(make_address("127.0.0.1"), 8443));
  EXPECT_TRUE(lab.AllowsAddress(make_address("::ffff:127.0.0.1"), 8443));
  EXPECT_FALSE(lab.AllowsAddress(make_address("127.0.0.1"), 22));
  EXPECT_FALSE(lab.AllowsAddress(make_address("127.0.0.9"), 8443));
  EXPECT_TRUE(lab.AllowsName("127.0.0.1", 8443));
  EgressPolicy none;
  EXPECT_TRUE(none.none());
  EXPECT_FALSE(none.AllowsAddress(make_address("151.101.0.223"), 443));
  EXPECT_FALSE(none.AllowsName("pypi.org", 443));
}

TEST(EgressPolicyTest, ARequestOnlyNarrowsTheOperatorsBound) {
  EgressPolicy max = Policy("*.org, api.test:443, 10.0.0.0/8", "secret.org");
  auto ok = Narrow(
      Policy("pypi.org, *.pythonhosted.org, api.test:443, 10.1.0.0/16:80", "x.pypi.org"), max);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->ToString(),
            "pypi.org,*.pythonhosted.org,api.test:443,10.1.0.0/16:80 -secret.org -x.pypi.org");
  for (const char* wider :
       {"*.com", "org", "api.test", "api.test:80", "10.0.0.0/7", "11.0.0.0/8", "::/0"}) {
    auto refused = Narrow(Policy(wider), max);
    ASSERT_FALSE(refused.ok()) << wider;
    EXPECT_NE(refused.status().message().find("EGRESS_ALLOW_MAX"), std::string::npos);
  }
  EXPECT_FALSE(Narrow(Policy("pypi.org"), EgressPolicy{}).ok());  // no bound: no network
  EXPECT_TRUE(Narrow(EgressPolicy{}, max)->none());
}

}  // namespace
}  // namespace ci::daemon
