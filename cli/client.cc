#include "cli/client.h"

#include <chrono>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "daemon/address.h"

namespace rocetune::cli {

bool IsLoopbackAddress(const std::string& address) {
  std::string host = address;
  if (absl::StartsWith(host, "[")) {
    size_t close = host.find(']');
    if (close == std::string::npos) return false;
    host = host.substr(1, close - 1);
  } else if (size_t colon = host.rfind(':');
             colon != std::string::npos && host.find(':') == colon) {
    host = host.substr(0, colon);
  }
  if (host == "localhost" || host == "::1") return true;
  if (!absl::StartsWith(host, "127.")) return false;
  // Four dotted decimal octets.
  int parts = 0;
  for (absl::string_view p : absl::StrSplit(host, '.')) {
    int v = 0;
    if (p.empty() || !absl::SimpleAtoi(p, &v) || v < 0 || v > 255) return false;
    ++parts;
  }
  return parts == 4;
}

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(const ClientOptions& options) {
  grpc::ChannelArguments args;
  // Host listings of large fleets come in pages, but one page of hosts with many
  // NICs can exceed gRPC's 4 MiB default.
  args.SetMaxReceiveMessageSize(256 << 20);
  std::string target = options.controller;
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (options.tls.enabled()) {
    absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> tls =
        MakeChannelCredentials(options.tls, &args);
    if (!tls.ok()) return tls.status();
    creds = *std::move(tls);
  } else {
    if (!options.insecure_loopback) {
      return absl::FailedPreconditionError(
          "no TLS files given: pass --tls_cert, --tls_key and --tls_ca for mutual TLS, or "
          "--insecure_loopback to talk plaintext to a controller on a loopback address");
    }
    absl::StatusOr<std::string> resolved = ResolveLoopback(options.controller, "--controller");
    if (!resolved.ok()) return resolved.status();
    target = *resolved;
    creds = grpc::InsecureChannelCredentials();
  }
  auto channel = grpc::CreateCustomChannel(target, creds, args);
  return std::unique_ptr<Client>(new Client(options, v1::AdminService::NewStub(channel)));
}

std::unique_ptr<grpc::ClientContext> Client::NewContext(absl::Duration timeout) const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->AddMetadata(kActorMetadataKey, options_.actor);
  if (timeout != absl::InfiniteDuration()) {
    ctx->set_deadline(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(timeout));
  }
  return ctx;
}

std::string StatusCodeName(grpc::StatusCode code) {
  // gRPC's and Abseil's canonical codes share their numbers and names.
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
}

std::string TlsRefusalHint(const grpc::Status& status, bool tls) {
  if (!tls || status.error_code() != grpc::StatusCode::UNAVAILABLE) return "";
  const std::string& m = status.error_message();
  // TLS 1.3: the server verifies the client's certificate after the client
  // has finished its side, so a refusal reads "Socket closed"; an alert
  // during the handshake reads as a handshake failure.
  if (!absl::StrContains(m, "Socket closed") &&
      !absl::StrContains(absl::AsciiStrToLower(m), "handshake")) {
    return "";
  }
  return "the controller probably refused the TLS handshake: check that --tls_cert is signed by "
         "the CA the controller trusts (its --tls_ca), is valid now and is meant for TLS clients "
         "(the controller audits each refusal as tls_refused)";
}

}  // namespace rocetune::cli
