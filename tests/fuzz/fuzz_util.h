#ifndef ROCETUNE_TESTS_FUZZ_FUZZ_UTIL_H_
#define ROCETUNE_TESTS_FUZZ_FUZZ_UTIL_H_

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace rocetune::fuzz {

// An in-memory file holding `data`, for parsers that read from a path. The
// path is valid while the object lives.
class MemFile {
 public:
  MemFile(const uint8_t* data, size_t size) : fd_(memfd_create("fuzz", 0)) {
    if (fd_ >= 0) {
      size_t off = 0;
      while (off < size) {
        ssize_t n = write(fd_, data + off, size - off);
        if (n <= 0) break;
        off += static_cast<size_t>(n);
      }
    }
  }
  ~MemFile() {
    if (fd_ >= 0) close(fd_);
  }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;
  std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

 private:
  int fd_;
};

// Stops the fuzzer on a broken property (a finding, like a crash).
inline void Check(bool property) {
  if (!property) __builtin_trap();
}

}  // namespace rocetune::fuzz

#endif  // ROCETUNE_TESTS_FUZZ_FUZZ_UTIL_H_
