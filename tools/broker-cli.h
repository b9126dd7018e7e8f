// What the broker subcommands (submit, watch, jobs, job, cancel, nodes, models) share: the
// --broker, --broker-key, --key and --retry-for options, wire structs as JSON, tables, times and
// sizes.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "client/broker-client.h"
#include "client/broker-retry.h"
#include "client/client-config.h"
#include "client/job-record.h"
#include "common/format-ago.h"
#include "schema/messages.h"
#include "schema/wire-json.h"

namespace hearth::cli {

// The broker commands speak to the broker through the client library (client/): its names here.
using client::broker_client;
using client::broker_endpoint;
using client::broker_endpoint_default;
using client::broker_error;
using client::broker_keys;
using client::broker_options;
using client::broker_retry;
using client::broker_timeout;
using client::broker_unreachable;
using client::client_config_dir;
using client::fetch_job;
using client::job_output_fn;
using client::job_record_fn;
using client::read_job;

// Insertion-ordered, so that objects list their fields in wire order and "event" comes first.
using json = nlohmann::ordered_json;

// Adds --broker ENDPOINT, --broker-key FILE and --key FILE to a subcommand; broker_client
// resolves what was not given (broker_endpoint(), broker_keys()).
void add_broker_options(CLI::App* cmd, broker_options& o);

// Adds --retry-for SECONDS (how long to keep trying while the broker does not answer); the option,
// to tell whether it was given (client/broker-retry.h).
CLI::Option* add_retry_option(CLI::App* cmd, int& retry_for_s);

// One JSON value per line on stdout (invalid UTF-8 replaced, never thrown on).
void print_json(const json& j);

// Text to stdout, and notices to stderr after what stdout had (both flushed at once).
void write_out(std::string_view s);
void write_err(std::string_view s);

// Rows under a header, columns two spaces apart; the last column is not padded.
void print_table(const std::vector<std::string>& header,
                 const std::vector<std::vector<std::string>>& rows);

std::string format_local_time(int64_t ms);     // "YYYY-MM-DD HH:MM:SS"; "-" for 0
std::string format_local_time_ms(int64_t ms);  // ... with ".mmm"
std::string format_duration(int64_t ms);       // "850ms", "12.3s", "4m05s", "2h03m"
// "30d", "12h", "90m", "45s" in milliseconds; nullopt for anything else, 0 and more than 100 years
// included.
std::optional<uint64_t> duration_ms(std::string_view s);
std::string format_bytes(uint64_t bytes);  // "512 MiB", "4.7 GiB"
std::string or_dash(const std::string& s);

// Sends the admin request `Request` that names one thing (a node to forget or release, an API key
// to revoke) and is answered with ok; throws as broker_client::request does.
template <class Request>
void request_by_name(const broker_options& o, const std::string& name) {
  broker_client client(o);
  Request req;
  req.name = name;
  client.request<wire::ok>(req);
}

// A broker event as a JSON line object: {"event": name, fields...}.
template <class T>
json event_json(const char* name, const T& v) {
  json j = {{"event", name}};
  const json fields = wire_json(v);
  for (auto it = fields.begin(); it != fields.end(); ++it) j[it.key()] = it.value();
  return j;
}

}  // namespace hearth::cli
