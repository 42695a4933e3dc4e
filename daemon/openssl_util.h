#ifndef ROCETUNE_DAEMON_OPENSSL_UTIL_H_
#define ROCETUNE_DAEMON_OPENSSL_UTIL_H_

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

#include <memory>
#include <string>

namespace rocetune::openssl {

// Owning pointers to OpenSSL objects, each freed with its own free function.
struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
// A stack that owns its certificates.
struct X509StackFree {
  void operator()(STACK_OF(X509) * s) const { sk_X509_pop_free(s, X509_free); }
};
struct StoreCtxFree {
  void operator()(X509_STORE_CTX* c) const { X509_STORE_CTX_free(c); }
};

using BioPtr = std::unique_ptr<BIO, BioFree>;
using X509Ptr = std::unique_ptr<X509, X509Free>;
using KeyPtr = std::unique_ptr<EVP_PKEY, KeyFree>;
using X509StackPtr = std::unique_ptr<STACK_OF(X509), X509StackFree>;
using StoreCtxPtr = std::unique_ptr<X509_STORE_CTX, StoreCtxFree>;

// The newest error of this thread's OpenSSL error queue as text (`if_none`
// when the queue is empty), and the queue emptied: gRPC's TLS code on the same
// thread reads the queue after its own calls.
inline std::string TakeError(const char* if_none) {
  const unsigned long e = ERR_peek_last_error();  // NOLINT(runtime/int): OpenSSL's type
  ERR_clear_error();
  if (e == 0) return if_none;
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

}  // namespace rocetune::openssl

#endif  // ROCETUNE_DAEMON_OPENSSL_UTIL_H_
