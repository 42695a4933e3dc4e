#ifndef ROCETUNE_CLI_CLIENT_H_
#define ROCETUNE_CLI_CLIENT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/tls.h"
#include "grpcpp/grpcpp.h"
#include "rocetune/v1/admin.grpc.pb.h"

namespace rocetune::cli {

// gRPC metadata key carrying the operator's name; the controller's identity
// seam reads it from plaintext loopback peers (with mTLS the certificate's
// identity is used instead).
inline constexpr char kActorMetadataKey[] = "rocetune-actor";

struct ClientOptions {
  std::string controller = "127.0.0.1:7070";
  std::string actor;
  absl::Duration timeout = absl::Seconds(10);
  bool insecure_loopback = false;
  TlsOptions tls;  // mutual TLS when enabled
};

// True for "localhost:P", "127.x.y.z:P", "[::1]:P" (and without a port).
bool IsLoopbackAddress(const std::string& address);

// A channel and stub to the controller's AdminService.
class Client {
 public:
  // Mutual TLS when options.tls is enabled (kInvalidArgument for bad files).
  // Otherwise plaintext, refused (kFailedPrecondition, saying what to do)
  // unless insecure_loopback is set and the address is a numeric loopback
  // address or localhost.
  static absl::StatusOr<std::unique_ptr<Client>> Connect(const ClientOptions& options);

  v1::AdminService::Stub& stub() { return *stub_; }
  const ClientOptions& options() const { return options_; }

  // A context carrying the actor metadata and a deadline `timeout` from now
  // (no deadline when timeout is infinite).
  std::unique_ptr<grpc::ClientContext> NewContext(absl::Duration timeout) const;
  std::unique_ptr<grpc::ClientContext> NewContext() const { return NewContext(options_.timeout); }

 private:
  Client(ClientOptions options, std::unique_ptr<v1::AdminService::Stub> stub)
      : options_(std::move(options)), stub_(std::move(stub)) {}
  ClientOptions options_;
  std::unique_ptr<v1::AdminService::Stub> stub_;
};

// "NOT_FOUND", "UNAVAILABLE", ...
std::string StatusCodeName(grpc::StatusCode code);

// A hint for a call that failed because the controller closed the connection
// in or right after the TLS handshake, which is how a refused client
// certificate shows on this side (gRPC gives no reason); "" for any other
// failure or without TLS.
std::string TlsRefusalHint(const grpc::Status& status, bool tls);

}  // namespace rocetune::cli

#endif  // ROCETUNE_CLI_CLIENT_H_
