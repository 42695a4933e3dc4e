#include "sim/sim_host.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace rocetune::sim {
namespace {

absl::Status CheckDevice(const std::string& device) {
  if (device != SimHost::kDevice) {
    return absl::UnavailableError(absl::StrCat("no RDMA device \"", device,
                                               "\" (simulated host has ", SimHost::kDevice, ")"));
  }
  return absl::OkStatus();
}

}  // namespace

class SimHost::Discovery : public NicDiscovery {
 public:
  Discovery(Fabric* fabric, int host) : fabric_(fabric), host_(host) {}
  absl::StatusOr<std::vector<v1::NicDevice>> Discover() override {
    v1::NicDevice d;
    d.set_name(kDevice);
    d.set_driver("mlx5_core");
    d.set_vendor("0x15b3");
    d.set_model("simulated ConnectX");
    d.set_firmware_version("sim");
    d.set_node_guid(absl::StrFormat("5e5e:0000:%04x:%04x", host_ >> 16, host_ & 0xffff));
    d.set_pci_address("0000:00:00.0");
    d.set_counter_source("sim");
    d.set_cc_param_layout("sim");
    v1::NicPort* p = d.add_ports();
    p->set_port(1);
    p->set_link_layer("Ethernet");
    p->set_state("ACTIVE");
    p->set_speed_mbps(static_cast<uint64_t>(fabric_->host_link_gbps() * 1000));
    p->set_netdev(kNetdev);
    p->add_gids(absl::StrFormat("::ffff:10.0.%d.%d", host_ / 256, host_ % 256));
    return std::vector<v1::NicDevice>{d};
  }

 private:
  Fabric* fabric_;
  int host_;
};

class SimHost::Counters : public CounterSource {
 public:
  Counters(Fabric* fabric, int host) : fabric_(fabric), host_(host) {}
  std::string name() const override { return "sim"; }
  absl::Status Collect(std::vector<CounterValue>* out) override {
    const HostCounters c = fabric_->Counters(host_);
    auto add = [&](const char* name, int prio, uint64_t v) {
      CounterValue cv;
      cv.key.device = kDevice;
      cv.key.port = 1;
      cv.key.priority = prio;
      cv.key.name = name;
      cv.value = v;
      out->push_back(std::move(cv));
    };
    add("tx_bytes", -1, c.tx_bytes);
    add("rx_bytes", -1, c.rx_bytes);
    add("tx_packets", -1, c.tx_packets);
    add("rx_packets", -1, c.rx_packets);
    add("cnp_sent", -1, c.cnp_sent);
    add("cnp_handled", -1, c.cnp_handled);
    add("ecn_marked_packets", -1, c.ecn_marked_packets);
    for (int p = 0; p < 8; ++p) {
      add("rx_pfc_pause_frames", p, c.rx_pause_frames[p]);
      add("tx_pfc_pause_frames", p, c.tx_pause_frames[p]);
      add("rx_pfc_pause_duration_us", p, c.rx_pause_us[p]);
      add("tx_pfc_pause_duration_us", p, c.tx_pause_us[p]);
    }
    return absl::OkStatus();
  }

 private:
  Fabric* fabric_;
  int host_;
};

class SimHost::Cc : public CcParamStore {
 public:
  Cc(Fabric* fabric, int host) : fabric_(fabric), host_(host) {}
  std::string layout() const override { return "sim"; }
  absl::StatusOr<v1::DeviceParameters> Read(const std::string& device) override {
    if (auto s = CheckDevice(device); !s.ok()) return s;
    v1::DeviceParameters out;
    out.set_device(device);
    for (const auto& [name, value] : fabric_->HostDcqcn(host_))
      (*out.mutable_dcqcn())[name] = value;
    out.set_rp_enable_mask(fabric_->HostRpEnableMask(host_));
    out.set_np_enable_mask(fabric_->HostNpEnableMask(host_));
    return out;
  }
  absl::Status Write(const std::string& device, const std::string& name, int64_t value) override {
    if (auto s = CheckDevice(device); !s.ok()) return s;
    if (name == "rp_enable_mask" || name == "np_enable_mask") {
      if (value < 0 || value > 255) {
        return absl::InvalidArgumentError(absl::StrCat(name, "=", value, " outside [0, 255]"));
      }
      absl::MutexLock lock(&mu_);  // one read-modify-write of the pair at a time
      uint8_t rp = fabric_->HostRpEnableMask(host_);
      uint8_t np = fabric_->HostNpEnableMask(host_);
      (name == "rp_enable_mask" ? rp : np) = static_cast<uint8_t>(value);
      fabric_->SetHostEnableMasks(host_, rp, np);
      return absl::OkStatus();
    }
    return fabric_->SetHostDcqcn(host_, name, value);
  }

 private:
  Fabric* fabric_;
  int host_;
  absl::Mutex mu_;
};

class SimHost::Pfc : public PfcConfig {
 public:
  Pfc(Fabric* fabric, int host) : fabric_(fabric), host_(host) {}
  absl::StatusOr<PfcState> Read(const std::string& netdev) override {
    if (netdev != kNetdev) {
      return absl::UnavailableError(absl::StrCat("no netdev \"", netdev, "\""));
    }
    PfcState s;
    s.pfc_cap = 8;
    s.enable_mask = fabric_->HostPfcMask(host_);
    const HostCounters c = fabric_->Counters(host_);
    for (int p = 0; p < 8; ++p) {
      s.requests[p] = c.tx_pause_frames[p];
      s.indications[p] = c.rx_pause_frames[p];
    }
    absl::MutexLock lock(&mu_);
    s.delay = delay_;
    s.prevention_timeout_ms = prevention_ms_;
    return s;
  }
  absl::Status Write(const std::string& netdev, const v1::PfcSettings& settings) override {
    if (netdev != kNetdev) {
      return absl::UnavailableError(absl::StrCat("no netdev \"", netdev, "\""));
    }
    if (settings.enable_mask() > 255) {
      return absl::InvalidArgumentError(
          absl::StrCat("pfc.enable_mask=", settings.enable_mask(), " outside [0, 255]"));
    }
    if (settings.has_delay() && settings.delay() > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("pfc.delay=", settings.delay(), " outside [0, 65535]"));
    }
    absl::Status s = fabric_->SetHostPfcMask(host_, static_cast<uint8_t>(settings.enable_mask()));
    if (!s.ok()) return s;
    absl::MutexLock lock(&mu_);
    if (settings.has_delay()) delay_ = static_cast<uint16_t>(settings.delay());
    if (settings.has_prevention_timeout_ms()) {
      prevention_ms_ = static_cast<uint16_t>(settings.prevention_timeout_ms());
    }
    return absl::OkStatus();
  }

 private:
  Fabric* fabric_;
  int host_;
  absl::Mutex mu_;
  uint16_t delay_ ABSL_GUARDED_BY(mu_) = 7;
  uint16_t prevention_ms_ ABSL_GUARDED_BY(mu_) = 65535;
};

class SimHost::Probes : public Prober {
 public:
  Probes(Fabric* fabric, int host) : fabric_(fabric), host_(host) {}
  std::string kind() const override { return "sim"; }
  absl::Status SetPlan(const v1::ProbePlan& plan) override {
    return fabric_->SetProbePlan(host_, plan);
  }
  std::vector<v1::LatencyWindow> TakeWindow() override { return fabric_->TakeProbeWindow(host_); }

 private:
  Fabric* fabric_;
  int host_;
};

SimHost::SimHost(Fabric* fabric, int host)
    : host_id_(fabric->HostName(host)),
      discovery_(std::make_unique<Discovery>(fabric, host)),
      counters_(std::make_unique<Counters>(fabric, host)),
      cc_(std::make_unique<Cc>(fabric, host)),
      pfc_(std::make_unique<Pfc>(fabric, host)),
      prober_(std::make_unique<Probes>(fabric, host)) {}

SimHost::~SimHost() = default;

}  // namespace rocetune::sim
