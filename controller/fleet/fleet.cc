#include "controller/fleet/fleet.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "controller/fleet/switch_member.h"
#include "daemon/address.h"
#include "daemon/logging.h"
#include "google/protobuf/util/message_differencer.h"

namespace rocetune::controller {
namespace {

const char* StateName(v1::HostState s) {
  switch (s) {
    case v1::HOST_CONNECTED:
      return "connected";
    case v1::HOST_STALE:
      return "stale";
    case v1::HOST_GONE:
      return "gone";
    default:
      return "unknown";
  }
}

}  // namespace

Fleet::Fleet(Clock* clock, TelemetryStore* telemetry, Store* store, EventBus* events,
             FleetOptions options)
    : clock_(clock), telemetry_(telemetry), store_(store), events_(events), options_(options) {
  if (options_.plan_probes && options_.probe_replan_delay > absl::ZeroDuration()) {
    planner_ = std::thread([this] { PlannerLoop(); });
  }
}

Fleet::~Fleet() {
  {
    absl::MutexLock lock(&plan_mu_);
    plan_stop_ = true;
  }
  if (planner_.joinable()) planner_.join();
}

void Fleet::ProbePlanDirty() {
  if (!options_.plan_probes) return;
  if (!planner_.joinable()) {
    RePlanProbes();
    return;
  }
  absl::MutexLock lock(&plan_mu_);
  plan_dirty_ = true;
}

void Fleet::PlannerLoop() {
  plan_mu_.Lock();
  while (true) {
    plan_mu_.Await(absl::Condition(
        +[](Fleet* f)
             ABSL_EXCLUSIVE_LOCKS_REQUIRED(f->plan_mu_) { return f->plan_dirty_ || f->plan_stop_; },
        this));
    if (plan_stop_) break;
    // Let the changes of the next `probe_replan_delay` join this one.
    plan_mu_.AwaitWithTimeout(absl::Condition(&plan_stop_), options_.probe_replan_delay);
    if (plan_stop_) break;
    plan_dirty_ = false;
    plan_mu_.Unlock();
    RePlanProbes();
    plan_mu_.Lock();
  }
  plan_mu_.Unlock();
}

absl::Status Fleet::LoadFromStore() {
  if (store_ == nullptr) return absl::OkStatus();
  absl::StatusOr<std::vector<StoredHost>> rows = store_->LoadHosts();
  if (!rows.ok()) return rows.status();
  absl::MutexLock lock(&mu_);
  for (StoredHost& row : *rows) {
    auto h = std::make_unique<Host>();
    std::string id = row.info.host_id();
    h->stored = std::move(row);
    h->telemetry = telemetry_->ForHost(id);
    h->last_swept = v1::HOST_GONE;
    hosts_[id] = std::move(h);
  }
  return absl::OkStatus();
}

bool Fleet::Matches(const google::protobuf::Map<std::string, std::string>& labels,
                    const std::map<std::string, std::string>& selector) {
  for (const auto& [k, v] : selector) {
    auto it = labels.find(k);
    if (it == labels.end() || it->second != v) return false;
  }
  return true;
}

absl::Status Fleet::ValidateHello(const v1::Hello& hello) const {
  if (hello.host_id().empty()) {
    return absl::InvalidArgumentError("hello.host_id is empty: a Hello must name the host");
  }
  if (absl::Status s = CheckHostId(hello.host_id()); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("hello.host_id: ", s.message()));
  }
  if (hello.host_id().size() > options_.max_host_id_length) {
    return absl::InvalidArgumentError(absl::StrCat("hello.host_id has ", hello.host_id().size(),
                                                   " characters (this controller's limit is ",
                                                   options_.max_host_id_length, ")"));
  }
  if (hello.labels_size() > static_cast<int>(options_.max_labels)) {
    return absl::InvalidArgumentError(absl::StrCat("hello.labels has ", hello.labels_size(),
                                                   " entries (limit ", options_.max_labels, ")"));
  }
  for (const auto& [k, v] : hello.labels()) {
    if (k.empty() || k.size() > 63 || v.size() > 253) {
      return absl::InvalidArgumentError(
          absl::StrCat("hello.labels: key \"", k.substr(0, 64),
                       "\" must be 1..63 bytes and its value at most 253"));
    }
  }
  return absl::OkStatus();
}

v1::Event Fleet::MakeEvent(const std::string& kind, const std::string& subject,
                           const std::string& detail) const {
  v1::Event e;
  e.set_unix_nanos(absl::ToUnixNanos(clock_->Now()));
  e.set_kind(kind);
  e.set_subject(subject);
  e.set_detail(detail);
  return e;
}

void Fleet::Publish(const std::vector<v1::Event>& events) {
  if (events_ == nullptr) return;
  for (const v1::Event& e : events) events_->Publish(e);
}

absl::StatusOr<Registration> Fleet::Register(const v1::Hello& hello,
                                             std::shared_ptr<AgentConnection> conn) {
  if (absl::Status s = ValidateHello(hello); !s.ok()) return s;
  if (absl::Status s = CheckSwitchRole(hello); !s.ok()) return s;
  std::shared_ptr<AgentConnection> superseded;
  bool push = false;
  std::string desired_version;
  uint32_t lease = 0;
  v1::ParameterSet desired;
  Registration reg;
  reg.host_id = hello.host_id();
  std::vector<v1::Event> events;
  {
    absl::MutexLock lock(&mu_);
    auto& slot = hosts_[hello.host_id()];
    bool is_new = slot == nullptr;
    if (is_new) slot = std::make_unique<Host>();
    Host& h = *slot;
    if (absl::Status s = CheckSupersede(h, hello.host_id(), conn->stream_id()); !s.ok()) return s;
    if (h.conn != nullptr && h.stream_id != conn->stream_id()) superseded = std::move(h.conn);
    h.superseded_another = superseded != nullptr;
    v1::HostInfo& info = h.stored.info;
    info.set_host_id(hello.host_id());
    info.set_hostname(hello.hostname());
    *info.mutable_labels() = MemberLabels(hello);  // role=switch for switches
    *info.mutable_devices() = hello.devices();
    // The notes of the last ack describe its version only.
    if (hello.current_version() != info.current_version()) info.clear_not_in_effect();
    info.set_current_version(hello.current_version());
    *info.mutable_current_parameters() = hello.current_parameters();
    *info.mutable_drift() = hello.drift();
    h.conn = conn;
    h.stream_id = conn->stream_id();
    h.probe_endpoint = hello.probe_endpoint();
    h.probe_plan_version.clear();  // a new stream gets its plan again
    h.connected_at = clock_->Now();
    if (h.telemetry == nullptr) h.telemetry = telemetry_->ForHost(hello.host_id());
    reg.telemetry = h.telemetry;
    h.last_swept = v1::HOST_CONNECTED;
    if (h.stored.desired_seq != 0) {
      desired_version = info.desired_version();
      const auto& rejected = info.rejected_versions();
      // A set that a NACK or the agent's guard rejected is never re-pushed.
      push = std::find(rejected.begin(), rejected.end(), desired_version) == rejected.end();
      if (push) {
        desired = h.stored.desired;
        lease = info.desired_lease_seconds();
      }
    }
    events.push_back(MakeEvent(
        is_new ? "host_registered" : "host_reconnected", hello.host_id(),
        absl::StrCat("hostname=", hello.hostname(), " current_version=", hello.current_version())));
  }
  if (superseded != nullptr) {
    superseded->Close(absl::AbortedError(
        absl::StrCat("superseded: a newer stream registered host ", hello.host_id())));
    events.push_back(MakeEvent("stream_superseded", hello.host_id(), ""));
  }
  PersistHost(hello.host_id(), nullptr);
  if (push) conn->PushDesiredState(desired_version, desired, lease);
  ProbePlanDirty();
  Publish(events);
  LogInfo("host registered",
          {{"host", hello.host_id()}, {"stream", absl::StrCat(conn->stream_id())}});
  return reg;
}

absl::Status Fleet::CheckSupersede(const Host& h, const std::string& host_id,
                                   uint64_t stream_id) const {
  if (h.conn == nullptr || h.stream_id == stream_id || !h.superseded_another) {
    return absl::OkStatus();
  }
  // The live stream already took over from another one. While it reports,
  // a further stream of the same host is two agents sharing one identity:
  // refused, so that they do not take turns.
  const absl::Time now = clock_->Now();
  const absl::Time last =
      std::max(h.connected_at, h.telemetry != nullptr ? h.telemetry->last_report() : absl::Time());
  if (now - last > options_.stale_after) return absl::OkStatus();
  return absl::AlreadyExistsError(absl::StrCat(
      "host ", host_id, " is already connected on another live stream (stream ", h.stream_id,
      ") that superseded an earlier one: two agents report with the same identity"));
}

void Fleet::Unregister(const std::string& host_id, uint64_t stream_id) {
  {
    absl::MutexLock lock(&mu_);
    auto it = hosts_.find(host_id);
    if (it == hosts_.end() || it->second->stream_id != stream_id || it->second->conn == nullptr) {
      return;
    }
    it->second->conn.reset();
    it->second->disconnected_at = clock_->Now();
    it->second->last_swept = v1::HOST_GONE;
  }
  ProbePlanDirty();
  Publish({MakeEvent("host_gone", host_id, "stream closed")});
}

void Fleet::RePlanProbes() {
  if (!options_.plan_probes) return;
  absl::MutexLock replan(&replan_mu_);
  std::vector<ProbeTarget> targets;
  {
    absl::ReaderMutexLock lock(&mu_);
    targets.reserve(hosts_.size());
    for (const auto& [id, h] : hosts_) {
      if (h->conn == nullptr) continue;
      ProbeTarget t;
      t.host_id = id;
      for (const auto& [k, v] : h->stored.info.labels()) t.labels[k] = v;
      t.endpoint = h->probe_endpoint;
      targets.push_back(std::move(t));
    }
  }
  // The expensive part runs without the fleet lock: reports and registrations go on.
  std::map<std::string, v1::ProbePlan> plans = PlanProbes(targets, options_.probes);
  std::vector<std::pair<std::shared_ptr<AgentConnection>, v1::ProbePlan>> pushes;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, plan] : plans) {
      auto it = hosts_.find(id);
      if (it == hosts_.end() || it->second->conn == nullptr) continue;  // left meanwhile
      Host& h = *it->second;
      if (plan.version() == h.probe_plan_version) continue;
      h.probe_plan_version = plan.version();
      pushes.emplace_back(h.conn, std::move(plan));
    }
  }
  for (auto& [conn, plan] : pushes) conn->PushProbePlan(plan);
}

v1::HostState Fleet::StateOf(const Host& h, absl::Time now) const {
  if (h.conn == nullptr) return v1::HOST_GONE;
  absl::Time last = h.connected_at;
  if (h.telemetry != nullptr) last = std::max(last, h.telemetry->last_report());
  absl::Duration age = now - last;
  if (age > options_.gone_after) return v1::HOST_GONE;
  if (age > options_.stale_after) return v1::HOST_STALE;
  return v1::HOST_CONNECTED;
}

v1::HostInfo Fleet::InfoOf(const Host& h, absl::Time now) const {
  v1::HostInfo info = h.stored.info;
  info.set_state(StateOf(h, now));
  if (h.telemetry != nullptr) {
    absl::Time last = h.telemetry->last_report();
    if (last > absl::UnixEpoch()) info.set_last_report_unix_nanos(absl::ToUnixNanos(last));
    info.set_reports(h.telemetry->reports());
  }
  if (h.conn != nullptr) info.set_connected_unix_nanos(absl::ToUnixNanos(h.connected_at));
  return info;
}

std::vector<v1::HostInfo> Fleet::ListHosts(
    const std::map<std::string, std::string>& selector) const {
  absl::Time now = clock_->Now();
  std::map<std::string, v1::HostInfo> sorted;
  absl::MutexLock lock(&mu_);
  for (const auto& [id, h] : hosts_) {
    if (!Matches(h->stored.info.labels(), selector)) continue;
    sorted.emplace(id, InfoOf(*h, now));
  }
  std::vector<v1::HostInfo> out;
  out.reserve(sorted.size());
  for (auto& [id, info] : sorted) out.push_back(std::move(info));
  return out;
}

std::vector<v1::HostInfo> Fleet::ListHostsPage(const std::map<std::string, std::string>& selector,
                                               const std::string& after_id, size_t page_size,
                                               uint32_t* total, bool* more) const {
  absl::Time now = clock_->Now();
  std::vector<std::string> ids;
  absl::MutexLock lock(&mu_);
  for (const auto& [id, h] : hosts_) {
    if (Matches(h->stored.info.labels(), selector)) ids.push_back(id);
  }
  *total = static_cast<uint32_t>(ids.size());
  std::sort(ids.begin(), ids.end());
  auto it = std::upper_bound(ids.begin(), ids.end(), after_id);
  std::vector<v1::HostInfo> out;
  for (; it != ids.end() && out.size() < page_size; ++it) {
    out.push_back(InfoOf(*hosts_.at(*it), now));
  }
  *more = it != ids.end();
  return out;
}

absl::StatusOr<StoredHost> Fleet::GetStored(const std::string& host_id) const {
  absl::MutexLock lock(&mu_);
  auto it = hosts_.find(host_id);
  if (it == hosts_.end()) {
    return absl::NotFoundError(absl::StrCat("unknown host \"", host_id, "\""));
  }
  return it->second->stored;
}

absl::StatusOr<v1::HostInfo> Fleet::GetHost(const std::string& host_id) const {
  absl::MutexLock lock(&mu_);
  auto it = hosts_.find(host_id);
  if (it == hosts_.end()) {
    return absl::NotFoundError(absl::StrCat("unknown host \"", host_id, "\""));
  }
  return InfoOf(*it->second, clock_->Now());
}

std::vector<std::string> Fleet::Select(const std::map<std::string, std::string>& selector) const {
  std::vector<std::string> out;
  absl::MutexLock lock(&mu_);
  for (const auto& [id, h] : hosts_) {
    if (Matches(h->stored.info.labels(), selector)) out.push_back(id);
  }
  return out;
}

std::map<std::string, std::vector<std::string>> Fleet::GroupBy(const std::string& key) const {
  std::map<std::string, std::vector<std::string>> out;
  absl::MutexLock lock(&mu_);
  for (const auto& [id, h] : hosts_) {
    auto it = h->stored.info.labels().find(key);
    if (it != h->stored.info.labels().end()) out[it->second].push_back(id);
  }
  return out;
}

FleetCounts Fleet::Counts() const {
  FleetCounts c;
  absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  for (const auto& [id, h] : hosts_) {
    switch (StateOf(*h, now)) {
      case v1::HOST_CONNECTED:
        ++c.connected;
        break;
      case v1::HOST_STALE:
        ++c.stale;
        break;
      default:
        ++c.gone;
        break;
    }
    const v1::HostInfo& info = h->stored.info;
    if (!info.desired_version().empty() && info.desired_version() != info.current_version()) {
      ++c.drifted;
    }
  }
  return c;
}

void Fleet::Sweep() {
  std::vector<v1::Event> events;
  // Streams of hosts silent for --gone_after: closed, so that a connection
  // whose agent died without a FIN (the controller sends no HTTP/2 keepalive
  // pings) does not stay open.
  std::vector<std::shared_ptr<AgentConnection>> silent;
  absl::Time now = clock_->Now();
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, h] : hosts_) {
      v1::HostState s = StateOf(*h, now);
      if (s == h->last_swept) continue;
      std::string kind =
          s == v1::HOST_CONNECTED ? "host_recovered" : absl::StrCat("host_", StateName(s));
      events.push_back(MakeEvent(kind, id, ""));
      h->last_swept = s;
      if (s == v1::HOST_GONE && h->conn != nullptr) silent.push_back(h->conn);
    }
  }
  for (const auto& conn : silent) {
    conn->Close(absl::UnavailableError(
        absl::StrCat("no Report for ", absl::FormatDuration(options_.gone_after),
                     " (--gone_after): the controller closes the stream; reconnect to resume")));
  }
  Publish(events);
}

void Fleet::Audit(const std::string& actor, const std::string& action, const std::string& subject,
                  const std::string& detail) {
  if (store_ != nullptr) {
    v1::AuditEntry e;
    e.set_unix_nanos(absl::ToUnixNanos(clock_->Now()));
    e.set_actor(actor);
    e.set_action(action);
    e.set_subject(subject);
    e.set_detail(detail);
    if (loop_ != nullptr) {
      loop_->Audit(std::move(e), "a fleet event");
    } else if (auto s = store_->AppendAudit(e); !s.ok()) {
      LogError("cannot append audit", {{"error", s.status().ToString()}});
    }
  }
  Publish({MakeEvent(action, subject, detail)});
}

}  // namespace rocetune::controller
