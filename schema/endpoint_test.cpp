#include "schema/endpoint.h"

#include <gtest/gtest.h>

namespace hearth::net {
namespace {

TEST(Endpoint, TheFormsABrokerCanHave) {
  for (const char* ok : {"tcp://127.0.0.1:5555", "tcp://broker.lan:5555", "tcp://[::1]:5555",
                         "tcp://0.0.0.0:*", "ipc:///run/hearth.sock", "inproc://x"}) {
    EXPECT_TRUE(endpoint_check(ok)) << ok;
  }
  for (const char* bad : {"", "127.0.0.1:5555", "tcp://", "tcp://host", "tcp://host:", "tcp://:1",
                          "http://x:1", "tcp://host:http", "tcp://host:70000", "ipc://"}) {
    auto r = endpoint_check(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.message().find("expected tcp://HOST:PORT"), std::string::npos) << r.message();
  }
  // The mistake seen most: the scheme left out.
  EXPECT_NE(endpoint_check("10.77.0.1:5555").message().find("did you mean tcp://10.77.0.1:5555?"),
            std::string::npos);
}

TEST(Endpoint, AHostThatDoesNotResolveIsNamed) {
  EXPECT_TRUE(endpoint_host_check("tcp://127.0.0.1:5555"));
  EXPECT_TRUE(endpoint_host_check("tcp://localhost:5555"));
  EXPECT_TRUE(endpoint_host_check("ipc:///run/hearth.sock"));
  // .invalid never resolves (RFC 2606).
  auto r = endpoint_host_check("tcp://brokerhost.invalid:5555");
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("cannot resolve host 'brokerhost.invalid'"), std::string::npos)
      << r.message();
}

}  // namespace
}  // namespace hearth::net
