#include "broker/job-store.h"
