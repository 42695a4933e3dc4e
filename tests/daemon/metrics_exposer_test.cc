// MetricsExposer: serves a registry, refuses a taken address, stops its
// listener when destroyed (also with a client connection left open), answers
// bad requests with the right status, and is not held up by slow clients.
#include "daemon/metrics_exposer.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "prometheus/counter.h"
#include "prometheus/registry.h"

namespace rocetune {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

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

void SetReceiveTimeout(int fd, int seconds) {
  timeval tv{};
  tv.tv_sec = seconds;
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
}

// Sends `request` on a fresh connection and returns everything read until the
// server closes, or "" when the connection fails or nothing arrives within
// `timeout_s` seconds of a read.
std::string Exchange(int port, const std::string& request, int timeout_s = 10) {
  int fd = Connect(port);
  if (fd < 0) return "";
  SetReceiveTimeout(fd, timeout_s);
  if (write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
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

std::string Get(int port, const std::string& path, int timeout_s = 10) {
  return Exchange(port, absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: localhost\r\n\r\n"),
                  timeout_s);
}

// Whether the server has closed `fd` (EOF or reset), without waiting.
bool ClosedByPeer(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  char buf[64];
  ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
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

TEST(MetricsExposerTest, ManySlowClientsDoNotStopAScrape) {
  auto exposer = MetricsExposer::Start("127.0.0.1:0", RegistryWithCounter());
  ASSERT_TRUE(exposer.ok()) << exposer.status();
  const int port = (*exposer)->port();
  // More slow clients than the server keeps connections: each sends part of a
  // request line and then nothing.
  constexpr int kSlow = 300;
  std::vector<int> slow;
  for (int i = 0; i < kSlow; ++i) {
    int fd = Connect(port);
    ASSERT_GE(fd, 0) << "slow client " << i;
    ASSERT_EQ(write(fd, "GET /metr", 9), 9);
    slow.push_back(fd);
  }
  const auto start = std::chrono::steady_clock::now();
  // A real scrape must be answered at once, not after the slow clients' time
  // runs out (the header deadline is 5 s; 3 s tells the two apart).
  const std::string scrape = Get(port, "/metrics", /*timeout_s=*/3);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - start)
                      .count();
  int held = 0;
  for (int fd : slow) held += ClosedByPeer(fd) ? 0 : 1;
  std::printf(
      "metrics slow clients: held=%d (of %d slow sockets still open on the server side), "
      "scrape answered in %lld ms\n",
      held, kSlow, static_cast<long long>(ms));
  EXPECT_THAT(scrape, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(scrape, HasSubstr("rocetune_test_total{k=\"v\"} 3"));
  EXPECT_LT(ms, 3000);
  // The cap holds: at most 256 connections, the scrape's among them.
  EXPECT_LE(held, 255);
  EXPECT_GT(held, 0);
  for (int fd : slow) close(fd);
}

TEST(MetricsExposerTest, AnIdleClientIsClosedAtTheHeaderDeadline) {
  auto exposer = MetricsExposer::Start("127.0.0.1:0", RegistryWithCounter());
  ASSERT_TRUE(exposer.ok()) << exposer.status();
  int idle = Connect((*exposer)->port());
  ASSERT_GE(idle, 0);
  SetReceiveTimeout(idle, 8);
  const auto start = std::chrono::steady_clock::now();
  char buf[64];
  const ssize_t n = read(idle, buf, sizeof buf);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  close(idle);
  EXPECT_EQ(n, 0) << "not closed by the server within 8 s";
  EXPECT_GE(seconds, 4.5);
  EXPECT_LE(seconds, 6.0);
}

TEST(MetricsExposerTest, AnswersBadRequestsWithTheirStatus) {
  auto exposer = MetricsExposer::Start("127.0.0.1:0", RegistryWithCounter());
  ASSERT_TRUE(exposer.ok()) << exposer.status();
  const int port = (*exposer)->port();

  EXPECT_THAT(Get(port, "/nope"), StartsWith("HTTP/1.1 404 "));
  const std::string post =
      Exchange(port, "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc");
  EXPECT_THAT(post, StartsWith("HTTP/1.1 405 "));
  EXPECT_THAT(post, HasSubstr("Allow: GET, HEAD\r\n"));
  EXPECT_THAT(Exchange(port, "garbage\r\n\r\n"), StartsWith("HTTP/1.1 400 "));
  EXPECT_THAT(Exchange(port, "GET  /metrics HTTP/1.1\r\n\r\n"), StartsWith("HTTP/1.1 400 "));
  EXPECT_THAT(Exchange(port, "GET metrics HTTP/1.1\r\n\r\n"), StartsWith("HTTP/1.1 400 "));

  const std::string big = absl::StrCat(
      "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Pad: ", std::string(9000, 'a'), "\r\n\r\n");
  EXPECT_THAT(Exchange(port, big), StartsWith("HTTP/1.1 431 "));
  // Just under the limit is still served.
  const std::string fits = absl::StrCat(
      "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Pad: ", std::string(8000, 'a'), "\r\n\r\n");
  EXPECT_THAT(Exchange(port, fits), StartsWith("HTTP/1.1 200 "));
}

TEST(MetricsExposerTest, HeadHasHeadersButNoBody) {
  auto exposer = MetricsExposer::Start("127.0.0.1:0", RegistryWithCounter());
  ASSERT_TRUE(exposer.ok()) << exposer.status();
  const int port = (*exposer)->port();
  const std::string get = Get(port, "/metrics?x=1");
  ASSERT_THAT(get, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(get, HasSubstr("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"));
  EXPECT_THAT(get, HasSubstr("Connection: close\r\n"));
  const size_t body_at = get.find("\r\n\r\n");
  ASSERT_NE(body_at, std::string::npos);
  const std::string body = get.substr(body_at + 4);
  EXPECT_THAT(get, HasSubstr(absl::StrCat("Content-Length: ", body.size(), "\r\n")));

  const std::string head = Exchange(port, "HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_THAT(head, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(head, HasSubstr(absl::StrCat("Content-Length: ", body.size(), "\r\n")));
  EXPECT_THAT(head, Not(HasSubstr("rocetune_test_total")));
  ASSERT_GE(head.size(), 4u);
  EXPECT_EQ(head.substr(head.size() - 4), "\r\n\r\n");

  EXPECT_THAT(Get(port, "/"), HasSubstr("/metrics"));
}

TEST(MetricsExposerTest, ServesCollectablesAddedWhileServing) {
  auto exposer = MetricsExposer::Start("[::1]:0", std::make_shared<prometheus::Registry>());
  if (!exposer.ok()) GTEST_SKIP() << "no IPv6 loopback: " << exposer.status();
  EXPECT_EQ((*exposer)->address(), absl::StrCat("[::1]:", (*exposer)->port()));
  (*exposer)->AddCollectable(RegistryWithCounter());
  int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in6 sa{};
  sa.sin6_family = AF_INET6;
  sa.sin6_port = htons(static_cast<uint16_t>((*exposer)->port()));
  sa.sin6_addr = in6addr_loopback;
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  SetReceiveTimeout(fd, 10);
  const std::string req = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(write(fd, req.data(), req.size()), static_cast<ssize_t>(req.size()));
  std::string got;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) got.append(buf, static_cast<size_t>(n));
  close(fd);
  EXPECT_THAT(got, HasSubstr("rocetune_test_total{k=\"v\"} 3"));
}

TEST(MetricsExposerTest, MalformedAddressIsInvalid) {
  for (const char* address : {"127.0.0.1", "::1:0", "[::1]0", "127.0.0.1:x", "127.0.0.1:70000"}) {
    auto exposer = MetricsExposer::Start(address, RegistryWithCounter());
    EXPECT_FALSE(exposer.ok()) << address;
  }
}

}  // namespace
}  // namespace rocetune
