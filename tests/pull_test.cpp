// Issue 54, item 2: pulling models from a FAKE Hugging Face Hub and a FAKE Ollama registry
// (tests/fake-model-source.py, the only fake: the store, the files, the sockets, libcurl and the
// hearth binary are real), from a URL with its digest and from a local path; each fault of the
// issue's list; a `hearth pull` killed at half and run again resumes (and says how long it took).
#include <signal.h>
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "pull/http-client.h"
#include "pull/pull.h"
#include "store/model-store.h"
#include "tests/child-process.h"
#include "tests/hearth-cli.h"
#include "tests/testdata.h"

namespace hearth::testing {
namespace {

namespace fs = std::filesystem;

const std::string k_fake_source = std::string(HEARTH_SOURCE_DIR) + "/tests/fake-model-source.py";

std::string model_file(const std::string& rel) {
  return model_path("models/" + rel);
}

// The fake source over `root`, on a free port; killed when destroyed.
class fake_source {
 public:
  fake_source(const std::string& root, const std::vector<std::string>& switches) {
    const std::string port_file = root + "/../port-" + std::to_string(++started_);
    std::vector<std::string> argv = {"/usr/bin/python3", k_fake_source, "--root", root,
                                     "--port-file",      port_file};
    argv.insert(argv.end(), switches.begin(), switches.end());
    proc_ = std::make_unique<child_process>(argv, root + "/../fake-source.log");
    for (int i = 0; i < 1200 && !fs::exists(port_file); ++i)  // 30 s on a loaded machine
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    std::ifstream in(port_file);
    in >> port_;
    EXPECT_GT(port_, 0) << "the fake source did not start";
  }
  // The Hub's address as HF_ENDPOINT gives it; LFS files redirect to 127.0.0.1, another host.
  std::string url() const { return "http://localhost:" + std::to_string(port_); }
  nlohmann::json stats() const {
    pull::pull_options o;
    pull::http_client http(o);
    const auto r = http.get(url() + "/_stats", 1 << 16);
    return nlohmann::json::parse(r.body);
  }

 private:
  static inline int started_ = 0;
  std::unique_ptr<child_process> proc_;
  int port_ = 0;
};

void copy(const std::string& from, const fs::path& to) {
  fs::create_directories(to.parent_path());
  fs::copy_file(from, to, fs::copy_options::overwrite_existing);
}

void write_bytes(const fs::path& to, const std::string& bytes) {
  fs::create_directories(to.parent_path());
  std::ofstream(to, std::ios::binary) << bytes;
}

std::string random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = char(rng());
  return s;
}

// The commit the fake Hub gives a revision: sha1("OWNER/REPO@REV") (git's sha1 of nothing else).
std::string fake_commit(const std::string& repo_at_rev) {
  const auto r = run_command("printf %s " + shell_quote(repo_at_rev) + " | sha1sum");
  return r.out.substr(0, 40);
}

class pull_test : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("hearth-pull-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(src());
    // The usual repository: two quantizations of one model and a config file outside LFS.
    copy(model_file("stories260K.gguf"), src() / "hf/org/tiny-GGUF/main/tiny-Q4_K_M.gguf");
    copy(model_file("synthetic/synthetic-llama-a.q8_0.gguf"),
         src() / "hf/org/tiny-GGUF/main/tiny-Q8_0.gguf");
    write_bytes(src() / "hf/org/tiny-GGUF/main/README.md", "# tiny\n");
    options_.retry_backoff_ms = 5;
    options_.piece_bytes = 256 << 10;  // several pieces per test file
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }

  fs::path src() const { return dir_ / "src"; }
  fs::path store_dir() const { return dir_ / "store"; }

  store::manifest pull(fake_source& f, const std::string& source, uint64_t limit = 0,
                       const std::string& sha256 = "") {
    store::model_store st(store_dir(), limit);
    options_.hf_endpoint = f.url();
    options_.ollama_registry = f.url();
    return pull::pull_model(st, {source, "", sha256}, options_, progress_, nullptr);
  }

  // The pull fails with `kind` (and a message containing `words`), and leaves no model.
  void expect_refused(fake_source& f, const std::string& source, pull::pull_error_kind kind,
                      const std::string& words, uint64_t limit = 0) {
    try {
      pull(f, source, limit);
      ADD_FAILURE() << source << " was pulled";
    } catch (const pull::pull_error& e) {
      EXPECT_EQ(int(e.kind), int(kind)) << e.what();
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
    store::model_store st(store_dir());
    EXPECT_TRUE(st.list().empty());
    EXPECT_TRUE(fs::is_empty(st.views())) << "something is visible as a model";
  }

  fs::path dir_;
  pull::pull_options options_;
  std::function<void(const pull::pull_progress&)> progress_;
};

TEST_F(pull_test, hf_quantization_with_a_token_kept_from_the_cdn) {
  fake_source f(src(), {"--token", "hf_secret"});
  options_.hf_token = "hf_secret";
  uint64_t last_done = 0, total = 0;
  progress_ = [&](const pull::pull_progress& p) {
    EXPECT_GE(p.bytes_done, last_done);
    last_done = p.bytes_done;
    total = p.bytes_total;
  };
  const auto m = pull(f, "hf:org/tiny-GGUF:q4_k_m");
  const std::string want = store::sha256_file(model_file("stories260K.gguf"));
  EXPECT_EQ(m.name, "tiny-Q4_K_M");
  EXPECT_EQ(m.kind, "gguf");
  EXPECT_EQ(m.digest, want);
  EXPECT_EQ(m.revision, fake_commit("org/tiny-GGUF@main"));
  EXPECT_EQ(m.source, "hf:org/tiny-GGUF/tiny-Q4_K_M.gguf");
  EXPECT_EQ(total, fs::file_size(model_file("stories260K.gguf")));
  EXPECT_EQ(last_done, total);
  const fs::path view = store_dir() / "models/tiny-Q4_K_M.gguf";
  ASSERT_TRUE(fs::exists(view));
  EXPECT_EQ(store::sha256_file(view), want);
  const auto stats = f.stats();
  EXPECT_GT(stats["auth_on_hub"].get<int>(), 0);
  EXPECT_EQ(stats["auth_on_cdn"].get<int>(), 0) << "the token went to the CDN";

  // Without the token the (gated) repository is refused, and says why.
  options_.hf_token.clear();
  fs::remove_all(store_dir());
  expect_refused(f, "hf:org/tiny-GGUF:Q8_0", pull::pull_error_kind::bad_source, "HF_TOKEN");
}

TEST_F(pull_test, hf_choices_named_or_refused) {
  fake_source f(src(), {"--page-size", "1"});  // the file list in pages of one
  EXPECT_EQ(pull(f, "hf:org/tiny-GGUF/tiny-Q8_0.gguf").name, "tiny-Q8_0");
  fs::remove_all(store_dir());
  expect_refused(f, "hf:org/tiny-GGUF", pull::pull_error_kind::bad_source,
                 "several GGUF models: tiny-Q4_K_M.gguf, tiny-Q8_0.gguf");
  expect_refused(f, "hf:org/tiny-GGUF:Q5_K_M", pull::pull_error_kind::bad_source,
                 "no GGUF file of quantization Q5_K_M");
  expect_refused(f, "hf:org/nothing:Q4_K_M", pull::pull_error_kind::bad_source, "RepoNotFound");
  expect_refused(f, "hf:org/tiny-GGUF:Q4_K_M@v9", pull::pull_error_kind::bad_source,
                 "RevisionNotFound");
}

TEST_F(pull_test, hf_split_gguf_pulled_whole) {
  copy(model_file("stories260K.gguf"), src() / "hf/org/split/main/Q4_K_M/big-00001-of-00002.gguf");
  copy(model_file("synthetic/synthetic-llama-a.q4_0.gguf"),
       src() / "hf/org/split/main/Q4_K_M/big-00002-of-00002.gguf");
  copy(model_file("synthetic/synthetic-llama-a.q8_0.gguf"),
       src() / "hf/org/split/main/big-Q8_0.gguf");
  fake_source f(src(), {});
  const auto m = pull(f, "hf:org/split:Q4_K_M");
  EXPECT_EQ(m.name, "big");
  EXPECT_EQ(m.kind, "gguf-split");
  ASSERT_EQ(m.files.size(), 2u);
  EXPECT_EQ(m.files[1].path, "big-00002-of-00002.gguf");
  EXPECT_EQ(m.files[1].digest,
            store::sha256_file(model_file("synthetic/synthetic-llama-a.q4_0.gguf")));
  EXPECT_TRUE(fs::exists(store_dir() / "models/big/big-00001-of-00002.gguf"));
}

TEST_F(pull_test, hf_safetensors_repository_as_a_folder) {
  const fs::path repo = src() / "hf/org/tiny-hf/main";
  const auto conv = hearth("convert " + quote(model_file("stories260K.gguf")) + " " +
                           quote(repo.string()) + " --shards 2");
  ASSERT_EQ(conv.exit_code, 0) << conv.err;
  write_bytes(repo / "README.md", "not part of the model\n");
  fake_source f(src(), {});
  const auto m = pull(f, "hf:org/tiny-hf");
  EXPECT_EQ(m.name, "tiny-hf");
  EXPECT_EQ(m.kind, "hf-folder");
  std::vector<std::string> paths;
  for (const auto& file : m.files) {
    paths.push_back(file.path);
    EXPECT_EQ(file.digest, store::sha256_file(repo / file.path)) << file.path;
  }
  EXPECT_NE(std::find(paths.begin(), paths.end(), "config.json"), paths.end());
  EXPECT_NE(std::find(paths.begin(), paths.end(), "model.safetensors.index.json"), paths.end());
  EXPECT_EQ(std::find(paths.begin(), paths.end(), "README.md"), paths.end());
  EXPECT_TRUE(fs::exists(store_dir() / "models/tiny-hf/config.json"));
}

TEST_F(pull_test, hf_revision_recorded) {
  copy(model_file("synthetic/synthetic-llama-a.q4_k_m.gguf"),
       src() / "hf/org/tiny-GGUF/v1/tiny-Q4_K_M.gguf");
  fake_source f(src(), {});
  const auto m = pull(f, "hf:org/tiny-GGUF:Q4_K_M@v1");
  EXPECT_EQ(m.revision, fake_commit("org/tiny-GGUF@v1"));
  EXPECT_EQ(m.digest, store::sha256_file(model_file("synthetic/synthetic-llama-a.q4_k_m.gguf")));
  // By the commit itself, too.
  fs::remove_all(store_dir());
  EXPECT_EQ(pull(f, "hf:org/tiny-GGUF:Q4_K_M@" + m.revision).digest, m.digest);
}

TEST_F(pull_test, ollama_model_with_template_and_params) {
  const fs::path tag = src() / "ollama/library/tiny/1b";
  copy(model_file("stories260K.gguf"), tag / "model.gguf");
  write_bytes(tag / "template", "{{ .System }} {{ .Prompt }}");
  write_bytes(tag / "params", R"({"stop": ["<|end|>"], "temperature": 0.5})");
  write_bytes(tag / "system", "Be brief.");
  fake_source f(src(), {});
  const auto m = pull(f, "ollama:tiny:1b");
  EXPECT_EQ(m.name, "tiny-1b");
  EXPECT_EQ(m.aliases, std::vector<std::string>{"tiny:1b"});
  EXPECT_EQ(m.digest, store::sha256_file(model_file("stories260K.gguf")));
  EXPECT_EQ(m.metadata["template"], "{{ .System }} {{ .Prompt }}");
  EXPECT_EQ(m.metadata["system"], "Be brief.");
  EXPECT_EQ(m.metadata["params"]["temperature"], 0.5);
  fs::remove_all(store_dir());
  expect_refused(f, "ollama:tiny:70b", pull::pull_error_kind::bad_source, "no such model");
}

TEST_F(pull_test, url_with_its_digest) {
  copy(model_file("stories260K.gguf"), src() / "files/dl/stories.gguf");
  fake_source f(src(), {});
  const std::string url = f.url() + "/files/dl/stories.gguf";
  const std::string want = store::sha256_file(model_file("stories260K.gguf"));
  store::model_store st(store_dir());
  EXPECT_THROW(pull::pull_model(st, {url, "", ""}, options_, nullptr, nullptr), pull::pull_error);
  auto bad = want;
  bad.back() = bad.back() == '0' ? '1' : '0';
  try {
    pull::pull_model(st, {url, "", bad}, options_, nullptr, nullptr);
    ADD_FAILURE() << "a wrong digest was taken";
  } catch (const pull::pull_error& e) {
    EXPECT_EQ(int(e.kind), int(pull::pull_error_kind::digest)) << e.what();
  }
  EXPECT_TRUE(st.list().empty());
  const auto m = pull::pull_model(st, {url, "mine", want.substr(7)}, options_, nullptr, nullptr);
  EXPECT_EQ(m.name, "mine");
  EXPECT_EQ(m.digest, want);
}

TEST_F(pull_test, local_file_is_hard_linked) {
  const fs::path file = dir_ / "mine/stories.gguf";
  copy(model_file("stories260K.gguf"), file);
  store::model_store st(store_dir());
  const auto m = pull::pull_model(st, {file.string(), "", ""}, options_, nullptr, nullptr);
  EXPECT_EQ(m.name, "stories");
  struct stat a {
  }, b{};
  ASSERT_EQ(::stat(file.c_str(), &a), 0);
  ASSERT_EQ(::stat(st.blob_path(m.digest).c_str(), &b), 0);
  EXPECT_EQ(a.st_ino, b.st_ino) << "copied, not linked";
  // A file that is not a GGUF is refused before it is imported.
  write_bytes(dir_ / "mine/notes.gguf", "just text, not a model");
  EXPECT_THROW(pull::pull_model(st, {(dir_ / "mine/notes.gguf").string(), "", ""}, options_,
                                nullptr, nullptr),
               pull::pull_error);
  EXPECT_EQ(st.list().size(), 1u);
}

// The issue's faults, each refused with its own kind and nothing visible as a model.
TEST_F(pull_test, faults_refused) {
  struct fault_case {
    std::vector<std::string> switches;
    std::string source;
    pull::pull_error_kind kind;
    std::string words;
  };
  write_bytes(src() / "hf/org/bad/main/noise-Q4_K_M.gguf", random_bytes(300000, 1));
  // A GGUF header claiming 2^40 tensors.
  std::string malformed("GGUF\x03\0\0\0", 8);
  malformed += std::string("\0\0\0\0\0\x01\0\0", 8) + std::string(8, '\0') + random_bytes(5000, 2);
  write_bytes(src() / "hf/org/bad/main/broken-Q8_0.gguf", malformed);
  const std::vector<fault_case> cases = {
      {{"--fault", "wrong-digest"},
       "hf:org/tiny-GGUF:Q4_K_M",
       pull::pull_error_kind::digest,
       "digest mismatch"},
      {{"--fault", "truncate"}, "hf:org/tiny-GGUF:Q4_K_M", pull::pull_error_kind::http, "retries"},
      {{"--fault", "overlong"},
       "hf:org/tiny-GGUF:Q4_K_M",
       pull::pull_error_kind::http,
       "more bytes than"},
      {{"--fault", "redirect-loop"},
       "hf:org/tiny-GGUF:Q4_K_M",
       pull::pull_error_kind::http,
       "redirect loop"},
      {{"--fault", "dotdot"},
       "hf:org/tiny-GGUF:Q4_K_M",
       pull::pull_error_kind::unsafe_path,
       "../evil.gguf"},
      {{"--fault", "absolute"},
       "hf:org/tiny-GGUF:Q4_K_M",
       pull::pull_error_kind::unsafe_path,
       "/etc/evil.gguf"},
      {{}, "hf:org/bad:Q4_K_M", pull::pull_error_kind::not_a_model, "noise-Q4_K_M.gguf"},
      {{}, "hf:org/bad:Q8_0", pull::pull_error_kind::not_a_model, "broken-Q8_0.gguf"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.source + (c.switches.empty() ? "" : " " + c.switches[1]));
    fake_source f(src(), c.switches);
    expect_refused(f, c.source, c.kind, c.words);
    store::model_store st(store_dir());
    EXPECT_FALSE(st.has_blob(store::sha256_file(src() / "hf/org/bad/main/noise-Q4_K_M.gguf")));
    fs::remove_all(store_dir());
  }
}

TEST_F(pull_test, full_store_refused_before_any_byte) {
  fake_source f(src(), {});
  const uint64_t size = fs::file_size(model_file("stories260K.gguf"));
  expect_refused(f, "hf:org/tiny-GGUF:Q4_K_M", pull::pull_error_kind::no_space, "needs", size / 2);
  EXPECT_EQ(f.stats()["bytes_sent"].get<uint64_t>(), 0u);
  // A full disk: a store on a tmpfs of 1 MiB (where this may mount one).
  const fs::path tiny = dir_ / "tmpfs";
  fs::create_directories(tiny);
  if (run_command("mount -t tmpfs -o size=1m tmpfs " + shell_quote(tiny.string())).exit_code != 0) {
    return;  // not allowed here: the limit above stands for it
  }
  {
    store::model_store st(tiny / "store");
    options_.hf_endpoint = f.url();
    try {
      pull::pull_model(st, {"hf:org/tiny-GGUF:Q4_K_M", "", ""}, options_, nullptr, nullptr);
      ADD_FAILURE() << "pulled onto a full disk";
    } catch (const pull::pull_error& e) {
      EXPECT_EQ(int(e.kind), int(pull::pull_error_kind::no_space)) << e.what();
    }
    EXPECT_TRUE(st.list().empty());
  }
  run_command("umount " + shell_quote(tiny.string()));
}

TEST_F(pull_test, transient_faults_retried) {
  for (const auto& sw : std::vector<std::vector<std::string>>{
           {"--fault", "truncate-once"}, {"--fail-first", "3"}, {"--fault", "no-range"}}) {
    SCOPED_TRACE(sw[0] + " " + sw[1]);
    fake_source f(src(), sw);
    EXPECT_EQ(pull(f, "hf:org/tiny-GGUF:Q4_K_M").digest,
              store::sha256_file(model_file("stories260K.gguf")));
    fs::remove_all(store_dir());
  }
}

// The cancel flag stops a pull where it is (no model); a second pull of the same blob while one
// runs is refused as busy; the next pull resumes from what the cancelled one flushed.
TEST_F(pull_test, cancel_busy_and_resume) {
  const std::string big = model_file("synthetic/synthetic-gemma2-a.f16.gguf");
  copy(big, src() / "hf/org/big-GGUF/main/big-F16.gguf");
  const uint64_t size = fs::file_size(big);
  // Slow enough (about 4 MB/s in all) that the first pull is still running, whatever the load,
  // when the second one tries the blob.
  fake_source slow(src(), {"--rate", "1000000"});
  options_.hf_endpoint = slow.url();
  options_.piece_bytes = 4 << 20;
  options_.flush_bytes = 1 << 20;
  std::atomic<bool> cancel{false}, halfway{false};
  std::string first_error;
  std::thread first([&] {
    store::model_store st(store_dir());
    try {
      pull::pull_model(
          st, {"hf:org/big-GGUF:F16", "", ""}, options_,
          [&](const pull::pull_progress& p) {
            if (p.bytes_done >= size / 2) halfway = true;
          },
          &cancel);
    } catch (const pull::pull_error& e) {
      first_error = std::to_string(int(e.kind)) + " " + e.what();
    }
  });
  while (!halfway && first_error.empty())
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  {
    store::model_store st(store_dir());
    try {
      pull::pull_model(st, {"hf:org/big-GGUF:F16", "", ""}, options_, nullptr, nullptr);
      ADD_FAILURE() << "two pulls wrote one blob";
    } catch (const pull::pull_error& e) {
      EXPECT_EQ(int(e.kind), int(pull::pull_error_kind::busy)) << e.what();
    }
  }
  cancel = true;
  first.join();
  EXPECT_EQ(first_error, std::to_string(int(pull::pull_error_kind::cancelled)) + " cancelled");
  EXPECT_TRUE(store::model_store(store_dir()).list().empty());
  const uint64_t sent_before = slow.stats()["bytes_sent"].get<uint64_t>();
  fake_source fast(src(), {});
  EXPECT_EQ(pull(fast, "hf:org/big-GGUF:F16").digest, store::sha256_file(big));
  const uint64_t again = fast.stats()["bytes_sent"].get<uint64_t>();
  EXPECT_LT(again, size - size / 4)
      << "resumed from less than a quarter (" << sent_before << " bytes were sent before)";
}

// `hearth pull` killed (SIGKILL) at half a download, run again: it fetches what it lacks only.
TEST_F(pull_test, cli_resumes_after_kill) {
  const std::string big = model_file("synthetic/synthetic-gemma2-a.f16.gguf");
  copy(big, src() / "hf/org/big-GGUF/main/big-F16.gguf");
  const uint64_t size = fs::file_size(big);
  const std::string store_arg = " --store " + quote(store_dir().string());
  std::string err_log = (dir_ / "pull-1.log").string();
  {
    // About 10 s in all: killed at half whatever the load (the stats lag behind on a busy machine).
    fake_source slow(src(), {"--rate", "1000000"});
    child_process p({"/usr/bin/env", "HF_ENDPOINT=" + slow.url(), HEARTH_BIN, "pull",
                     "hf:org/big-GGUF:F16", "--store", store_dir().string()},
                    err_log);
    uint64_t sent = 0;
    for (int i = 0; i < 1200 && sent < size / 2; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      sent = slow.stats()["bytes_sent"].get<uint64_t>();
    }
    ASSERT_GE(sent, size / 2) << read_file_text(err_log);
    ::kill(p.pid(), SIGKILL);
    p.stop(std::chrono::milliseconds(2000));
  }
  EXPECT_TRUE(store::model_store(store_dir()).list().empty());
  EXPECT_NE(read_file_text(err_log).find("pull: "), std::string::npos) << "no progress line";

  fake_source fast(src(), {});
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = run_command("HF_ENDPOINT=" + fast.url() + " " + HEARTH_BIN +
                             " pull hf:org/big-GGUF:F16" + store_arg);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("pulled big-F16"), std::string::npos) << r.out;
  const uint64_t again = fast.stats()["bytes_sent"].get<uint64_t>();
  EXPECT_LT(again, size) << "started over";
  std::printf("resume after a kill at 50%%: %.3f s, %llu of %llu bytes fetched again\n", secs,
              static_cast<unsigned long long>(again), static_cast<unsigned long long>(size));
  EXPECT_EQ(store::model_store(store_dir()).find("big-F16")->digest, store::sha256_file(big));

  // An error is one line and exit 1.
  const auto bad = run_command("HF_ENDPOINT=" + fast.url() + " " + HEARTH_BIN +
                               " pull hf:org/none:Q4_K_M" + store_arg);
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("hearth: error:"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace hearth::testing
