#include "controller/audit/audit_chain.h"
