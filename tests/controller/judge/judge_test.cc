#include "controller/judge/judge.h"

#include <gtest/gtest.h>
