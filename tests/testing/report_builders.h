#ifndef ROCETUNE_TESTS_TESTING_REPORT_BUILDERS_H_
#define ROCETUNE_TESTS_TESTING_REPORT_BUILDERS_H_

#include <cstdint>
#include <string>

#include "rocetune/v1/agent.pb.h"

namespace rocetune::testing {

// Adds one counter sample of mlx5_0 port 1 to `report` (priority -1: not per
// priority) and returns it, for the caller to set a rate or more.
inline v1::CounterSample* AddCounter(v1::Report* report, const std::string& name, int priority,
                                     uint64_t delta) {
  v1::CounterSample* c = report->add_counters();
  c->set_device("mlx5_0");
  c->set_port(1);
  c->set_priority(priority);
  c->set_name(name);
  c->set_delta(delta);
  return c;
}

}  // namespace rocetune::testing

#endif  // ROCETUNE_TESTS_TESTING_REPORT_BUILDERS_H_
