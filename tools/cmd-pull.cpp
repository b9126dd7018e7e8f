// hearth pull: a model from Hugging Face, Ollama's registry, a URL or a local path into this
// machine's model store (pull/), with a progress bar on a terminal and plain lines on a pipe;
// with --to NODE or --all, the broker has nodes pull it (an admin request) and this follows the
// transfers until they end.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "pull/pull.h"
#include "store/model-store.h"
#include "tools/broker-cli.h"
#include "tools/commands.h"
#include "tools/follow-transfers.h"
#include "tools/interrupt.h"

namespace hearth::cli {
namespace {

struct pull_cli_options {
  broker_options broker;
  std::string source, name, sha256, store, to;
  bool all = false;
  int connections = 4;
  double rate_mib = 0;
  bool json = false;
};

using pull_clock = std::chrono::steady_clock;

// "1.2 MiB", "340 KiB", "12 B": a pull's sizes are often small in tests and large in life.
std::string pull_bytes_text(uint64_t b) {
  char buf[32];
  if (b >= (uint64_t(1) << 30)) {
    std::snprintf(buf, sizeof buf, "%.2f GiB", double(b) / double(1 << 30));
  } else if (b >= (uint64_t(1) << 20)) {
    std::snprintf(buf, sizeof buf, "%.1f MiB", double(b) / double(1 << 20));
  } else if (b >= 1024) {
    std::snprintf(buf, sizeof buf, "%.0f KiB", double(b) / 1024);
  } else {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(b));
  }
  return buf;
}

// What a pull shows as it goes: on a terminal one line rewritten (bar, bytes, rate, time left);
// on a pipe a plain line every 2 s (and at the end), for logs.
class pull_meter {
 public:
  explicit pull_meter(bool tty) : tty_(tty) {}

  void update(uint64_t done, uint64_t total, const std::string& from) {
    const auto now = pull_clock::now();
    if (!started_) {
      started_ = true;
      t0_ = now;
      done0_ = done;
    }
    const bool end = total > 0 && done >= total;
    if (end && ended_) return;
    ended_ = end;
    if (!end && now - last_ < std::chrono::milliseconds(tty_ ? 200 : 2000)) return;
    last_ = now;
    const double secs = std::chrono::duration<double>(now - t0_).count();
    const double rate = secs > 0 ? double(done - done0_) / secs : 0;
    std::string left = "-";
    if (rate > 0 && total > done)
      left = format_duration(int64_t(double(total - done) / rate * 1000));
    const int pct = total ? int(100.0 * double(done) / double(total)) : 100;
    if (tty_) {
      std::string bar(30, ' ');
      for (int i = 0; i < pct * 30 / 100; ++i) bar[size_t(i)] = '#';
      std::fprintf(stderr, "\r[%s] %3d%% %s / %s  %s/s  %s left  %s\033[K", bar.c_str(), pct,
                   pull_bytes_text(done).c_str(), pull_bytes_text(total).c_str(),
                   pull_bytes_text(uint64_t(rate)).c_str(), left.c_str(), from.c_str());
      if (end) std::fprintf(stderr, "\n");
    } else {
      std::fprintf(stderr, "pull: %s of %s (%d%%) from %s, %s/s\n", pull_bytes_text(done).c_str(),
                   pull_bytes_text(total).c_str(), pct, from.c_str(),
                   pull_bytes_text(uint64_t(rate)).c_str());
    }
    std::fflush(stderr);
  }
  void finish_line() {
    if (tty_ && started_) std::fprintf(stderr, "\033[K");
  }

 private:
  bool tty_;
  bool started_ = false, ended_ = false;
  pull_clock::time_point t0_{}, last_{};
  uint64_t done0_ = 0;
};

int pull_here(const pull_cli_options& o) {
  store::model_store st(o.store.empty() ? store::default_store_root()
                                        : std::filesystem::path(o.store));
  auto options = pull::pull_options_from_env();
  options.connections = o.connections;
  options.rate_limit = uint64_t(o.rate_mib * 1024 * 1024);
  pull::pull_request req{o.source, o.name, o.sha256};

  // Ctrl-C stops the pull where it is: what was flushed stays for the next `hearth pull`.
  catch_interrupt();
  std::atomic<bool> cancel{false}, done{false};
  std::thread watch([&] {
    while (!done.load()) {
      if (interrupted()) cancel = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  pull_meter meter(::isatty(2) != 0);
  store::manifest m;
  try {
    m = pull::pull_model(
        st, req, options,
        [&](const pull::pull_progress& p) {
          if (p.bytes_total > 0) meter.update(p.bytes_done, p.bytes_total, p.from);
        },
        &cancel);
  } catch (const pull::pull_error& e) {
    done = true;
    watch.join();
    meter.finish_line();
    if (e.kind == pull::pull_error_kind::cancelled) {
      std::fprintf(stderr, "\npull interrupted: `hearth pull %s` again resumes it\n",
                   o.source.c_str());
      return 130;
    }
    throw;
  }
  done = true;
  watch.join();
  uint64_t size = 0;
  for (const auto& f : m.files) size += f.size;
  if (o.json) {
    print_json({{"name", m.name},
                {"digest", m.digest},
                {"size", size},
                {"source", m.source},
                {"revision", m.revision},
                {"kind", m.kind},
                {"store", st.root().string()}});
  } else {
    std::printf("pulled %s (%s, %s) into %s\n", m.name.c_str(), pull_bytes_text(size).c_str(),
                m.digest.c_str(), st.root().string().c_str());
  }
  return 0;
}

// Through the broker: nodes pull it; this follows their transfers until each ends.
int pull_on_nodes(const pull_cli_options& o) {
  broker_client client(o.broker);
  wire::pull_model req;
  req.source = o.source;
  req.name = o.name;
  req.sha256 = o.sha256;
  req.to = o.to;
  req.all = o.all;
  const auto started = client.request<wire::transfers_started>(req);
  if (started.transfers.empty()) {
    std::fprintf(stderr, "no node needs it (every node that can hold it has it)\n");
    return 0;
  }
  return follow_transfers(client, started, "pulled", o.json);
}

}  // namespace

action add_pull(CLI::App& app) {
  auto o = std::make_shared<pull_cli_options>();
  CLI::App* cmd = app.add_subcommand(
      "pull",
      "Download a model into this machine's model store (hf:OWNER/REPO[:QUANT][@REV], "
      "hf:OWNER/REPO/FILE.gguf, ollama:NAME[:TAG], https://... --sha256 D, a path); "
      "--to NODE / --all: onto nodes, through the broker");
  cmd->add_option("source", o->source, "What to pull")->required();
  cmd->add_option("--name", o->name, "The model's name (default: the GGUF file's stem)");
  cmd->add_option("--sha256", o->sha256, "The digest of a URL's file (checked for a local file)");
  cmd->add_option("--store", o->store,
                  "The store folder (default $HEARTH_STORE, else ~/.local/share/hearth/store)");
  cmd->add_option("--connections", o->connections, "Parallel Range requests")
      ->check(CLI::Range(1, 32));
  cmd->add_option("--limit-rate", o->rate_mib, "At most this many MiB/s (0: no limit)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--to", o->to, "Pull onto this node, through the broker (admin keys)");
  cmd->add_flag("--all", o->all, "Pull onto every online node that can hold it (admin keys)");
  cmd->add_flag("--json", o->json, "Print the result as JSON");
  add_broker_options(cmd, o->broker);
  return [o] {
    if (!o->to.empty() || o->all) return pull_on_nodes(*o);
    return pull_here(*o);
  };
}

}  // namespace hearth::cli
