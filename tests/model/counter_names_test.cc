#include "model/counter_names.h"

#include "gtest/gtest.h"

namespace rocetune {
namespace {

struct Case {
  CounterVendor vendor;
  const char* vendor_name;
  const char* canonical;
  uint8_t width;
};

TEST(CounterNamesTest, HwCountersMapPerVendor) {
  const Case cases[] = {
      {CounterVendor::kMlx5, "np_cnp_sent", "cnp_sent", 64},
      {CounterVendor::kMlx5, "rp_cnp_handled", "cnp_handled", 64},
      {CounterVendor::kMlx5, "rp_cnp_ignored", "cnp_ignored", 64},
      {CounterVendor::kMlx5, "np_ecn_marked_roce_packets", "ecn_marked_packets", 64},
      {CounterVendor::kMlx5, "out_of_sequence", "out_of_sequence", 32},
      {CounterVendor::kMlx5, "packet_seq_err", "packet_seq_err", 32},
      {CounterVendor::kMlx5, "local_ack_timeout_err", "local_ack_timeout_err", 32},
      {CounterVendor::kBnxtRe, "tx_cnp_pkts", "cnp_sent", 64},
      {CounterVendor::kBnxtRe, "rx_cnp_pkts", "cnp_handled", 64},
      {CounterVendor::kBnxtRe, "rx_ecn_marked_pkts", "ecn_marked_packets", 64},
      {CounterVendor::kBnxtRe, "rx_out_of_sequence", "out_of_sequence", 64},
      {CounterVendor::kBnxtRe, "seq_err_naks_rcvd", "packet_seq_err", 64},
      {CounterVendor::kBnxtRe, "to_retransmits", "local_ack_timeout_err", 64},
      {CounterVendor::kBnxtRe, "hw_retransmission", "retransmits", 64},
      {CounterVendor::kIrdma, "cnpSent", "cnp_sent", 32},
      {CounterVendor::kIrdma, "cnpHandled", "cnp_handled", 32},
      {CounterVendor::kIrdma, "cnpIgnored", "cnp_ignored", 32},
      {CounterVendor::kIrdma, "RxECNMrkd", "ecn_marked_packets", 64},
      // Transport errors and receive-buffer drops.
      {CounterVendor::kMlx5, "out_of_buffer", "out_of_buffer", 32},
      {CounterVendor::kMlx5, "duplicate_request", "duplicate_request", 32},
      {CounterVendor::kMlx5, "implied_nak_seq_err", "implied_nak_seq_err", 32},
      {CounterVendor::kMlx5, "rnr_nak_retry_err", "rnr_nak_retry_err", 32},
      {CounterVendor::kBnxtRe, "rx_out_of_buffer", "out_of_buffer", 64},
      {CounterVendor::kBnxtRe, "dup_req", "duplicate_request", 64},
      {CounterVendor::kBnxtRe, "tx_pkts", "tx_packets", 64},
      {CounterVendor::kBnxtRe, "rx_pkts", "rx_packets", 64},
      // rxe: software counters, its own names.
      {CounterVendor::kRxe, "duplicate_request", "duplicate_request", 64},
      {CounterVendor::kRxe, "out_of_seq_request", "out_of_sequence", 64},
      {CounterVendor::kRxe, "rcvd_seq_err", "packet_seq_err", 64},
      {CounterVendor::kRxe, "retry_rnr_exceeded_err", "rnr_nak_retry_err", 64},
      {CounterVendor::kRxe, "completer_retry_err", "retransmits", 64},
      {CounterVendor::kRxe, "link_downed", "link_downed", 64},
      {CounterVendor::kRxe, "sent_pkts", "tx_packets", 64},
      {CounterVendor::kRxe, "rcvd_pkts", "rx_packets", 64},
  };
  for (const Case& c : cases) {
    MappedCounter m = MapHwCounter(c.vendor, c.vendor_name);
    EXPECT_EQ(m.name, c.canonical) << c.vendor_name;
    EXPECT_TRUE(m.mapped) << c.vendor_name;
    EXPECT_EQ(m.width_bits, c.width) << c.vendor_name;
    EXPECT_EQ(m.priority, -1);
    EXPECT_EQ(m.multiplier, 1u);
  }
}

TEST(CounterNamesTest, UnmappedNamesPassThrough) {
  MappedCounter m = MapHwCounter(CounterVendor::kMlx5, "rx_write_requests");
  EXPECT_EQ(m.name, "rx_write_requests");
  EXPECT_FALSE(m.mapped);
  EXPECT_EQ(m.width_bits, 32);  // a Q counter
  m = MapHwCounter(CounterVendor::kRxe, "rdma_sends");
  EXPECT_EQ(m.name, "rdma_sends");
  EXPECT_FALSE(m.mapped);
  EXPECT_EQ(m.width_bits, 64);
  // A vendor name from another vendor's table is not mapped.
  m = MapHwCounter(CounterVendor::kRxe, "np_cnp_sent");
  EXPECT_EQ(m.name, "np_cnp_sent");
  EXPECT_FALSE(m.mapped);
  m = MapHwCounter(CounterVendor::kMlx5, "cc_rx_ce_pkts");
  EXPECT_EQ(m.width_bits, 64);
  EXPECT_FALSE(m.mapped);
}

TEST(CounterNamesTest, PortCountersConvertWordsToBytes) {
  MappedCounter m = MapPortCounter("port_xmit_data");
  EXPECT_EQ(m.name, "tx_bytes");
  EXPECT_EQ(m.multiplier, 4u);
  m = MapPortCounter("port_rcv_data");
  EXPECT_EQ(m.name, "rx_bytes");
  EXPECT_EQ(m.multiplier, 4u);
  m = MapPortCounter("port_xmit_packets");
  EXPECT_EQ(m.name, "tx_packets");
  EXPECT_EQ(m.multiplier, 1u);
  m = MapPortCounter("port_rcv_packets");
  EXPECT_EQ(m.name, "rx_packets");
  m = MapPortCounter("port_xmit_wait");
  EXPECT_EQ(m.name, "port_xmit_wait");
  EXPECT_EQ(m.width_bits, 32);
  EXPECT_TRUE(m.mapped);
  for (const char* same :
       {"link_downed", "symbol_error", "link_error_recovery", "port_rcv_errors"}) {
    m = MapPortCounter(same);
    EXPECT_EQ(m.name, same);
    EXPECT_TRUE(m.mapped) << same;
    EXPECT_EQ(m.width_bits, 64) << same;  // saturating: a decrease is a reset
    EXPECT_EQ(m.multiplier, 1u) << same;
  }
  m = MapPortCounter("port_xmit_discards");
  EXPECT_FALSE(m.mapped);
}

// Every name a table maps to is canonical (so /metrics gives it its own
// metric name), and names outside the tables are not.
TEST(CounterNamesTest, MappedNamesAreCanonical) {
  const CounterVendor vendors[] = {CounterVendor::kMlx5, CounterVendor::kBnxtRe,
                                   CounterVendor::kIrdma, CounterVendor::kRxe};
  const char* hw[] = {"np_cnp_sent",       "rp_cnp_handled",      "rp_cnp_ignored",
                      "out_of_buffer",     "duplicate_request",   "implied_nak_seq_err",
                      "rnr_nak_retry_err", "tx_cnp_pkts",         "rx_out_of_buffer",
                      "dup_req",           "hw_retransmission",   "cnpSent",
                      "RxECNMrkd",         "Nak Sequence Error",  "out_of_seq_request",
                      "rcvd_seq_err",      "completer_retry_err", "link_downed",
                      "sent_pkts",         "rcvd_pkts",           "to_retransmits"};
  int mapped = 0;
  for (CounterVendor v : vendors) {
    for (const char* n : hw) {
      MappedCounter m = MapHwCounter(v, n);
      if (!m.mapped) continue;
      ++mapped;
      EXPECT_TRUE(IsCanonicalCounterName(m.name)) << CounterVendorName(v) << " " << n;
    }
  }
  EXPECT_GE(mapped, 21);
  for (const char* n : {"port_xmit_data", "port_rcv_packets", "port_xmit_wait", "symbol_error"}) {
    EXPECT_TRUE(IsCanonicalCounterName(MapPortCounter(n).name)) << n;
  }
  for (const char* n : {"rx_prio3_pause", "tx_prio2_pause_duration", "rx_discards_phy"}) {
    EXPECT_TRUE(IsCanonicalCounterName(MapEthtoolCounter(n).name)) << n;
  }
  EXPECT_FALSE(IsCanonicalCounterName("rx_write_requests"));
  EXPECT_FALSE(IsCanonicalCounterName(""));
}

TEST(CounterNamesTest, EthtoolPerPriorityNames) {
  struct E {
    const char* name;
    const char* canonical;
    int prio;
  };
  const E cases[] = {
      {"rx_prio3_pause", "rx_pfc_pause_frames", 3},
      {"tx_prio3_pause", "tx_pfc_pause_frames", 3},
      {"rx_prio0_pause_duration", "rx_pfc_pause_duration_us", 0},
      {"tx_prio7_pause_duration", "tx_pfc_pause_duration_us", 7},
      {"rx_prio4_pause_transition", "rx_pfc_pause_transitions", 4},
      {"rx_prio5_discards", "rx_prio_discards", 5},
      {"tx_pause_storm_warning_events", "tx_pause_storm_warning_events", -1},
      {"tx_pause_storm_error_events", "tx_pause_storm_error_events", -1},
      {"rx_discards_phy", "rx_discards_phy", -1},
      {"tx_discards_phy", "tx_discards_phy", -1},
      {"rx_priority_3_xoff.nic", "rx_pfc_pause_frames", 3},
      {"tx_pfc_ena_frames_pri6", "tx_pfc_pause_frames", 6},
      {"pfc_pri2_rx_duration_us", "rx_pfc_pause_duration_us", 2},
  };
  for (const E& c : cases) {
    MappedCounter m = MapEthtoolCounter(c.name);
    EXPECT_EQ(m.name, c.canonical) << c.name;
    EXPECT_EQ(m.priority, c.prio) << c.name;
    EXPECT_TRUE(m.mapped) << c.name;
  }
  // Not per-priority PFC: pass through unchanged.
  for (const char* raw : {"rx_prio3_bytes", "rx_prio8_pause", "rx_prio33_pause", "rx_prio_pause",
                          "rx_global_pause", "rx_prio3_pause_durationx"}) {
    MappedCounter m = MapEthtoolCounter(raw);
    EXPECT_EQ(m.name, raw);
    EXPECT_EQ(m.priority, -1) << raw;
    EXPECT_FALSE(m.mapped) << raw;
  }
}

TEST(CounterNamesTest, VendorDetection) {
  EXPECT_EQ(CounterVendorFor("mlx5_core", "mlx5_0"), CounterVendor::kMlx5);
  EXPECT_EQ(CounterVendorFor("bnxt_en", "bnxt_re0"), CounterVendor::kBnxtRe);
  EXPECT_EQ(CounterVendorFor("ice", "irdma0"), CounterVendor::kIrdma);
  EXPECT_EQ(CounterVendorFor("", "rxe0"), CounterVendor::kRxe);
  EXPECT_EQ(CounterVendorFor("", "mlx5_bond_0"), CounterVendor::kMlx5);
  EXPECT_EQ(CounterVendorFor("virtio_net", "foo0"), CounterVendor::kUnknown);
  EXPECT_STREQ(CounterVendorName(CounterVendor::kIrdma), "irdma");
}

}  // namespace
}  // namespace rocetune
