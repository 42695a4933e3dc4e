#ifndef ROCETUNE_CONTROLLER_JUDGE_STATS_H_
#define ROCETUNE_CONTROLLER_JUDGE_STATS_H_

#include <cstdint>

// Distribution functions the canary judge needs, written for it (no external
// numerics library). Pure functions; deterministic.
namespace rocetune::controller::stats {

// ln Gamma(x) for x > 0.
double LogGamma(double x);

// Regularized incomplete beta I_x(a, b) for a, b > 0 and 0 <= x <= 1.
double RegularizedIncompleteBeta(double a, double b, double x);

// P(T > t) for Student's t with df > 0 degrees of freedom.
double StudentTUpperTail(double t, double df);

// The t with P(T <= t) = p, for 0 < p < 1 (p = 0 or 1 give -inf / +inf).
double StudentTQuantile(double p, double df);

// Standard normal quantile, for 0 < p < 1 (p = 0 or 1 give -inf / +inf).
double NormalQuantile(double p);

// P(B <= k) for B ~ Binomial(n, p), 0 <= p <= 1; k < 0 gives 0, k >= n gives 1.
double BinomialCdf(int64_t k, uint64_t n, double p);

// Exact distribution-free two-sided interval for the q-quantile from n i.i.d.
// samples, as 1-based order-statistic ranks: P(X_(lower) <= xi_q < X_(upper)) >=
// confidence. lower = 0 means no lower bound exists; upper = n + 1 means no upper
// bound exists (too few samples).
struct RankInterval {
  uint64_t lower = 0;
  uint64_t upper = 0;
};
RankInterval QuantileRankInterval(uint64_t n, double q, double confidence);

}  // namespace rocetune::controller::stats

#endif  // ROCETUNE_CONTROLLER_JUDGE_STATS_H_
