#include "agent/agent.h"

#include <unistd.h>

#include <algorithm>
#include <map>
#include <optional>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/report_wire.h"
#include "daemon/address.h"
#include "daemon/logging.h"
#include "model/cc_params.h"
#include "model/in_effect.h"

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
  Agent* a = agent.get();
  StreamClientOptions so;
  so.controller = a->options_.controller;
  so.host_id = a->options_.host_id;
  so.tls = a->options_.tls;
  so.refused_backoff = a->options_.refused_backoff;
  so.reconnect_min = a->options_.reconnect_min;
  so.reconnect_max = a->options_.reconnect_max;
  so.report_buffer_max = a->options_.report_buffer_max;
  so.report_buffer_max_bytes = a->options_.report_buffer_max_bytes;
  so.stall_timeout = a->options_.stall_timeout;
  so.metrics = a->options_.metrics;
  StreamClient::Handlers handlers;
  handlers.hello = [a]() { return a->BuildHello(); };
  handlers.message = [a](const v1::ControllerMessage& msg, absl::string_view wire) {
    return a->HandleMessage(msg, wire);
  };
  absl::StatusOr<std::unique_ptr<StreamClient>> client =
      StreamClient::Create(std::move(so), target, seams.clock, std::move(handlers));
  if (!client.ok()) return client.status();
  a->client_ = *std::move(client);
  absl::StatusOr<std::unique_ptr<Sampler>> sampler =
      Sampler::Create(seams.counters, seams.clock, a->options_.sample_interval);
  if (!sampler.ok()) return sampler.status();
  a->sampler_ = std::move(*sampler);
  absl::StatusOr<std::vector<std::string>> drift = a->InitParameters();
  if (!drift.ok()) return drift.status();
  if (!a->options_.job_socket.empty()) {
    JobListenerOptions jo;
    jo.path = a->options_.job_socket;
    jo.group = a->options_.job_socket_group;
    absl::StatusOr<std::unique_ptr<JobListener>> job = JobListener::Create(jo, seams.clock);
    if (!job.ok()) return job.status();
    a->job_listener_ = *std::move(job);
  }
  SamplingLoopOptions lo;
  lo.job_listener = a->job_listener_.get();
  lo.sample_interval = a->options_.sample_interval;
  lo.drift_interval = a->options_.drift_interval;
  lo.metrics = a->options_.metrics;
  lo.progress = a->options_.sampling_progress;
  lo.round_gate = a->options_.round_gate;
  lo.without_controller = [a] { return a->client_->DisconnectedFor(); };
  a->loop_ = std::make_unique<SamplingLoop>(std::move(lo), a->sampler_.get(), a->owner_.get(),
                                            seams.prober, seams.clock);
  a->loop_->SetDrift(*std::move(drift));
  if (a->options_.sampling_progress != nullptr) {
    a->options_.sampling_progress->SetDeadline(ProgressDeadline(a->options_.sample_interval));
  }
  return agent;
}

Agent::Agent(AgentOptions options, HostSeams seams) : options_(std::move(options)), seams_(seams) {}

Agent::~Agent() { Stop(); }

absl::Status Agent::Run() {
  std::thread sampling([this]() { loop_->Run([this](v1::Report* r) { client_->Offer(r); }); });
  absl::Status s = client_->Run();
  loop_->Stop();
  sampling.join();
  return s;
}

void Agent::Stop() {
  if (client_ != nullptr) client_->Stop();
  if (loop_ != nullptr) loop_->Stop();
}

AgentStats Agent::stats() const {
  AgentStats out;
  const StreamStats st = client_->stats();
  out.connects = st.connects;
  out.reports_sent = st.reports_sent;
  out.local_rounds = st.local_rounds;
  out.reports_held_sent = st.reports_held_sent;
  out.reports_held_dropped = st.reports_held_dropped;
  out.stalls = st.stalls;
  out.reports_held = st.reports_held;
  out.connected = st.connected;
  out.rounds = loop_->rounds();
  out.guard_rollbacks = loop_->guard_rollbacks();
  {
    absl::MutexLock lock(&mu_);
    out.acks = acks_;
    out.nacks = nacks_;
    out.probe_plan_version = probe_plan_version_;
  }
  out.applied_version = AppliedVersion();
  return out;
}

std::string Agent::AppliedVersion() const {
  std::string v = owner_ != nullptr ? owner_->expected_version() : "";
  return v == "baseline" ? "" : v;
}

absl::StatusOr<std::vector<std::string>> Agent::InitParameters() {
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
  owner_ = std::make_unique<NicOwner>(active_applier_, journal_.get(), guard_.get(), intent_.get(),
                                      options_.host_id);
  std::vector<std::string> drift;
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
    drift = journal_->Drift(current);
    for (const auto& d : drift) LogWarning("parameter drift from last-known-good", {{"drift", d}});
    owner_->SetExpected(lkg->version, lkg->parameters);
  }
  if (ResolveInterruptedApply(&current)) drift.clear();
  // A provisional set on the NIC from before the restart: its lease runs
  // again from now, so without the controller it is still given up.
  absl::StatusOr<std::optional<v1::DesiredState>> provisional = journal_->LoadProvisional();
  if (!provisional.ok()) {
    LogError("provisional record unreadable; the set on the NIC is treated as final",
             {{"error", std::string(provisional.status().message())}});
  } else if (provisional->has_value() && owner_->ResumeProvisional(**provisional)) {
    LogWarning(
        "the NIC holds a provisional set from before the restart; it is restored to "
        "last-known-good unless the controller is reached within its lease",
        {{"version", (*provisional)->version()},
         {"lease_seconds", absl::StrCat((*provisional)->provisional_lease_seconds())}});
    drift.clear();
    current = owner_->ReadCurrent();
  }
  if (options_.metrics != nullptr) options_.metrics->SetParameters(current);
  return drift;
}

absl::Duration Agent::ProgressDeadline(absl::Duration sample_interval) {
  return std::max(3 * sample_interval, absl::Seconds(10));
}

void Agent::SetIntervals(absl::Duration sample_interval, absl::Duration drift_interval) {
  {
    absl::MutexLock lock(&live_mu_);
    options_.sample_interval = sample_interval;
    options_.drift_interval = drift_interval;
  }
  loop_->SetIntervals(sample_interval, drift_interval);
  if (options_.sampling_progress != nullptr) {
    options_.sampling_progress->SetDeadline(ProgressDeadline(sample_interval));
  }
}

void Agent::SetLabels(std::vector<std::pair<std::string, std::string>> labels) {
  absl::MutexLock lock(&live_mu_);
  options_.labels = std::move(labels);
}

void Agent::SetGuardOptions(const LocalGuardOptions& guard) { guard_->SetOptions(guard); }

bool Agent::ResolveInterruptedApply(v1::ParameterSet* current) {
  absl::StatusOr<std::optional<NicOwner::Resolution>> r = owner_->ResolveInterruptedApply();
  if (!r.ok()) {
    LogError("interrupted apply: cannot tell or restore the host's parameter set",
             {{"error", std::string(r.status().message())}});
    return false;
  }
  if (!r->has_value()) return false;
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
  return true;
}

v1::AgentMessage Agent::ApplyDesiredState(const v1::DesiredState& ds,
                                          const std::vector<std::string>& refused) {
  v1::AgentMessage reply;
  const std::string kept = AppliedVersion();
  if (options_.metrics != nullptr) options_.metrics->SetDesiredVersion(ds.version());
  if (ds.provisional_lease_seconds() == 0 && loop_->GivenUpForLease(ds.version())) {
    // Given up only because the controller was away; pushed again as final
    // (its change reached DONE meanwhile): the controller's word wins.
    LogInfo("a version given up when its lease expired is pushed again as final; applying it",
            {{"version", ds.version()}});
    loop_->ForgetGivenUp(ds.version());
  }
  if (std::optional<std::string> why = loop_->GivenUp(ds.version()); why.has_value()) {
    // The controller may push it again before the guard event (held while
    // disconnected) reaches it: refuse, so the host does not go back into
    // the storm, or back onto a set whose lease ran out; the NACK marks the
    // version rejected there too.
    v1::Nack* nack = reply.mutable_nack();
    nack->set_kind(v1::DESIRED_STATE);
    nack->set_version(ds.version());
    nack->set_nonce(ds.nonce());
    nack->set_error(absl::StrCat(*why, "; not applied again"));
    nack->set_kept_version(kept);
    LogWarning("refused a version this host gave up", {{"version", ds.version()}, {"why", *why}});
    return reply;
  }
  absl::StatusOr<ApplyResult> result =
      refused.empty()
          ? owner_->Apply(ds.version(), ds.parameters(), ds.provisional_lease_seconds())
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
    ++nacks_;
    return reply;
  }
  for (const auto& d : result->disruptive) {
    LogWarning("disruptive parameter change applied", {{"change", d}});
  }
  if (options_.metrics != nullptr) options_.metrics->SetParameters(result->applied);
  loop_->RequestDriftCheck();
  LogInfo("applied desired state",
          {{"version", ds.version()},
           {"writes", absl::StrCat(result->writes)},
           {"provisional_lease_seconds", absl::StrCat(ds.provisional_lease_seconds())}});
  v1::Ack* ack = reply.mutable_ack();
  ack->set_kind(v1::DESIRED_STATE);
  ack->set_version(ds.version());
  ack->set_nonce(ds.nonce());
  *ack->mutable_applied() = std::move(result->applied);
  // The lossless (PFC) priorities decide whether an enable mask leaves the
  // traffic without DCQCN; a set without PFC settings read none back.
  v1::ParameterSet held = ack->applied();
  if (std::any_of(held.devices().begin(), held.devices().end(),
                  [](const v1::DeviceParameters& d) { return !d.has_pfc(); })) {
    const v1::ParameterSet now = owner_->ReadCurrent();
    for (v1::DeviceParameters& d : *held.mutable_devices()) {
      for (const v1::DeviceParameters& n : now.devices()) {
        if (n.device() == d.device() && n.has_pfc() && !d.has_pfc()) *d.mutable_pfc() = n.pfc();
      }
    }
  }
  for (v1::ParameterNote& n : NotInEffect(ds.parameters(), held)) {
    LogWarning("applied, not in effect", {{"version", ds.version()},
                                          {"device", n.device()},
                                          {"parameter", n.parameter()},
                                          {"reason", n.reason()}});
    *ack->add_not_in_effect() = std::move(n);
  }
  absl::MutexLock lock(&mu_);
  ++acks_;
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
  for (const auto& d : loop_->drift()) hello.add_drift(d);
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
    hello.set_current_probe_plan_version(probe_plan_version_);
  }
  return hello;
}

std::optional<v1::AgentMessage> Agent::HandleMessage(const v1::ControllerMessage& msg,
                                                     absl::string_view wire) {
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
      probe_plan_version_ = plan.version();
      ++acks_;
    } else {
      v1::Nack* nack = reply.mutable_nack();
      nack->set_kind(v1::PROBE_PLAN);
      nack->set_version(plan.version());
      nack->set_nonce(plan.nonce());
      nack->set_error(std::string(s.message()));
      nack->set_kept_version(probe_plan_version_);
      ++nacks_;
    }
  } else {
    LogOnce("agent.unknown_controller_message", LogLevel::kWarning,
            "ignoring unknown controller message");
    return std::nullopt;
  }
  return reply;
}

}  // namespace rocetune
