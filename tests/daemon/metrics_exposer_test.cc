// MetricsExposer: serves a registry, refuses a taken address, and stops its
// listener when destroyed (also with a client connection left open).
#include "daemon/metrics_exposer.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "prometheus/counter.h"
#include "prometheus/registry.h"

namespace rocetune {
namespace {

using ::testing::HasSubstr;

// A connected socket to 127.0.0.1:port, or -1.
int Connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

std::string Get(int port, const std::string& path) {
  int fd = Connect(port);
  if (fd < 0) return "";
  std::string req = absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: localhost\r\n\r\n");
  if (write(fd, req.data(), req.size()) != static_cast<ssize_t>(req.size())) {
    close(fd);
    return "";
  }
  std::string body;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) body.append(buf, static_cast<size_t>(n));
  close(fd);
  return body;
}

std::shared_ptr<prometheus::Registry> RegistryWithCounter() {
  auto registry = std::make_shared<prometheus::Registry>();
  prometheus::BuildCounter()
      .Name("rocetune_test_total")
      .Help("A test counter.")
      .Register(*registry)
      .Add({{"k", "v"}})
      .Increment(3);
  return registry;
}

TEST(MetricsExposerTest, ServesTheRegistryOnAPickedPort) {
  auto exposer = MetricsExposer::Start("127.0.0.1:0", RegistryWithCounter());
  ASSERT_TRUE(exposer.ok()) << exposer.status();
  ASSERT_GT((*exposer)->port(), 0);
  EXPECT_EQ((*exposer)->address(), absl::StrCat("127.0.0.1:", (*exposer)->port()));
  EXPECT_THAT(Get((*exposer)->port(), "/metrics"), HasSubstr("rocetune_test_total{k=\"v\"} 3"));
}

TEST(MetricsExposerTest, TakenAddressIsUnavailableAndNamed) {
  auto first = MetricsExposer::Start("127.0.0.1:0", RegistryWithCounter());
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string address = (*first)->address();
  auto second = MetricsExposer::Start(address, RegistryWithCounter());
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(second.status().message()), HasSubstr(address));
}

TEST(MetricsExposerTest, DestroyingStopsTheListener) {
  auto exposer = MetricsExposer::Start("127.0.0.1:0", RegistryWithCounter());
  ASSERT_TRUE(exposer.ok()) << exposer.status();
  const int port = (*exposer)->port();
  // A client that connected and never sent a request must not keep it alive.
  int idle = Connect(port);
  ASSERT_GE(idle, 0);
  exposer->reset();
  EXPECT_EQ(Connect(port), -1);
  close(idle);
}

TEST(MetricsExposerTest, WildcardAddressStopsToo) {
  auto exposer = MetricsExposer::Start("0.0.0.0:0", RegistryWithCounter());
  ASSERT_TRUE(exposer.ok()) << exposer.status();
  const int port = (*exposer)->port();
  EXPECT_THAT(Get(port, "/metrics"), HasSubstr("rocetune_test_total"));
  exposer->reset();
  EXPECT_EQ(Connect(port), -1);
}

}  // namespace
}  // namespace rocetune
