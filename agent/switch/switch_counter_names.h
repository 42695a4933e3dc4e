#ifndef ROCETUNE_AGENT_SWITCH_SWITCH_COUNTER_NAMES_H_
#define ROCETUNE_AGENT_SWITCH_SWITCH_COUNTER_NAMES_H_

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"

namespace rocetune {

// Canonical names of a switch's counters. On a switch a CounterKey's `device`
// is the port ("Ethernet0"); per-priority PFC counters (the host names
// rx_pfc_pause_frames, tx_pfc_pause_frames, rx_pfc_pause_duration_us of
// model/counter_names.h) carry `priority` and port = 0; queue counters
// carry the queue's position in the port's queue list in `port` (exported as
// the `queue` label) and priority -1.
namespace switch_counter_names {
inline constexpr char kQueuePackets[] = "queue_packets";
inline constexpr char kQueueBytes[] = "queue_bytes";
inline constexpr char kQueueDroppedPackets[] = "queue_dropped_packets";
inline constexpr char kQueueDroppedBytes[] = "queue_dropped_bytes";
inline constexpr char kQueueEcnMarkedPackets[] = "queue_ecn_marked_packets";
inline constexpr char kQueueEcnMarkedBytes[] = "queue_ecn_marked_bytes";
// Levels, not counters: bytes in the queue now, and the peak over the
// switch's last watermark poll.
inline constexpr char kQueueOccupancyBytes[] = "queue_occupancy_bytes";
inline constexpr char kQueueWatermarkBytes[] = "queue_watermark_bytes";
// PFC watchdog, per queue: storms detected and restored (counters), and 1
// while the queue is stormed (a level).
inline constexpr char kPfcwdStormsDetected[] = "pfcwd_storms_detected";
inline constexpr char kPfcwdStormsRestored[] = "pfcwd_storms_restored";
inline constexpr char kPfcwdStormed[] = "pfcwd_stormed";
}  // namespace switch_counter_names

// Whether a switch counter of this name is per queue (its key's port is a queue).
inline bool IsSwitchQueueCounter(absl::string_view name) {
  return absl::StartsWith(name, "queue_") || absl::StartsWith(name, "pfcwd_");
}

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_SWITCH_SWITCH_COUNTER_NAMES_H_
