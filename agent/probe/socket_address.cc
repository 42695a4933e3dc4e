#include "agent/probe/socket_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace rocetune {

int SocketAddress::port() const {
  if (family() == AF_INET) {
    return ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
  }
  if (family() == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
  }
  return 0;
}

std::string SocketAddress::ToString() const {
  char buf[INET6_ADDRSTRLEN] = {};
  if (family() == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr, buf, sizeof(buf));
    return absl::StrCat(buf, ":", port());
  }
  if (family() == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_addr, buf,
              sizeof(buf));
    return absl::StrCat("[", buf, "]:", port());
  }
  return "<unset>";
}

absl::StatusOr<SocketAddress> SocketAddress::Parse(absl::string_view text) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad UDP address \"", text, "\": ", why, " (want ip:port or [ip6]:port)"));
  };
  std::string host;
  absl::string_view port_text;
  if (!text.empty() && text[0] == '[') {
    size_t close = text.find(']');
    if (close == absl::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return bad("missing ']:'");
    }
    host = std::string(text.substr(1, close - 1));
    port_text = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    if (colon == absl::string_view::npos) return bad("missing port");
    host = std::string(text.substr(0, colon));
    port_text = text.substr(colon + 1);
  }
  uint32_t port = 0;
  if (!absl::SimpleAtoi(port_text, &port) || port > 65535) return bad("bad port");
  SocketAddress out;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&out.storage);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&out.storage);
  if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(port));
    out.length = sizeof(sockaddr_in);
    return out;
  }
  std::memset(&out.storage, 0, sizeof(out.storage));
  if (inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(port));
    out.length = sizeof(sockaddr_in6);
    return out;
  }
  return bad("not a numeric IPv4 or IPv6 address");
}

SocketAddress SocketAddress::FromSockaddr(const sockaddr* sa, socklen_t len) {
  SocketAddress out;
  if (len > sizeof(out.storage)) len = sizeof(out.storage);
  std::memcpy(&out.storage, sa, len);
  out.length = len;
  return out;
}

}  // namespace rocetune
