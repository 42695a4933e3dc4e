#include "agent/probe/probe_stack.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "agent/probe/udp_prober.h"
#include "agent/probe/verbs_prober.h"
#include "daemon/logging.h"

namespace rocetune {
namespace {

absl::StatusOr<ProbeStack> StartVerbs(const ProbeStackOptions& options) {
  VerbsProber::Options po;
  po.endpoint = options.verbs;
  absl::StatusOr<std::unique_ptr<VerbsProber>> prober = VerbsProber::Create(po);
  if (!prober.ok()) return prober.status();
  absl::StatusOr<std::unique_ptr<VerbsResponder>> responder = VerbsResponder::Start(options.verbs);
  if (!responder.ok()) return responder.status();
  ProbeStack stack;
  stack.capability = "probe.verbs";
  stack.responder_address =
      absl::StrCat((*responder)->gid(), "/", (*responder)->qpn(), "/", (*responder)->qkey());
  stack.prober = *std::move(prober);
  stack.verbs_responder = *std::move(responder);
  return stack;
}

absl::StatusOr<ProbeStack> StartUdp(const ProbeStackOptions& options) {
  absl::StatusOr<std::unique_ptr<UdpProber>> prober = UdpProber::Create({});
  if (!prober.ok()) return prober.status();
  UdpResponder::Options ro;
  ro.listen_address = options.udp_listen;
  absl::StatusOr<std::unique_ptr<UdpResponder>> responder = UdpResponder::Start(ro);
  if (!responder.ok()) return responder.status();
  ProbeStack stack;
  stack.capability = "probe.udp";
  stack.responder_address = (*responder)->address();
  stack.prober = *std::move(prober);
  stack.udp_responder = *std::move(responder);
  return stack;
}

}  // namespace

absl::StatusOr<ProbeStack> StartProbeStack(const ProbeStackOptions& options) {
  if (options.transport == "verbs") return StartVerbs(options);
  if (options.transport == "udp") return StartUdp(options);
  if (options.transport != "auto") {
    return absl::InvalidArgumentError(absl::StrCat("probe transport \"", options.transport,
                                                   "\" unknown (want auto, verbs or udp)"));
  }
  absl::StatusOr<ProbeStack> verbs = StartVerbs(options);
  if (verbs.ok()) return verbs;
  LogOnce("probe.stack.fallback_udp", LogLevel::kInfo, "verbs probes unavailable; probing over UDP",
          {{"reason", std::string(verbs.status().message())}});
  return StartUdp(options);
}

}  // namespace rocetune
