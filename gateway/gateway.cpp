#include "gateway/gateway.h"

#include <openssl/evp.h>
#include <spdlog/spdlog.h>

#include <deque>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "gateway/config.h"
#include "gateway/http-server.h"
#include "gateway/openai-request.h"
#include "gateway/router.h"

namespace hearth::gateway {
namespace {

using clock = std::chrono::steady_clock;

// The gateway's own identity, and a key the broker does not know, are remembered this long (a
// known key is asked about at every request).
constexpr auto whoami_ttl = std::chrono::seconds(2);
// Keys remembered at most (each a hash and a few names); past it the oldest go first.
constexpr size_t whoami_cache_entries = 10000;

// The key an HTTP client presented: `Authorization: Bearer KEY`, else `X-Api-Key: KEY`.
std::string presented_key(const http_request& r) {
  const std::string auth = r.header("authorization");
  constexpr std::string_view scheme = "bearer ";
  if (auth.size() > scheme.size()) {
    std::string head = auth.substr(0, scheme.size());
    for (auto& c : head) c = char(std::tolower(static_cast<unsigned char>(c)));
    if (head == scheme) {
      const auto start = auth.find_first_not_of(' ', scheme.size());
      if (start != std::string::npos) return auth.substr(start);
    }
  }
  return r.header("x-api-key");
}

// SHA-256 of the key: the cache never holds a secret.
std::string key_hash(const std::string& key) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (EVP_Digest(key.data(), key.size(), digest, &n, EVP_sha256(), nullptr) != 1) return {};
  return std::string(reinterpret_cast<const char*>(digest), n);
}

http_response invalid_key(std::string_view message) {
  return error_response(401, message, "authentication_error", {}, "invalid_api_key");
}

// The file at `path` opens for reading; otherwise an error naming the option and the file.
void check_readable(const std::string& option, const std::string& path) {
  std::ifstream f(path);
  if (!f) throw std::runtime_error(option + " " + path + ": cannot read the file");
}

}  // namespace

// Who API keys belong to, asked of the broker for every request that presents one, so that a
// revoked key is refused at its next request. Remembered for whoami_ttl: the gateway's own
// identity (requests without a key) and keys the broker does not know, so that a client sending
// a placeholder key ("sk-no-key-required") costs the broker one whoami per interval.
// Where keys are not required, a key the broker does not know counts as no key, as llama-server,
// Ollama and vLLM take any key when they have none configured: OpenAI's clients insist on one.
// Runs on the I/O thread only.
class key_checker {
 public:
  key_checker(broker_link& link, bool required) : link_(link), required_(required) {}

  void check(const http_request& request,
             const std::function<void(const caller*, http_response)>& done) {
    std::string key = presented_key(request);
    if (key.empty() && required_) {
      return done(nullptr,
                  invalid_key("an API key is needed: send it as 'Authorization: Bearer KEY' (an "
                              "admin makes one with `hearth apikey create NAME`)"));
    }
    if (key.size() > wire::max_api_key_bytes) {
      if (required_) {
        return done(nullptr, invalid_key("the API key is " + std::to_string(key.size()) +
                                         " bytes; keys are at most " +
                                         std::to_string(wire::max_api_key_bytes)));
      }
      key.clear();  // none of the broker's keys, and none is needed
    }
    check_key(key, done);
  }

 private:
  struct entry {
    caller who;
    bool known = false;
    link_failure failure;
    clock::time_point expires;
  };
  using done_fn = std::function<void(const caller*, http_response)>;

  void check_key(const std::string& key, const done_fn& done) {
    // "" (no key: the gateway acts as itself) is looked up like a key.
    const std::string hash = key.empty() ? std::string() : key_hash(key);
    const auto now = clock::now();
    if (auto it = cache_.find(hash); it != cache_.end() && it->second.expires > now) {
      return answer(it->second, key, done);
    }
    // Checks of the gateway's own identity share one whoami; a key's are not shared, since one
    // sent before a revocation must not answer a request that came after it.
    if (key.empty()) {
      auto [waiting, first] = waiting_.try_emplace(hash);
      waiting->second.push_back(done);
      if (!first) return;  // a whoami for it is on its way
    }
    wire::whoami w;
    w.api_key = key;
    link_.request<wire::identity>(w, [this, hash, key, done](link_result<wire::identity> r) {
      entry e;
      if (auto* id = std::get_if<wire::identity>(&r)) {
        e.who = caller{key, id->owner, id->name, id->role == "admin"};
        e.known = true;
      } else {
        const auto& f = std::get<link_failure>(r);
        e.failure = f;
      }
      e.expires = clock::now() + whoami_ttl;
      // Only answers are remembered: a broker that did not answer is asked again next time.
      if ((e.known && key.empty()) || e.failure.code == wire::error_code::unauthorized) {
        remember(hash, e);
      }
      if (!key.empty()) return answer(e, key, done);
      auto waiters = std::move(waiting_[hash]);
      waiting_.erase(hash);
      for (auto& d : waiters) answer(e, key, d);
    });
  }

  void answer(const entry& e, const std::string& key, const done_fn& done) {
    if (e.known) {
      caller c = e.who;
      c.api_key = key;
      return done(&c, {});
    }
    if (e.failure.no_reply) return done(nullptr, broker_unavailable(e.failure));
    if (e.failure.code == wire::error_code::unauthorized) {
      if (!key.empty() && !required_) return check_key(std::string(), done);
      return done(nullptr, invalid_key(key.empty() ? "the broker refused the gateway's own key: " +
                                                         e.failure.message
                                                   : "unknown or revoked API key"));
    }
    done(nullptr,
         error_response(502, "the broker could not check the API key: " + e.failure.message,
                        "server_error"));
  }

  void remember(const std::string& hash, const entry& e) {
    const auto now = clock::now();
    // Expired entries leave from the front (all live whoami_ttl); so does the oldest when full.
    while (!order_.empty() &&
           (order_.front().second <= now || cache_.size() >= whoami_cache_entries)) {
      auto it = cache_.find(order_.front().first);
      if (it != cache_.end() && it->second.expires == order_.front().second) cache_.erase(it);
      order_.pop_front();
    }
    cache_[hash] = e;
    order_.emplace_back(hash, e.expires);
  }

  broker_link& link_;
  bool required_;
  std::unordered_map<std::string, entry> cache_;
  std::deque<std::pair<std::string, clock::time_point>> order_;  // (hash, expiry), oldest first
  std::unordered_map<std::string, std::vector<std::function<void(const caller*, http_response)>>>
      waiting_;
};

struct gateway::impl : gateway_services {
  explicit impl(gateway_options o) : opt(std::move(o)) {}

  broker_link& broker() override { return *link; }
  void after(std::chrono::milliseconds delay, std::function<void()> f) override {
    if (server) return server->after(delay, std::move(f));
    deferred.emplace_back(delay, std::move(f));  // installers run before the server exists
  }
  const gateway_options& options() const override { return opt; }
  size_t http_connections() const override { return server ? server->connections() : 0; }
  const std::map<int, uint64_t>& http_responses() const override {
    static const std::map<int, uint64_t> none;
    return server ? server->responses() : none;
  }

  gateway_options opt;
  router routes;
  std::unique_ptr<broker_link> link;
  std::unique_ptr<key_checker> keys;
  std::shared_ptr<void> installed;
  std::vector<std::pair<std::chrono::milliseconds, std::function<void()>>> deferred;
  std::unique_ptr<http_server> server;
};

gateway::gateway(gateway_options o, const route_installer& install)
    : impl_(std::make_unique<impl>(std::move(o))) {
  auto& m = *impl_;
  const auto& opt = m.opt;
  if (listen_host(opt.listen).empty()) {
    throw std::runtime_error("--listen '" + opt.listen +
                             "': expected HOST:PORT, such as 127.0.0.1:8080 or [::1]:8080");
  }
  if (opt.tls_cert.empty() != opt.tls_key.empty()) {
    throw std::runtime_error(opt.tls_cert.empty()
                                 ? "--tls-key needs --tls-cert (both PEM files, or neither)"
                                 : "--tls-cert needs --tls-key (both PEM files, or neither)");
  }
  if (!opt.tls_cert.empty()) {
    check_readable("--tls-cert", opt.tls_cert);
    check_readable("--tls-key", opt.tls_key);
  }
  const bool need_keys = keys_required(opt);

  link_options lo;
  lo.endpoint = opt.broker;
  if (!opt.broker_key.empty() || !opt.key.empty()) {
    auto keys = net::curve_client_keys_load(opt.broker_key, opt.key);
    if (!keys) throw std::runtime_error(keys.message());
    lo.keys = std::move(keys).value();
  }
  // Callbacks reach the I/O thread through the server, which exists before any request does.
  m.link = std::make_unique<broker_link>(
      lo, [this](std::function<void()> f) { impl_->server->post(std::move(f)); });
  m.keys = std::make_unique<key_checker>(*m.link, need_keys);

  m.routes.add(
      "GET", "/health",
      [this](std::shared_ptr<exchange> x) {
        const bool up = impl_->link->connected();
        http_response r;
        r.status = up ? 200 : 503;
        nlohmann::json j{{"status", up ? "ok" : "unavailable"},
                         {"broker", up ? "connected" : "disconnected"}};
        // A refused key is a fault an admin fixes, not an outage to wait out: say which.
        if (const std::string why = up ? std::string() : impl_->link->refusal(); !why.empty()) {
          j["broker"] = "refused";
          j["error"] = why;
        }
        r.body = j.dump();
        x->out->reply(std::move(r));
      },
      route_options{.is_public = true});
  if (install) m.installed = install(m.routes, m);

  m.server = std::make_unique<http_server>(
      opt, m.routes,
      [this](const http_request& r, std::function<void(const caller*, http_response)> done) {
        impl_->keys->check(r, done);
      });
  for (auto& [delay, f] : m.deferred) m.server->after(delay, std::move(f));
  m.deferred.clear();

  spdlog::info("gateway: broker {}{}", opt.broker,
               lo.keys.enabled() ? " (CURVE)" : " (no CURVE keys: plain ZMTP)");
  if (need_keys) {
    spdlog::info("gateway: {} is not loopback: API keys are required on every request", opt.listen);
  } else if (!listen_is_loopback(opt.listen)) {
    spdlog::warn(
        "gateway: {} is not loopback and --insecure is set: requests without an API "
        "key act as the gateway's own broker key",
        opt.listen);
  }
}

gateway::~gateway() {
  // The routes' state (the batch service) and the link go before the server whose thread their
  // callbacks were posted to; nothing posted runs once the link is gone.
  impl_->installed.reset();
  impl_->link.reset();
}

void gateway::run(const std::atomic<bool>& stop) {
  impl_->server->run(stop);
}

uint16_t gateway::port() const {
  return impl_->server ? impl_->server->port() : 0;
}

bool gateway::bound() const {
  return impl_->server && impl_->server->bound();
}

}  // namespace hearth::gateway
