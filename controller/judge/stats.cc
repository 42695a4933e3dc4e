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
  // Shift up to x >= 15, then Stirling's series (error below 1e-16 there).
  double product = 1;
  while (x < 15) {
    product *= x;
    x += 1;
  }
  double shift = std::log(product);
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
  if (p == 0.5) return 0;
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
  const double half = (1 - confidence) / 2;
  // l is the largest rank in [0, n] with F(l - 1) <= half (F(-1) = 0); u the
  // smallest in [1, n + 1] with F(u - 1) >= 1 - half (F(n) = 1). F is
  // monotone, so both are found by walking from a normal-approximation start
  // (a few steps when n q (1 - q) is large) after bracketing by doubling.
  // below(r) = F(r - 1) = P(fewer than r samples fall at or below xi_q).
  auto below = [n, q](uint64_t rank) { return BinomialCdf(static_cast<int64_t>(rank) - 1, n, q); };
  const double mean = static_cast<double>(n) * q;
  const double sd = std::sqrt(mean * (1 - q));
  const double z = NormalQuantile(1 - half);
  auto clamp_rank = [](double r, uint64_t lo, uint64_t hi) {
    if (!(r > static_cast<double>(lo))) return lo;
    if (r >= static_cast<double>(hi)) return hi;
    return static_cast<uint64_t>(r);
  };
  // Lower: a bracket with lower_ok(good) and !lower_ok(bad), bad = good + 1 at the end.
  auto lower_ok = [&](uint64_t l) { return l == 0 || below(l) <= half; };
  uint64_t start = clamp_rank(std::floor(mean - z * sd), 0, n);
  uint64_t good, bad;
  if (lower_ok(start)) {
    good = start;
    uint64_t step = 1;
    bad = std::min(n + 1, good + step);
    while (bad <= n && lower_ok(bad)) {
      good = bad;
      step *= 2;
      bad = std::min(n + 1, good + step);
    }
  } else {
    bad = start;
    uint64_t step = 1;
    good = bad > step ? bad - step : 0;
    while (!lower_ok(good)) {
      bad = good;
      step *= 2;
      good = bad > step ? bad - step : 0;
    }
  }
  while (bad - good > 1) {
    uint64_t mid = good + (bad - good) / 2;
    (lower_ok(mid) ? good : bad) = mid;
  }
  out.lower = good;
  // Upper: a bracket with upper_ok(good) and !upper_ok(bad) (bad = 0: none).
  auto upper_ok = [&](uint64_t u) { return u == n + 1 || below(u) >= 1 - half; };
  start = clamp_rank(std::ceil(mean + z * sd), 1, n + 1);
  if (upper_ok(start)) {
    good = start;
    uint64_t step = 1;
    bad = good > step ? good - step : 0;
    while (bad >= 1 && upper_ok(bad)) {
      good = bad;
      step *= 2;
      bad = good > step ? good - step : 0;
    }
  } else {
    bad = start;
    uint64_t step = 1;
    good = std::min(n + 1, bad + step);
    while (!upper_ok(good)) {
      bad = good;
      step *= 2;
      good = std::min(n + 1, bad + step);
    }
  }
  while (good - bad > 1) {
    uint64_t mid = bad + (good - bad) / 2;
    (upper_ok(mid) ? good : bad) = mid;
  }
  out.upper = good;
  return out;
}

}  // namespace rocetune::controller::stats
