#ifndef ROCETUNE_AGENT_PROBE_SOCKET_ADDRESS_H_
#define ROCETUNE_AGENT_PROBE_SOCKET_ADDRESS_H_

#include <sys/socket.h>

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace rocetune {

// An IPv4 or IPv6 UDP endpoint.
struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;

  int family() const { return storage.ss_family; }
  const sockaddr* addr() const { return reinterpret_cast<const sockaddr*>(&storage); }
  int port() const;
  // "1.2.3.4:5" or "[::1]:5".
  std::string ToString() const;

  // Parses "a.b.c.d:port" or "[v6]:port" (numeric only, port 0..65535).
  // kInvalidArgument naming the text otherwise.
  static absl::StatusOr<SocketAddress> Parse(absl::string_view text);
  static SocketAddress FromSockaddr(const sockaddr* sa, socklen_t len);
};

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_PROBE_SOCKET_ADDRESS_H_
