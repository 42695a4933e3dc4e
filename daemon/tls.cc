#include "daemon/tls.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/openssl_util.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_certificate_verifier.h"
#include "grpcpp/security/tls_credentials_options.h"

namespace rocetune {
namespace {

using openssl::BioPtr;
using openssl::KeyPtr;
using openssl::X509Ptr;

std::string OpenSslError() { return openssl::TakeError("no PEM block found"); }

absl::StatusOr<BioPtr> OpenFile(const std::string& path, const std::string& flag) {
  if (path.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " is empty: mutual TLS needs --tls_cert, --tls_key and --tls_ca"));
  }
  BioPtr bio(BIO_new_file(path.c_str(), "r"));
  if (bio == nullptr) {
    ERR_clear_error();
    return absl::InvalidArgumentError(absl::StrCat(flag, "=", path, ": cannot be read"));
  }
  return bio;
}

absl::StatusOr<X509Ptr> ReadCert(const std::string& path, const std::string& flag) {
  absl::StatusOr<BioPtr> bio = OpenFile(path, flag);
  if (!bio.ok()) return bio.status();
  X509Ptr cert(PEM_read_bio_X509(bio->get(), nullptr, nullptr, nullptr));
  if (cert == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, "=", path, ": not a PEM certificate (", OpenSslError(), ")"));
  }
  return cert;
}

unsigned int RefreshSeconds(absl::Duration d) {
  return static_cast<unsigned int>(std::clamp<int64_t>(absl::ToInt64Seconds(d), 1, 86400));
}

std::shared_ptr<grpc::experimental::CertificateProviderInterface> Provider(const TlsOptions& tls) {
  return std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      tls.key_file, tls.cert_file, tls.ca_file, RefreshSeconds(tls.refresh));
}

}  // namespace

absl::Status CheckTlsOptions(const TlsOptions& tls) {
  absl::StatusOr<X509Ptr> cert = ReadCert(tls.cert_file, "--tls_cert");
  if (!cert.ok()) return cert.status();
  if (X509_cmp_current_time(X509_get0_notAfter(cert->get())) < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tls_cert=", tls.cert_file, ": the certificate has expired"));
  }
  absl::StatusOr<BioPtr> key_bio = OpenFile(tls.key_file, "--tls_key");
  if (!key_bio.ok()) return key_bio.status();
  KeyPtr key(PEM_read_bio_PrivateKey(key_bio->get(), nullptr, nullptr, nullptr));
  if (key == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls_key=", tls.key_file, ": not an unencrypted PEM private key (", OpenSslError(), ")"));
  }
  if (X509_check_private_key(cert->get(), key.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(
        absl::StrCat("--tls_key=", tls.key_file, " does not belong to --tls_cert=", tls.cert_file));
  }
  absl::StatusOr<X509Ptr> ca = ReadCert(tls.ca_file, "--tls_ca");
  if (!ca.ok()) return ca.status();
  if (tls.refresh < absl::Seconds(1)) {
    return absl::InvalidArgumentError("--tls_refresh must be at least 1s");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsOptions& tls, TlsRefusalCallback on_refusal) {
  if (absl::Status s = CheckTlsOptions(tls); !s.ok()) return s;
  grpc::experimental::TlsServerCredentialsOptions options(Provider(tls));
  // The CA is still watched: OpenSSL names its certificates in the
  // CertificateRequest it sends.
  options.watch_root_certs();
  options.watch_identity_key_cert_pairs();
  // gRPC asks for a client certificate and lets every handshake through to
  // our verifier, which refuses a missing one too: only then does every
  // refusal reach code that can count and audit it (with "..._REQUIRE_..."
  // a client without a certificate is refused inside OpenSSL, unseen).
  options.set_cert_request_type(GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_BUT_DONT_VERIFY);
  options.set_certificate_verifier(MakeGrpcClientCertVerifier(
      std::make_shared<ClientCertVerifier>(tls.ca_file), std::move(on_refusal)));
  std::shared_ptr<grpc::ServerCredentials> creds =
      grpc::experimental::TlsServerCredentials(options);
  if (creds == nullptr) return absl::InternalError("gRPC refused the TLS server credentials");
  return creds;
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const TlsOptions& tls, grpc::ChannelArguments* args) {
  if (absl::Status s = CheckTlsOptions(tls); !s.ok()) return s;
  grpc::experimental::TlsChannelCredentialsOptions options;
  options.set_certificate_provider(Provider(tls));
  options.watch_root_certs();
  options.watch_identity_key_cert_pairs();
  options.set_verify_server_certs(true);
  options.set_certificate_verifier(
      std::make_shared<grpc::experimental::HostNameCertificateVerifier>());
  if (!tls.server_name.empty()) args->SetSslTargetNameOverride(tls.server_name);
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::experimental::TlsCredentials(options);
  if (creds == nullptr) return absl::InternalError("gRPC refused the TLS channel credentials");
  return creds;
}

absl::StatusOr<std::string> CertificateCommonName(const std::string& cert_file) {
  absl::StatusOr<X509Ptr> cert = ReadCert(cert_file, "--tls_cert");
  if (!cert.ok()) return cert.status();
  X509_NAME* subject = X509_get_subject_name(cert->get());
  const int i = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
  if (i < 0) {
    return absl::InvalidArgumentError(absl::StrCat(cert_file, ": the subject has no CN"));
  }
  const ASN1_STRING* data = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, i));
  return std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(data)),
                     static_cast<size_t>(ASN1_STRING_length(data)));
}

}  // namespace rocetune
