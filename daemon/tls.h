#ifndef ROCETUNE_DAEMON_TLS_H_
#define ROCETUNE_DAEMON_TLS_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/client_cert_verifier.h"
#include "grpcpp/grpcpp.h"

namespace rocetune {

// Mutual TLS files of one binary (PEM). All three are set, or none: then the
// binary talks plaintext, which is only allowed to loopback addresses.
struct TlsOptions {
  std::string cert_file;  // this end's certificate chain
  std::string key_file;   // its private key
  std::string ca_file;    // the CA bundle the peer's certificate must chain to
  // How often the three files are re-read, so that rotated certificates and
  // CAs take effect without a restart (at least 1 s).
  absl::Duration refresh = absl::Seconds(10);
  // Clients only: the name the server's certificate must carry ("" = the host
  // part of the target address).
  std::string server_name;

  bool enabled() const { return !cert_file.empty() || !key_file.empty() || !ca_file.empty(); }
};

// Checks that all three files are given, readable and parse: the certificate
// and CA as X.509, the key as a private key matching the certificate, and
// the certificate has not expired.
// kInvalidArgument naming the flag (`--tls_cert`, ...) and the file otherwise.
absl::Status CheckTlsOptions(const TlsOptions& tls);

// Server credentials requiring a client certificate that chains to the CA:
// the handshake fails without one, and with one that ClientCertVerifier
// refuses (another CA, expired, not yet valid, not for TLS clients), each
// refusal reported to `on_refusal` (see TlsRefusalCallback). The server's own
// certificate and key are re-read every `refresh`; the CA bundle is re-read
// by the verifier as soon as the file changes.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsOptions& tls, TlsRefusalCallback on_refusal = nullptr);

// Channel credentials presenting the certificate and verifying the server's
// against the CA and `server_name` (set in `args` when given).
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const TlsOptions& tls, grpc::ChannelArguments* args);

// The common name of a PEM certificate file (kInvalidArgument when unreadable).
absl::StatusOr<std::string> CertificateCommonName(const std::string& cert_file);

}  // namespace rocetune

#endif  // ROCETUNE_DAEMON_TLS_H_
