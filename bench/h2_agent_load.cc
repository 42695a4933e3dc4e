// What the servers send, and what the generator does with it (seen with
// tshark against grpc_sink and rocetune-controller, gRPC 1.51):
//  * SETTINGS (INITIAL_WINDOW_SIZE, MAX_FRAME_SIZE, MAX_HEADER_LIST_SIZE and
//    gRPC's 0xfe03), later ones too when the server's BDP probing resizes its
//    window: acknowledged; the window size applies to the open stream as a
//    delta, the frame size to our DATA frames.
//  * WINDOW_UPDATE on the connection and on stream 1: send credit. gRPC's
//    server returns stream window as its application reads each message, so
//    under a closed loop every Report comes back as a stream WINDOW_UPDATE of
//    its size (3145 for a 3145-byte DATA payload), sometimes split across two
//    (4626 then 1664: part of the next message announced ahead). Flood relies
//    on this: a Report counts as read once the stream credit covers its last
//    byte; if a server credited only in larger batches, the flood would stall
//    at `flood_inflight` (H2AgentLoadStats::awaiting_credit shows it).
//    With many messages queued (no in-flight bound) it does credit in batches.
//    A Report larger than the window (an 8-port host's is about 83 KB against
//    gRPC's 64 KB default stream window, BDP probing off) goes as gRPC's
//    client sends it: what the window allows at once, the rest as credit
//    returns (the server grows the window once it has read the length).
//  * PING (BDP probes, when enabled): answered with a PING ACK, same payload.
//  * HEADERS (response headers), DATA (the controller's pushes), CONTINUATION:
//    skipped, DATA credited back once a quarter of our window is used.
//  * trailers (HEADERS with END_STREAM), RST_STREAM, GOAWAY, EOF: the stream
//    has failed and is not used again.
#include "bench/h2_agent_load.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "google/protobuf/io/coded_stream.h"
#include "rocetune/v1/agent.pb.h"

namespace rocetune::bench {
namespace {

// HTTP/2 (RFC 9113) frame types, flags and settings used here.
constexpr uint8_t kData = 0x0;
constexpr uint8_t kHeaders = 0x1;
constexpr uint8_t kRstStream = 0x3;
constexpr uint8_t kSettings = 0x4;
constexpr uint8_t kPushPromise = 0x5;
constexpr uint8_t kPing = 0x6;
constexpr uint8_t kGoaway = 0x7;
constexpr uint8_t kWindowUpdate = 0x8;
constexpr uint8_t kFlagEndStream = 0x1;
constexpr uint8_t kFlagAck = 0x1;
constexpr uint8_t kFlagEndHeaders = 0x4;
constexpr uint16_t kSettingsEnablePush = 0x2;
constexpr uint16_t kSettingsInitialWindowSize = 0x4;
constexpr uint16_t kSettingsMaxFrameSize = 0x5;
constexpr size_t kFrameHeader = 9;
constexpr int64_t kDefaultWindow = 65535;
constexpr uint32_t kDefaultMaxFrame = 16384;
constexpr uint32_t kStreamId = 1;  // the one stream of every connection
constexpr size_t kGrpcPrefix = 5;  // compressed flag + 4-byte big-endian length

// Our receive windows (connection and stream): large, so the server's pushes
// never wait for credit; the credit is returned once a quarter is used.
constexpr int64_t kRecvWindow = 16 << 20;
constexpr int64_t kRecvCreditAt = kRecvWindow / 4;

constexpr char kPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

// epoll tags besides connection indexes.
constexpr uint64_t kCommandTag = ~uint64_t{0};
constexpr uint64_t kTimerTag = ~uint64_t{0} - 1;

constexpr double kPaceTickSeconds = 0.0005;
constexpr double kMaxOwed = 1000;  // the pacer's backlog cap, as the gRPC generator's

void PutU32(char* p, uint32_t v) {
  p[0] = static_cast<char>(v >> 24);
  p[1] = static_cast<char>(v >> 16);
  p[2] = static_cast<char>(v >> 8);
  p[3] = static_cast<char>(v);
}

uint32_t GetU32(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return (uint32_t{u[0]} << 24) | (uint32_t{u[1]} << 16) | (uint32_t{u[2]} << 8) | u[3];
}

void PutFrameHeader(char* p, uint32_t length, uint8_t type, uint8_t flags, uint32_t stream) {
  p[0] = static_cast<char>(length >> 16);
  p[1] = static_cast<char>(length >> 8);
  p[2] = static_cast<char>(length);
  p[3] = static_cast<char>(type);
  p[4] = static_cast<char>(flags);
  PutU32(p + 5, stream);
}

void AppendFrameHeader(std::string* out, uint32_t length, uint8_t type, uint8_t flags,
                       uint32_t stream) {
  char h[kFrameHeader];
  PutFrameHeader(h, length, type, flags, stream);
  out->append(h, kFrameHeader);
}

void AppendWindowUpdate(std::string* out, uint32_t stream, uint32_t increment) {
  AppendFrameHeader(out, 4, kWindowUpdate, 0, stream);
  char v[4];
  PutU32(v, increment);
  out->append(v, 4);
}

// HPACK (RFC 7541 5.1) integer with an N-bit prefix; `first` holds the bits above it.
void AppendHpackInt(std::string* out, uint8_t first, int prefix_bits, uint32_t value) {
  const uint32_t max = (1u << prefix_bits) - 1;
  if (value < max) {
    out->push_back(static_cast<char>(first | value));
    return;
  }
  out->push_back(static_cast<char>(first | max));
  value -= max;
  while (value >= 128) {
    out->push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

// A string literal without Huffman coding (RFC 7541 5.2).
void AppendHpackString(std::string* out, absl::string_view s) {
  AppendHpackInt(out, 0x00, 7, static_cast<uint32_t>(s.size()));
  out->append(s.data(), s.size());
}

// Literal header field without indexing, name from the static table (6.2.2).
void AppendLiteralIndexedName(std::string* out, uint32_t name_index, absl::string_view value) {
  AppendHpackInt(out, 0x00, 4, name_index);
  AppendHpackString(out, value);
}

// Literal header field without indexing, new name (6.2.2).
void AppendLiteralNewName(std::string* out, absl::string_view name, absl::string_view value) {
  out->push_back(0x00);
  AppendHpackString(out, name);
  AppendHpackString(out, value);
}

// The request headers of Connect: no Huffman coding and no dynamic table, so
// one block serves every connection.
std::string ConnectHeaderBlock(int port) {
  std::string b;
  b.push_back(static_cast<char>(0x80 | 3));  // :method POST (static index 3)
  b.push_back(static_cast<char>(0x80 | 6));  // :scheme http (static index 6)
  AppendLiteralIndexedName(&b, 4, "/rocetune.v1.AgentService/Connect");  // :path
  AppendLiteralIndexedName(&b, 1, absl::StrCat("127.0.0.1:", port));     // :authority
  AppendLiteralIndexedName(&b, 31, "application/grpc");                  // content-type
  AppendLiteralNewName(&b, "te", "trailers");
  return b;
}

int64_t NowNanos() { return absl::ToUnixNanos(absl::Now()); }

double SteadySeconds() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

enum class ConnState : uint8_t { kNotStarted, kConnecting, kHandshake, kUp, kFailed };
enum class Mode { kIdle, kFlood, kPaced };
enum class Cause { kConnect, kEof, kRst, kGoaway, kEndStream, kProtocol };

struct Conn {
  int fd = -1;
  ConnState state = ConnState::kNotStarted;
  bool settings_seen = false;  // the server's first SETTINGS
  bool want_out = false;       // EPOLLOUT in the interest set
  uint32_t peer_max_frame = kDefaultMaxFrame;
  int64_t peer_initial_window = kDefaultWindow;
  int64_t conn_window = kDefaultWindow;    // send credit, connection
  int64_t stream_window = kDefaultWindow;  // send credit, stream 1
  int64_t recv_unacked_conn = 0;           // DATA received, credit not yet returned
  int64_t recv_unacked_stream = 0;
  uint64_t seq = 0;
  // Stream DATA bytes sent (payload, all messages) and credited back by the
  // server's stream WINDOW_UPDATEs, and the end offsets of the messages sent
  // but not yet credited (flood's in-flight count).
  int64_t stream_bytes_sent = 0;
  int64_t stream_bytes_credited = 0;
  std::vector<int64_t> uncredited_ends;
  std::string out;  // bytes the kernel has not taken yet
  size_t out_off = 0;
  // The rest of a message larger than the stream's send window when it was
  // sent (a real gRPC client sends what the window allows, then the rest as
  // the server, having read the message's length, returns credit).
  std::string pending;
  size_t pending_off = 0;
  std::string in;    // an incomplete frame
  std::string body;  // the Report without seq and timestamps
};

class Generator {
 public:
  Generator(const H2AgentLoadOptions& options, int command_fd, FILE* reply)
      : opt_(options), command_fd_(command_fd), reply_(reply) {}
  ~Generator() {
    for (Conn& c : conns_) {
      if (c.fd >= 0) close(c.fd);
    }
    if (timer_fd_ >= 0) close(timer_fd_);
    if (epoll_fd_ >= 0) close(epoll_fd_);
  }

  absl::StatusOr<H2AgentLoadStats> Run();

 private:
  void StartMore();
  void Start(int i);
  void OnEvent(int i, uint32_t events);
  void OnConnected(Conn& c);
  void OnReadable(Conn& c);
  // Handles one complete frame; false when the connection failed.
  bool OnFrame(Conn& c, uint8_t type, uint8_t flags, uint32_t stream, const char* payload,
               uint32_t length);
  void Credit(Conn& c, int64_t increment);
  void Fail(Conn& c, Cause cause, absl::string_view detail = "");
  void MaybeUp(Conn& c);
  // Sends `data` after what is queued; the kernel's refusal is queued.
  void Write(Conn& c, const char* data, size_t size);
  void Flush(Conn& c);
  void SetWantOut(Conn& c, bool want);
  // Sends one Report if the stream can now (after the rest of the previous
  // one); `flood` also applies the in-flight bound.
  bool TrySendReport(Conn& c, bool flood);
  // Frames as much of `data` as the windows allow as DATA frames and sends
  // them; returns the bytes sent.
  size_t SendData(Conn& c, const char* data, size_t size);
  // Sends what the windows allow of the message the stream has pending.
  void SendPending(Conn& c);
  void FloodFill(Conn& c) {
    while (TrySendReport(c, true)) {
    }
  }
  void OnTimer();
  void SetMode(Mode mode);
  // Returns false on quit.
  bool OnCommands();
  bool OnCommand(absl::string_view line);
  int Index(const Conn& c) const { return static_cast<int>(&c - conns_.data()); }
  // `flags`: a setting's identifier for "in-setting".
  void Trace(const Conn& c, const char* what, uint8_t type, uint32_t flags, uint32_t stream,
             uint32_t length, uint64_t value) const {
    if (opt_.trace && Index(c) == 0) {
      std::fprintf(stderr, "h2trace %.6f %s type=%u flags=0x%x stream=%u len=%u value=%llu\n",
                   SteadySeconds(), what, type, flags, stream, length,
                   static_cast<unsigned long long>(value));
    }
  }

  H2AgentLoadOptions opt_;
  int command_fd_;
  FILE* reply_;
  int epoll_fd_ = -1;
  int timer_fd_ = -1;
  std::vector<Conn> conns_;
  std::string header_block_;
  int next_start_ = 0;
  int in_setup_ = 0;
  bool connected_printed_ = false;
  Mode mode_ = Mode::kIdle;
  double rate_ = 0;
  double owed_ = 0;
  double last_tick_ = 0;
  size_t rr_ = 0;
  std::string commands_;
  std::string scratch_;
  std::string message_;  // the Report being sent, unframed
  rocetune::v1::Report head_;
  H2AgentLoadStats stats_;
};

void Generator::StartMore() {
  while (in_setup_ < opt_.connect_batch && next_start_ < opt_.streams) Start(next_start_++);
}

void Generator::Start(int i) {
  Conn& c = conns_[i];
  ++in_setup_;
  c.state = ConnState::kConnecting;
  c.fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (c.fd < 0) {
    Fail(c, Cause::kConnect, absl::StrCat("socket: ", strerror(errno)));
    return;
  }
  int one = 1;
  setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // as gRPC does
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(opt_.port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(c.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 && errno != EINPROGRESS) {
    Fail(c, Cause::kConnect, absl::StrCat("connect: ", strerror(errno)));
    return;
  }
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLOUT;
  ev.data.u64 = static_cast<uint64_t>(i);
  c.want_out = true;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, c.fd, &ev) != 0) {
    Fail(c, Cause::kConnect, absl::StrCat("epoll_ctl: ", strerror(errno)));
  }
}

void Generator::OnEvent(int i, uint32_t events) {
  Conn& c = conns_[i];
  if (c.state == ConnState::kConnecting) {
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    if (err != 0) {
      Fail(c, Cause::kConnect, absl::StrCat("connect: ", strerror(err)));
      return;
    }
    if ((events & (EPOLLOUT | EPOLLIN)) == 0) return;
    OnConnected(c);
  }
  if (c.state == ConnState::kFailed) return;
  if (events & (EPOLLIN | EPOLLERR | EPOLLHUP)) OnReadable(c);
  if (c.state == ConnState::kFailed) return;
  if (events & EPOLLOUT) {
    Flush(c);
    MaybeUp(c);
  }
  if (c.state == ConnState::kUp) SendPending(c);
  if (mode_ == Mode::kFlood && c.state == ConnState::kUp) FloodFill(c);
}

// Client preface, SETTINGS, the connection window raised, then the Connect
// request's HEADERS and the Hello in one DATA frame.
void Generator::OnConnected(Conn& c) {
  c.state = ConnState::kHandshake;
  std::string b(kPreface, sizeof kPreface - 1);
  AppendFrameHeader(&b, 12, kSettings, 0, 0);
  char setting[6];
  setting[0] = 0;
  setting[1] = static_cast<char>(kSettingsEnablePush);
  PutU32(setting + 2, 0);
  b.append(setting, 6);
  setting[1] = static_cast<char>(kSettingsInitialWindowSize);
  PutU32(setting + 2, static_cast<uint32_t>(kRecvWindow));
  b.append(setting, 6);
  AppendWindowUpdate(&b, 0, static_cast<uint32_t>(kRecvWindow - kDefaultWindow));
  AppendFrameHeader(&b, static_cast<uint32_t>(header_block_.size()), kHeaders, kFlagEndHeaders,
                    kStreamId);
  b += header_block_;
  const std::string hello = opt_.hello(opt_.first + Index(c));
  const int64_t payload = static_cast<int64_t>(kGrpcPrefix + hello.size());
  // The peer's defaults apply until its SETTINGS arrive: a Hello fits.
  if (payload > c.peer_max_frame || payload > c.conn_window || payload > c.stream_window) {
    Fail(c, Cause::kProtocol, "Hello larger than the default frame size / window");
    return;
  }
  AppendFrameHeader(&b, static_cast<uint32_t>(payload), kData, 0, kStreamId);
  char prefix[kGrpcPrefix] = {0};
  PutU32(prefix + 1, static_cast<uint32_t>(hello.size()));
  b.append(prefix, kGrpcPrefix);
  b += hello;
  c.conn_window -= payload;
  c.stream_window -= payload;
  c.stream_bytes_sent += payload;
  c.uncredited_ends.push_back(c.stream_bytes_sent);
  Write(c, b.data(), b.size());
}

void Generator::OnReadable(Conn& c) {
  char buf[65536];
  ssize_t n = recv(c.fd, buf, sizeof buf, 0);
  if (n == 0) {
    Fail(c, Cause::kEof, "EOF");
    return;
  }
  if (n < 0) {
    if (errno == EAGAIN || errno == EINTR) return;
    Fail(c, Cause::kEof, strerror(errno));
    return;
  }
  const char* p = buf;
  size_t avail = static_cast<size_t>(n);
  if (!c.in.empty()) {
    c.in.append(buf, avail);
    p = c.in.data();
    avail = c.in.size();
  }
  size_t used = 0;
  while (avail - used >= kFrameHeader) {
    const char* h = p + used;
    const auto* u = reinterpret_cast<const unsigned char*>(h);
    const uint32_t length = (uint32_t{u[0]} << 16) | (uint32_t{u[1]} << 8) | u[2];
    if (avail - used < kFrameHeader + length) break;
    const uint32_t stream = GetU32(h + 5) & 0x7fffffff;
    if (!OnFrame(c, u[3], u[4], stream, h + kFrameHeader, length)) return;
    used += kFrameHeader + length;
  }
  if (c.in.empty()) {
    c.in.assign(p + used, avail - used);
  } else {
    c.in.erase(0, used);
  }
  // Credit for the server's DATA, in one WINDOW_UPDATE per scope once enough is used.
  if (c.recv_unacked_conn >= kRecvCreditAt) {
    AppendWindowUpdate(&c.out, 0, static_cast<uint32_t>(c.recv_unacked_conn));
    c.recv_unacked_conn = 0;
    ++stats_.window_updates_out;
  }
  if (c.recv_unacked_stream >= kRecvCreditAt) {
    AppendWindowUpdate(&c.out, kStreamId, static_cast<uint32_t>(c.recv_unacked_stream));
    c.recv_unacked_stream = 0;
    ++stats_.window_updates_out;
  }
  Flush(c);
  MaybeUp(c);
}

bool Generator::OnFrame(Conn& c, uint8_t type, uint8_t flags, uint32_t stream, const char* payload,
                        uint32_t length) {
  if (type < 10) {
    ++stats_.frames_in[type];
  } else {
    ++stats_.frames_in_other;
  }
  switch (type) {
    case kData:
      Trace(c, "in", type, flags, stream, length, 0);
      stats_.data_bytes_in += length;
      c.recv_unacked_conn += length;
      if (stream == kStreamId) c.recv_unacked_stream += length;
      if (flags & kFlagEndStream) {
        Fail(c, Cause::kEndStream, "DATA with END_STREAM");
        return false;
      }
      return true;
    case kHeaders:
      // Response headers: skipped (we never decode, so HPACK state does not
      // matter), CONTINUATION likewise. With END_STREAM they are trailers.
      Trace(c, "in", type, flags, stream, length, 0);
      if (flags & kFlagEndStream) {
        Fail(c, Cause::kEndStream, "trailers (HEADERS with END_STREAM)");
        return false;
      }
      return true;
    case kRstStream:
      Trace(c, "in", type, flags, stream, length, length >= 4 ? GetU32(payload) : 0);
      Fail(c, Cause::kRst, absl::StrCat("RST_STREAM error ", length >= 4 ? GetU32(payload) : 0));
      return false;
    case kSettings: {
      if (flags & kFlagAck) {
        Trace(c, "in", type, flags, stream, length, 0);
        return true;
      }
      if (length % 6 != 0) {
        Fail(c, Cause::kProtocol, "SETTINGS length");
        return false;
      }
      for (uint32_t off = 0; off < length; off += 6) {
        const auto* u = reinterpret_cast<const unsigned char*>(payload + off);
        const uint16_t id = static_cast<uint16_t>((u[0] << 8) | u[1]);
        const uint32_t value = GetU32(payload + off + 2);
        Trace(c, "in-setting", type, id, stream, length, value);
        if (id == kSettingsInitialWindowSize) {
          // Applies to the open stream as a delta (RFC 9113 6.9.2).
          c.stream_window += static_cast<int64_t>(value) - c.peer_initial_window;
          c.peer_initial_window = value;
        } else if (id == kSettingsMaxFrameSize) {
          c.peer_max_frame = value;
        }
      }
      AppendFrameHeader(&c.out, 0, kSettings, kFlagAck, 0);
      c.settings_seen = true;
      return true;
    }
    case kPushPromise:
      Fail(c, Cause::kProtocol, "PUSH_PROMISE with push disabled");
      return false;
    case kPing:
      Trace(c, "in", type, flags, stream, length, 0);
      if (!(flags & kFlagAck) && length == 8) {
        AppendFrameHeader(&c.out, 8, kPing, kFlagAck, 0);
        c.out.append(payload, 8);
      }
      return true;
    case kGoaway: {
      Trace(c, "in", type, flags, stream, length, length >= 8 ? GetU32(payload + 4) : 0);
      std::string detail = absl::StrCat("GOAWAY error ", length >= 8 ? GetU32(payload + 4) : 0);
      if (length > 8) absl::StrAppend(&detail, " ", absl::string_view(payload + 8, length - 8));
      Fail(c, Cause::kGoaway, detail);
      return false;
    }
    case kWindowUpdate: {
      if (length != 4) {
        Fail(c, Cause::kProtocol, "WINDOW_UPDATE length");
        return false;
      }
      const int64_t increment = GetU32(payload) & 0x7fffffff;
      Trace(c, "in", type, flags, stream, length, static_cast<uint64_t>(increment));
      if (stream == 0) {
        c.conn_window += increment;
      } else if (stream == kStreamId) {
        c.stream_window += increment;
        Credit(c, increment);
      }
      return true;
    }
    default:  // PRIORITY, CONTINUATION, unknown: nothing to do
      Trace(c, "in", type, flags, stream, length, 0);
      return true;
  }
}

// The server returned `increment` bytes of stream window: the messages that
// end within what it has now credited count as read. The credit is not always
// message-aligned (seen: 4677 then 1613 for two 3145-byte Reports: part of the
// next message announced ahead of it), so a surplus is kept, not clamped to what
// was sent: the next message then counts as read once its remainder arrives.
void Generator::Credit(Conn& c, int64_t increment) {
  c.stream_bytes_credited += increment;
  size_t n = 0;
  while (n < c.uncredited_ends.size() && c.uncredited_ends[n] <= c.stream_bytes_credited) ++n;
  c.uncredited_ends.erase(c.uncredited_ends.begin(), c.uncredited_ends.begin() + n);
}

void Generator::Fail(Conn& c, Cause cause, absl::string_view detail) {
  if (c.state == ConnState::kFailed) return;
  const bool was_setup = c.state == ConnState::kConnecting || c.state == ConnState::kHandshake;
  c.state = ConnState::kFailed;
  ++stats_.failed;
  switch (cause) {
    case Cause::kConnect:
      ++stats_.connect_errors;
      break;
    case Cause::kEof:
      ++stats_.eof;
      break;
    case Cause::kRst:
      ++stats_.rst_stream;
      break;
    case Cause::kGoaway:
      ++stats_.goaway;
      break;
    case Cause::kEndStream:
      ++stats_.end_stream;
      break;
    case Cause::kProtocol:
      ++stats_.protocol_errors;
      break;
  }
  if (stats_.first_failure.empty()) {
    stats_.first_failure = absl::StrCat("stream ", opt_.first + Index(c), ": ", detail);
  }
  if (c.fd >= 0) close(c.fd);  // also leaves the epoll set
  c.fd = -1;
  std::string().swap(c.out);
  std::string().swap(c.in);
  std::string().swap(c.body);
  std::string().swap(c.pending);
  c.pending_off = 0;
  c.out_off = 0;
  if (was_setup) {
    --in_setup_;
    StartMore();
  }
}

void Generator::MaybeUp(Conn& c) {
  if (c.state != ConnState::kHandshake || !c.settings_seen || c.out_off < c.out.size()) return;
  c.state = ConnState::kUp;
  ++stats_.up;
  --in_setup_;
  StartMore();
}

void Generator::Write(Conn& c, const char* data, size_t size) {
  if (c.out_off < c.out.size()) {
    c.out.append(data, size);
    return;
  }
  ++stats_.send_calls;
  ssize_t n = send(c.fd, data, size, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n < 0) {
    if (errno != EAGAIN && errno != EINTR) {
      Fail(c, Cause::kEof, absl::StrCat("send: ", strerror(errno)));
      return;
    }
    n = 0;
  }
  if (static_cast<size_t>(n) == size) return;
  ++stats_.partial_sends;
  c.out.assign(data + n, size - static_cast<size_t>(n));
  c.out_off = 0;
  SetWantOut(c, true);
}

void Generator::Flush(Conn& c) {
  while (c.out_off < c.out.size()) {
    ++stats_.send_calls;
    ssize_t n =
        send(c.fd, c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) break;
      Fail(c, Cause::kEof, absl::StrCat("send: ", strerror(errno)));
      return;
    }
    c.out_off += static_cast<size_t>(n);
  }
  if (c.out_off == c.out.size()) {
    c.out.clear();
    c.out_off = 0;
    SetWantOut(c, false);
  } else {
    SetWantOut(c, true);
  }
}

void Generator::SetWantOut(Conn& c, bool want) {
  if (c.want_out == want || c.fd < 0) return;
  c.want_out = want;
  epoll_event ev{};
  ev.events = EPOLLIN | (want ? EPOLLOUT : 0u);
  ev.data.u64 = static_cast<uint64_t>(Index(c));
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd, &ev);
}

bool Generator::TrySendReport(Conn& c, bool flood) {
  if (c.state != ConnState::kUp || c.out_off < c.out.size()) return false;
  if (!c.pending.empty()) {
    // The rest of the previous Report first (counted once, when it was split).
    SendPending(c);
    if (!c.pending.empty() || c.state != ConnState::kUp || c.out_off < c.out.size()) return false;
  }
  if (flood && static_cast<int>(c.uncredited_ends.size()) >= opt_.flood_inflight) return false;
  if (std::min(c.conn_window, c.stream_window) <= 0) {
    ++stats_.window_blocked;
    return false;
  }
  using google::protobuf::io::CodedOutputStream;
  const int64_t now = NowNanos();
  head_.set_seq(c.seq + 1);
  head_.set_start_unix_nanos(now - 1'000'000'000);
  head_.set_end_unix_nanos(now);
  const size_t head_size = head_.ByteSizeLong();
  const size_t report_size = head_size + c.body.size();
  // AgentMessage{report = 2}: tag, length, then the Report's bytes.
  const size_t msg_size =
      1 + CodedOutputStream::VarintSize32(static_cast<uint32_t>(report_size)) + report_size;
  const size_t payload = kGrpcPrefix + msg_size;
  message_.resize(payload);
  char* const msg = message_.data();
  msg[0] = 0;  // not compressed
  PutU32(msg + 1, static_cast<uint32_t>(msg_size));
  auto* p = reinterpret_cast<uint8_t*>(msg + kGrpcPrefix);
  *p++ = (rocetune::v1::AgentMessage::kReportFieldNumber << 3) | 2;
  p = CodedOutputStream::WriteVarint32ToArray(static_cast<uint32_t>(report_size), p);
  p = head_.SerializeWithCachedSizesToArray(p);
  std::memcpy(p, c.body.data(), c.body.size());
  ++c.seq;
  c.stream_bytes_sent += static_cast<int64_t>(payload);
  c.uncredited_ends.push_back(c.stream_bytes_sent);
  ++stats_.sent;
  const size_t sent = SendData(c, message_.data(), payload);
  if (c.state != ConnState::kUp) return false;  // failed while sending: nothing to keep
  if (sent < payload) {
    ++stats_.split_by_window;
    c.pending.assign(message_.data() + sent, payload - sent);
    c.pending_off = 0;
  }
  return c.state == ConnState::kUp;
}

size_t Generator::SendData(Conn& c, const char* data, size_t size) {
  const int64_t window = std::min(c.conn_window, c.stream_window);
  if (window <= 0 || size == 0) return 0;
  const size_t n = std::min(size, static_cast<size_t>(window));
  const size_t frames = (n + c.peer_max_frame - 1) / c.peer_max_frame;
  scratch_.resize(frames * kFrameHeader + n);
  size_t dst = 0, src = 0;
  while (src < n) {
    const size_t chunk = std::min<size_t>(n - src, c.peer_max_frame);
    PutFrameHeader(scratch_.data() + dst, static_cast<uint32_t>(chunk), kData, 0, kStreamId);
    std::memcpy(scratch_.data() + dst + kFrameHeader, data + src, chunk);
    dst += kFrameHeader + chunk;
    src += chunk;
  }
  c.conn_window -= static_cast<int64_t>(n);
  c.stream_window -= static_cast<int64_t>(n);
  Write(c, scratch_.data(), scratch_.size());
  return n;
}

void Generator::SendPending(Conn& c) {
  if (c.pending.empty() || c.state != ConnState::kUp || c.out_off < c.out.size()) return;
  c.pending_off += SendData(c, c.pending.data() + c.pending_off, c.pending.size() - c.pending_off);
  if (c.pending_off == c.pending.size()) {
    c.pending.clear();
    c.pending_off = 0;
  }
}

void Generator::OnTimer() {
  uint64_t expirations;
  if (read(timer_fd_, &expirations, sizeof expirations) < 0) return;
  if (mode_ != Mode::kPaced || conns_.empty()) return;
  const double now = SteadySeconds();
  owed_ += rate_ * (now - last_tick_);
  last_tick_ = now;
  // Sends due now, round-robin; a stream that cannot send is skipped (the
  // offered load then falls short, visible in the achieved rate).
  size_t tries = 0;
  while (owed_ >= 1 && tries < conns_.size()) {
    Conn& c = conns_[rr_++ % conns_.size()];
    ++tries;
    if (TrySendReport(c, false)) owed_ -= 1;
  }
  if (owed_ > kMaxOwed) owed_ = kMaxOwed;
}

void Generator::SetMode(Mode mode) {
  mode_ = mode;
  owed_ = 0;
  last_tick_ = SteadySeconds();
  itimerspec its{};
  if (mode == Mode::kPaced) {
    its.it_interval.tv_nsec = static_cast<long>(kPaceTickSeconds * 1e9);
    its.it_value = its.it_interval;
  }
  timerfd_settime(timer_fd_, 0, &its, nullptr);
  if (mode == Mode::kFlood) {
    for (Conn& c : conns_) FloodFill(c);
  }
}

bool Generator::OnCommand(absl::string_view line) {
  line = absl::StripAsciiWhitespace(line);
  if (line == "flood") {
    SetMode(Mode::kFlood);
  } else if (absl::ConsumePrefix(&line, "pace ")) {
    double r = 0;
    if (absl::SimpleAtod(line, &r)) {
      rate_ = r;
      SetMode(Mode::kPaced);
    }
  } else if (line == "idle") {
    SetMode(Mode::kIdle);
  } else if (line == "sent") {
    std::fprintf(reply_, "SENT %llu\n", static_cast<unsigned long long>(stats_.sent));
    std::fflush(reply_);
  } else if (line == "quit") {
    return false;
  }
  return true;
}

bool Generator::OnCommands() {
  char buf[4096];
  ssize_t n = read(command_fd_, buf, sizeof buf);
  if (n < 0) return errno == EAGAIN || errno == EINTR;
  if (n == 0) return false;  // EOF: as quit
  commands_.append(buf, static_cast<size_t>(n));
  size_t nl;
  while ((nl = commands_.find('\n')) != std::string::npos) {
    const std::string line = commands_.substr(0, nl);
    commands_.erase(0, nl + 1);
    if (!OnCommand(line)) return false;
  }
  return true;
}

absl::StatusOr<H2AgentLoadStats> Generator::Run() {
  if (opt_.streams < 0 || !opt_.hello || !opt_.report_body || opt_.flood_inflight < 1 ||
      opt_.connect_batch < 1) {
    return absl::InvalidArgumentError("H2AgentLoadOptions: bad streams/hello/report_body/bounds");
  }
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  timer_fd_ = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (epoll_fd_ < 0 || timer_fd_ < 0) {
    return absl::InternalError(absl::StrCat("epoll/timerfd: ", strerror(errno)));
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kTimerTag;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, timer_fd_, &ev) != 0) {
    return absl::InternalError(absl::StrCat("epoll_ctl(timerfd): ", strerror(errno)));
  }
  header_block_ = ConnectHeaderBlock(opt_.port);
  conns_.resize(static_cast<size_t>(opt_.streams));
  for (int i = 0; i < opt_.streams; ++i) conns_[i].body = opt_.report_body(opt_.first + i);
  const absl::Time deadline = absl::Now() + opt_.connect_deadline;
  StartMore();
  std::vector<epoll_event> events(1024);
  for (;;) {
    if (!connected_printed_ &&
        (stats_.up + stats_.failed >= opt_.streams || absl::Now() >= deadline)) {
      std::fprintf(reply_, "CONNECTED %d %d\n", stats_.up, stats_.failed);
      std::fflush(reply_);
      connected_printed_ = true;
      ev.events = EPOLLIN;
      ev.data.u64 = kCommandTag;
      if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, command_fd_, &ev) != 0) {
        return absl::InternalError(absl::StrCat("epoll_ctl(commands): ", strerror(errno)));
      }
    }
    const int n = epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()),
                             connected_printed_ ? -1 : 50);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(absl::StrCat("epoll_wait: ", strerror(errno)));
    }
    for (int k = 0; k < n; ++k) {
      const uint64_t tag = events[k].data.u64;
      if (tag == kCommandTag) {
        if (!OnCommands()) {
          for (const Conn& c : conns_) {
            if (c.state == ConnState::kUp && !c.uncredited_ends.empty()) ++stats_.awaiting_credit;
          }
          std::fprintf(stderr, "%s\n", stats_.Summary().c_str());
          return stats_;
        }
      } else if (tag == kTimerTag) {
        OnTimer();
      } else {
        OnEvent(static_cast<int>(tag), events[k].events);
      }
    }
  }
}

}  // namespace

std::string H2AgentLoadStats::Summary() const {
  static const char* const kNames[10] = {"data",          "headers",     "priority", "rst_stream",
                                         "settings",      "push",        "ping",     "goaway",
                                         "window_update", "continuation"};
  std::string s = absl::StrFormat(
      "h2_agent_load: up=%d failed=%d (connect=%d eof=%d rst_stream=%d goaway=%d end_stream=%d "
      "protocol=%d) sent=%llu send_calls=%llu partial_sends=%llu window_blocked=%llu "
      "split_by_window=%llu "
      "window_updates_out=%llu data_bytes_in=%llu awaiting_credit=%d frames_in:",
      up, failed, connect_errors, eof, rst_stream, goaway, end_stream, protocol_errors,
      static_cast<unsigned long long>(sent), static_cast<unsigned long long>(send_calls),
      static_cast<unsigned long long>(partial_sends),
      static_cast<unsigned long long>(window_blocked),
      static_cast<unsigned long long>(split_by_window),
      static_cast<unsigned long long>(window_updates_out),
      static_cast<unsigned long long>(data_bytes_in), awaiting_credit);
  for (int t = 0; t < 10; ++t) {
    absl::StrAppend(&s, " ", kNames[t], "=", frames_in[t]);
  }
  absl::StrAppend(&s, " other=", frames_in_other);
  if (!first_failure.empty()) absl::StrAppend(&s, " first_failure=\"", first_failure, "\"");
  return s;
}

absl::StatusOr<H2AgentLoadStats> RunH2AgentLoad(const H2AgentLoadOptions& options, int command_fd,
                                                FILE* reply) {
  Generator g(options, command_fd, reply);
  return g.Run();
}

}  // namespace rocetune::bench
