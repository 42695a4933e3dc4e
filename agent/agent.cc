#include "agent/agent.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <optional>
#include <random>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/report_wire.h"
#include "daemon/address.h"
#include "daemon/logging.h"
#include "grpcpp/grpcpp.h"
#include "model/cc_params.h"

ABSL_FLAG(int64_t, report_buffer_max, 300,
          "Reports of rounds taken while the controller is unreachable held for the reconnect "
          "(the newest; older ones are dropped and counted). 0 holds none.");
ABSL_FLAG(int64_t, report_buffer_max_bytes, int64_t{4} << 20,
          "Bytes (encoded) the held reports may take at most.");
ABSL_FLAG(absl::Duration, stream_stall_timeout, absl::Seconds(5),
          "A write to the controller not completed for this long ends the stream; the agent "
          "then samples, guards and holds reports as when disconnected.");

namespace rocetune {

void ConnectionOptionsFromFlags(AgentOptions* options) {
  options->report_buffer_max =
      static_cast<size_t>(std::max<int64_t>(0, absl::GetFlag(FLAGS_report_buffer_max)));
  options->report_buffer_max_bytes =
      static_cast<size_t>(std::max<int64_t>(0, absl::GetFlag(FLAGS_report_buffer_max_bytes)));
  options->stall_timeout = absl::GetFlag(FLAGS_stream_stall_timeout);
}

namespace {

// Statuses with which the controller refuses this agent's identity or hands
// its host to another stream: retrying soon would only flap.
bool IsRefusal(const absl::Status& s) {
  return s.code() == absl::StatusCode::kPermissionDenied ||
         s.code() == absl::StatusCode::kUnauthenticated ||
         s.code() == absl::StatusCode::kAlreadyExists || s.code() == absl::StatusCode::kAborted;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Agent>> Agent::Create(AgentOptions options, HostSeams seams) {
  if (options.host_id.empty()) {
    return absl::InvalidArgumentError("agent: host_id is required");
  }
  if (seams.discovery == nullptr || seams.counters == nullptr || seams.clock == nullptr) {
    return absl::InvalidArgumentError("agent: discovery, counters and clock seams are required");
  }
  if (options.drift_interval < absl::Milliseconds(10)) {
    return absl::InvalidArgumentError(absl::StrCat("agent: drift interval ",
                                                   absl::FormatDuration(options.drift_interval),
                                                   " is below the 10ms minimum"));
  }
  if (options.sample_interval < absl::Milliseconds(10)) {
    return absl::InvalidArgumentError(absl::StrCat("agent: sample interval ",
                                                   absl::FormatDuration(options.sample_interval),
                                                   " is below the 10ms minimum"));
  }
  std::string target = options.controller;
  if (options.tls.enabled()) {
    if (absl::Status s = CheckTlsOptions(options.tls); !s.ok()) return s;
  } else {
    if (!options.insecure_loopback) {
      return absl::FailedPreconditionError(
          "agent: no TLS files given and plaintext not allowed (--insecure_loopback)");
    }
    absl::StatusOr<std::string> resolved = ResolveLoopback(options.controller, "--controller");
    if (!resolved.ok()) return resolved.status();
    target = *resolved;
  }
  auto agent = std::unique_ptr<Agent>(new Agent(std::move(options), seams));
  if (absl::Status s = agent->MakeChannel(target); !s.ok()) return s;
  absl::StatusOr<std::unique_ptr<Sampler>> sampler =
      Sampler::Create(seams.counters, seams.clock, agent->options_.sample_interval);
  if (!sampler.ok()) return sampler.status();
  agent->sampler_ = std::move(*sampler);
  if (absl::Status s = agent->InitParameters(); !s.ok()) return s;
  agent->sampling_progress_ =
      Progress::Register("agent_sampling", ProgressDeadline(agent->options_.sample_interval));
  return agent;
}

Agent::Agent(AgentOptions options, HostSeams seams) : options_(std::move(options)), seams_(seams) {}

absl::Status Agent::MakeChannel(const std::string& target) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
              static_cast<int>(absl::ToInt64Milliseconds(options_.reconnect_min)));
  // The channel retries connecting at least every second: an attempt of
  // Run()'s loop made while the channel waits out its own backoff fails at
  // once, so a long channel backoff stacked on the loop's own (both once 10 s)
  // kept agents away for 11-17 s after a controller restart.
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
              static_cast<int>(std::clamp<int64_t>(
                  absl::ToInt64Milliseconds(options_.reconnect_max) / 2, 100, 1000)));
  // After a failed connection the channel asks its resolver for the address
  // again before the next attempt, and the DNS resolver answers at most once
  // per this interval. With gRPC 1.51's default, attempts to reach a stopped
  // controller came 5 s apart (seen with strace), on top of Run()'s backoff.
  args.SetInt(GRPC_ARG_DNS_MIN_TIME_BETWEEN_RESOLUTIONS_MS, 500);
  // A controller that vanished without a FIN (power loss, a cut path) is
  // noticed within about 40 s: HTTP/2 pings every 30 s, 10 s to answer. The
  // stream then fails and the agent reconnects; meanwhile it keeps sampling.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 30'000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10'000);
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  if (options_.tls.enabled()) {
    absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> tls =
        MakeChannelCredentials(options_.tls, &args);
    if (!tls.ok()) return tls.status();
    creds = *std::move(tls);
  }
  channel_ = grpc::CreateCustomChannel(target, creds, args);
  connect_method_ = absl::StrCat("/", v1::AgentService::service_full_name(), "/Connect");
  connect_ = std::make_unique<grpc::internal::RpcMethod>(
      connect_method_.c_str(), grpc::internal::RpcMethod::BIDI_STREAMING, channel_);
  return absl::OkStatus();
}

Agent::~Agent() { Stop(); }

void Agent::Stop() {
  if (stopping_.exchange(true)) return;
  stopped_.Notify();
  absl::MutexLock lock(&mu_);
  if (active_context_ != nullptr) active_context_->TryCancel();
}

AgentStats Agent::stats() const {
  AgentStats out;
  {
    absl::MutexLock lock(&mu_);
    out = stats_;
  }
  out.applied_version = AppliedVersion();
  return out;
}

std::string Agent::AppliedVersion() const {
  std::string v = owner_ != nullptr ? owner_->expected_version() : "";
  return v == "baseline" ? "" : v;
}

absl::Status Agent::InitParameters() {
  if (options_.state_dir.empty()) {
    // Embedded agents (the fabric simulator) need no persistence across runs: a
    // private temp dir holds the journal for this process's lifetime.
    std::string tmpl = absl::StrCat("/tmp/rocetune-agent-", options_.host_id, "-XXXXXX");
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (mkdtemp(buf.data()) == nullptr) {
      return absl::InternalError(absl::StrCat("agent: cannot create a state dir from ", tmpl));
    }
    options_.state_dir = buf.data();
    LogDebug("no state_dir given; journaling in a temp dir", {{"dir", options_.state_dir}});
  }
  absl::StatusOr<std::vector<v1::NicDevice>> devices = seams_.discovery->Discover();
  if (!devices.ok()) return devices.status();
  std::map<std::string, ApplyTarget> targets;
  for (const auto& d : *devices) {
    ApplyTarget t;
    t.cc = seams_.cc;
    t.pfc = seams_.pfc;
    for (const auto& p : d.ports()) {
      if (t.netdev.empty() && !p.netdev().empty()) t.netdev = p.netdev();
      t.speed_mbps = std::max<int64_t>(t.speed_mbps, p.speed_mbps());
    }
    targets[d.name()] = t;
  }
  if (devices->empty()) {
    LogOnce("agent.no_rdma_devices", LogLevel::kInfo,
            "no RDMA device on this host; reporting an empty inventory");
  }
  if (seams_.applier != nullptr) {
    active_applier_ = seams_.applier;
  } else {
    applier_ = std::make_unique<Applier>(std::move(targets));
    active_applier_ = applier_.get();
  }
  journal_ = std::make_unique<LkgJournal>(options_.state_dir);
  if (absl::Status s = journal_->Load(); !s.ok()) {
    // A corrupt journal is not fatal: the NIC's values are the truth; say so.
    LogError("last-known-good journal unreadable; starting from the NIC's values",
             {{"error", std::string(s.message())}});
  }
  std::vector<std::string> read_errors;
  v1::ParameterSet current = active_applier_->ReadCurrent(&read_errors);
  for (const auto& e : read_errors) {
    LogOnce(absl::StrCat("agent.read_params:", e), LogLevel::kWarning,
            "cannot read device parameters", {{"error", e}});
  }
  guard_ =
      std::make_unique<LocalGuard>(options_.guard, seams_.clock, active_applier_, journal_.get());
  intent_ = std::make_unique<ApplyIntent>(options_.state_dir);
  owner_ = std::make_unique<NicOwner>(active_applier_, journal_.get(), guard_.get(), intent_.get());
  std::optional<LkgEntry> lkg = journal_->Get();
  if (!lkg.has_value()) {
    if (current.devices_size() > 0) {
      if (absl::Status s = journal_->Save("baseline", current); !s.ok()) {
        LogWarning("cannot record the baseline parameter set",
                   {{"error", std::string(s.message())}});
      }
    }
    owner_->SetExpected("baseline", current);
  } else {
    std::vector<std::string> drift = journal_->Drift(current);
    for (const auto& d : drift) LogWarning("parameter drift from last-known-good", {{"drift", d}});
    absl::MutexLock lock(&mu_);
    drift_ = std::move(drift);
    owner_->SetExpected(lkg->version, lkg->parameters);
  }
  ResolveInterruptedApply(&current);
  if (options_.metrics != nullptr) options_.metrics->SetParameters(current);
  return absl::OkStatus();
}

absl::Duration Agent::ProgressDeadline(absl::Duration sample_interval) {
  return std::max(3 * sample_interval, absl::Seconds(10));
}

absl::Duration Agent::SampleInterval() const {
  absl::MutexLock lock(&live_mu_);
  return options_.sample_interval;
}

absl::Duration Agent::DriftInterval() const {
  absl::MutexLock lock(&live_mu_);
  return options_.drift_interval;
}

void Agent::SetIntervals(absl::Duration sample_interval, absl::Duration drift_interval) {
  {
    absl::MutexLock lock(&live_mu_);
    options_.sample_interval = sample_interval;
    options_.drift_interval = drift_interval;
  }
  if (sampling_progress_ != nullptr) {
    sampling_progress_->SetDeadline(ProgressDeadline(sample_interval));
  }
}

void Agent::SetLabels(std::vector<std::pair<std::string, std::string>> labels) {
  absl::MutexLock lock(&live_mu_);
  options_.labels = std::move(labels);
}

void Agent::SetGuardOptions(const LocalGuardOptions& guard) { guard_->SetOptions(guard); }

void Agent::ResolveInterruptedApply(v1::ParameterSet* current) {
  absl::StatusOr<std::optional<NicOwner::Resolution>> r = owner_->ResolveInterruptedApply();
  if (!r.ok()) {
    LogError("interrupted apply: cannot tell or restore the host's parameter set",
             {{"error", std::string(r.status().message())}});
    return;
  }
  if (!r->has_value()) return;
  const NicOwner::Resolution& res = **r;
  const char* says = res.found == IntentOutcome::kNew   ? "the host is entirely on the new set"
                     : res.found == IntentOutcome::kOld ? "the host is entirely on the old set"
                                                        : "the host was mixed; the old set is "
                                                          "restored, the host is on the old set";
  LogWarning(absl::StrCat("interrupted apply: the previous process ended during an apply; ", says),
             {{"found", IntentOutcomeName(res.found)},
              {"on", res.found == IntentOutcome::kNew ? "new" : "old"},
              {"from_version", res.from_version},
              {"to_version", res.to_version},
              {"version", res.version}});
  *current = owner_->ReadCurrent();
  absl::MutexLock lock(&mu_);
  drift_.clear();
}

v1::AgentMessage Agent::ApplyDesiredState(const v1::DesiredState& ds,
                                          const std::vector<std::string>& refused) {
  v1::AgentMessage reply;
  const std::string kept = AppliedVersion();
  if (options_.metrics != nullptr) options_.metrics->SetDesiredVersion(ds.version());
  if (IsGuardRejected(ds.version())) {
    // The controller may push it again before the guard event (held while
    // disconnected) reaches it: refuse, so the host does not go back into
    // the storm; the NACK marks the version rejected there too.
    v1::Nack* nack = reply.mutable_nack();
    nack->set_kind(v1::DESIRED_STATE);
    nack->set_version(ds.version());
    nack->set_nonce(ds.nonce());
    nack->set_error(absl::StrCat("version ", ds.version(),
                                 " was rolled back by this host's local guard; not applied again"));
    nack->set_kept_version(kept);
    LogWarning("refused a version the local guard rolled back", {{"version", ds.version()}});
    return reply;
  }
  absl::StatusOr<ApplyResult> result =
      refused.empty()
          ? owner_->Apply(ds.version(), ds.parameters())
          : absl::StatusOr<ApplyResult>(absl::InvalidArgumentError(absl::StrCat(
                "parameter set rejected, nothing written: ", absl::StrJoin(refused, "; "))));
  if (options_.metrics != nullptr) options_.metrics->RecordApply(result.ok());
  if (!result.ok()) {
    v1::Nack* nack = reply.mutable_nack();
    nack->set_kind(v1::DESIRED_STATE);
    nack->set_version(ds.version());
    nack->set_nonce(ds.nonce());
    nack->set_error(std::string(result.status().ToString()));
    nack->set_kept_version(kept);
    LogWarning("refused desired state",
               {{"version", ds.version()}, {"error", std::string(result.status().message())}});
    absl::MutexLock lock(&mu_);
    ++stats_.nacks;
    return reply;
  }
  for (const auto& d : result->disruptive) {
    LogWarning("disruptive parameter change applied", {{"change", d}});
  }
  if (options_.metrics != nullptr) options_.metrics->SetParameters(result->applied);
  check_drift_now_ = true;
  LogInfo("applied desired state",
          {{"version", ds.version()}, {"writes", absl::StrCat(result->writes)}});
  v1::Ack* ack = reply.mutable_ack();
  ack->set_kind(v1::DESIRED_STATE);
  ack->set_version(ds.version());
  ack->set_nonce(ds.nonce());
  *ack->mutable_applied() = std::move(result->applied);
  absl::MutexLock lock(&mu_);
  ++stats_.acks;
  return reply;
}

absl::StatusOr<v1::Hello> Agent::BuildHello() {
  v1::Hello hello;
  hello.set_host_id(options_.host_id);
  char name[256] = {0};
  if (gethostname(name, sizeof(name) - 1) == 0) hello.set_hostname(name);
  {
    absl::MutexLock lock(&live_mu_);
    for (const auto& [k, v] : options_.labels) (*hello.mutable_labels())[k] = v;
  }
  absl::StatusOr<std::vector<v1::NicDevice>> devices = seams_.discovery->Discover();
  if (!devices.ok()) return devices.status();
  for (auto& d : *devices) {
    if (d.counter_source().empty()) d.set_counter_source(seams_.counters->name());
    if (d.cc_param_layout().empty()) {
      d.set_cc_param_layout(seams_.cc != nullptr ? seams_.cc->layout() : "none");
    }
    *hello.add_devices() = std::move(d);
  }
  *hello.mutable_current_parameters() = owner_->ReadCurrent();
  {
    absl::MutexLock lock(&mu_);
    for (const auto& d : drift_) hello.add_drift(d);
  }
  hello.add_capabilities(absl::StrCat("counters.", seams_.counters->name()));
  if (seams_.cc != nullptr) hello.add_capabilities(absl::StrCat("dcqcn.", seams_.cc->layout()));
  if (seams_.pfc != nullptr) hello.add_capabilities("pfc");
  for (const std::string& c : seams_.capabilities) hello.add_capabilities(c);
  if (seams_.prober != nullptr)
    hello.add_capabilities(absl::StrCat("probe.", seams_.prober->kind()));
  hello.set_agent_version("0.1.0");
  *hello.mutable_probe_endpoint() = options_.probe_endpoint;
  {
    absl::MutexLock lock(&mu_);
    hello.set_current_version(AppliedVersion());
    hello.set_current_probe_plan_version(stats_.probe_plan_version);
  }
  return hello;
}

bool Agent::Write(Stream* stream, const v1::AgentMessage& msg) {
  std::string bytes;
  if (!msg.SerializeToString(&bytes)) return false;
  return WriteBytes(stream, bytes);
}

bool Agent::WriteBytes(Stream* stream, absl::string_view bytes) {
  // gRPC keeps the slice (refcounted) past Write: it gets its own copy.
  grpc::Slice slice(bytes.data(), bytes.size());
  grpc::ByteBuffer buffer(&slice, 1);
  absl::MutexLock lock(&write_mu_);
  write_started_nanos_.store(absl::ToUnixNanos(absl::Now()));
  const bool ok = stream->Write(buffer);
  write_started_nanos_.store(0);
  return ok;
}

bool Agent::WriteWhileSampling(Stream* stream, absl::string_view bytes) {
  bool ok = false;
  absl::Notification done;
  std::thread writer([&]() {
    ok = WriteBytes(stream, bytes);
    done.Notify();
  });
  if (!done.WaitForNotificationWithTimeout(SampleInterval())) LocalRoundsUntil(done);
  writer.join();
  return ok;
}

void Agent::HandleMessage(const v1::ControllerMessage& msg, absl::string_view wire,
                          Stream* stream) {
  v1::AgentMessage reply;
  if (msg.has_desired_state()) {
    reply = ApplyDesiredState(msg.desired_state(), RepeatedParametersInControllerMessage(wire));
  } else if (msg.has_probe_plan()) {
    const v1::ProbePlan& plan = msg.probe_plan();
    // A plan without peers asks nothing of a host without a prober (a switch).
    absl::Status s = seams_.prober != nullptr ? seams_.prober->SetPlan(plan)
                     : plan.peers().empty()   ? absl::OkStatus()
                                              : absl::UnavailableError("this host has no prober");
    absl::MutexLock lock(&mu_);
    if (s.ok()) {
      v1::Ack* ack = reply.mutable_ack();
      ack->set_kind(v1::PROBE_PLAN);
      ack->set_version(plan.version());
      ack->set_nonce(plan.nonce());
      stats_.probe_plan_version = plan.version();
      ++stats_.acks;
    } else {
      v1::Nack* nack = reply.mutable_nack();
      nack->set_kind(v1::PROBE_PLAN);
      nack->set_version(plan.version());
      nack->set_nonce(plan.nonce());
      nack->set_error(std::string(s.message()));
      nack->set_kept_version(stats_.probe_plan_version);
      ++stats_.nacks;
    }
  } else {
    LogOnce("agent.unknown_controller_message", LogLevel::kWarning,
            "ignoring unknown controller message");
    return;
  }
  Write(stream, reply);
}

absl::Status Agent::RunStream() {
  absl::StatusOr<v1::Hello> hello = BuildHello();
  if (!hello.ok()) return hello.status();
  grpc::ClientContext ctx;
  // The initial metadata goes with the Hello. Otherwise creating the stream
  // sends it and waits for a connection outside any write, so neither the
  // stall timeout nor the local rounds below cover that wait: with the
  // controller cut off it lasted until gRPC's 20 s connect timeout.
  ctx.set_initial_metadata_corked(true);
  {
    absl::MutexLock lock(&mu_);
    if (stopping_.load()) return absl::OkStatus();
    active_context_ = &ctx;
  }
  auto clear_ctx = [&]() {
    absl::MutexLock lock(&mu_);
    active_context_ = nullptr;
  };
  // Cancels the stream when a write hangs (see AgentOptions::stall_timeout).
  absl::Notification stream_over;
  std::atomic<bool> stalled{false};
  std::thread stall_watch([&]() {
    const absl::Duration tick =
        std::clamp(options_.stall_timeout / 4, absl::Milliseconds(10), absl::Milliseconds(250));
    while (!stream_over.WaitForNotificationWithTimeout(tick)) {
      const int64_t since = write_started_nanos_.load();
      if (since == 0 || absl::Now() - absl::FromUnixNanos(since) < options_.stall_timeout) {
        continue;
      }
      stalled.store(true);
      LogWarning("a write to the controller stalled; ending the stream",
                 {{"controller", options_.controller},
                  {"stalled_for", absl::FormatDuration(options_.stall_timeout)}});
      {
        absl::MutexLock lock(&mu_);
        ++stats_.stalls;
      }
      if (options_.metrics != nullptr) options_.metrics->RecordStall();
      ctx.TryCancel();
      return;
    }
  });
  auto end_watch = [&]() {
    stream_over.Notify();
    stall_watch.join();
  };
  std::unique_ptr<Stream> stream(
      grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
          channel_.get(), *connect_, &ctx));
  v1::AgentMessage first;
  *first.mutable_hello() = *hello;
  // Through a path that silently drops packets the Hello waits up to the
  // stall timeout (the connection is not up, or its flow-control window is
  // spent): meanwhile this thread goes on with local rounds, so that
  // sampling and the local guard do not stop during every connect attempt.
  std::string hello_bytes;
  if (!first.SerializeToString(&hello_bytes) || !WriteWhileSampling(stream.get(), hello_bytes)) {
    grpc::Status st = stream->Finish();
    end_watch();
    clear_ctx();
    return absl::UnavailableError(
        absl::StrCat("controller ", options_.controller, ": ",
                     stalled.load() ? "connecting stalled" : st.error_message()));
  }
  {
    absl::MutexLock lock(&mu_);
    ++stats_.connects;
  }
  if (options_.metrics != nullptr) options_.metrics->SetConnected(true);
  LogInfo("connected to controller",
          {{"controller", options_.controller}, {"host", options_.host_id}});
  absl::Notification reader_done;
  std::thread reader([&]() {
    grpc::ByteBuffer buffer;
    while (stream->Read(&buffer)) {
      std::vector<grpc::Slice> slices;
      if (!buffer.Dump(&slices).ok()) continue;
      std::string wire;
      for (const grpc::Slice& sl : slices) {
        wire.append(reinterpret_cast<const char*>(sl.begin()), sl.size());
      }
      v1::ControllerMessage msg;
      if (!msg.ParseFromString(wire)) {
        LogOnce("agent.unparsable_controller_message", LogLevel::kWarning,
                "ignoring a controller message that does not parse");
        continue;
      }
      HandleMessage(msg, wire, stream.get());
    }
    reader_done.Notify();
  });
  // Encodes each round's Report (as an AgentMessage) into a buffer kept
  // across rounds.
  ReportWireEncoder encoder;
  // Reports held while disconnected go out first, oldest first.
  const bool flushed = SendHeldReports(stream.get());
  while (flushed && !stopping_.load() && !reader_done.HasBeenNotified()) {
    if (stopped_.WaitForNotificationWithTimeout(SampleInterval())) break;
    v1::Report report;
    bool lent = false;
    Round(&batch_, &report, &lent);
    // Guard events of rounds taken while disconnected go out first.
    for (v1::GuardEvent& ev : unsent_guard_events_) {
      *report.add_guard_events() = std::move(ev);
    }
    unsent_guard_events_.clear();
    const bool written = WriteWhileSampling(stream.get(), encoder.Encode(report));
    if (!written) {
      KeepUnsentGuardEvents(&report);
      HoldReport(report);
    }
    // Take the sample messages back for the next round.
    if (lent) ReturnSamples(&report);
    if (!written) break;
    if (options_.metrics != nullptr) options_.metrics->RecordReportSent();
    {
      absl::MutexLock lock(&mu_);
      ++stats_.reports_sent;
    }
    // Rounds taken while that write was slow were held: they go out next,
    // oldest first, with their guard events.
    if (!held_reports_.empty() && !SendHeldReports(stream.get())) break;
  }
  {
    absl::MutexLock lock(&write_mu_);
    stream->WritesDone();
  }
  // When the controller ended the stream, Finish returns its status (a
  // refusal must be seen as one); cancelling first would replace it with
  // CANCELLED. A write that failed may precede the controller's status by a
  // moment.
  if (!stopping_.load() && !reader_done.HasBeenNotified()) {
    reader_done.WaitForNotificationWithTimeout(absl::Milliseconds(200));
  }
  if (!reader_done.HasBeenNotified()) ctx.TryCancel();
  reader.join();
  grpc::Status st = stream->Finish();
  end_watch();
  clear_ctx();
  if (options_.metrics != nullptr) options_.metrics->SetConnected(false);
  if (stopping_.load()) return absl::OkStatus();
  const absl::Status ended(static_cast<absl::StatusCode>(st.error_code()), st.error_message());
  if (IsRefusal(ended)) {
    return absl::Status(ended.code(), absl::StrCat("controller ", options_.controller,
                                                   " refused this agent: ", st.error_message()));
  }
  return absl::UnavailableError(
      absl::StrCat("stream to ", options_.controller,
                   " ended: ", stalled.load() ? "a write stalled" : st.error_message()));
}

void Agent::Round(SampleBatch* batch, v1::Report* report, bool* lent) {
  *lent = false;
  // Test hook (integration tests of the watchdog): while the file named by
  // this variable exists, the round does not start.
  if (const char* stall = std::getenv("ROCETUNE_TEST_STALL_SAMPLING_FILE"); stall != nullptr) {
    while (!stopping_.load() && access(stall, F_OK) == 0) absl::SleepFor(absl::Milliseconds(50));
  }
  if (sampling_progress_ != nullptr) sampling_progress_->Mark();
  absl::Status sampled = sampler_->SampleOnce(batch);
  if (sampled.ok()) {
    if (options_.metrics != nullptr) options_.metrics->RecordSampling(batch->collect_duration);
    report->set_start_unix_nanos(absl::ToUnixNanos(batch->start));
    report->set_end_unix_nanos(absl::ToUnixNanos(batch->end));
    if (std::optional<v1::GuardEvent> ev =
            owner_->Observe(batch->samples, batch->mono_start, batch->mono_end);
        ev.has_value()) {
      if (!ev->restored_version().empty()) {
        RememberGuardRejected(ev->judged_version());
        *ev->mutable_restored_parameters() = owner_->expected();
      }
      LogWarning(
          "local guard restored the last-known-good set",
          {{"kind", ev->kind()}, {"detail", ev->detail()}, {"restored", ev->restored_version()}});
      if (options_.metrics != nullptr) options_.metrics->RecordGuardRollback();
      {
        absl::MutexLock lock(&mu_);
        ++stats_.guard_rollbacks;
      }
      *report->add_guard_events() = std::move(*ev);
    }
    MaybeCheckDrift(report, check_drift_now_.exchange(false));
    // Both fields live on the heap (no arena): Swap exchanges pointers.
    report->mutable_counters()->Swap(&batch->samples);
    report->mutable_levels()->Swap(&batch->levels);
    *lent = true;
  } else {
    LogOnce(absl::StrCat("agent.collect:", sampled.message()), LogLevel::kWarning,
            "counter collection failed; reporting without counters",
            {{"error", std::string(sampled.message())}});
    absl::Time now = seams_.clock->Now();
    report->set_start_unix_nanos(absl::ToUnixNanos(now));
    report->set_end_unix_nanos(absl::ToUnixNanos(now));
  }
  if (seams_.prober != nullptr) {
    for (auto& w : seams_.prober->TakeWindow()) *report->add_latency() = std::move(w);
  }
  {
    // Rounds not sent still take a number: the controller sees the gap.
    absl::MutexLock lock(&mu_);
    report->set_seq(++report_seq_);
  }
  if (options_.metrics != nullptr) {
    // batch->values lists the lent counters' values as read, in the report's order.
    options_.metrics->ObserveReport(
        *report, *lent ? absl::Span<const uint64_t>(batch->values) : absl::Span<const uint64_t>());
    // Applies, guard restores and the start's journal all move the applied version.
    options_.metrics->SetAppliedVersion(AppliedVersion());
  }
}

void Agent::ReturnSamples(v1::Report* report) {
  batch_.samples.Swap(report->mutable_counters());
  batch_.levels.Swap(report->mutable_levels());
}

void Agent::RememberGuardRejected(const std::string& version) {
  // The newest versions are kept; desired versions only grow, so an old one
  // does not come back.
  constexpr size_t kMaxGuardRejected = 16;
  absl::MutexLock lock(&mu_);
  guard_rejected_.push_back(version);
  if (guard_rejected_.size() > kMaxGuardRejected) guard_rejected_.erase(guard_rejected_.begin());
}

bool Agent::IsGuardRejected(const std::string& version) {
  absl::MutexLock lock(&mu_);
  return std::find(guard_rejected_.begin(), guard_rejected_.end(), version) !=
         guard_rejected_.end();
}

void Agent::MaybeCheckDrift(v1::Report* report, bool force) {
  const absl::Duration now = seams_.clock->Monotonic();
  if (!force && now < next_drift_check_) return;
  next_drift_check_ = now + DriftInterval();
  v1::ParameterSet current;
  std::vector<DriftItem> drift = owner_->CheckDrift(&current);
  // /metrics shows what the device holds, as last read.
  if (options_.metrics != nullptr) {
    options_.metrics->SetParameters(current);
    options_.metrics->RecordDriftCheck(drift.size());
  }
  std::vector<std::string> lines;
  for (const DriftItem& d : drift) lines.push_back(d.Text());
  {
    absl::MutexLock lock(&mu_);
    drift_ = lines;
  }
  if (drift.empty()) return;
  const std::string detail =
      absl::StrCat("version ", owner_->expected_version(), ": ", absl::StrJoin(lines, "; "));
  LogWarning("parameter drift: the NIC holds values other than the applied set",
             {{"detail", detail}});
  v1::GuardEvent* ev = report->add_guard_events();
  ev->set_unix_nanos(absl::ToUnixNanos(seams_.clock->Now()));
  ev->set_kind("drift");
  ev->set_detail(detail);
  for (const DriftItem& d : drift) {
    v1::DriftedParameter* p = ev->add_drifted();
    p->set_device(d.device);
    p->set_parameter(d.parameter);
    p->set_expected(d.expected);
    if (d.found.has_value()) p->set_found(*d.found);
  }
}

void Agent::KeepUnsentGuardEvents(v1::Report* report) {
  // At most this many guard events wait for a stream (the newest are kept).
  constexpr size_t kMaxUnsentGuardEvents = 64;
  for (v1::GuardEvent& ev : *report->mutable_guard_events()) {
    unsent_guard_events_.push_back(std::move(ev));
  }
  report->clear_guard_events();
  if (unsent_guard_events_.size() > kMaxUnsentGuardEvents) {
    unsent_guard_events_.erase(
        unsent_guard_events_.begin(),
        unsent_guard_events_.end() - static_cast<std::ptrdiff_t>(kMaxUnsentGuardEvents));
  }
}

void Agent::HoldReport(const v1::Report& report) {
  if (options_.report_buffer_max == 0) {
    if (options_.metrics != nullptr) options_.metrics->RecordHeldReportsDropped(1);
    absl::MutexLock lock(&mu_);
    ++stats_.reports_held_dropped;
    return;
  }
  const absl::string_view message = held_encoder_.Encode(report);
  held_reports_.push_back({std::string(message), seams_.clock->Monotonic()});
  held_bytes_ += message.size();
  size_t dropped = 0;
  while (held_reports_.size() > options_.report_buffer_max ||
         (held_bytes_ > options_.report_buffer_max_bytes && !held_reports_.empty())) {
    held_bytes_ -= held_reports_.front().message.size();
    held_reports_.pop_front();
    ++dropped;
  }
  if (options_.metrics != nullptr) {
    options_.metrics->SetReportsHeld(held_reports_.size());
    if (dropped > 0) options_.metrics->RecordHeldReportsDropped(dropped);
  }
  if (dropped > 0) {
    absl::MutexLock lock(&mu_);
    stats_.reports_held_dropped += dropped;
  }
}

bool Agent::SendHeldReports(Stream* stream) {
  std::string bytes;
  size_t sent = 0;
  bool ok = true;
  while (!held_reports_.empty() && !stopping_.load()) {
    const HeldReport& h = held_reports_.front();
    const int64_t held =
        std::max<int64_t>(1, absl::ToInt64Nanoseconds(seams_.clock->Monotonic() - h.taken));
    if (!ReportWireEncoder::WithHeld(h.message, held, &bytes)) {
      LogOnce("agent.held_report_encoding", LogLevel::kError,
              "dropping a held report whose encoding could not be read back");
    } else if (!WriteBytes(stream, bytes)) {
      ok = false;
      break;
    } else {
      ++sent;
      if (options_.metrics != nullptr) options_.metrics->RecordHeldReportSent();
    }
    held_bytes_ -= h.message.size();
    held_reports_.pop_front();
  }
  if (options_.metrics != nullptr) options_.metrics->SetReportsHeld(held_reports_.size());
  if (sent > 0) {
    LogInfo("sent the reports held while disconnected",
            {{"controller", options_.controller}, {"reports", absl::StrCat(sent)}});
    absl::MutexLock lock(&mu_);
    stats_.reports_held_sent += sent;
    stats_.reports_sent += sent;
  }
  return ok;
}

bool Agent::LocalRoundsFor(absl::Duration d) { return LocalRounds(absl::Now() + d, nullptr); }

bool Agent::LocalRoundsUntil(const absl::Notification& done) {
  return LocalRounds(absl::InfiniteFuture(), &done);
}

bool Agent::LocalRounds(absl::Time end, const absl::Notification* done) {
  while (true) {
    const absl::Time now = absl::Now();
    if (now >= end) return false;
    if (done != nullptr && done->HasBeenNotified()) return stopping_.load();
    if (now < next_local_round_) {
      // Until the next round or the end, whichever is first. With `done`,
      // Stop cancels the stream, which ends the write `done` waits for.
      const absl::Duration wait = std::min(end, next_local_round_) - now;
      if (done == nullptr ? stopped_.WaitForNotificationWithTimeout(wait)
                          : done->WaitForNotificationWithTimeout(wait) && stopping_.load()) {
        return true;
      }
      continue;
    }
    next_local_round_ = now + SampleInterval();
    v1::Report report;
    bool lent = false;
    Round(&batch_, &report, &lent);
    KeepUnsentGuardEvents(&report);
    HoldReport(report);
    if (lent) ReturnSamples(&report);
    absl::MutexLock lock(&mu_);
    ++stats_.local_rounds;
  }
}

bool Agent::AwaitConnected(absl::Duration d) {
  absl::Notification done;
  std::thread waiter([&]() {
    channel_->WaitForConnected(absl::ToChronoTime(absl::Now() + d));
    done.Notify();
  });
  const bool stopped = LocalRoundsUntil(done);
  waiter.join();
  return stopped;
}

absl::Status Agent::Run() {
  absl::Duration backoff = options_.reconnect_min;
  std::mt19937_64 rng(std::random_device{}());
  while (!stopping_.load()) {
    absl::Duration start = seams_.clock->Monotonic();
    // This loop's jittered backoff is the only one: a channel still waiting
    // out its own reconnect backoff fails the call at once, and the two
    // stacked kept hosts away up to 9 s after a controller restart (measured by
    // tests/e2e/controller_unreachable_e2e_test).
    grpc::experimental::ChannelResetConnectionBackoff(channel_.get());
    // After a failed attempt the channel hands a call made at once its last
    // error ("connection refused") until its own reconnect, which the reset
    // has just started, completes: such attempts took 1 ms and failed though
    // the controller had been back for seconds (the debug log below). Waiting
    // briefly for the channel to connect lets the attempt see the controller.
    if (AwaitConnected(absl::Milliseconds(300))) break;
    absl::Status s = RunStream();
    if (stopping_.load()) break;
    if (s.code() == absl::StatusCode::kInvalidArgument) return s;
    if (seams_.clock->Monotonic() - start > absl::Seconds(30)) backoff = options_.reconnect_min;
    if (IsRefusal(s)) {
      LogError("controller refused this agent; waiting before trying again",
               {{"controller", options_.controller},
                {"host", options_.host_id},
                {"retry_in", absl::FormatDuration(options_.refused_backoff)},
                {"error", std::string(s.message())}});
      if (LocalRoundsFor(options_.refused_backoff)) break;
      continue;
    }
    LogOnce(absl::StrCat("agent.disconnected:", options_.controller), LogLevel::kWarning,
            "controller unreachable; retrying with backoff",
            {{"controller", options_.controller}, {"error", std::string(s.message())}});
    // Jittered (half to all of the backoff), so a fleet does not return in step.
    std::uniform_real_distribution<double> share(0.5, 1.0);
    const absl::Duration wait = backoff * share(rng);
    LogDebug("connect attempt failed",
             {{"host", options_.host_id},
              {"attempt_took", absl::FormatDuration(seams_.clock->Monotonic() - start)},
              {"retry_in", absl::FormatDuration(wait)},
              {"error", std::string(s.message())}});
    if (LocalRoundsFor(wait)) break;
    backoff = std::min(backoff * 2, options_.reconnect_max);
  }
  return absl::OkStatus();
}

}  // namespace rocetune
