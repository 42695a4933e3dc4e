#include "daemon/address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace rocetune {
namespace {

bool IsLoopback(const sockaddr* sa) {
  if (sa->sa_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(sa);
    return (ntohl(v4->sin_addr.s_addr) >> 24) == 127;
  }
  if (sa->sa_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(sa);
    return IN6_IS_ADDR_LOOPBACK(&v6->sin6_addr);
  }
  return false;
}

std::string Numeric(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (sa->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf, sizeof buf);
    return buf;
  }
  inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, buf, sizeof buf);
  return absl::StrCat("[", buf, "]");
}

}  // namespace

absl::StatusOr<std::string> ResolveLoopback(const std::string& address, const std::string& flag) {
  std::string host;
  std::string port;
  if (!address.empty() && address.front() == '[') {
    const size_t close = address.find(']');
    if (close == std::string::npos || close + 1 >= address.size() || address[close + 1] != ':') {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, "=\"", address, "\": want host:port or [v6]:port"));
    }
    host = address.substr(1, close - 1);
    port = address.substr(close + 2);
  } else {
    const size_t colon = address.rfind(':');
    if (colon == std::string::npos || address.find(':') != colon) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, "=\"", address, "\": want host:port or [v6]:port"));
    }
    host = address.substr(0, colon);
    port = address.substr(colon + 1);
  }
  int port_number = 0;
  if (host.empty() || !absl::SimpleAtoi(port, &port_number) || port_number < 0 ||
      port_number > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, "=\"", address, "\": want host:port with a port of 0 to 65535"));
  }
  // A numeric address, or "localhost" (answered by the hosts file). Any other
  // name is refused without a lookup: its answer could differ between this
  // check and the connection, and the lookup itself would leave the host.
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST;
  const bool is_localhost = absl::AsciiStrToLower(host) == "localhost";
  if (is_localhost) hints.ai_flags = 0;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr) {
    if (res != nullptr) freeaddrinfo(res);
    return absl::FailedPreconditionError(absl::StrCat(
        "--insecure_loopback allows plaintext only to a loopback address; ", flag, "=\"", address,
        "\" is ",
        is_localhost
            ? absl::StrCat("not resolvable (", gai_strerror(rc), ")")
            : std::string("not a numeric address or localhost (names are not looked up)")));
  }
  std::string numeric;
  bool all_loopback = true;
  for (const addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    if (!IsLoopback(ai->ai_addr)) {
      all_loopback = false;
      numeric = Numeric(ai->ai_addr);
      break;
    }
    // Prefer the IPv4 answer of localhost.
    if (numeric.empty() || ai->ai_addr->sa_family == AF_INET) numeric = Numeric(ai->ai_addr);
  }
  freeaddrinfo(res);
  if (!all_loopback) {
    return absl::FailedPreconditionError(
        absl::StrCat("--insecure_loopback allows plaintext only to a loopback address; ", flag,
                     "=\"", address, "\" is ", numeric, ", not 127.0.0.0/8 or ::1"));
  }
  return absl::StrCat(numeric, ":", port_number);
}

absl::Status CheckHostId(const std::string& id) {
  constexpr size_t kMaxLength = 253, kMaxLabel = 63, kQuoted = 64;
  auto refuse = [&](absl::string_view why) {
    std::string shown = absl::CHexEscape(id.substr(0, kQuoted));
    if (id.size() > kQuoted) absl::StrAppend(&shown, "...");
    return absl::InvalidArgumentError(
        absl::StrCat("host id \"", shown, "\" (", id.size(), " bytes): ", why,
                     "; a host id is 1..253 characters [A-Za-z0-9._-] in dot-separated labels of "
                     "1..63, each starting with a letter or digit"));
  };
  if (id.empty()) return refuse("empty");
  if (id.size() > kMaxLength) return refuse("too long");
  size_t label = 0;
  for (size_t i = 0; i < id.size(); ++i) {
    char c = id[i];
    if (c == '.') {
      if (label == 0) return refuse("an empty label (leading dot or \"..\")");
      label = 0;
      continue;
    }
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') {
      return refuse(absl::StrCat("character \"", absl::CHexEscape(std::string(1, c)),
                                 "\" at offset ", i, " is not allowed"));
    }
    if (label == 0 && !absl::ascii_isalnum(static_cast<unsigned char>(c))) {
      return refuse("a label starts with a letter or digit");
    }
    if (++label > kMaxLabel) return refuse("a label is longer than 63 characters");
  }
  if (label == 0) return refuse("a trailing dot");
  return absl::OkStatus();
}

}  // namespace rocetune
