// A client's socket to the broker: a DEALER configured the hearth way (schema/zmq-io.h), with
// this client's CURVE keys, connected to the endpoint. The blocking face (broker-client.h), the
// asynchronous one (broker-link.h) and the tests' client open their sockets through here, and a
// reconnect (the Lazy Pirate pattern) is a fresh one from here with the same keys.
#pragma once

#include <string>
#include <string_view>
#include <zmq.hpp>

#include "schema/codec.h"
#include "schema/curve-cert.h"

namespace hearth::client {

// A DEALER with `keys` applied (none: plain ZMTP), not connected yet: sends to it fail at once.
zmq::socket_t dealer_open(zmq::context_t& ctx, const net::curve_client_keys& keys);

// Connects `s` to `endpoint`; std::runtime_error naming the endpoint when ZeroMQ refuses it.
void dealer_connect(zmq::socket_t& s, const std::string& endpoint);

// Sends one request ([signature][command][body]) on a client's DEALER. request_send may block on
// a connected DEALER whose queue is full (the blocking face's and the tests' way: without
// ZMQ_IMMEDIATE a connecting DEALER queues the message, so it fails only on a closed socket or
// after the socket's ZMQ_SNDTIMEO). request_send_now never blocks: false when the queue is full
// or there is no peer (the asynchronous face, whose thread must go on answering timeouts).
bool request_send(zmq::socket_t& s, wire::command cmd, std::string_view body);
bool request_send_now(zmq::socket_t& s, wire::command cmd, std::string_view body);

}  // namespace hearth::client
