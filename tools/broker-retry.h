// Trying a broker request again is the client library's (client/broker-retry.h). This header
// stays only until tools/cmd-submit.cpp includes that one (it is being edited for issue 53 item 4).
#pragma once

#include "client/broker-retry.h"
#include "tools/broker-cli.h"
