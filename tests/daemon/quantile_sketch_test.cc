#include "daemon/quantile_sketch.h"

#include <gtest/gtest.h>

TEST(Placeholder, Builds) { rocetune::QuantileSketch s; s.Insert(1.0); EXPECT_EQ(s.count(), 1u); }
