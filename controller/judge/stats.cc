#include "controller/judge/stats.h"

#include <cmath>
#include <limits>

namespace rocetune::controller::stats {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Continued fraction of I_x(a, b) (modified Lentz), valid and fast for
// x < (a + 1) / (a + b + 2).
double BetaContinuedFraction(double a, double b, double x) {
  constexpr double kTiny = 1e-300;
  constexpr double kEps = 1e-15;
  constexpr int kMaxTerms = 100000;
  // f = 1 / (1 + d1 / (1 + d2 / (1 + ...))), evaluated as b0 + a1/(b1 + a2/(b2 + ...))
  // with b0 = 0, a1 = 1, a_(j+1) = d_j, b_j = 1.
  double f = kTiny;
  double c = f;
  double d = 0;
  for (int j = 1; j <= kMaxTerms; ++j) {
    double aj;
    if (j == 1) {
      aj = 1;
    } else {
      int i = j - 1;  // d_i
      int m = i / 2;
      if (i % 2 == 1) {
        aj = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1));
      } else {
        aj = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m));
      }
    }
    d = 1 + aj * d;
    if (std::abs(d) < kTiny) d = kTiny;
    c = 1 + aj / c;
    if (std::abs(c) < kTiny) c = kTiny;
    d = 1 / d;
    double delta = c * d;
    f *= delta;
    if (std::abs(delta - 1) < kEps) break;
  }
  return f;
}

}  // namespace

double LogGamma(double x) {
  if (!(x > 0)) return kInf;
  // Shift up to x >= 10, then Stirling's series.
  double shift = 0;
  while (x < 10) {
    shift += std::log(x);
    x += 1;
  }
  double inv = 1 / x;
  double inv2 = inv * inv;
  double series = inv * (1.0 / 12 - inv2 * (1.0 / 360 - inv2 * (1.0 / 1260 - inv2 * (1.0 / 1680))));
  return (x - 0.5) * std::log(x) - x + 0.5 * std::log(2 * M_PI) + series - shift;
}

double RegularizedIncompleteBeta(double a, double b, double x) {
  if (!(x > 0)) return 0;
  if (!(x < 1)) return 1;
  double log_front =
      a * std::log(x) + b * std::log1p(-x) - (LogGamma(a) + LogGamma(b) - LogGamma(a + b));
  if (x < (a + 1) / (a + b + 2)) {
    return std::exp(log_front) / a * BetaContinuedFraction(a, b, x);
  }
  return 1 - std::exp(log_front) / b * BetaContinuedFraction(b, a, 1 - x);
}

double StudentTUpperTail(double t, double df) {
  if (std::isnan(t)) return std::numeric_limits<double>::quiet_NaN();
  if (t == kInf) return 0;
  if (t == -kInf) return 1;
  double x = df / (df + t * t);
  double half = 0.5 * RegularizedIncompleteBeta(df / 2, 0.5, x);
  return t >= 0 ? half : 1 - half;
}

double StudentTQuantile(double p, double df) {
  if (!(p > 0)) return -kInf;
  if (!(p < 1)) return kInf;
  if (p < 0.5) return -StudentTQuantile(1 - p, df);
  if (p == 0.5) return 0;
  double tail = 1 - p;
  double lo = 0;
  double hi = 1;
  while (StudentTUpperTail(hi, df) > tail && hi < 1e300) hi *= 2;
  for (int i = 0; i < 200 && hi - lo > 1e-12 * hi; ++i) {
    double mid = 0.5 * (lo + hi);
    if (StudentTUpperTail(mid, df) > tail) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return 0.5 * (lo + hi);
}

double NormalQuantile(double p) {
  if (!(p > 0)) return -kInf;
  if (!(p < 1)) return kInf;
  if (p < 0.5) return -NormalQuantile(1 - p);
  double tail = 1 - p;
  double lo = 0;
  double hi = 40;
  for (int i = 0; i < 200 && hi - lo > 1e-14; ++i) {
    double mid = 0.5 * (lo + hi);
    if (0.5 * std::erfc(mid / std::sqrt(2.0)) > tail) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return 0.5 * (lo + hi);
}

double BinomialCdf(int64_t k, uint64_t n, double p) {
  if (k < 0) return 0;
  if (static_cast<uint64_t>(k) >= n) return 1;
  if (p <= 0) return 1;
  if (p >= 1) return 0;
  // P(B <= k) = I_(1-p)(n - k, k + 1).
  return RegularizedIncompleteBeta(static_cast<double>(n - static_cast<uint64_t>(k)),
                                   static_cast<double>(k) + 1, 1 - p);
}

RankInterval QuantileRankInterval(uint64_t n, double q, double confidence) {
  RankInterval out{0, n + 1};
  if (n == 0) return out;
  double half = (1 - confidence) / 2;
  // lower: the largest l in [0, n] with F(l - 1) <= half (F(-1) = 0).
  uint64_t lo = 0;
  uint64_t hi = n;
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo + 1) / 2;
    if (BinomialCdf(static_cast<int64_t>(mid) - 1, n, q) <= half) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  out.lower = lo;
  // upper: the smallest u in [1, n + 1] with F(u - 1) >= 1 - half (F(n) = 1).
  lo = 1;
  hi = n + 1;
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo) / 2;
    if (BinomialCdf(static_cast<int64_t>(mid) - 1, n, q) >= 1 - half) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  out.upper = lo;
  return out;
}

}  // namespace rocetune::controller::stats
