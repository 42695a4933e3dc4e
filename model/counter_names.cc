#include "model/counter_names.h"

#include <cstddef>

#include "absl/strings/match.h"
#include "absl/strings/strip.h"

namespace rocetune {
namespace {

namespace cn = counter_names;

struct Entry {
  const char* vendor_name;
  const char* canonical;
};

constexpr Entry kMlx5[] = {
    {"np_cnp_sent", cn::kCnpSent},
    {"rp_cnp_handled", cn::kCnpHandled},
    {"rp_cnp_ignored", cn::kCnpIgnored},
    {"np_ecn_marked_roce_packets", cn::kEcnMarkedPackets},
    {"out_of_sequence", cn::kOutOfSequence},
    {"packet_seq_err", cn::kPacketSeqErr},
    {"local_ack_timeout_err", cn::kLocalAckTimeoutErr},
    {"out_of_buffer", cn::kOutOfBuffer},
    {"duplicate_request", cn::kDuplicateRequest},
    {"implied_nak_seq_err", cn::kImpliedNakSeqErr},
    {"rnr_nak_retry_err", cn::kRnrNakRetryErr},
};

// mlx5 counters that are 64-bit; every other mlx5 hw counter is a 32-bit Q counter.
constexpr const char* kMlx5Wide[] = {
    "np_cnp_sent",          "rp_cnp_handled", "rp_cnp_ignored", "np_ecn_marked_roce_packets",
    "rx_icrc_encapsulated",
};

constexpr Entry kBnxtRe[] = {
    {"tx_cnp_pkts", cn::kCnpSent},
    {"cnp_tx_pkts", cn::kCnpSent},
    {"rx_cnp_pkts", cn::kCnpHandled},
    {"cnp_rx_pkts", cn::kCnpHandled},
    {"rx_ecn_marked_pkts", cn::kEcnMarkedPackets},
    {"rx_out_of_sequence", cn::kOutOfSequence},
    {"oos_drop_count", cn::kOutOfSequence},
    {"seq_err_naks_rcvd", cn::kPacketSeqErr},
    {"to_retransmits", cn::kLocalAckTimeoutErr},
    {"hw_retransmission", cn::kRetransmits},
    {"rx_out_of_buffer", cn::kOutOfBuffer},
    {"dup_req", cn::kDuplicateRequest},
    {"tx_pkts", cn::kTxPackets},
    {"rx_pkts", cn::kRxPackets},
};

constexpr Entry kIrdma[] = {
    {"cnpSent", cn::kCnpSent},
    {"cnpHandled", cn::kCnpHandled},
    {"cnpIgnored", cn::kCnpIgnored},
    {"RxECNMrkd", cn::kEcnMarkedPackets},
    {"Nak Sequence Error", cn::kPacketSeqErr},
};

// rxe (Soft-RoCE, rxe_hw_counters.c): software u64 counters.
constexpr Entry kRxe[] = {
    {"duplicate_request", cn::kDuplicateRequest},
    {"out_of_seq_request", cn::kOutOfSequence},
    {"rcvd_seq_err", cn::kPacketSeqErr},
    {"retry_rnr_exceeded_err", cn::kRnrNakRetryErr},
    {"completer_retry_err", cn::kRetransmits},
    {"link_downed", cn::kLinkDowned},
    {"sent_pkts", cn::kTxPackets},
    {"rcvd_pkts", cn::kRxPackets},
};

// PMA port counters that keep their own (canonical) name.
constexpr const char* kPortSame[] = {
    cn::kPortXmitWait,      cn::kLinkDowned,    cn::kSymbolError,
    cn::kLinkErrorRecovery, cn::kPortRcvErrors,
};

constexpr const char* kCanonical[] = {
    cn::kCnpSent,
    cn::kCnpHandled,
    cn::kCnpIgnored,
    cn::kEcnMarkedPackets,
    cn::kOutOfSequence,
    cn::kPacketSeqErr,
    cn::kLocalAckTimeoutErr,
    cn::kRetransmits,
    cn::kTxBytes,
    cn::kRxBytes,
    cn::kTxPackets,
    cn::kRxPackets,
    cn::kRxPfcPauseFrames,
    cn::kTxPfcPauseFrames,
    cn::kRxPfcPauseDurationUs,
    cn::kTxPfcPauseDurationUs,
    cn::kRxPfcPauseTransitions,
    cn::kTxPauseStormWarningEvents,
    cn::kTxPauseStormErrorEvents,
    cn::kRxDiscardsPhy,
    cn::kTxDiscardsPhy,
    cn::kRxPrioDiscards,
    cn::kPortXmitWait,
    cn::kOutOfBuffer,
    cn::kLinkDowned,
    cn::kSymbolError,
    cn::kLinkErrorRecovery,
    cn::kPortRcvErrors,
    cn::kDuplicateRequest,
    cn::kImpliedNakSeqErr,
    cn::kRnrNakRetryErr,
};

constexpr const char* kIrdmaNarrow[] = {
    "cnpSent",       "cnpHandled",         "cnpIgnored",     "ip4InDiscards",  "ip4InTruncatedPkts",
    "ip6InDiscards", "ip6InTruncatedPkts", "tcpRetransSegs", "tcpInOptErrors", "tcpInProtoErrors",
    "RxVlanErr",
};

struct PrioPattern {
  const char* prefix;  // text before the priority digit
  const char* suffix;  // text after it
  const char* canonical;
};

constexpr PrioPattern kEthtoolPrio[] = {
    // mlx5
    {"rx_prio", "_pause", cn::kRxPfcPauseFrames},
    {"tx_prio", "_pause", cn::kTxPfcPauseFrames},
    {"rx_prio", "_pause_duration", cn::kRxPfcPauseDurationUs},
    {"tx_prio", "_pause_duration", cn::kTxPfcPauseDurationUs},
    {"rx_prio", "_pause_transition", cn::kRxPfcPauseTransitions},
    {"rx_prio", "_discards", cn::kRxPrioDiscards},
    // ice
    {"rx_priority_", "_xoff.nic", cn::kRxPfcPauseFrames},
    {"tx_priority_", "_xoff.nic", cn::kTxPfcPauseFrames},
    // bnxt_en
    {"rx_pfc_ena_frames_pri", "", cn::kRxPfcPauseFrames},
    {"tx_pfc_ena_frames_pri", "", cn::kTxPfcPauseFrames},
    {"pfc_pri", "_rx_duration_us", cn::kRxPfcPauseDurationUs},
    {"pfc_pri", "_tx_duration_us", cn::kTxPfcPauseDurationUs},
    {"pfc_pri", "_rx_transitions", cn::kRxPfcPauseTransitions},
};

constexpr const char* kEthtoolSame[] = {
    cn::kTxPauseStormWarningEvents,
    cn::kTxPauseStormErrorEvents,
    cn::kRxDiscardsPhy,
    cn::kTxDiscardsPhy,
};

template <size_t N>
const char* Lookup(const Entry (&table)[N], absl::string_view name) {
  for (const Entry& e : table) {
    if (name == e.vendor_name) return e.canonical;
  }
  return nullptr;
}

template <size_t N>
const char* Find(const char* const (&list)[N], absl::string_view name) {
  for (const char* s : list) {
    if (name == s) return s;
  }
  return nullptr;
}

template <size_t N>
bool Contains(const char* const (&list)[N], absl::string_view name) {
  return Find(list, name) != nullptr;
}

MappedCounter Unmapped(absl::string_view name, uint8_t width) {
  MappedCounter m;
  m.name = std::string(name);
  m.width_bits = width;
  return m;
}

MappedCounter Mapped(const char* canonical, uint8_t width) {
  MappedCounter m;
  m.name = canonical;
  m.width_bits = width;
  m.mapped = true;
  return m;
}

}  // namespace

bool IsCanonicalCounterName(absl::string_view name) { return Contains(kCanonical, name); }

const char* CounterVendorName(CounterVendor vendor) {
  switch (vendor) {
    case CounterVendor::kMlx5:
      return "mlx5";
    case CounterVendor::kBnxtRe:
      return "bnxt_re";
    case CounterVendor::kIrdma:
      return "irdma";
    case CounterVendor::kRxe:
      return "rxe";
    case CounterVendor::kUnknown:
      break;
  }
  return "unknown";
}

CounterVendor CounterVendorFor(absl::string_view driver, absl::string_view device_name) {
  if (driver == "mlx5_core" || driver == "mlx5_ib") return CounterVendor::kMlx5;
  if (driver == "bnxt_en" || driver == "bnxt_re") return CounterVendor::kBnxtRe;
  if (driver == "ice" || driver == "irdma" || driver == "i40e") return CounterVendor::kIrdma;
  if (driver == "rdma_rxe" || driver == "rxe") return CounterVendor::kRxe;
  if (absl::StartsWith(device_name, "mlx5_")) return CounterVendor::kMlx5;
  if (absl::StartsWith(device_name, "bnxt_re")) return CounterVendor::kBnxtRe;
  if (absl::StartsWith(device_name, "irdma")) return CounterVendor::kIrdma;
  if (absl::StartsWith(device_name, "rxe")) return CounterVendor::kRxe;
  return CounterVendor::kUnknown;
}

MappedCounter MapHwCounter(CounterVendor vendor, absl::string_view name) {
  switch (vendor) {
    case CounterVendor::kMlx5: {
      const bool wide = Contains(kMlx5Wide, name) || absl::StartsWith(name, "cc_") ||
                        absl::StartsWith(name, "rdma_");
      const uint8_t width = wide ? 64 : 32;
      if (const char* c = Lookup(kMlx5, name)) return Mapped(c, width);
      return Unmapped(name, width);
    }
    case CounterVendor::kBnxtRe:
      if (const char* c = Lookup(kBnxtRe, name)) return Mapped(c, 64);
      return Unmapped(name, 64);
    case CounterVendor::kIrdma: {
      const uint8_t width = Contains(kIrdmaNarrow, name) ? 32 : 64;
      if (const char* c = Lookup(kIrdma, name)) return Mapped(c, width);
      return Unmapped(name, width);
    }
    case CounterVendor::kRxe:
      if (const char* c = Lookup(kRxe, name)) return Mapped(c, 64);
      break;
    case CounterVendor::kUnknown:
      break;
  }
  return Unmapped(name, 64);
}

MappedCounter MapPortCounter(absl::string_view name) {
  MappedCounter m;
  if (name == "port_xmit_data") {
    m = Mapped(cn::kTxBytes, 64);
    m.multiplier = 4;
  } else if (name == "port_rcv_data") {
    m = Mapped(cn::kRxBytes, 64);
    m.multiplier = 4;
  } else if (name == "port_xmit_packets") {
    m = Mapped(cn::kTxPackets, 64);
  } else if (name == "port_rcv_packets") {
    m = Mapped(cn::kRxPackets, 64);
  } else if (const char* same = Find(kPortSame, name)) {
    m = Mapped(same, name == cn::kPortXmitWait ? 32 : 64);
  } else {
    m = Unmapped(name, 64);
  }
  return m;
}

MappedCounter MapEthtoolCounter(absl::string_view name) {
  for (const char* same : kEthtoolSame) {
    if (name == same) return Mapped(same, 64);
  }
  for (const PrioPattern& p : kEthtoolPrio) {
    absl::string_view rest = name;
    if (!absl::ConsumePrefix(&rest, p.prefix)) continue;
    if (!absl::ConsumeSuffix(&rest, p.suffix)) continue;
    if (rest.size() != 1 || rest[0] < '0' || rest[0] > '7') continue;
    MappedCounter m = Mapped(p.canonical, 64);
    m.priority = rest[0] - '0';
    return m;
  }
  return Unmapped(name, 64);
}

}  // namespace rocetune
