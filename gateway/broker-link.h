// The gateway's connection to the broker is the client library's asynchronous face
// (client/broker-link.h): one DEALER on its own thread, shared by every HTTP request, its
// callbacks posted to the gateway's I/O thread. Its names, as the gateway's code uses them.
#pragma once

#include "client/broker-link.h"
#include "client/protocol.h"

namespace hearth::gateway {

using client::broker_link;
using client::job_event;
using client::job_event_fn;
using client::link_failure;
using client::link_options;
using client::link_result;
using client::post_fn;

}  // namespace hearth::gateway
