#include "daemon/client_cert_verifier.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/openssl_util.h"

namespace rocetune {
namespace {

constexpr size_t kMaxNameChars = 200;

using openssl::BioPtr;
using CtxPtr = openssl::StoreCtxPtr;
using StackPtr = openssl::X509StackPtr;
using openssl::X509Ptr;

std::string TakeOpenSslError() { return openssl::TakeError("no PEM certificate found"); }

std::string BioText(BIO* bio) {
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);  // NOLINT(runtime/int): OpenSSL's type
  return n > 0 ? std::string(data, static_cast<size_t>(n)) : std::string();
}

// RFC 2253 form with control and non-ASCII bytes escaped, cut to a bound:
// the text comes from an unauthenticated peer.
std::string NameText(const X509_NAME* name) {
  if (name == nullptr) return "";
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (bio == nullptr || X509_NAME_print_ex(bio.get(), name, 0, XN_FLAG_RFC2253) < 0) {
    ERR_clear_error();
    return "(unprintable name)";
  }
  std::string s = BioText(bio.get());
  if (s.size() > kMaxNameChars) s = s.substr(0, kMaxNameChars - 3) + "...";
  return s.empty() ? "(empty name)" : s;
}

std::string TimeText(const ASN1_TIME* t) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (bio == nullptr || t == nullptr || ASN1_TIME_print(bio.get(), t) != 1) {
    ERR_clear_error();
    return "(unprintable time)";
  }
  return BioText(bio.get());
}

// All PEM certificates in `pem`; false with `*error` when a block does not
// parse (an empty input gives an empty list).
bool ParseCertificates(absl::string_view pem, std::vector<X509Ptr>* out, std::string* error) {
  if (pem.empty()) return true;
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (bio == nullptr) {
    *error = TakeOpenSslError();
    return false;
  }
  while (true) {
    X509Ptr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
    if (cert == nullptr) break;
    out->push_back(std::move(cert));
  }
  const unsigned long e = ERR_peek_last_error();  // NOLINT(runtime/int): OpenSSL's type
  if (e != 0 && !(ERR_GET_LIB(e) == ERR_LIB_PEM && ERR_GET_REASON(e) == PEM_R_NO_START_LINE)) {
    *error = TakeOpenSslError();
    return false;
  }
  ERR_clear_error();
  return true;
}

}  // namespace

std::vector<std::string> TlsRefusalReasons() {
  return {kRefusedNoCertificate, kRefusedExpired,        kRefusedNotYetValid,   kRefusedUntrusted,
          kRefusedWrongPurpose,  kRefusedBadCertificate, kRefusedCaUnavailable, kRefusedInvalid};
}

struct ClientCertVerifier::Bundle {
  explicit Bundle(X509_STORE* s) : store(s) {}
  ~Bundle() { X509_STORE_free(store); }
  Bundle(const Bundle&) = delete;
  Bundle& operator=(const Bundle&) = delete;
  X509_STORE* const store;
};

bool ClientCertVerifier::FileKey::operator==(const FileKey& o) const {
  return dev == o.dev && ino == o.ino && size == o.size && mtime.tv_sec == o.mtime.tv_sec &&
         mtime.tv_nsec == o.mtime.tv_nsec && ctime.tv_sec == o.ctime.tv_sec &&
         ctime.tv_nsec == o.ctime.tv_nsec;
}

ClientCertVerifier::ClientCertVerifier(std::string ca_file) : ca_file_(std::move(ca_file)) {}
ClientCertVerifier::~ClientCertVerifier() = default;

std::shared_ptr<const ClientCertVerifier::Bundle> ClientCertVerifier::CurrentBundle(
    std::string* error) {
  struct stat st;
  if (stat(ca_file_.c_str(), &st) != 0) {
    *error = absl::StrCat("--tls_ca=", ca_file_, ": ", std::strerror(errno));
    return nullptr;
  }
  FileKey key;
  key.dev = st.st_dev;
  key.ino = st.st_ino;
  key.size = st.st_size;
  key.mtime = st.st_mtim;
  key.ctime = st.st_ctim;
  {
    absl::MutexLock lock(&mu_);
    if (key == key_) {
      *error = bundle_error_;
      return bundle_;
    }
  }
  // Read outside the lock; the file is read after its key was taken, so a
  // later change shows as a different key at the next call.
  std::shared_ptr<const Bundle> bundle;
  std::string err;
  BioPtr bio(BIO_new_file(ca_file_.c_str(), "r"));
  if (bio == nullptr) {
    ERR_clear_error();
    err = absl::StrCat("--tls_ca=", ca_file_, ": cannot be read");
  } else {
    std::string text;
    char buf[4096];
    int n;
    while ((n = BIO_read(bio.get(), buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
    ERR_clear_error();
    std::vector<X509Ptr> certs;
    std::string parse_error;
    if (!ParseCertificates(text, &certs, &parse_error)) {
      err =
          absl::StrCat("--tls_ca=", ca_file_, ": not a PEM certificate bundle (", parse_error, ")");
    } else if (certs.empty()) {
      err = absl::StrCat("--tls_ca=", ca_file_, ": holds no PEM certificate");
    } else {
      X509_STORE* store = X509_STORE_new();
      if (store == nullptr) {
        err = absl::StrCat("--tls_ca=", ca_file_, ": ", TakeOpenSslError());
      } else {
        auto b = std::make_shared<Bundle>(store);
        for (const X509Ptr& c : certs) {
          if (X509_STORE_add_cert(store, c.get()) != 1) {
            // A duplicate certificate in the bundle is harmless; anything else is not.
            const unsigned long e = ERR_peek_last_error();  // NOLINT(runtime/int)
            if (ERR_GET_REASON(e) != X509_R_CERT_ALREADY_IN_HASH_TABLE) {
              err = absl::StrCat("--tls_ca=", ca_file_, ": ", TakeOpenSslError());
              break;
            }
            ERR_clear_error();
          }
        }
        if (err.empty()) bundle = std::move(b);
      }
    }
  }
  absl::MutexLock lock(&mu_);
  key_ = key;
  bundle_ = bundle;
  bundle_error_ = err;
  *error = err;
  return bundle;
}

absl::Status ClientCertVerifier::Verify(absl::string_view leaf_pem, absl::string_view chain_pem,
                                        TlsRefusal* refusal) {
  TlsRefusal r;
  auto refuse = [&](const char* reason, std::string message) {
    ERR_clear_error();
    r.reason = reason;
    r.message = std::move(message);
    absl::Status s = absl::UnauthenticatedError(r.message);
    if (refusal != nullptr) *refusal = std::move(r);
    return s;
  };
  std::vector<X509Ptr> leaf_certs, chain_certs;
  std::string error;
  if (!ParseCertificates(leaf_pem, &leaf_certs, &error) ||
      !ParseCertificates(chain_pem, &chain_certs, &error)) {
    return refuse(kRefusedBadCertificate,
                  absl::StrCat("client certificate: not a PEM X.509 certificate (", error, ")"));
  }
  X509* leaf = !leaf_certs.empty()    ? leaf_certs.front().get()
               : !chain_certs.empty() ? chain_certs.front().get()
                                      : nullptr;
  if (leaf == nullptr) return refuse(kRefusedNoCertificate, "no client certificate presented");
  r.subject = NameText(X509_get_subject_name(leaf));
  r.issuer = NameText(X509_get_issuer_name(leaf));
  const std::string who =
      absl::StrCat("client certificate ", r.subject, " issued by ", r.issuer, ": ");

  std::shared_ptr<const Bundle> bundle = CurrentBundle(&error);
  if (bundle == nullptr) {
    return refuse(kRefusedCaUnavailable,
                  absl::StrCat(who, "cannot be verified: the CA bundle failed (", error, ")"));
  }
  StackPtr untrusted(sk_X509_new_null());
  CtxPtr ctx(X509_STORE_CTX_new());
  if (untrusted == nullptr || ctx == nullptr) {
    return refuse(kRefusedInvalid, absl::StrCat(who, "out of memory"));
  }
  for (X509Ptr& c : chain_certs) {
    if (sk_X509_push(untrusted.get(), c.get()) <= 0) {
      return refuse(kRefusedInvalid, absl::StrCat(who, "out of memory"));
    }
    c.release();  // owned by the stack now
  }
  if (X509_STORE_CTX_init(ctx.get(), bundle->store, leaf, untrusted.get()) != 1 ||
      X509_STORE_CTX_set_default(ctx.get(), "ssl_client") != 1) {
    return refuse(kRefusedInvalid, absl::StrCat(who, TakeOpenSslError()));
  }
  // The level Debian's OpenSSL applies to TLS peers (SECLEVEL=2): at least
  // 112-bit security for keys, no SHA-1 signatures.
  X509_VERIFY_PARAM* param = X509_STORE_CTX_get0_param(ctx.get());
  X509_VERIFY_PARAM_set_auth_level(param, 2);
  // As gRPC's own root store: any certificate of the bundle is a trust
  // anchor (an intermediate CA alone may be configured), tried first.
  X509_VERIFY_PARAM_set_flags(param, X509_V_FLAG_PARTIAL_CHAIN | X509_V_FLAG_TRUSTED_FIRST);
  if (X509_verify_cert(ctx.get()) == 1) {
    ERR_clear_error();
    return absl::OkStatus();
  }
  const int err = X509_STORE_CTX_get_error(ctx.get());
  const int depth = X509_STORE_CTX_get_error_depth(ctx.get());
  X509* bad = X509_STORE_CTX_get_current_cert(ctx.get());
  const std::string what = X509_verify_cert_error_string(err);
  // Which certificate of the chain failed, when it is not the leaf.
  const std::string where =
      (depth > 0 && bad != nullptr)
          ? absl::StrCat(" (the chain's certificate ", NameText(X509_get_subject_name(bad)), ")")
          : std::string();
  switch (err) {
    case X509_V_ERR_CERT_HAS_EXPIRED:
      return refuse(
          kRefusedExpired,
          absl::StrCat(who, what, where, " (notAfter ",
                       TimeText(bad != nullptr ? X509_get0_notAfter(bad) : nullptr), ")"));
    case X509_V_ERR_CERT_NOT_YET_VALID:
      return refuse(
          kRefusedNotYetValid,
          absl::StrCat(who, what, where, " (notBefore ",
                       TimeText(bad != nullptr ? X509_get0_notBefore(bad) : nullptr), ")"));
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
    case X509_V_ERR_CERT_SIGNATURE_FAILURE:
    case X509_V_ERR_CERT_UNTRUSTED:
    case X509_V_ERR_CERT_REJECTED:
      return refuse(kRefusedUntrusted,
                    absl::StrCat(who, "not signed by the configured CA (", what, ")", where));
    case X509_V_ERR_INVALID_PURPOSE:
      return refuse(
          kRefusedWrongPurpose,
          absl::StrCat(who, "not usable for TLS client authentication (", what, ")", where));
    default:
      return refuse(kRefusedInvalid, absl::StrCat(who, what, where));
  }
}

namespace {

class GrpcClientCertVerifier final : public grpc::experimental::ExternalCertificateVerifier {
 public:
  GrpcClientCertVerifier(std::shared_ptr<ClientCertVerifier> verifier,
                         TlsRefusalCallback on_refusal)
      : verifier_(std::move(verifier)), on_refusal_(std::move(on_refusal)) {}

  bool Verify(grpc::experimental::TlsCustomVerificationCheckRequest* request,
              std::function<void(grpc::Status)> /*callback*/, grpc::Status* sync_status) override {
    const grpc::string_ref leaf = request->peer_cert();
    const grpc::string_ref chain = request->peer_cert_full_chain();
    TlsRefusal refusal;
    absl::Status s = verifier_->Verify(absl::string_view(leaf.data(), leaf.size()),
                                       absl::string_view(chain.data(), chain.size()), &refusal);
    if (s.ok()) {
      *sync_status = grpc::Status::OK;
    } else {
      *sync_status = grpc::Status(grpc::StatusCode::UNAUTHENTICATED, std::string(s.message()));
      if (on_refusal_) on_refusal_(refusal);
    }
    return true;  // always synchronous
  }
  void Cancel(grpc::experimental::TlsCustomVerificationCheckRequest* /*request*/) override {}

 private:
  const std::shared_ptr<ClientCertVerifier> verifier_;
  const TlsRefusalCallback on_refusal_;
};

}  // namespace

std::shared_ptr<grpc::experimental::CertificateVerifier> MakeGrpcClientCertVerifier(
    std::shared_ptr<ClientCertVerifier> verifier, TlsRefusalCallback on_refusal) {
  return grpc::experimental::ExternalCertificateVerifier::Create<GrpcClientCertVerifier>(
      std::move(verifier), std::move(on_refusal));
}

}  // namespace rocetune
