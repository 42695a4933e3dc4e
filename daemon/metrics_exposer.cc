#include "daemon/metrics_exposer.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"

namespace rocetune {

absl::StatusOr<std::unique_ptr<MetricsExposer>> MetricsExposer::Start(
    const std::string& address, std::shared_ptr<prometheus::Registry> registry) {
  auto out = std::unique_ptr<MetricsExposer>(new MetricsExposer());
  // prometheus-cpp (civetweb) reports bind failures by throwing; this is the
  // boundary where that becomes a Status.
  try {
    out->exposer_ = std::make_unique<prometheus::Exposer>(address, /*num_threads=*/1);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", address, ": ", e.what()));
  }
  out->registry_ = std::move(registry);
  out->exposer_->RegisterCollectable(out->registry_);
  auto ports = out->exposer_->GetListeningPorts();
  if (ports.empty()) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", address));
  }
  out->port_ = ports.front();
  std::string host = address.substr(0, address.rfind(':'));
  out->address_ = absl::StrCat(host, ":", out->port_);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  out->host_ = host;
  return out;
}

void MetricsExposer::AddCollectable(std::shared_ptr<prometheus::Collectable> collectable) {
  exposer_->RegisterCollectable(collectable);
  extra_.push_back(std::move(collectable));
}

namespace {

// Opens and closes one TCP connection to host:port (a wildcard host means
// this machine's loopback); errors are ignored.
void Knock(const std::string& host, int port) {
  std::string target = host;
  if (target.empty() || target == "0.0.0.0") target = "127.0.0.1";
  if (target == "::") target = "::1";
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(target.c_str(), std::to_string(port).c_str(), &hints, &res) != 0) return;
  if (res != nullptr) {
    int fd = socket(res->ai_family, res->ai_socktype | SOCK_CLOEXEC, res->ai_protocol);
    if (fd >= 0) {
      (void)connect(fd, res->ai_addr, res->ai_addrlen);
      close(fd);
    }
  }
  freeaddrinfo(res);
}

}  // namespace

MetricsExposer::~MetricsExposer() {
  if (exposer_ == nullptr) return;
  // civetweb's listener thread polls its socket in 2-second quanta and looks
  // at the stop flag only between polls, so a stop used to take up to 2 s.
  // A connection to our own listener ends the poll at once.
  std::atomic<bool> stopped{false};
  std::thread knocker([this, &stopped]() {
    while (!stopped.load()) {
      Knock(host_, port_);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  exposer_.reset();
  stopped.store(true);
  knocker.join();
}

}  // namespace rocetune
