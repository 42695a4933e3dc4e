#ifndef ROCETUNE_BENCH_EIGHT_NIC_HOST_H_
#define ROCETUNE_BENCH_EIGHT_NIC_HOST_H_

// An 8-port mlx5 host for benchmarks: its sysfs tree, its ethtool statistics
// behind the ioctl seam, and the Report its agent sends each second.

#include <cstdint>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "rocetune/v1/agent.pb.h"

namespace rocetune::bench {

// Writes an mlx5 host under `sys` (mlx5_0..mlx5_{ports-1}, one port each, two
// per card): PCI devices, infiniband devices with their hw_counters and PMA
// counters/ as a ConnectX-6 Dx has them, and their netdevs.
void WriteMlx5Tree(const std::filesystem::path& sys, int ports);

// A saved `ethtool -S` dump played behind the ethtool ioctl seam: every
// interface in `ifnames` answers ETHTOOL_GSSET_INFO / GSTRINGS / GSTATS with
// the dump's statistics, in the dump's order; any other name is ENODEV.
class FixtureEthtool {
 public:
  // kInvalidArgument naming the file and line for a line that is not "name: u64".
  static absl::StatusOr<FixtureEthtool> Load(const std::string& path,
                                             std::set<std::string> ifnames);

  size_t size() const { return names_.size(); }
  int Ioctl(const std::string& ifname, void* cmd) const;

 private:
  std::set<std::string> ifnames_;
  std::vector<std::string> names_;
  std::vector<uint64_t> values_;
};

// What the host's one-second Report carries besides its counters.
struct HostReportShape {
  int ports = 8;
  // Probe RTTs per peer class and report: the controller's default probe plan
  // (16 peers at 10 probes/s, half in the host's ToR and half beyond) gives 80
  // in "intra_tor" and 80 in "inter_tor".
  int probes_per_class = 80;
  // The job signal of one training job ("llama-70b/run3"), events per op and
  // report: a step a second and the collectives of a sharded data-parallel
  // step (parameter all-gathers and gradient reduce-scatters per layer group,
  // a few all-reduces).
  int steps = 1;
  int allgathers = 96;
  int reducescatters = 96;
  int allreduces = 8;
};

// The host the Report comes from: its discovered devices (for a Hello) and the
// Report (seq and timestamps unset).
struct HostReport {
  std::vector<v1::NicDevice> devices;
  v1::Report report;
};

// The Report an agent on an 8-port mlx5 host sends each second: its counters
// as the agent's own sysfs and ethtool sources and Sampler produce them from a
// generated tree (`ethtool_fixture`: a saved `ethtool -S` dump every port
// answers with), each counter's delta set to a rate typical of a port carrying
// RoCE at half its line rate; then the probe windows and the job signal of
// `shape`. Sketch contents come from `seed`. Writes and removes a temporary
// tree under /tmp; an error names what failed.
absl::StatusOr<HostReport> EightNicHostReport(const std::string& ethtool_fixture,
                                              const HostReportShape& shape, uint32_t seed);

// Refills `report`'s probe windows and job signal as EightNicHostReport does,
// from `seed` (cheap: no tree), so that streams sharing one counter set carry
// sketches of their own.
void FillProbesAndJobs(const HostReportShape& shape, uint32_t seed, v1::Report* report);

}  // namespace rocetune::bench

#endif  // ROCETUNE_BENCH_EIGHT_NIC_HOST_H_
