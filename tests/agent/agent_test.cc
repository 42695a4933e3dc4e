// The agent in process: its sampling loop and stream client against a fake
// controller (an AgentService on a loopback port this test picks), on a
// fixture NIC tree copied to a temp dir (tests/testing: FixtureTree) (real sysfs discovery,
// counters and DCQCN writes), with a ManualClock: a round happens only when the test moves the
// clock by a sample interval.
#include "agent/agent.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "agent/real_host.h"
#include "agent/sampling_loop.h"
#include "daemon/clock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "model/quantile_sketch.h"
#include "rocetune/v1/agent.grpc.pb.h"
#include "tests/testing/test_support.h"

namespace rocetune {
namespace {

constexpr absl::Duration kInterval = absl::Seconds(1);
// How long (real time) a test waits for the agent's threads to do something.
constexpr absl::Duration kPatience = absl::Seconds(20);

bool Eventually(const std::function<bool()>& done) {
  return ::rocetune::testing::Eventually(done, kPatience, absl::Milliseconds(2));
}

// The controller's side of AgentService.Connect, recording what the agent
// sends; one stream at a time.
class FakeController final : public v1::AgentService::Service {
 public:
  grpc::Status Connect(
      grpc::ServerContext* /*ctx*/,
      grpc::ServerReaderWriter<v1::ControllerMessage, v1::AgentMessage>* stream) override {
    v1::AgentMessage msg;
    bool refuse = false;
    {
      absl::MutexLock lock(&mu_);
      refuse = refuse_;
      if (!refuse) stream_ = stream;
    }
    if (refuse) {
      // Reads the Hello and ends the stream, sending nothing (a proxy that
      // drops it).
      if (stream->Read(&msg) && msg.has_hello()) {
        absl::MutexLock lock(&mu_);
        hellos_.push_back(msg.hello());
      }
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "dropped (test)");
    }
    while (stream->Read(&msg)) {
      absl::MutexLock lock(&mu_);
      if (msg.has_hello()) hellos_.push_back(msg.hello());
      if (msg.has_report()) reports_.push_back(msg.report());
      if (msg.has_ack()) acks_.push_back(msg.ack());
      if (msg.has_nack()) nacks_.push_back(msg.nack());
    }
    absl::MutexLock lock(&mu_);
    stream_ = nullptr;
    return grpc::Status::OK;
  }

  // Every later stream is refused after its Hello.
  void RefuseStreams() {
    absl::MutexLock lock(&mu_);
    refuse_ = true;
  }

  bool Send(const v1::ControllerMessage& msg) {
    absl::MutexLock lock(&mu_);
    return stream_ != nullptr && stream_->Write(msg);
  }
  size_t hellos() {
    absl::MutexLock lock(&mu_);
    return hellos_.size();
  }
  v1::Hello hello(size_t i) {
    absl::MutexLock lock(&mu_);
    return hellos_.at(i);
  }
  std::vector<v1::Report> reports() {
    absl::MutexLock lock(&mu_);
    return reports_;
  }
  std::vector<v1::Ack> acks() {
    absl::MutexLock lock(&mu_);
    return acks_;
  }
  std::vector<v1::Nack> nacks() {
    absl::MutexLock lock(&mu_);
    return nacks_;
  }

 private:
  absl::Mutex mu_;
  grpc::ServerReaderWriter<v1::ControllerMessage, v1::AgentMessage>* stream_ ABSL_GUARDED_BY(mu_) =
      nullptr;
  std::vector<v1::Hello> hellos_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::Report> reports_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::Ack> acks_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::Nack> nacks_ ABSL_GUARDED_BY(mu_);
  bool refuse_ ABSL_GUARDED_BY(mu_) = false;
};

// A FakeController served on 127.0.0.1 (a port it picks, or `port`).
struct Server {
  FakeController service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;

  bool Start(int want_port = 0) {
    grpc::ServerBuilder b;
    b.AddListeningPort(absl::StrCat("127.0.0.1:", want_port), grpc::InsecureServerCredentials(),
                       &port);
    b.RegisterService(&service);
    server = b.BuildAndStart();
    return server != nullptr && port > 0;
  }
  // Ends the agent's stream at once (a controller that went away).
  void Stop() {
    if (server == nullptr) return;
    server->Shutdown(std::chrono::system_clock::now());
    server->Wait();
    server.reset();
  }
};

class AgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(tmp_.path().empty());
    ASSERT_FALSE(host_tree_.root().empty());
    RealHostOptions ho;
    ho.sysfs_root = host_tree_.sys();
    ho.debugfs_root = host_tree_.debug();
    ho.counter_source = "sysfs";
    ho.kernel_netdevs = false;
    absl::StatusOr<std::unique_ptr<RealHost>> host = RealHost::Create(ho);
    ASSERT_TRUE(host.ok()) << host.status();
    host_ = *std::move(host);
    ASSERT_TRUE(controller_.Start());
  }

  void TearDown() override {
    if (agent_ != nullptr) agent_->Stop();
    if (runner_.joinable()) runner_.join();
    agent_.reset();
    controller_.Stop();
  }

  // Starts an agent (sample interval 1 s of the ManualClock) on its thread.
  void StartAgent(size_t report_buffer_max = 300) {
    AgentOptions o;
    o.host_id = "h1";
    o.controller = absl::StrCat("127.0.0.1:", controller_.port);
    o.state_dir = tmp_.path() + "/state";
    o.sample_interval = kInterval;
    o.drift_interval = absl::Hours(1);
    o.reconnect_min = absl::Milliseconds(10);
    o.reconnect_max = absl::Milliseconds(20);
    o.report_buffer_max = report_buffer_max;
    o.job_socket = job_socket_;
    HostSeams seams = host_->seams();
    seams.clock = &clock_;
    absl::StatusOr<std::unique_ptr<Agent>> agent = Agent::Create(o, seams);
    ASSERT_TRUE(agent.ok()) << agent.status();
    agent_ = *std::move(agent);
    runner_ = std::thread([this]() { EXPECT_TRUE(agent_->Run().ok()); });
  }

  // True once the controller has the agent's Hello and the agent counts its
  // stream as up (a round taken between the two would be held, not live).
  bool Connected() {
    return Eventually(
        [&]() { return controller_.service.hellos() == 1 && agent_->stats().connected; });
  }

  // Moves the clock by one sample interval once the sampling loop waits for
  // it, and waits until the agent has taken that round.
  void NextRound() {
    const uint64_t before = agent_->stats().rounds;
    // The sampling loop is the only thread that waits one sample interval
    // (the stream's stall watch waits in shorter ticks); advancing before it
    // waits would start its interval after the advance.
    ASSERT_TRUE(Eventually([&]() { return clock_.waiters(kInterval) == 1; }));
    clock_.Advance(kInterval);
    ASSERT_TRUE(Eventually([&]() { return agent_->stats().rounds > before; }));
  }

  // Moves the clock in steps of 5 ms (below a sample interval) until `done`.
  bool StepUntil(const std::function<bool()>& done) {
    return Eventually([&]() {
      if (done()) return true;
      clock_.Advance(absl::Milliseconds(5));
      absl::SleepFor(absl::Milliseconds(1));
      return false;
    });
  }

  std::string ReadFixture(const std::string& relative) {
    std::string s = ::rocetune::testing::FixtureTree::ReadFile(host_tree_.sys() + "/" + relative);
    if (!s.empty() && s.back() == '\n') s.pop_back();
    return s;
  }

  ::rocetune::testing::TempDir tmp_{"agent-test"};
  ::rocetune::testing::FixtureTree host_tree_{"mlx5_ofed"};
  ManualClock clock_;
  std::unique_ptr<RealHost> host_;
  Server controller_;
  std::unique_ptr<Agent> agent_;
  std::thread runner_;
  std::string job_socket_;  // StartAgent's --job_socket ("" = none)
};

constexpr char kRpgTimeReset[] = "class/net/ens1f0np0/ecn/roce_rp/rpg_time_reset";

// A desired state for mlx5_0: version, nonce, rpg_time_reset=310 and
// `extra` DCQCN values; provisional when `lease_seconds` > 0.
v1::ControllerMessage DesiredPush(const std::string& version, const std::string& nonce,
                                  uint32_t lease_seconds = 0,
                                  const std::map<std::string, int64_t>& extra = {}) {
  v1::ControllerMessage m;
  v1::DesiredState* ds = m.mutable_desired_state();
  ds->set_version(version);
  ds->set_nonce(nonce);
  ds->set_provisional_lease_seconds(lease_seconds);
  v1::DeviceParameters* d = ds->mutable_parameters()->add_devices();
  d->set_device("mlx5_0");
  (*d->mutable_dcqcn())["rpg_time_reset"] = 310;
  for (const auto& [name, value] : extra) (*d->mutable_dcqcn())[name] = value;
  return m;
}

// The provisional push of the lease tests: version 7, a 3 s lease.
v1::ControllerMessage ProvisionalPush() { return DesiredPush("7", "n1", 3); }

TEST_F(AgentTest, ReportsOncePerIntervalOfItsClockNumberedInOrder) {
  StartAgent();
  ASSERT_TRUE(Connected());
  const v1::Hello hello = controller_.service.hello(0);
  EXPECT_EQ(hello.host_id(), "h1");
  ASSERT_EQ(hello.devices_size(), 2);
  EXPECT_EQ(hello.devices(0).name(), "mlx5_0");
  EXPECT_EQ(hello.current_version(), "");
  for (int i = 1; i <= 3; ++i) {
    NextRound();
    // Received, and the agent's write completed: a round offered while a
    // write is in flight is held behind it (and would carry its age).
    ASSERT_TRUE(Eventually([&]() {
      return controller_.service.reports().size() == size_t(i) &&
             agent_->stats().reports_sent == uint64_t(i);
    }));
  }
  // No round without the clock: once the sampling loop waits on it again,
  // no fourth round was taken and no fourth report arrived.
  ASSERT_TRUE(Eventually([&]() { return clock_.waiters(kInterval) == 1; }));
  EXPECT_EQ(agent_->stats().rounds, 3u);
  const std::vector<v1::Report> reports = controller_.service.reports();
  ASSERT_EQ(reports.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(reports[i].seq(), uint64_t(i + 1));
    EXPECT_EQ(reports[i].held_nanos(), 0) << "sent live";
    if (i == 0) {
      // The first round takes the counters' baseline: no deltas yet.
      EXPECT_EQ(reports[i].counters_size(), 0);
      continue;
    }
    // Each later round covers one interval of the agent's clock.
    EXPECT_EQ(reports[i].end_unix_nanos() - reports[i].start_unix_nanos(),
              absl::ToInt64Nanoseconds(kInterval));
    EXPECT_GT(reports[i].counters_size(), 0);
  }
  const AgentStats st = agent_->stats();
  EXPECT_EQ(st.connects, 1u);
  EXPECT_EQ(st.reports_sent, 3u);
  EXPECT_EQ(st.local_rounds, 0u);
}

// Issue 24: what a training job writes to the agent's job socket reaches the
// controller in the agent's reports: one JobTiming per (job, op) and round,
// every event in exactly one report, none for a refused line, no empty ones.
TEST_F(AgentTest, ReportsCarryTheJobSignal) {
  job_socket_ = tmp_.path() + "/job.sock";
  StartAgent();
  ASSERT_TRUE(Connected());
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(job_socket_.size(), sizeof(addr.sun_path));
  std::memcpy(addr.sun_path, job_socket_.c_str(), job_socket_.size() + 1);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << strerror(errno);
  std::string lines;
  for (int i = 0; i < 30; ++i) lines += "RTJ1 job=run3 op=allreduce us=1500 bytes=4096\n";
  lines += "not a job line\n";
  for (int i = 0; i < 5; ++i) lines += "RTJ1 job=run3 op=step us=250000 rank=0\n";
  ASSERT_EQ(write(fd, lines.data(), lines.size()), static_cast<ssize_t>(lines.size()));
  close(fd);
  // Rounds until every event has been reported (the listener's thread may
  // read the lines before or after any round).
  std::map<std::string, uint64_t> events;
  uint64_t bytes = 0;
  QuantileSketch allreduce;
  for (size_t round = 1; round <= 20 && events["allreduce"] + events["step"] < 35; ++round) {
    NextRound();
    ASSERT_TRUE(Eventually([&]() { return controller_.service.reports().size() == round; }));
    const v1::Report report = controller_.service.reports().back();
    for (const v1::JobTiming& j : report.jobs()) {
      EXPECT_EQ(j.job(), "run3");
      absl::StatusOr<QuantileSketch> seconds = QuantileSketch::FromProto(j.seconds());
      ASSERT_TRUE(seconds.ok()) << seconds.status();
      EXPECT_GT(seconds->count(), 0u) << "an empty entry for " << j.op();
      events[j.op()] += seconds->count();
      if (j.op() == "allreduce") {
        ASSERT_TRUE(allreduce.Merge(*seconds).ok());
        bytes += j.bytes();
      }
    }
  }
  EXPECT_EQ(events["allreduce"], 30u);
  EXPECT_EQ(events["step"], 5u);
  EXPECT_EQ(events.size(), 2u);
  EXPECT_EQ(bytes, 30u * 4096);
  EXPECT_NEAR(allreduce.Quantile(0.99), 1.5e-3, 1.5e-3 * 0.02);
}

TEST_F(AgentTest, AppliesADesiredStateAcksItsReadBackAndNacksAnOutOfRangeOne) {
  StartAgent();
  ASSERT_TRUE(Connected());
  v1::ControllerMessage m = DesiredPush("v1", "n1");
  v1::DesiredState* ds = m.mutable_desired_state();
  v1::DeviceParameters* d = ds->mutable_parameters()->mutable_devices(0);
  ASSERT_TRUE(controller_.service.Send(m));
  ASSERT_TRUE(Eventually([&]() { return controller_.service.acks().size() == 1; }));
  const v1::Ack ack = controller_.service.acks()[0];
  EXPECT_EQ(ack.version(), "v1");
  EXPECT_EQ(ack.nonce(), "n1");
  ASSERT_GE(ack.applied().devices_size(), 1);
  EXPECT_EQ(ack.applied().devices(0).dcqcn().at("rpg_time_reset"), 310);
  EXPECT_EQ(ReadFixture(kRpgTimeReset), "310");
  EXPECT_EQ(agent_->AppliedVersion(), "v1");

  (*d->mutable_dcqcn())["rpg_time_reset"] = 0;  // below the parameter's minimum, 1
  ds->set_version("v2");
  ds->set_nonce("n2");
  ASSERT_TRUE(controller_.service.Send(m));
  ASSERT_TRUE(Eventually([&]() { return controller_.service.nacks().size() == 1; }));
  const v1::Nack nack = controller_.service.nacks()[0];
  EXPECT_EQ(nack.version(), "v2");
  EXPECT_EQ(nack.kept_version(), "v1");
  EXPECT_NE(nack.error().find("rpg_time_reset"), std::string::npos) << nack.error();
  EXPECT_EQ(ReadFixture(kRpgTimeReset), "310") << "a refused set writes nothing";
  EXPECT_EQ(agent_->AppliedVersion(), "v1");
  // The report after an apply carries no drift: the device holds the applied set.
  NextRound();
  ASSERT_TRUE(Eventually([&]() { return controller_.service.reports().size() == 1; }));
  EXPECT_EQ(controller_.service.reports()[0].guard_events_size(), 0);
}

// Issue 25 item 8: the reaction point of ens1f0np0 (mlx5_0) is off on every
// priority (the OFED enable files all 0). A set with a reaction-point value is
// applied, read back, and acked with a note that the value is not in effect;
// with the reaction point on again, the same value is acked without one.
TEST_F(AgentTest, AnAckSaysWhichAppliedValuesAreNotInEffect) {
  const std::string enable = host_tree_.sys() + "/class/net/ens1f0np0/ecn/roce_rp/enable/";
  for (int p = 0; p < 8; ++p) {
    ::rocetune::testing::FixtureTree::WriteFile(absl::StrCat(enable, p), "0\n");
  }
  StartAgent();
  ASSERT_TRUE(Connected());
  // min_time_between_cnps: the notification point, on.
  v1::ControllerMessage m = DesiredPush("v1", "n1", 0, {{"min_time_between_cnps", 4}});
  v1::DesiredState* ds = m.mutable_desired_state();
  ASSERT_TRUE(controller_.service.Send(m));
  ASSERT_TRUE(Eventually([&]() { return controller_.service.acks().size() == 1; }));
  v1::Ack ack = controller_.service.acks()[0];
  EXPECT_EQ(ReadFixture(kRpgTimeReset), "310") << "applied all the same";
  ASSERT_EQ(ack.not_in_effect_size(), 1) << ack.DebugString();
  EXPECT_EQ(ack.not_in_effect(0).device(), "mlx5_0");
  EXPECT_EQ(ack.not_in_effect(0).parameter(), "rpg_time_reset");
  EXPECT_EQ(ack.not_in_effect(0).reason(),
            "the DCQCN reaction point is off on every priority (rp_enable_mask 0x00)");

  ::rocetune::testing::FixtureTree::WriteFile(absl::StrCat(enable, 3), "1\n");
  ds->set_version("v2");
  ds->set_nonce("n2");
  ASSERT_TRUE(controller_.service.Send(m));
  ASSERT_TRUE(Eventually([&]() { return controller_.service.acks().size() == 2; }));
  ack = controller_.service.acks()[1];
  EXPECT_EQ(ack.version(), "v2");
  EXPECT_EQ(ack.not_in_effect_size(), 0) << ack.DebugString();
}

TEST_F(AgentTest, HoldsRoundsWhileTheControllerIsDownAndSendsThemOldestFirstWithTheirAge) {
  StartAgent();
  ASSERT_TRUE(Eventually([&]() { return agent_->stats().connects == 1; }));
  NextRound();
  ASSERT_TRUE(Eventually([&]() { return controller_.service.reports().size() == 1; }));
  const int port = controller_.port;
  controller_.Stop();
  ASSERT_TRUE(Eventually([&]() { return !agent_->stats().connected; }));
  // Three rounds with no controller: sampled all the same, and held.
  for (int i = 0; i < 3; ++i) NextRound();
  AgentStats st = agent_->stats();
  EXPECT_EQ(st.local_rounds, 3u);
  EXPECT_EQ(st.reports_held, 3u);
  // The controller is back on its port: the agent reconnects (its backoff
  // waits on the clock) and sends the held rounds, oldest first, each with
  // how long it was held, before any live one.
  Server back;
  ASSERT_TRUE(back.Start(port));
  ASSERT_TRUE(StepUntil([&]() { return back.service.reports().size() >= 3; }));
  const std::vector<v1::Report> held = back.service.reports();
  ASSERT_GE(held.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(held[i].seq(), uint64_t(i + 2));
    EXPECT_GT(held[i].held_nanos(), 0);
  }
  EXPECT_GT(held[0].held_nanos(), held[1].held_nanos());
  EXPECT_GT(held[1].held_nanos(), held[2].held_nanos());
  // The oldest was taken two intervals before the newest; each age is taken
  // when it is written, and the clock may move by a step or two between
  // those writes.
  const absl::Duration apart = absl::Nanoseconds(held[0].held_nanos() - held[2].held_nanos());
  EXPECT_LE(apart, 2 * kInterval);
  EXPECT_GE(apart, 2 * kInterval - absl::Milliseconds(100));
  // The agent counts a held report as sent when its write completes, which
  // can come after the server has read it.
  EXPECT_TRUE(Eventually([&]() { return agent_->stats().reports_held_sent == 3; }));
  st = agent_->stats();
  EXPECT_EQ(st.reports_held, 0u);
  EXPECT_EQ(st.reports_held_sent, 3u);
  EXPECT_EQ(st.connects, 2u);
  back.Stop();
}

// Version 7 (nonce n1), rpg_time_reset=310 on mlx5_0, provisional with a 3 s lease.
// Issue 25 item 2: a provisional set (a change's canary) is kept only while
// the agent can reach its controller. Without a stream for longer than the
// lease, the agent restores its last-known-good set by itself, tells the
// controller when it is back (a "lease_expired" guard event), and refuses
// the given-up version if it is pushed again.
TEST_F(AgentTest, AProvisionalSetIsGivenUpWhenItsLeaseRunsOutWithoutTheController) {
  StartAgent();
  ASSERT_TRUE(Connected());
  const std::string before = ReadFixture(kRpgTimeReset);
  v1::ControllerMessage m = ProvisionalPush();
  v1::DesiredState* ds = m.mutable_desired_state();
  ASSERT_TRUE(controller_.service.Send(m));
  ASSERT_TRUE(Eventually([&]() { return controller_.service.acks().size() == 1; }));
  ASSERT_EQ(ReadFixture(kRpgTimeReset), "310");
  // Connected, the lease does not run, however long.
  for (int i = 0; i < 5; ++i) NextRound();
  EXPECT_EQ(ReadFixture(kRpgTimeReset), "310");
  const int port = controller_.port;
  controller_.Stop();
  ASSERT_TRUE(Eventually([&]() { return !agent_->stats().connected; }));
  NextRound();
  NextRound();
  EXPECT_EQ(ReadFixture(kRpgTimeReset), "310") << "two seconds of a three-second lease";
  NextRound();
  NextRound();
  EXPECT_EQ(ReadFixture(kRpgTimeReset), before) << "the lease ran out: last-known-good restored";
  EXPECT_EQ(agent_->AppliedVersion(), "");
  // Back: the controller hears why, with the version given up and the one restored.
  Server back;
  ASSERT_TRUE(back.Start(port));
  v1::GuardEvent event;
  ASSERT_TRUE(StepUntil([&]() {
    for (const v1::Report& r : back.service.reports()) {
      for (const v1::GuardEvent& e : r.guard_events()) {
        if (e.kind() == "lease_expired") {
          event = e;
          return true;
        }
      }
    }
    return false;
  }));
  EXPECT_EQ(event.judged_version(), "7");
  EXPECT_EQ(event.restored_version(), "baseline");
  EXPECT_NE(event.detail().find("no stream to the controller"), std::string::npos)
      << event.detail();
  EXPECT_EQ(back.service.hello(0).current_version(), "");
  // The given-up version pushed again (before the event reached the
  // controller) is refused and nothing is written.
  ds->set_nonce("n2");
  ASSERT_TRUE(back.service.Send(m));
  ASSERT_TRUE(Eventually([&]() { return back.service.nacks().size() == 1; }));
  EXPECT_NE(back.service.nacks()[0].error().find("provisional lease expired"), std::string::npos)
      << back.service.nacks()[0].error();
  EXPECT_EQ(ReadFixture(kRpgTimeReset), before);
  // The same version pushed as final (its change reached DONE meanwhile) is
  // the controller's word: applied.
  ds->set_nonce("n3");
  ds->set_provisional_lease_seconds(0);
  ASSERT_TRUE(back.service.Send(m));
  ASSERT_TRUE(Eventually([&]() { return back.service.acks().size() == 1; }));
  EXPECT_EQ(ReadFixture(kRpgTimeReset), "310");
  EXPECT_EQ(agent_->AppliedVersion(), "7");
  back.Stop();
}

// A controller that takes the stream and ends it at once (it refuses the
// agent, or a proxy drops it) is not contact: the lease runs on through such
// streams.
TEST_F(AgentTest, StreamsEndedAtOnceDoNotKeepAProvisionalSetAlive) {
  StartAgent();
  ASSERT_TRUE(Connected());
  const std::string before = ReadFixture(kRpgTimeReset);
  ASSERT_TRUE(controller_.service.Send(ProvisionalPush()));
  ASSERT_TRUE(Eventually([&]() { return controller_.service.acks().size() == 1; }));
  const int port = controller_.port;
  controller_.Stop();
  ASSERT_TRUE(Eventually([&]() { return !agent_->stats().connected; }));
  Server refusing;
  refusing.service.RefuseStreams();
  ASSERT_TRUE(refusing.Start(port));
  const uint64_t connects = agent_->stats().connects;
  // Step the clock in small steps (the reconnect backoff waits on it) until
  // the agent has been refused a few times, then take rounds. Refused: the
  // refusing controller has read three Hellos. The agent counts a connect when
  // its stream starts, before the server has read the Hello, so its own count
  // alone can run ahead (an ASan run under load saw 2 Hellos at 3 connects).
  ASSERT_TRUE(StepUntil([&]() {
    return agent_->stats().connects >= connects + 3 && refusing.service.hellos() >= 3u;
  })) << "connects "
      << agent_->stats().connects - connects << ", Hellos read " << refusing.service.hellos();
  for (int i = 0; i < 4 && ReadFixture(kRpgTimeReset) != before; ++i) NextRound();
  EXPECT_EQ(ReadFixture(kRpgTimeReset), before)
      << "refused streams kept the provisional set past its lease";
  refusing.Stop();
}

// The controller confirms a provisional set (the change is DONE) by pushing
// the same version again without a lease: from then on it is kept without
// the controller, as any final set.
TEST_F(AgentTest, AConfirmedSetIsKeptWithoutTheController) {
  StartAgent();
  ASSERT_TRUE(Connected());
  v1::ControllerMessage m = ProvisionalPush();
  v1::DesiredState* ds = m.mutable_desired_state();
  ASSERT_TRUE(controller_.service.Send(m));
  ASSERT_TRUE(Eventually([&]() { return controller_.service.acks().size() == 1; }));
  ds->set_nonce("n2");
  ds->set_provisional_lease_seconds(0);
  ASSERT_TRUE(controller_.service.Send(m));
  ASSERT_TRUE(Eventually([&]() { return controller_.service.acks().size() == 2; }));
  controller_.Stop();
  ASSERT_TRUE(Eventually([&]() { return !agent_->stats().connected; }));
  for (int i = 0; i < 6; ++i) NextRound();
  EXPECT_EQ(ReadFixture(kRpgTimeReset), "310");
  EXPECT_EQ(agent_->AppliedVersion(), "7");
}

TEST_F(AgentTest, ABoundedRingKeepsTheNewestRounds) {
  StartAgent(/*report_buffer_max=*/2);
  ASSERT_TRUE(Eventually([&]() { return agent_->stats().connects == 1; }));
  controller_.Stop();
  ASSERT_TRUE(Eventually([&]() { return !agent_->stats().connected; }));
  for (int i = 0; i < 5; ++i) NextRound();
  const AgentStats st = agent_->stats();
  EXPECT_EQ(st.reports_held, 2u);
  EXPECT_EQ(st.reports_held_dropped, 3u);
}

TEST_F(AgentTest, StopEndsRunPromptlyWhileDisconnected) {
  StartAgent();
  ASSERT_TRUE(Eventually([&]() { return agent_->stats().connects == 1; }));
  controller_.Stop();
  ASSERT_TRUE(Eventually([&]() { return !agent_->stats().connected; }));
  NextRound();
  // The clock does not move: Stop alone must end every wait.
  const absl::Time t0 = absl::Now();
  agent_->Stop();
  runner_.join();
  EXPECT_LT(absl::Now() - t0, absl::Seconds(5));
}

// Agent::Stop (a signal) and the end of Agent::Run both stop the sampling
// loop; when they met, a second Notify aborted the daemon on SIGTERM (seen in
// agent_controller_test). Two threads stop fresh loops at the same moment.
TEST(SamplingLoopTest, StopFromTwoThreadsAtOnceIsSafe) {
  ManualClock clock;
  for (int i = 0; i < 2000; ++i) {
    SamplingLoop loop(SamplingLoopOptions(), nullptr, nullptr, nullptr, &clock);
    std::atomic<int> ready{0};
    auto stop = [&]() {
      ready.fetch_add(1);
      while (ready.load() < 2) {
      }
      loop.Stop();
    };
    std::thread a(stop);
    std::thread b(stop);
    a.join();
    b.join();
  }
}

}  // namespace
}  // namespace rocetune
