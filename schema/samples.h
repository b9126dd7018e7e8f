// A filled-in value of every message in messages.h, each field away from its default (extreme
// integers, ids above 2^32, a NUL and UTF-8 in strings, non-empty lists), so that a field the
// codec drops or misreads shows. Used by schema/codec_test.cpp and the wire fuzz seeds
// (fuzz/wire_fuzz_seeds.cpp); a message added to HEARTH_WIRE_MESSAGES needs a sample here.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "schema/messages.h"

namespace hearth::wire::samples {

inline constexpr uint64_t job_id = (uint64_t(1) << 40) + 7;  // needs all 64 bits
inline constexpr uint64_t request_id = 0xFFFFFFFFFFFFFFFFull;
inline constexpr uint64_t transfer_id = (uint64_t(1) << 52) + 3;
inline const std::string digest_a =
    "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
inline const std::string digest_b =
    "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

inline gpu_info gpu() {
  return {"cuda",
          "NVIDIA GeForce RTX 3090",
          25'769'803'776ull,
          21'474'836'480ull,
          "NVIDIA",
          "discrete",
          {{25'769'803'776ull, true}, {34'359'738'368ull, false}},
          "8.6",
          0.375};
}

inline hardware_info hardware() {
  return {"AMD Ryzen 9 5950X 16-Core Processor",
          32,
          68'719'476'736ull,
          51'539'607'552ull,
          {gpu(), {"vulkan", "AMD Radeon RX 6600", 8'589'934'592ull, 1}},
          34'359'738'368ull};  // --memory-limit 32GiB
}

inline model_info model(bool loaded) {
  model_info m;
  m.name = "qwen3-30b-a3b-q4_k_m";
  m.architecture = "qwen3moe";
  m.quantization = "Q4_K_M";
  m.size_bytes = 18'556'686'208ull;
  m.context_length = 40960;
  m.loaded = loaded;
  m.chat_template = "qwen3";
  m.params_total = 30'532'122'624ull;
  m.params_active = 3'345'352'704ull;
  m.digest = digest_a;
  m.files = {{"qwen3-30b-a3b-q4_k_m.gguf", digest_a, m.size_bytes}};
  m.source =
      "hf:Qwen/Qwen3-30B-A3B-GGUF@0123456789abcdef0123456789abcdef01234567/"
      "Qwen3-30B-A3B-Q4_K_M.gguf";
  m.pinned = true;
  m.layout = {{uint64_t(1) << 33, 1, 0}, 311'164'928ull, 311'164'928ull, 4096,          98'304,
              20'000'000'000ull,         402'653'184ull, 50'331'648ull,  311'164'928ull};
  return m;
}

// The stages of a pipeline over three nodes (stage_assign, models_reply).
inline std::vector<pipeline_stage> pipeline() {
  return {{"gpu-box", 0, 30, "tcp://192.168.1.20:7713", "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"},
          {"old-box", 30, 44, "tcp://[fe80::1]:7713", ""},
          {"pi-\xc3\xa9", 44, std::numeric_limits<int32_t>::max(), "tcp://10.0.0.3:1", "k"}};
}

// Two files of a split GGUF, digests in their wire form.
inline std::vector<model_file> split_files() {
  return {{"m-00001-of-00002.gguf", digest_a, uint64_t(1) << 34},
          {"m-00002-of-00002.gguf", digest_b, 1}};
}

inline transfer_info transfer(uint64_t id, std::string state) {
  return {id,
          "qwen3-30b-a3b-q4_k_m",
          "old-box",
          "peer:gpu-box",
          std::move(state),
          1 << 30,
          18'556'686'208ull,
          1'700'000'000'999,
          "sha256 mismatch: got sha256:00, expected sha256:11"};
}

inline skipped_model skipped() {
  return {"llama-3-8b.Q4_K_M.gguf",
          "tensor 'blk.31.ffn_down.weight' ends at byte 4920000000 but the file has 2147483648"};
}

// Every field of chat_message away from its default somewhere: a tool call and its result.
inline std::vector<chat_message> conversation() {
  chat_message call;
  call.role = "assistant";
  call.content = "Je regarde.";
  call.name = "meteo";
  call.tool_call_id = "call_0";
  call.reasoning_content = "The user asks why; a tool knows the sky.";
  call.tool_calls = {{"call_1", "get_weather", R"({"city": "Paris", "units": "metric"})"}};
  chat_message result;
  result.role = "tool";
  result.content = R"({"sky": "blue"})";
  result.name = "get_weather";
  result.tool_call_id = "call_1";
  return {{"system", "Answer briefly."}, {"user", "Pourquoi le ciel est-il bleu ?"}, call, result};
}

inline job_params params() {
  job_params p;
  p.max_tokens = std::numeric_limits<int32_t>::max();
  p.temperature = 0.25f;
  p.top_k = -1;
  p.top_p = 0.5f;
  p.min_p = 0.125f;
  p.repeat_penalty = 1.5f;
  p.repeat_last_n = std::numeric_limits<int32_t>::min();
  p.seed = 0xFFFFFFFFFFFFFFFFull;
  p.stop = {"\n\n", "</s>", ""};
  p.presence_penalty = -0.5f;
  p.frequency_penalty = 1.75f;
  p.chat_template = "llama3";
  p.enable_thinking = false;
  p.show_thinking = true;
  api_params& a = p.api;
  a.tools = R"([{"type":"function","function":{"name":"get_weather","parameters":{}}}])";
  a.tool_choice = "function:get_weather";
  a.parallel_tool_calls = false;
  a.json_schema = R"({"type":"object","required":["sky"]})";
  a.grammar = "root ::= \"{\" [^}]* \"}\"";
  a.template_kwargs = R"({"enable_thinking":false})";
  a.logprobs = true;
  a.top_logprobs = 20;
  a.n = std::numeric_limits<int32_t>::max();
  a.logit_bias = {{std::numeric_limits<int32_t>::max(), -100}, {-1, 0.5f}};
  a.events = true;
  return p;
}

inline job_summary summary() {
  job_summary s;
  s.job_id = job_id;
  s.model = "stories260K";
  s.state = job_state::running;
  s.priority = -5;
  s.node = "gpu-box";
  s.attempts = 2;
  s.created_ms = 1'700'000'000'000;
  s.started_ms = 1'700'000'000'250;
  s.finished_ms = -1;
  s.n_prompt = 17;
  s.n_gen = 4;
  s.stop_reason = "max_tokens";
  s.error = "node old-box stopped responding";
  s.owner = "alice";
  return s;
}

inline job_event event(std::string name, uint32_t attempt) {
  return {1'700'000'000'100 + attempt, std::move(name), attempt, "gpu-box", "slot 1"};
}

template <class M>
M sample();

template <>
inline heartbeat sample<heartbeat>() {
  return {};
}

template <>
inline error_reply sample<error_reply>() {
  return {request_id, error_code::queue_full, "the queue is full (1000 jobs)"};
}

template <>
inline node_hello sample<node_hello>() {
  node_hello m;
  m.version = 2;
  m.name = "gpu-box";
  m.hostname = "gpu-box.lan";
  m.engine = "cpu";
  m.slots = 4;
  m.hardware = hardware();
  m.models = {model(true), {"stories260K", "llama", "F32", 1'185'376, 512, false}};
  m.running = {{job_id, 3}, {job_id + 1, std::numeric_limits<uint32_t>::max()}};
  m.skipped = {skipped()};
  m.instance = std::numeric_limits<uint64_t>::max();
  m.transfer_port = 5556;
  m.transfer_key = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7";
  m.store_capacity = uint64_t(1) << 40;
  m.stage_port = 7713;
  return m;
}

template <>
inline node_pull sample<node_pull>() {
  return {std::numeric_limits<uint32_t>::max()};
}

template <>
inline node_status sample<node_status>() {
  return {{model(false)},
          {skipped(), {"Ünïcode.gguf", "dangling symbolic link to /mnt/gone"}},
          hardware(),
          (uint64_t(1) << 40) + 1};
}

template <>
inline job_started sample<job_started>() {
  return {job_id, 3, 17, 1234.5};
}

template <>
inline job_tokens sample<job_tokens>() {
  using namespace std::string_literals;
  return {job_id, 3, 8, 8, " blue \xC3\xA9t\0\xE2\x96\x81"s};
}

template <>
inline job_final sample<job_final>() {
  job_final m;
  m.job_id = job_id;
  m.attempt = 3;
  m.state = job_state::failed;
  m.stop_reason = "error";
  m.error = "out of memory";
  m.n_prompt = 17;
  m.n_gen = 200;
  m.prompt_ms = 12.5;
  m.gen_ms = 1234.0625;
  return m;
}

template <>
inline job_handback sample<job_handback>() {
  return {job_id, 3, "node shutting down"};
}

template <>
inline node_bye sample<node_bye>() {
  return {};
}

template <>
inline transfer_status sample<transfer_status>() {
  transfer_status m;
  m.transfer_id = transfer_id;
  m.state = "failed";
  m.bytes_done = (uint64_t(1) << 33) + 5;
  m.bytes_total = uint64_t(1) << 34;
  m.bytes_from_peers = uint64_t(1) << 32;
  m.from = "peer:gpu-box";
  m.digest = digest_a;
  m.error = "peer gpu-box sent a blob whose sha256 differs; no other holder";
  return m;
}

template <>
inline node_welcome sample<node_welcome>() {
  return {2, 500, 5};
}

template <>
inline job_assign sample<job_assign>() {
  job_assign m;
  m.job_id = job_id;
  m.attempt = 3;
  m.model = "qwen2.5-0.5b-instruct-q8_0";
  m.prompt = "Once upon a time";
  m.messages = conversation();
  m.params = params();
  m.pipeline_id = (uint64_t(1) << 40) + 9;
  return m;
}

template <>
inline job_cancel sample<job_cancel>() {
  return {job_id, 3};
}

template <>
inline job_resume sample<job_resume>() {
  return {job_id, 3, uint64_t(1) << 35};
}

template <>
inline model_fetch sample<model_fetch>() {
  model_fetch m;
  m.transfer_id = transfer_id;
  m.name = "m-q4_k_m";
  m.source = "https://example.com/m-q4_k_m.gguf";
  m.sha256 = digest_b;
  m.files = split_files();
  m.peers = {{"gpu-box", "tcp://192.168.1.20:5556", "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"},
             {"old-box", "tcp://[fe80::1]:5556", ""}};
  m.origin = "hf:OWNER/REPO@0123456789abcdef0123456789abcdef01234567/m-00001-of-00002.gguf";
  return m;
}

template <>
inline transfer_allow sample<transfer_allow>() {
  return {transfer_id,
          "old-box",
          "Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID",
          {digest_a, digest_b},
          std::numeric_limits<uint32_t>::max()};
}

template <>
inline model_evict sample<model_evict>() {
  return {"qwen3-30b-a3b-q4_k_m"};
}

template <>
inline blob_request sample<blob_request>() {
  return {request_id, transfer_id, digest_a, (uint64_t(1) << 40) + 4096, max_blob_chunk};
}

template <>
inline blob_chunk sample<blob_chunk>() {
  return {request_id, (uint64_t(1) << 40) + 4096, max_blob_chunk, (uint64_t(1) << 41) + 5};
}

template <>
inline stage_assign sample<stage_assign>() {
  return {(uint64_t(1) << 40) + 9,
          std::numeric_limits<uint32_t>::max(),
          "qwen3-30b-a3b-q4_k_m",
          pipeline(),
          2,
          "q8_0"};
}

template <>
inline stage_release sample<stage_release>() {
  return {(uint64_t(1) << 40) + 9};
}

template <>
inline stage_batch sample<stage_batch>() {
  stage_batch m;
  m.pipeline_id = (uint64_t(1) << 40) + 9;
  m.version = std::numeric_limits<uint32_t>::max();
  m.step = (uint64_t(1) << 50) + 1;
  m.ops = {{"seq_clear", 3, 17}, {"seq_copy", 0, std::numeric_limits<int32_t>::max()}};
  m.tokens = {1, std::numeric_limits<int32_t>::max(), 0};
  m.pos = {0, 4095, std::numeric_limits<int32_t>::min()};
  m.seqs = {0, 1, 2};
  m.logits = {0, 1, 1};
  m.hidden_type = "f16";
  m.n_embd = 8192;
  m.error = "stage 1 (old-box): decode failed: \xc3\xa9";
  return m;
}

template <>
inline submit sample<submit>() {
  submit m;
  m.request_id = request_id;
  m.model = "qwen2.5-0.5b-instruct-q8_0";
  m.prompt = "Once upon a time";
  m.messages = conversation();
  m.params = params();
  m.priority = std::numeric_limits<int32_t>::min();
  m.wait_model = true;
  m.watch = true;
  m.request_key = "3f9a-\xc3\xa9t\xc3\xa9";
  m.api_key = "hk_3q2-7wEVCv8QmZ1p0bN4oJtXy5Rc6dLgAeHfKsUi9Mz";
  return m;
}

template <>
inline watch sample<watch>() {
  return {request_id, job_id, 4, uint64_t(1) << 36, uint64_t(1) << 38, "hk_watcher"};
}

template <>
inline cancel sample<cancel>() {
  return {request_id, job_id, "hk_canceller"};
}

template <>
inline list_jobs sample<list_jobs>() {
  return {request_id, "running", "stories260K", 1000, "hk_lister"};
}

template <>
inline get_job sample<get_job>() {
  return {request_id, job_id, uint64_t(1) << 40, 65536, uint64_t(1) << 33, 4096, "hk_reader"};
}

template <>
inline list_nodes sample<list_nodes>() {
  return {request_id, "hk_nodes"};
}

template <>
inline list_models sample<list_models>() {
  return {request_id, "hk_models"};
}

template <>
inline forget_node sample<forget_node>() {
  return {request_id, "old-laptop"};
}

template <>
inline release_node sample<release_node>() {
  return {request_id, "flaky-box"};
}

template <>
inline prune_jobs sample<prune_jobs>() {
  return {request_id, uint64_t(30) * 24 * 3600 * 1000, uint64_t(1) << 33};
}

template <>
inline accepted sample<accepted>() {
  return {request_id, job_id, 12, "no online node serves model 'm' (last seen: node a, 3h ago)"};
}

template <>
inline job_queued sample<job_queued>() {
  return {job_id, 11, "no node has offered model 'm' yet; waiting"};
}

template <>
inline job_running sample<job_running>() {
  return {job_id, 3, "gpu-box"};
}

template <>
inline job_restarted sample<job_restarted>() {
  return {job_id, 4, "node gpu-box stopped responding"};
}

template <>
inline job_done sample<job_done>() {
  return {job_id, 3, job_state::cancelled, "cancelled", "cancelled by the client", 17, 9};
}

template <>
inline jobs_reply sample<jobs_reply>() {
  job_summary queued;
  queued.job_id = 1;
  queued.model = "m";
  return {request_id, {summary(), queued}};
}

template <>
inline job_reply sample<job_reply>() {
  job_detail d;
  d.summary = summary();
  d.prompt = "Once upon a time";
  d.messages = conversation();
  d.params = params();
  d.output = ", there was a little girl";
  d.events = {event("queued", 0), event("assigned", 1), event("requeued", 2)};
  d.waiting = "every online node that serves model 'm' is quarantined";
  return {request_id, d, uint64_t(1) << 40, (uint64_t(1) << 40) + 24, 7, 23};
}

template <>
inline nodes_reply sample<nodes_reply>() {
  node_summary n;
  n.name = "gpu-box";
  n.hostname = "gpu-box.lan";
  n.engine = "cpu";
  n.online = true;
  n.last_seen_ms = 1'700'000'000'999;
  n.slots = 4;
  n.running = 2;
  n.hardware = hardware();
  n.models = {model(true)};
  n.key = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7";
  n.quarantined_until_ms = 1'700'000'060'999;
  n.lost = 3;
  n.losses = {{1'700'000'000'123, job_id, 2, "node gpu-box stopped responding"}};
  return {request_id, {n, node_summary{}}, 4096, true};
}

template <>
inline models_reply sample<models_reply>() {
  model_summary s;
  s.name = "qwen2.5-0.5b-instruct-q8_0";
  s.architecture = "qwen2";
  s.quantization = "Q8_0";
  s.size_bytes = 531'068'928ull;
  s.context_length = 32768;
  s.nodes = {"gpu-box", "old-box"};
  s.loaded_on = {"gpu-box"};
  s.queued = 3;
  s.params_total = 494'032'768ull;
  s.params_active = 494'032'768ull;
  s.digest = digest_a;
  s.holders = {"gpu-box", "old-box", "nas"};
  s.stages = pipeline();
  return {request_id,
          {s},
          70000,
          true,
          {{"old-box", {skipped()}}},
          {transfer(transfer_id, "running"), transfer(transfer_id - 1, "failed")}};
}

template <>
inline ok sample<ok>() {
  return {request_id};
}

template <>
inline pruned sample<pruned>() {
  return {request_id, uint64_t(1) << 34};
}

template <>
inline whoami sample<whoami>() {
  return {request_id, "hk_3q2-7wEVCv8QmZ1p0bN4oJtXy5Rc6dLgAeHfKsUi9Mz"};
}

template <>
inline create_api_key sample<create_api_key>() {
  return {request_id, "open-webui", true};
}

template <>
inline list_api_keys sample<list_api_keys>() {
  return {request_id};
}

template <>
inline revoke_api_key sample<revoke_api_key>() {
  return {request_id, "open-webui"};
}

template <>
inline identity sample<identity>() {
  return {request_id, "api:5f1c9e0a2b7d4c31", "open-webui", "client"};
}

template <>
inline api_key_created sample<api_key_created>() {
  return {request_id, "open-webui", "hk_3q2-7wEVCv8QmZ1p0bN4oJtXy5Rc6dLgAeHfKsUi9Mz"};
}

template <>
inline api_keys_reply sample<api_keys_reply>() {
  api_key_info a{"open-webui", "hk_3q2-7w", 1'700'000'000'999, 0, 1'700'000'060'999};
  api_key_info b{"old-script", "hk_Zx81pQ", 1'600'000'000'000, 1'650'000'000'000, 0, true};
  return {request_id, {a, b}};
}

template <>
inline get_metrics sample<get_metrics>() {
  return {request_id, "hk_3q2-7wEVCv8QmZ1p0bN4oJtXy5Rc6dLgAeHfKsUi9Mz"};
}

template <>
inline pull_model sample<pull_model>() {
  return {request_id, "hf:OWNER/REPO:Q4_K_M@main", "m-q4", digest_b, "gpu-box", true};
}

template <>
inline place_model sample<place_model>() {
  return {request_id, "m-q4", "old-box", true, {"gpu-box", "old-box", "pi-\xc3\xa9"}};
}

template <>
inline evict_model sample<evict_model>() {
  return {request_id, "m-q4", "old-box"};
}

template <>
inline transfers_started sample<transfers_started>() {
  return {request_id, {transfer(transfer_id, "starting"), transfer(transfer_id + 1, "done")}};
}

template <>
inline metrics_reply sample<metrics_reply>() {
  metric_family submitted{"hearth_jobs_submitted_total",
                          "Jobs accepted.",
                          "counter",
                          {"model"},
                          {},
                          {{{"stories260K"}, 100, {}, 0, 0}, {{"llama-8b"}, 2, {}, 0, 0}}};
  metric_family wait{"hearth_job_queue_wait_seconds",
                     "From queued to assigned.",
                     "histogram",
                     {"model"},
                     {0.005, 0.1, 1, 60},
                     {{{"stories260K"}, 0, {40, 90, 99, 100}, 12.5, 100}}};
  return {request_id, {submitted, wait}, true};
}

}  // namespace hearth::wire::samples
