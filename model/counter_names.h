#ifndef ROCETUNE_MODEL_COUNTER_NAMES_H_
#define ROCETUNE_MODEL_COUNTER_NAMES_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace rocetune {

// Canonical counter names (CounterKey::name). Vendor names that have no entry
// in the tables below pass through unchanged under their own name.
namespace counter_names {
inline constexpr char kCnpSent[] = "cnp_sent";
inline constexpr char kCnpHandled[] = "cnp_handled";
inline constexpr char kCnpIgnored[] = "cnp_ignored";
inline constexpr char kEcnMarkedPackets[] = "ecn_marked_packets";
inline constexpr char kOutOfSequence[] = "out_of_sequence";
inline constexpr char kPacketSeqErr[] = "packet_seq_err";
inline constexpr char kLocalAckTimeoutErr[] = "local_ack_timeout_err";
inline constexpr char kRetransmits[] = "retransmits";
inline constexpr char kTxBytes[] = "tx_bytes";
inline constexpr char kRxBytes[] = "rx_bytes";
inline constexpr char kTxPackets[] = "tx_packets";
inline constexpr char kRxPackets[] = "rx_packets";
// ethtool (per priority where noted).
inline constexpr char kRxPfcPauseFrames[] = "rx_pfc_pause_frames";            // per prio
inline constexpr char kTxPfcPauseFrames[] = "tx_pfc_pause_frames";            // per prio
inline constexpr char kRxPfcPauseDurationUs[] = "rx_pfc_pause_duration_us";   // per prio
inline constexpr char kTxPfcPauseDurationUs[] = "tx_pfc_pause_duration_us";   // per prio
inline constexpr char kRxPfcPauseTransitions[] = "rx_pfc_pause_transitions";  // per prio
inline constexpr char kTxPauseStormWarningEvents[] = "tx_pause_storm_warning_events";
inline constexpr char kTxPauseStormErrorEvents[] = "tx_pause_storm_error_events";
inline constexpr char kRxDiscardsPhy[] = "rx_discards_phy";
inline constexpr char kTxDiscardsPhy[] = "tx_discards_phy";
inline constexpr char kRxPrioDiscards[] = "rx_prio_discards";  // per prio
// Port health and transport errors (RDMA hw_counters and PMA port counters).
inline constexpr char kPortXmitWait[] = "port_xmit_wait";  // ticks the port had data but no credit
inline constexpr char kOutOfBuffer[] = "out_of_buffer";    // packets dropped: no receive WQE
inline constexpr char kLinkDowned[] = "link_downed";
inline constexpr char kSymbolError[] = "symbol_error";
inline constexpr char kLinkErrorRecovery[] = "link_error_recovery";
inline constexpr char kPortRcvErrors[] = "port_rcv_errors";
inline constexpr char kDuplicateRequest[] = "duplicate_request";
inline constexpr char kImpliedNakSeqErr[] = "implied_nak_seq_err";
inline constexpr char kRnrNakRetryErr[] = "rnr_nak_retry_err";
}  // namespace counter_names

// True when `name` is one of the canonical names above.
bool IsCanonicalCounterName(absl::string_view name);

// Which vendor table applies to an RDMA device.
enum class CounterVendor { kUnknown, kMlx5, kBnxtRe, kIrdma, kRxe };

// "mlx5", "bnxt_re", "irdma", "rxe", "unknown".
const char* CounterVendorName(CounterVendor vendor);

// From the PCI / parent driver name (device/driver link basename: mlx5_core,
// bnxt_en, ice, irdma, rdma_rxe) and, when that is empty or unknown, from the
// RDMA device name prefix (mlx5_0, bnxt_re0, irdma0, rxe0).
CounterVendor CounterVendorFor(absl::string_view driver, absl::string_view device_name);

// Result of mapping one vendor counter.
struct MappedCounter {
  std::string name;         // canonical name, or the vendor name when unmapped
  int32_t priority = -1;    // 0..7 for per-priority counters, else -1
  uint64_t multiplier = 1;  // value * multiplier is in the canonical unit
  uint8_t width_bits = 64;  // hardware width of the vendor counter (32 or 64)
  bool mapped = false;      // true when `name` came from a table
};

// RDMA hw_counters (sysfs ports/<p>/hw_counters/ and netlink STAT_GET entries).
// canonical: mlx5 / bnxt_re / irdma / rxe vendor names ("-" = none)
//   cnp_sent:              np_cnp_sent / tx_cnp_pkts, cnp_tx_pkts (oot) / cnpSent / -
//   cnp_handled:           rp_cnp_handled / rx_cnp_pkts, cnp_rx_pkts (oot) [1] / cnpHandled / -
//   cnp_ignored:           rp_cnp_ignored / - / cnpIgnored / -
//   ecn_marked_packets:    np_ecn_marked_roce_packets / rx_ecn_marked_pkts / RxECNMrkd / -
//   out_of_sequence:       out_of_sequence / rx_out_of_sequence, oos_drop_count / - /
//                          out_of_seq_request
//   packet_seq_err:        packet_seq_err / seq_err_naks_rcvd / "Nak Sequence Error" (gen3) /
//                          rcvd_seq_err
//   local_ack_timeout_err: local_ack_timeout_err / to_retransmits [2] / - / -
//   retransmits:           - [3] / hw_retransmission (oot) / - [4] / completer_retry_err [5]
//   out_of_buffer:         out_of_buffer / rx_out_of_buffer / - / -
//   duplicate_request:     duplicate_request / dup_req / - / duplicate_request
//   implied_nak_seq_err:   implied_nak_seq_err / - / - / -
//   rnr_nak_retry_err:     rnr_nak_retry_err / - / - / retry_rnr_exceeded_err
//   link_downed:           - / - / - / link_downed (the PMA counter elsewhere)
//   tx_packets, rx_packets: PMA / tx_pkts, rx_pkts [6] / PMA / sent_pkts, rcvd_pkts [6]
//
// [1] bnxt_re counts CNPs received; every received CNP is handled by the RP,
//     bnxt_re has no "ignored" counter.
// [2] bnxt_re's retransmissions caused by the ACK timer, i.e. ACK timeouts.
// [3] mlx5 has no total retransmission counter (roce_adp_retrans counts
//     adaptive-retransmission events and passes through unmapped).
// [4] irdma's tcpRetransSegs counts iWARP (TCP) segments, not RoCE; unmapped.
// [5] rxe counts each time its completer restarts sending from the oldest
//     unacknowledged packet (timeout or sequence NAK): retransmission events.
// [6] bnxt_re and rxe have no PMA counters/ directory; their own RoCE packet
//     totals take the canonical packet names. bnxt_re's own tx_bytes /
//     rx_bytes hw counters (RoCE bytes) already carry the canonical names.
// "oot" = Broadcom's out-of-tree driver names.
//
// Widths (what the sampler treats as wrapping at 2^32):
// - mlx5: the Q counters (everything except the four congestion counters
//   rp_cnp_*, np_*, rx_icrc_encapsulated and the netlink-only optional cc_* /
//   rdma_* flow counters) are 32-bit in hardware (be32 in QUERY_Q_COUNTER).
// - irdma: cnpHandled, cnpIgnored, cnpSent and the other 32-bit statistics of
//   the gen2 hardware (ip*InDiscards, ip*InTruncatedPkts, tcpRetransSegs,
//   tcpInOptErrors, tcpInProtoErrors, RxVlanErr) are 32-bit; the rest 64-bit.
// - bnxt_re: firmware reports u64 for every counter: 64-bit.
// - rxe and unknown drivers: the kernel keeps u64 software counters: 64-bit.
// Assumption, stated: a counter we cannot place is 64-bit, so a decrease is
// treated as a reset, never as a wrap (under-reporting once beats inventing
// 4 billion events).
MappedCounter MapHwCounter(CounterVendor vendor, absl::string_view vendor_name);

// The PMA port counters (sysfs ports/<p>/counters/), identical on all drivers
// that have them: port_xmit_data -> tx_bytes, port_rcv_data -> rx_bytes
// (both count 4-byte words: multiplier 4), port_xmit_packets -> tx_packets,
// port_rcv_packets -> rx_packets; port_xmit_wait, link_downed, symbol_error,
// link_error_recovery and port_rcv_errors keep their names (canonical). The
// four traffic counters are 64-bit (mlx5 advertises IB_PMA_CLASS_CAP_EXT_WIDTH,
// so the kernel uses the extended 64-bit table). port_xmit_wait is 32-bit. The
// remaining PMA error fields are 4..16-bit saturating counters (they stop at
// their maximum instead of wrapping), so they are reported as 64-bit: a
// decrease is a reset (someone cleared them).
MappedCounter MapPortCounter(absl::string_view vendor_name);

// ethtool -S names (mlx5 names; the same canonical names for other drivers
// where known):
// | canonical                     | mlx5                          | ice                       |
// bnxt_en                 |
// |-------------------------------|-------------------------------|---------------------------|-------------------------|
// | rx_pfc_pause_frames[p]        | rx_prio<p>_pause              | rx_priority_<p>_xoff.nic  |
// rx_pfc_ena_frames_pri<p>| | tx_pfc_pause_frames[p]        | tx_prio<p>_pause              |
// tx_priority_<p>_xoff.nic  | tx_pfc_ena_frames_pri<p>| | rx_pfc_pause_duration_us[p]   |
// rx_prio<p>_pause_duration     | -                         | pfc_pri<p>_rx_duration_us | |
// tx_pfc_pause_duration_us[p]   | tx_prio<p>_pause_duration     | -                         |
// pfc_pri<p>_tx_duration_us | | rx_pfc_pause_transitions[p]   | rx_prio<p>_pause_transition   | -
// | pfc_pri<p>_rx_transitions | | tx_pause_storm_warning_events | tx_pause_storm_warning_events | -
// | -                       | | tx_pause_storm_error_events   | tx_pause_storm_error_events   | -
// | -                       | | rx_discards_phy               | rx_discards_phy               | -
// | -                       | | tx_discards_phy               | tx_discards_phy               | -
// | -                       | | rx_prio_discards[p]           | rx_prio<p>_discards           | -
// | -                       | mlx5 pause durations are in microseconds (counters.rst). ethtool
// values are u64 and the mlx5 PPCNT counters behind them are 64-bit: width 64.
MappedCounter MapEthtoolCounter(absl::string_view vendor_name);

}  // namespace rocetune

#endif  // ROCETUNE_MODEL_COUNTER_NAMES_H_
