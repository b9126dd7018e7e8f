// hearth: the command-line interface. `hearth run` generates text locally; `eval`, `tokenize` and
// `bench` expose the engine for tests and measurement; `devices` lists the Vulkan devices;
// `submit`, `watch`, `jobs`, `job`, `cancel`, `nodes` and `models` talk to a broker; `keygen`
// makes the keys they and the nodes talk to it with; `apikey` manages the API keys of HTTP clients.
#include <cctype>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "common/closest-name.h"
#include "schema/version.h"
#include "tools/commands.h"

namespace {

// An unknown option named alone, with the closest one its command has ("--tmep": did you mean
// --temp?). CLI11's own message lists every argument it could not place, so a mistyped flag
// seemed to blame the prompt after it too.
std::string unexpected_arguments(CLI::App& app, const CLI::ExtrasError& e) {
  CLI::App* cmd = &app;
  for (CLI::App* sub : app.get_subcommands()) cmd = sub;
  std::vector<std::string> names;
  for (const CLI::Option* o : cmd->get_options()) {
    for (const auto& l : o->get_lnames()) names.push_back("--" + l);
    for (const auto& s : o->get_snames()) names.push_back("-" + s);
  }
  std::vector<std::string> rest = cmd->remaining();
  if (cmd != &app) {
    const auto top = app.remaining();
    rest.insert(rest.end(), top.begin(), top.end());
  }
  for (const std::string& arg : rest) {
    const bool option =
        arg.size() > 1 && arg[0] == '-' && !std::isdigit(uint8_t(arg[1])) && arg[1] != '.';
    if (!option) continue;
    const std::string name = arg.substr(0, arg.find('='));
    const std::string command = cmd == &app ? "hearth" : "hearth " + cmd->get_name();
    std::string msg = "unknown option " + name + " for " + command;
    if (const auto close = hearth::closest_name(name, names); !close.empty()) {
      msg += " (did you mean " + close + "?)";
    }
    return msg + " (see " + command + " --help)";
  }
  return std::string(e.what()) + " (see hearth --help)";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"hearth: one LLM inference service across the machines of a homelab"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for every subcommand");
  app.set_version_flag("--version", hearth::wire::version_line("hearth"));

  std::vector<std::pair<CLI::App*, hearth::cli::action>> commands;
  for (auto add : {hearth::cli::add_run,      hearth::cli::add_eval,    hearth::cli::add_tokenize,
                   hearth::cli::add_bench,    hearth::cli::add_convert, hearth::cli::add_devices,
                   hearth::cli::add_quantize, hearth::cli::add_mkmodel, hearth::cli::add_submit,
                   hearth::cli::add_watch,    hearth::cli::add_jobs,    hearth::cli::add_job,
                   hearth::cli::add_cancel,   hearth::cli::add_nodes,   hearth::cli::add_models,
                   hearth::cli::add_up,       hearth::cli::add_keygen,  hearth::cli::add_apikey,
                   hearth::cli::add_doctor,   hearth::cli::add_pull,
                   hearth::cli::add_chat_template}) {
    const size_t before = app.get_subcommands({}).size();
    auto act = add(app);
    commands.emplace_back(app.get_subcommands({})[before], std::move(act));
  }

  std::string names;
  bool known = false;
  for (auto& [sub, act] : commands) {
    names += (names.empty() ? "" : ", ") + sub->get_name();
    known = known || (argc > 1 && sub->get_name() == argv[1]);
  }
  if (argc > 1 && argv[1][0] != '-' && !known) {
    std::fprintf(stderr, "hearth: error: unknown command '%s' (commands: %s)\n", argv[1],
                 names.c_str());
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ExtrasError& e) {
    std::fprintf(stderr, "hearth: error: %s\n", unexpected_arguments(app, e).c_str());
    return 2;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "hearth: error: %s (see hearth --help)\n", e.what());
    return 2;
  }

  try {
    for (auto& [sub, act] : commands) {
      if (sub->parsed()) return act();
    }
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "hearth: error: %s\n", e.what());
    return 1;
  }
  return 1;
}
