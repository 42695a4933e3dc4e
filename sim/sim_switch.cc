#include "sim/sim_switch.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "agent/switch/switch_counter_names.h"
#include "agent/switch/switch_seams.h"
#include "model/counter_names.h"
#include "model/switch_params.h"

namespace rocetune::sim {
namespace {

constexpr char kEcnMin[] = "green_min_threshold";
constexpr char kEcnMax[] = "green_max_threshold";
constexpr char kEcnProb[] = "green_drop_probability";

// A consistent read of the ToR's marking and PFC masks, with their version.
struct TorConfig {
  v1::EcnSettings ecn;
  std::vector<uint8_t> pfc_masks;
  uint64_t version = 0;
};

TorConfig ReadConfig(const Fabric& fabric, int tor) {
  TorConfig c;
  while (true) {
    uint64_t v2 = 0;
    c.ecn = fabric.TorEcn(tor, &c.version);
    c.pfc_masks = fabric.TorPfcMasks(tor, &v2);
    if (v2 == c.version) return c;
  }
}

std::map<std::string, std::string> ProfileFields(const v1::EcnSettings& ecn) {
  return {
      {"ecn", ecn.disabled() ? "ecn_none" : "ecn_all"},
      {"wred_green_enable", "true"},
      {kEcnMin, absl::StrCat(ecn.kmin_bytes())},
      {kEcnMax, absl::StrCat(ecn.kmax_bytes())},
      {kEcnProb, absl::StrCat(std::llround(ecn.pmax() * 100))},
  };
}

bool Wanted(const std::vector<std::string>& names, bool all, const std::string& name) {
  return all || std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

class SimSwitch::Discovery : public SwitchDiscovery {
 public:
  Discovery(Fabric* fabric, int tor) : fabric_(fabric), tor_(tor) {}
  absl::StatusOr<SwitchInventory> DiscoverSwitch() override {
    SwitchInventory inv;
    inv.platform = "sim";
    inv.hostname = fabric_->TorName(tor_);
    inv.hwsku = "rocetune-fabricsim";
    inv.buffer_limit_bytes = std::min<int64_t>(static_cast<int64_t>(fabric_->switch_buffer_bytes()),
                                               kMaxWredThresholdBytes);
    inv.ecn_marked_counter_supported = true;
    const TorConfig config = ReadConfig(*fabric_, tor_);
    const std::vector<TorPort> ports = fabric_->TorPorts(tor_);
    const int64_t mtu =
        fabric_->scenario().mtu_bytes() > 0 ? fabric_->scenario().mtu_bytes() : 1024;
    for (size_t i = 0; i < ports.size(); ++i) {
      SwitchPort p;
      p.name = ports[i].name;
      p.speed_mbps = std::llround(ports[i].gbps * 1000);
      p.mtu = mtu;
      p.admin_status = "up";
      p.oper_status = "up";
      if (fabric_->pfc_enabled()) p.pfc_enable = PfcEnablePriorities(config.pfc_masks[i]);
      inv.ports.push_back(std::move(p));
      for (int q = 0; q < 8; ++q) {
        inv.queues.push_back({ports[i].name, q, kProfile, ""});
      }
    }
    inv.profiles.push_back({kProfile, ProfileFields(config.ecn)});
    return inv;
  }

 private:
  Fabric* fabric_;
  int tor_;
};

class SimSwitch::Counters : public CounterSource {
 public:
  Counters(Fabric* fabric, int tor) : fabric_(fabric), tor_(tor), ports_(fabric->TorPorts(tor)) {}
  std::string name() const override { return "sim"; }
  absl::Status Collect(std::vector<CounterValue>* out) override {
    namespace n = switch_counter_names;
    const std::vector<TorPortCounters> counters = fabric_->TorCounters(tor_);
    for (size_t i = 0; i < counters.size() && i < ports_.size(); ++i) {
      const TorPortCounters& c = counters[i];
      auto add = [&](const char* name, uint32_t port, int prio, uint64_t v,
                     CounterKind kind = CounterKind::kCounter) {
        CounterValue cv;
        cv.key.device = ports_[i].name;
        cv.key.port = port;
        cv.key.priority = prio;
        cv.key.name = name;
        cv.value = v;
        cv.kind = kind;
        out->push_back(std::move(cv));
      };
      for (int p = 0; p < 8; ++p) {
        add(counter_names::kRxPfcPauseFrames, 0, p, c.rx_pfc_frames[p]);
        add(counter_names::kTxPfcPauseFrames, 0, p, c.tx_pfc_frames[p]);
      }
      for (uint32_t q = 0; q < 8; ++q) {
        const TorQueueCounters& qc = c.queues[q];
        add(n::kQueuePackets, q, -1, qc.packets);
        add(n::kQueueBytes, q, -1, qc.bytes);
        add(n::kQueueDroppedPackets, q, -1, qc.dropped_packets);
        add(n::kQueueDroppedBytes, q, -1, qc.dropped_bytes);
        add(n::kQueueEcnMarkedPackets, q, -1, qc.ecn_marked_packets);
        add(n::kQueueOccupancyBytes, q, -1, qc.occupancy_bytes, CounterKind::kLevel);
      }
    }
    return absl::OkStatus();
  }

 private:
  Fabric* fabric_;
  int tor_;
  std::vector<TorPort> ports_;
};

class SimSwitch::Store : public SwitchQosStore {
 public:
  Store(Fabric* fabric, int tor) : fabric_(fabric), tor_(tor), ports_(fabric->TorPorts(tor)) {}
  std::string name() const override { return "sim"; }

  absl::StatusOr<SwitchQosState> Read(const SwitchQosKeys& keys) override {
    return ReadState(keys, nullptr);
  }

  absl::StatusOr<SwitchQosState> Snapshot(const SwitchQosKeys& keys) override {
    uint64_t version = 0;
    absl::StatusOr<SwitchQosState> s = ReadState(keys, &version);
    absl::MutexLock lock(&mu_);
    watched_ = version;
    return s;
  }

  absl::Status Commit(const SwitchQosWrite& write) override {
    std::optional<uint64_t> expected;
    {
      absl::MutexLock lock(&mu_);
      expected = watched_;
      watched_.reset();
    }
    TorConfig current = ReadConfig(*fabric_, tor_);
    std::optional<v1::EcnSettings> ecn;
    for (const auto& [profile, fields] : write.profile_fields) {
      if (profile != kProfile) {
        return absl::FailedPreconditionError(
            absl::StrCat(fabric_->TorName(tor_), ": no WRED profile ", profile,
                         " (the simulator has ", kProfile, "); nothing written"));
      }
      ecn = current.ecn;
      for (const auto& [field, text] : fields) {
        absl::StatusOr<int64_t> v =
            ParseNumericField(absl::StrCat("WRED_PROFILE|", profile), field, text);
        if (!v.ok()) return v.status();
        if (*v < 0) {
          return absl::InvalidArgumentError(absl::StrCat(field, "=", *v, ": want >= 0"));
        }
        if (field == kEcnMin) {
          ecn->set_kmin_bytes(static_cast<uint64_t>(*v));
        } else if (field == kEcnMax) {
          ecn->set_kmax_bytes(static_cast<uint64_t>(*v));
        } else if (field == kEcnProb) {
          ecn->set_pmax(static_cast<double>(*v) / 100.0);
        } else {
          return absl::FailedPreconditionError(
              absl::StrCat(fabric_->TorName(tor_), ": WRED profile ", profile,
                           " has no tunable field ", field, " in the simulator; nothing written"));
        }
      }
    }
    std::map<int, uint8_t> masks;
    for (const auto& [port, text] : write.pfc_enable) {
      const int index = PortIndex(port);
      absl::StatusOr<int64_t> mask = ParsePfcEnable(text);
      if (index < 0 || !fabric_->pfc_enabled()) {
        return absl::FailedPreconditionError(absl::StrCat(
            fabric_->TorName(tor_), ": port ", port, " has no PFC configuration; nothing written"));
      }
      if (!mask.ok()) return mask.status();
      masks[index] = static_cast<uint8_t>(*mask);
    }
    return fabric_->SetTorConfig(tor_, ecn.has_value() ? &*ecn : nullptr, masks, expected);
  }

  void Release() override {
    absl::MutexLock lock(&mu_);
    watched_.reset();
  }

 private:
  int PortIndex(const std::string& name) const {
    for (size_t i = 0; i < ports_.size(); ++i) {
      if (ports_[i].name == name) return static_cast<int>(i);
    }
    return -1;
  }

  absl::StatusOr<SwitchQosState> ReadState(const SwitchQosKeys& keys, uint64_t* version) {
    const TorConfig config = ReadConfig(*fabric_, tor_);
    if (version != nullptr) *version = config.version;
    SwitchQosState s;
    s.buffer_limit_bytes = std::min<int64_t>(static_cast<int64_t>(fabric_->switch_buffer_bytes()),
                                             kMaxWredThresholdBytes);
    if (Wanted(keys.profiles, keys.all(), kProfile)) {
      s.profiles[kProfile] = ProfileFields(config.ecn);
    }
    if (fabric_->pfc_enabled()) {
      for (size_t i = 0; i < ports_.size(); ++i) {
        if (Wanted(keys.ports, keys.all(), ports_[i].name)) {
          s.pfc_enable[ports_[i].name] = FormatPfcEnable(config.pfc_masks[i]);
        }
      }
    }
    return s;
  }

  Fabric* fabric_;
  int tor_;
  std::vector<TorPort> ports_;
  absl::Mutex mu_;
  std::optional<uint64_t> watched_ ABSL_GUARDED_BY(mu_);
};

SimSwitch::SimSwitch(Fabric* fabric, int tor)
    : host_id_(absl::StrCat("sim-", fabric->TorName(tor))),
      discovery_(std::make_unique<Discovery>(fabric, tor)),
      counters_(std::make_unique<Counters>(fabric, tor)),
      store_(std::make_unique<Store>(fabric, tor)),
      applier_(std::make_unique<SwitchApplier>(store_.get())) {}

SimSwitch::~SimSwitch() = default;

HostSeams SimSwitch::seams() {
  return SwitchSeams("sim", discovery_.get(), counters_.get(), applier_.get());
}

}  // namespace rocetune::sim
