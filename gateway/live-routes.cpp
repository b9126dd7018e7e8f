// The dashboard's live data, as Server-Sent Events of JSON objects, each asked of the broker as
// the caller (its API key):
//
// GET /v1/hearth/live: a snapshot every second (nodes, each model's queue, the caller's running
// and queued jobs). Snapshots are made per caller key, not per connection: one poll of the
// broker per interval for every distinct key with subscribers, shared by that key's
// connections, and at most gateway_options::max_live_subscribers connections at once (503
// beyond), so many open dashboards cost the broker little.
//
// GET /v1/hearth/jobs/{id}/events: one job's events from the start of its latest attempt
// (queued, running, tokens, restarted, done), through the broker link's follower; a client that
// goes away stops the following, never the job.
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gateway/openai-json.h"
#include "gateway/openai-routes.h"
#include "gateway/openai-stream.h"
#include "gateway/routes.h"
#include "schema/wire-json.h"

namespace hearth::gateway {
namespace {

constexpr auto k_live_interval = std::chrono::milliseconds(1000);
// Running and queued jobs listed in a snapshot, each (the newest; the queue per model counts all).
constexpr uint32_t k_live_jobs = 200;

int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// {"type": type, ...the message's wire fields}.
template <class T>
ojson typed(const char* type, const T& message) {
  ojson j;
  j["type"] = type;
  const ojson fields = wire_json(message);
  for (const auto& [k, v] : fields.items()) j[k] = v;
  return j;
}

ojson link_error_json(const link_failure& f) {
  ojson j;
  if (f.handshake_refused) {
    j["code"] = "broker_refused_gateway_key";
    j["message"] = f.message;
    return j;
  }
  j["code"] = f.no_reply ? "broker_unavailable" : std::string(wire::error_code_name(f.code));
  j["message"] = f.no_reply ? "the broker did not answer: " + f.message : f.message;
  return j;
}

// ---- GET /v1/hearth/jobs/{id}/events ------------------------------------------------------

class job_events : public std::enable_shared_from_this<job_events> {
 public:
  job_events(gateway_services& s, std::shared_ptr<exchange> ex, uint64_t job_id)
      : s_(s), ex_(std::move(ex)), job_id_(job_id) {}

  void start() {
    std::weak_ptr<job_events> weak = weak_from_this();
    follower_ =
        s_.broker().follow(job_id_, ex_->who.api_key,
                           [self = shared_from_this()](const job_event& e) { self->on_event(e); });
    ex_->out->on_close([weak] {
      auto self = weak.lock();
      if (!self || self->ended_) return;
      self->ended_ = true;
      self->s_.broker().unfollow(self->follower_);
    });
    keep_alive_every(weak);
  }

 private:
  void keep_alive_every(std::weak_ptr<job_events> weak) {
    s_.after(k_keep_alive, [weak] {
      auto self = weak.lock();
      if (!self || self->ended_) return;
      if (self->started_) self->ex_->out->comment("keep-alive");
      self->keep_alive_every(weak);
    });
  }

  void send(const ojson& j) {
    if (!started_) {
      ex_->out->start_events();
      started_ = true;
    }
    ex_->out->event(json_text(j));
  }

  // Text up to the last whole UTF-8 character; the rest waits for the next chunk.
  void send_text(const wire::job_tokens& t, bool flush) {
    pending_ += t.text;
    const size_t n = flush ? pending_.size() : utf8_whole_prefix(pending_);
    ojson j = typed("tokens", t);
    j["text"] = pending_.substr(0, n);
    pending_.erase(0, n);
    send(j);
  }

  void on_event(const job_event& e) {
    if (ended_) return;
    if (auto* f = std::get_if<link_failure>(&e)) {
      ended_ = true;
      // Refused before anything was sent (no such job, not the caller's): an HTTP error.
      if (!started_) return ex_->out->reply(job_link_error(*f, job_id_));
      send({{"type", "error"}, {"error", link_error_json(*f)}});
      return ex_->out->end_events();
    }
    if (auto* q = std::get_if<wire::job_queued>(&e)) return send(typed("queued", *q));
    if (auto* r = std::get_if<wire::job_running>(&e)) return send(typed("running", *r));
    if (auto* t = std::get_if<wire::job_tokens>(&e)) return send_text(*t, false);
    if (auto* r = std::get_if<wire::job_restarted>(&e)) {
      pending_.clear();  // the new attempt starts its text over
      return send(typed("restarted", *r));
    }
    if (auto* d = std::get_if<wire::job_done>(&e)) {
      if (!pending_.empty()) send_text(wire::job_tokens{d->job_id, d->attempt, 0, 0, {}}, true);
      ended_ = true;
      send(typed("done", *d));
      ex_->out->end_events();
    }
  }

  gateway_services& s_;
  std::shared_ptr<exchange> ex_;
  uint64_t job_id_ = 0;
  uint64_t follower_ = 0;
  bool started_ = false;  // the SSE head went out
  bool ended_ = false;
  std::string pending_;  // an unfinished UTF-8 character of the current attempt
};

// ---- GET /v1/hearth/live ------------------------------------------------------------------

// One round of the broker's lists for one caller key, gathered into a snapshot.
struct live_poll {
  std::optional<wire::nodes_reply> nodes;
  std::optional<wire::models_reply> models;
  std::optional<wire::jobs_reply> running, queued;
  std::vector<link_failure> failures;
  int waiting = 4;

  std::string snapshot(const caller& who, int64_t now) const {
    ojson j;
    j["type"] = "snapshot";
    j["time_ms"] = now;
    j["interval_ms"] = k_live_interval.count();
    j["caller"] = {{"name", who.name}, {"admin", who.admin}};
    ojson node_list = ojson::array();
    if (nodes) {
      for (const auto& n : nodes->nodes) {
        ojson node = wire_json(n);
        node.erase("key");
        node["state"] = n.quarantined_until_ms > now ? "quarantined"
                        : n.online                   ? "online"
                                                     : "offline";
        node_list.push_back(std::move(node));
      }
    }
    j["nodes"] = std::move(node_list);
    ojson queues = ojson::array();
    if (models) {
      for (const auto& m : models->models) {
        queues.push_back({{"model", m.name},
                          {"queued", m.queued},
                          {"nodes", m.nodes},
                          {"loaded_on", m.loaded_on},
                          {"digest", m.digest},
                          {"holders", m.holders}});
      }
    }
    j["models"] = std::move(queues);
    j["transfers"] = models ? wire_json(models->transfers) : ojson::array();
    j["running"] = running ? wire_json(running->jobs) : ojson::array();
    j["queued"] = queued ? wire_json(queued->jobs) : ojson::array();
    ojson errors = ojson::array();
    for (const auto& f : failures) errors.push_back(link_error_json(f));
    j["errors"] = std::move(errors);
    return json_text(j);
  }
};

class live_hub : public std::enable_shared_from_this<live_hub> {
 public:
  explicit live_hub(gateway_services& s) : s_(s) {}

  void subscribe(const std::shared_ptr<exchange>& ex) {
    prune();
    const uint32_t cap = s_.options().max_live_subscribers;
    if (subscribers_ >= cap) {
      return ex->out->reply(error_response(
          503, "too many live dashboards (" + std::to_string(cap) + " at once); try again later",
          "server_error", {}, "too_many_subscribers"));
    }
    ex->out->start_events();
    group& g = groups_[ex->who.api_key];
    g.who = ex->who;
    g.subscribers.push_back(ex->out);
    ++subscribers_;
    // The key's latest snapshot at once; a fresh one comes with the next poll.
    if (!g.last.empty()) ex->out->event(g.last);
    std::weak_ptr<live_hub> weak = weak_from_this();
    ex->out->on_close([weak] {
      if (auto hub = weak.lock()) hub->prune();
    });
    if (!ticking_) {
      ticking_ = true;
      tick();
    }
  }

 private:
  struct group {
    caller who;
    std::vector<std::shared_ptr<responder>> subscribers;
    bool polling = false;  // a poll for this key is on its way: the next tick skips it
    std::string last;      // the latest snapshot
  };

  // Drops the subscribers that went away, and the keys left without any.
  void prune() {
    subscribers_ = 0;
    for (auto it = groups_.begin(); it != groups_.end();) {
      auto& subs = it->second.subscribers;
      std::erase_if(subs, [](const std::shared_ptr<responder>& r) { return r->closed(); });
      subscribers_ += subs.size();
      if (subs.empty() && !it->second.polling) {
        it = groups_.erase(it);
      } else {
        ++it;
      }
    }
  }

  void tick() {
    prune();
    if (groups_.empty()) {
      ticking_ = false;
      return;
    }
    for (auto& [key, g] : groups_) {
      if (!g.polling && !g.subscribers.empty()) poll(key, g);
    }
    std::weak_ptr<live_hub> weak = weak_from_this();
    s_.after(k_live_interval, [weak] {
      if (auto hub = weak.lock()) hub->tick();
    });
  }

  void poll(const std::string& key, group& g) {
    g.polling = true;
    auto p = std::make_shared<live_poll>();
    std::weak_ptr<live_hub> weak = weak_from_this();
    auto arrived = [weak, key, p] {
      if (--p->waiting > 0) return;
      if (auto hub = weak.lock()) hub->deliver(key, *p);
    };
    auto on = [p, arrived]<class Reply>(std::optional<Reply>& slot) {
      return [p, arrived, &slot](link_result<Reply> r) {
        if (auto* f = std::get_if<link_failure>(&r)) {
          p->failures.push_back(*f);
        } else {
          slot = std::move(std::get<Reply>(r));
        }
        arrived();
      };
    };
    wire::list_nodes ln;
    ln.api_key = key;
    s_.broker().request<wire::nodes_reply>(ln, on(p->nodes));
    wire::list_models lm;
    lm.api_key = key;
    s_.broker().request<wire::models_reply>(lm, on(p->models));
    for (auto [state, slot] : {std::pair{wire::job_state::running, &p->running},
                               std::pair{wire::job_state::queued, &p->queued}}) {
      wire::list_jobs lj;
      lj.api_key = key;
      lj.state = std::string(wire::job_state_name(state));
      lj.limit = k_live_jobs;
      s_.broker().request<wire::jobs_reply>(lj, on(*slot));
    }
  }

  void deliver(const std::string& key, const live_poll& p) {
    auto it = groups_.find(key);
    if (it == groups_.end()) return;
    group& g = it->second;
    g.polling = false;
    g.last = p.snapshot(g.who, unix_ms());
    for (const auto& out : g.subscribers) {
      if (!out->closed()) out->event(g.last);
    }
  }

  gateway_services& s_;
  std::map<std::string, group> groups_;  // by API key ("" = none)
  size_t subscribers_ = 0;
  bool ticking_ = false;
};

}  // namespace

std::shared_ptr<void> add_live_routes(router& r, gateway_services& s) {
  auto hub = std::make_shared<live_hub>(s);
  std::weak_ptr<live_hub> weak = hub;
  r.add("GET", "/v1/hearth/live", [weak](std::shared_ptr<exchange> ex) {
    if (!ex->request.query.empty()) {
      return ex->out->reply(error_response(400, "/v1/hearth/live takes no query parameters",
                                           "invalid_request_error"));
    }
    if (auto h = weak.lock()) h->subscribe(ex);
  });
  r.add("GET", "/v1/hearth/jobs/{id}/events", [&s](std::shared_ptr<exchange> ex) {
    const std::string id = ex->params["id"];
    auto job_id = parse_job_id(id);
    if (!job_id) return ex->out->reply(bad_job_id(id));
    std::make_shared<job_events>(s, std::move(ex), *job_id)->start();
  });
  return hub;
}

}  // namespace hearth::gateway
