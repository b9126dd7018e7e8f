#include "node/job-engine.h"
