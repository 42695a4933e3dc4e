// The controller's inbound agent messages, as a stream handles them: the
// Report fast path (ReportDecoder) and protobuf parsing, then Hello
// registration, Reports into telemetry and Ack/Nack into the fleet.
// Property: bytes the fast path accepts also parse as an AgentMessage.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "controller/fleet/fleet.h"
#include "controller/telemetry/report_decoder.h"
#include "controller/telemetry/telemetry_store.h"
#include "daemon/clock.h"
#include "rocetune/v1/agent.pb.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using rocetune::controller::AgentConnection;

class NullConnection final : public AgentConnection {
 public:
  uint64_t stream_id() const override { return 1; }
  void PushDesiredState(const std::string&, const rocetune::v1::ParameterSet&, uint32_t) override {}
  void Close(const absl::Status&) override {}
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rocetune::controller;  // NOLINT(build/namespaces)
  static rocetune::FakeClock* clock = new rocetune::FakeClock();
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  TelemetryStore telemetry{TelemetryOptions{}};
  EventBus events;
  FleetOptions fopt;
  fopt.plan_probes = false;
  Fleet fleet(clock, &telemetry, nullptr, &events, fopt);

  ReportDecoder decoder;
  const bool fast = decoder.Decode(bytes);
  rocetune::v1::AgentMessage msg;
  const bool parsed = msg.ParseFromArray(data, static_cast<int>(size));
  if (fast) {
    rocetune::fuzz::Check(parsed);
    std::shared_ptr<HostTelemetry> h = telemetry.ForHost("fuzz-host");
    (void)h->AddReport(decoder.head(), decoder.counters(), clock->Now());
  }
  if (!parsed) return 0;
  auto conn = std::make_shared<NullConnection>();
  switch (msg.msg_case()) {
    case rocetune::v1::AgentMessage::kHello: {
      absl::StatusOr<Registration> reg = fleet.Register(msg.hello(), conn);
      if (reg.ok()) fleet.Unregister(reg->host_id, conn->stream_id());
      break;
    }
    case rocetune::v1::AgentMessage::kReport: {
      std::vector<CounterInput> counters;
      CountersOf(msg.report(), &counters);
      (void)telemetry.ForHost("fuzz-host")->AddReport(msg.report(), counters, clock->Now());
      break;
    }
    case rocetune::v1::AgentMessage::kAck:
      fleet.HandleAck("fuzz-host", msg.ack());
      break;
    case rocetune::v1::AgentMessage::kNack:
      fleet.HandleNack("fuzz-host", msg.nack());
      break;
    default:
      break;
  }
  return 0;
}
