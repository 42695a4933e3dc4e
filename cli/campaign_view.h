#ifndef ROCETUNE_CLI_CAMPAIGN_VIEW_H_
#define ROCETUNE_CLI_CAMPAIGN_VIEW_H_

#include <string>

#include "absl/time/time.h"
#include "rocetune/v1/admin.pb.h"

namespace rocetune::cli {

// One campaign: header, start and best knobs, and the trials table (index,
// knobs, outcome, objective ratio, constraints, change), best marked.
std::string RenderCampaign(const v1::Campaign& campaign, absl::Time now);

// Every campaign, one line each.
std::string RenderCampaignList(const v1::ListCampaignsResponse& response, absl::Time now);

}  // namespace rocetune::cli

#endif  // ROCETUNE_CLI_CAMPAIGN_VIEW_H_
