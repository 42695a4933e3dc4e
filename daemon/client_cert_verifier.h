#ifndef ROCETUNE_DAEMON_CLIENT_CERT_VERIFIER_H_
#define ROCETUNE_DAEMON_CLIENT_CERT_VERIFIER_H_

#include <sys/types.h>

#include <ctime>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/security/tls_certificate_verifier.h"

namespace rocetune {

// Why a client certificate was refused: a small fixed set (metric labels,
// audit aggregation keys).
inline constexpr char kRefusedNoCertificate[] = "no_certificate";
inline constexpr char kRefusedExpired[] = "expired";
inline constexpr char kRefusedNotYetValid[] = "not_yet_valid";
inline constexpr char kRefusedUntrusted[] = "untrusted";             // not signed by the CA
inline constexpr char kRefusedWrongPurpose[] = "wrong_purpose";      // not for TLS clients
inline constexpr char kRefusedBadCertificate[] = "bad_certificate";  // unparseable
inline constexpr char kRefusedCaUnavailable[] = "ca_unavailable";    // our CA bundle failed
inline constexpr char kRefusedInvalid[] = "invalid";                 // any other verification error

// The reason classes above, for pre-declaring metric series.
std::vector<std::string> TlsRefusalReasons();

// One refused client certificate.
struct TlsRefusal {
  std::string reason;   // one of the kRefused* classes
  std::string subject;  // the leaf's subject (RFC 2253, at most 200 characters), "" without one
  std::string issuer;   // the leaf's issuer, likewise
  std::string message;  // what is wrong, for logs and audit rows
};

// Verifies TLS client certificate chains the way the TLS library would, with
// OpenSSL's X509_verify_cert: the leaf must chain to a certificate of the CA
// bundle file, every certificate in the chain must be within its validity
// period now, the leaf must be usable for TLS client authentication (purpose
// "ssl_client") and keys and signatures must meet security level 2. Like
// gRPC's own verification, every certificate of the bundle is a trust anchor
// (X509_V_FLAG_PARTIAL_CHAIN): a bundle may hold an intermediate CA alone.
// The bundle is re-read when the file's inode, size, mtime or ctime changes
// (checked on every call), so a rotated CA takes effect at the next handshake.
// Fails closed: an unreadable or unparseable bundle refuses every chain.
// Thread-safe.
class ClientCertVerifier {
 public:
  explicit ClientCertVerifier(std::string ca_file);
  ~ClientCertVerifier();
  ClientCertVerifier(const ClientCertVerifier&) = delete;
  ClientCertVerifier& operator=(const ClientCertVerifier&) = delete;

  // `leaf_pem`: the peer's certificate; `chain_pem`: the certificates it sent
  // (may repeat the leaf; on a server it usually lacks it). Either may be
  // empty. OK when the chain verifies; otherwise kUnauthenticated with the
  // refusal's message, and `*refusal` (when not null) filled in.
  absl::Status Verify(absl::string_view leaf_pem, absl::string_view chain_pem,
                      TlsRefusal* refusal = nullptr);

 private:
  struct FileKey {
    dev_t dev = 0;
    ino_t ino = 0;
    off_t size = -1;
    timespec mtime{};
    timespec ctime{};
    bool operator==(const FileKey& o) const;
  };
  struct Bundle;  // the parsed CA store

  // The bundle for the file as it is now; null with `*error` set when it
  // cannot be read or parsed.
  std::shared_ptr<const Bundle> CurrentBundle(std::string* error);

  const std::string ca_file_;
  absl::Mutex mu_;
  FileKey key_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const Bundle> bundle_ ABSL_GUARDED_BY(mu_);
  std::string bundle_error_ ABSL_GUARDED_BY(mu_);
};

// Called for every refused handshake, on gRPC's handshake thread: must return
// quickly and must not block.
using TlsRefusalCallback = std::function<void(const TlsRefusal&)>;

// A gRPC certificate verifier running `verifier` synchronously on each
// handshake's peer certificate (no certificate at all is refused, reason
// no_certificate) and reporting each refusal to `on_refusal` (may be empty).
std::shared_ptr<grpc::experimental::CertificateVerifier> MakeGrpcClientCertVerifier(
    std::shared_ptr<ClientCertVerifier> verifier, TlsRefusalCallback on_refusal);

}  // namespace rocetune

#endif  // ROCETUNE_DAEMON_CLIENT_CERT_VERIFIER_H_
