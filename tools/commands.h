// The `hearth` CLI's subcommands. Each file cmd-*.cpp adds one subcommand to the app and runs it.
// Errors are thrown as std::runtime_error and printed by main() as one line on stderr.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

namespace hearth::cli {

// A subcommand's action, run after parsing when that subcommand was chosen. Returns the exit code.
using action = std::function<int()>;

action add_run(CLI::App& app);
action add_eval(CLI::App& app);
action add_tokenize(CLI::App& app);
// hearth chat-template render: a template rendered as transformers' apply_chat_template does.
action add_chat_template(CLI::App& app);
action add_bench(CLI::App& app);
action add_convert(CLI::App& app);
action add_devices(CLI::App& app);
action add_quantize(CLI::App& app);
action add_mkmodel(CLI::App& app);
// Broker commands (tools/broker-cli.h): each takes --broker ENDPOINT, --broker-key FILE, --key
// FILE.
action add_submit(CLI::App& app);
action add_watch(CLI::App& app);
action add_jobs(CLI::App& app);
action add_job(CLI::App& app);
action add_cancel(CLI::App& app);
action add_nodes(CLI::App& app);
action add_models(CLI::App& app);
action add_up(CLI::App& app);
action add_keygen(CLI::App& app);
action add_apikey(CLI::App& app);
action add_doctor(CLI::App& app);
// hearth pull: into this machine's store, or onto nodes through the broker (--to, --all).
action add_pull(CLI::App& app);

}  // namespace hearth::cli
