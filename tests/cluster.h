// A hearth cluster for tests: the real hearth-broker and hearth-node binaries as separate
// processes on loopback, with their own SQLite file and log files in a temporary directory, and
// a test client speaking the wire protocol over a real DEALER socket through the client library
// (client/: its socket, request sending, reply matching and stream order).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "schema/curve-cert.h"
#include "schema/zmq-io.h"

namespace hearth::testing {

// A child process, killed (SIGKILL) and reaped when the handle is destroyed.
class process {
 public:
  process() = default;
  process(pid_t pid, std::string log) : pid_(pid), log_(std::move(log)) {}
  process(process&& o) noexcept;
  process& operator=(process&& o) noexcept;
  ~process();

  pid_t pid() const { return pid_; }
  const std::string& log_path() const { return log_; }
  std::string log() const;  // what it wrote to stdout and stderr so far
  void signal(int sig) const;
  // Waits for it to exit; returns its exit code, 128+signal, or -1 on timeout.
  int wait(std::chrono::milliseconds timeout = std::chrono::seconds(30));
  bool running();

 private:
  pid_t pid_ = -1;
  std::string log_;
  int status_ = -1;
};

// "--- name ---" and the log of each process given (null ones skipped): what a failing test
// prints.
std::string logs_of(std::initializer_list<std::pair<const char*, const process*>> processes);

// Starts argv[0] with the given arguments, stdout and stderr appended to `log`.
process spawn(const std::vector<std::string>& argv, const std::string& log);

// A fresh directory under the test temp dir, removed with its contents at destruction.
class temp_dir {
 public:
  temp_dir();
  ~temp_dir();
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A TCP port that was free a moment ago (on every address), below the ephemeral range.
int free_port();

// A models directory holding symlinks to test models under the given names.
void link_model(const std::string& dir, const std::string& name, const std::string& target);

class test_client;

// A broker, nodes and clients on loopback. By default it runs as a homelab should: the broker
// with --auth (CURVE, a folder of keys made in the cluster's directory), every node and client
// with a key of its role. `with_auth = false` is a broker without authentication.
class cluster {
 public:
  explicit cluster(bool with_auth = true);
  bool auth() const { return auth_; }
  // The broker's folder of keys (--auth), and the broker's public certificate.
  std::string auth_dir() const { return dir_.file("auth"); }
  std::string broker_public() const { return auth_dir() + "/broker.pub"; }
  // The secret certificate of a key of `role` named `name`, made (and its public certificate put
  // into the role's folder) on first use. `allowed = false` makes a key the broker does not know.
  std::string key(const std::string& role, const std::string& name, bool allowed = true);
  // Keys for a DEALER speaking as that key (empty without auth).
  net::curve_client_keys client_keys(const std::string& role, const std::string& name,
                                     bool allowed = true);
  // --broker-key/--key arguments for the hearth CLI and hearth-node (none without auth).
  std::vector<std::string> key_args(const std::string& role, const std::string& name);
  const std::string& endpoint() const { return endpoint_; }
  const temp_dir& dir() const { return dir_; }
  std::string db() const { return dir_.file("hearth.db"); }
  // The model store of the node of that name (start_node gives each node its own, in the
  // cluster's folder, unless the test passes --store: never the user's).
  std::string node_store(const std::string& name) const { return dir_.file("store-" + name); }
  // A models folder `dir_name` in the cluster's directory: each name a link to stories260K.
  std::string models(const std::string& dir_name, const std::vector<std::string>& names) const;
  // The same with a copy of stories260K that names the chatml chat template, for chat jobs
  // (the broker refuses chat jobs for a model no node can format them for).
  std::string chat_models(const std::string& dir_name, const std::vector<std::string>& names) const;

  // hearth-broker with short heartbeats (200 ms, liveness 5: a node is dead after 1 s) so failures
  // show quickly, yet a loaded machine running sanitizer builds does not lose live nodes.
  // `wrapper` runs it through another program (strace ...), which then execs the broker.
  process start_broker(const std::vector<std::string>& extra = {},
                       const std::vector<std::string>& wrapper = {});
  // The broker's command line, bound to `bind` (a second broker on the same database binds
  // elsewhere).
  std::vector<std::string> broker_argv(const std::string& bind,
                                       const std::vector<std::string>& extra = {});
  // Writes the brokers' YAML file: the settings start_broker uses, with `settings` (name, value)
  // added or replacing them. Without a call, start_broker writes the defaults alone.
  void broker_settings(const std::vector<std::pair<std::string, std::string>>& settings);
  std::string broker_config() const { return dir_.file("broker.yaml"); }
  // hearth-node --broker ... --name NAME --models DIR --engine ENGINE --slots K, plus extra.
  process start_node(const std::string& name, const std::string& models_dir,
                     const std::string& engine, int slots,
                     const std::vector<std::string>& extra = {});
  // hearth-gateway (`bin`: tests name it, the cluster library does not link it) on `listen`
  // (HOST:PORT), a client of this broker with the key client/gateway, its database and log in the
  // cluster's directory.
  process start_gateway(const std::string& bin, const std::string& listen,
                        const std::vector<std::string>& extra = {});
  // A client of this cluster's broker speaking as `role` ("client", "admin" or "node"; a "node"
  // client is a hand-written fake node). `name` picks one of several keys of that role. Tests
  // make every client through here, so they work whether the broker runs with keys or not.
  std::unique_ptr<test_client> client(const std::string& role = "client",
                                      const std::string& name = "default");

 private:
  temp_dir dir_;
  bool auth_ = true;
  std::string endpoint_;
  int n_logs_ = 0;
};

// The client side of the protocol, for tests: one DEALER socket (client/connection.h), replies
// matched by request_id (client/protocol.h). Unlike client::broker_client it hands the tests every
// message as it came (replies to other requests included) and never throws.
class test_client {
 public:
  explicit test_client(const std::string& endpoint, const net::curve_client_keys& keys = {});

  // Sends a request and waits for its reply (or error_reply). Events that arrive meanwhile are
  // kept for next_event().
  struct reply {
    wire::command cmd = wire::command::error;
    std::string body;
  };
  reply request_raw(wire::command cmd, const std::string& body, uint64_t request_id,
                    std::chrono::milliseconds timeout = std::chrono::seconds(10));
  template <class Reply, class Request>
  std::optional<Reply> request(Request r, std::string* error = nullptr) {
    r.request_id = ++next_id_;
    auto rep = request_raw(Request::cmd, wire::encode(r), r.request_id);
    if (rep.cmd != Reply::cmd) {
      if (error) {
        auto e = wire::decode<wire::error_reply>(rep.body);
        *error = e ? std::string(wire::error_code_name(e->code)) + ": " + e->message
                   : std::string("no reply");
      }
      return std::nullopt;
    }
    auto d = wire::decode<Reply>(rep.body);
    if (!d) return std::nullopt;
    return std::move(d.value());
  }

  // Sends a request without waiting for its reply, which then comes through next_event(): a
  // client that pipelines its requests.
  template <class Request>
  bool send(const Request& r) {
    return send_request(Request::cmd, wire::encode(r));
  }
  bool send_request(wire::command cmd, const std::string& body);

  // The next event (job_tokens, job_done ...), or nullopt after the timeout.
  std::optional<reply> next_event(std::chrono::milliseconds timeout);

  // Follows one job's events until job_done; returns the text of its last attempt (stream
  // numbering applied: duplicates and older attempts dropped) and the done message.
  struct outcome {
    std::string text;
    std::optional<wire::job_done> done;
    uint32_t restarts = 0;
  };
  outcome follow(uint64_t job_id, std::chrono::milliseconds timeout = std::chrono::seconds(60));

  // Polls get_job until the job reaches a final state; returns its detail.
  std::optional<wire::job_detail> wait_final(
      uint64_t job_id, std::chrono::milliseconds timeout = std::chrono::seconds(60));

  zmq::socket_t& socket() { return sock_; }
  // Heartbeats the broker sent (to make room in its count of our pipe); they are skipped.
  uint64_t heartbeats() const { return heartbeats_; }

 private:
  zmq::context_t ctx_;
  zmq::socket_t sock_;
  uint64_t next_id_ = 1000;
  std::vector<reply> events_;
  uint64_t heartbeats_ = 0;
};

// A greedy (temperature 0) job for `model`: the submit the cluster tests send.
wire::submit greedy_job(const std::string& model, const std::string& prompt, int32_t max_tokens);

// A reference case run through the cluster: 64 greedy tokens of `prompt` for `model`, submitted
// watched and followed; expects the job to complete with `greedy_text` (a case of
// reference/stories260K.json). `log` (a process's log) goes with a failure. Use inside
// ASSERT_NO_FATAL_FAILURE: an unanswered submit or a job that does not end ends the test. `run`
// gets the job's id and what was followed.
struct greedy_run {
  uint64_t job_id = 0;
  test_client::outcome out;
};
void expect_greedy_text(test_client& client, const std::string& model, const std::string& prompt,
                        const std::string& greedy_text, const std::function<std::string()>& log,
                        greedy_run* run = nullptr);

// Submits `s` and expects the job to be accepted and to complete within `timeout`; `log` (a
// process's log) goes with a failure. Use inside ASSERT_NO_FATAL_FAILURE. `detail` gets the
// job's final record.
void expect_completes(test_client& client, const wire::submit& s,
                      const std::function<std::string()>& log,
                      std::optional<wire::job_detail>* detail = nullptr,
                      std::chrono::milliseconds timeout = std::chrono::seconds(60));

// Polls `cond` every 20 ms until it is true or the timeout passes.
bool wait_until(const std::function<bool()>& cond,
                std::chrono::milliseconds timeout = std::chrono::seconds(20));

// Waits until `n` nodes are online at the broker `c` talks to.
bool nodes_online(test_client& c, size_t n);

}  // namespace hearth::testing
