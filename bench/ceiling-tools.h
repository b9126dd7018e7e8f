// What the ceiling tools (bandwidth, compute_peak) share: their flags (`--threads 1,2`,
// `--passes`, `--json`), and timing one pass of work on several threads that start together.
#pragma once

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace hearth::bench {

// Counts from 1 to 1024, comma-separated. Empty when the text is not such a list, so the caller
// prints its usage.
inline std::vector<int> parse_thread_counts(const std::string& text) {
  std::vector<int> out;
  std::stringstream s(text);
  for (std::string t; std::getline(s, t, ',');) {
    char* end = nullptr;
    const long n = std::strtol(t.c_str(), &end, 10);
    if (t.empty() || *end != '\0' || n < 1 || n > 1024) return {};
    out.push_back(int(n));
  }
  return out;
}

// The flags of both tools, read into o.threads, o.passes and o.json: --threads 1,2, --passes N,
// --json, and -h/--help (usage(what)). Another flag goes to extra(flag, value, o), where value()
// reads the word after it; extra returns false when it does not know the flag either, which is
// then usage("unknown argument ..."). `usage` prints the tool's usage after a reason and exits.
template <class Options, class Extra>
Options parse_ceiling_flags(int argc, char** argv, void (*usage)(const char*), const char* what,
                            const Extra& extra) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const std::function<std::string()> value = [&]() -> std::string {
      if (i + 1 >= argc) usage(("missing value after " + a).c_str());
      return argv[++i];
    };
    if (a == "--threads") {
      o.threads = parse_thread_counts(value());
      if (o.threads.empty()) usage("--threads takes a list of counts from 1 to 1024, such as 1,2");
    } else if (a == "--passes") {
      o.passes = std::atoi(value().c_str());
      if (o.passes < 1) usage("--passes must be at least 1");
    } else if (a == "--json") {
      o.json = true;
    } else if (a == "-h" || a == "--help") {
      usage(what);
    } else if (!extra(a, value, o)) {
      usage(("unknown argument " + a).c_str());
    }
  }
  return o;
}

// Runs work(t) on threads t = 0 .. nth - 1, all released by one barrier, and returns the seconds
// from the first thread's start to the last thread's end (a pass is as slow as its slowest
// thread). Each thread reads its own start: the caller's clock read after the barrier can come
// late, since waking a thread on an idle virtual CPU can take milliseconds, and a pass counted
// from then looked up to twice as fast as it was (compute_peak reported 251 GMAC/s on one Zen 5
// thread whose multiply-adds run at 108).
inline double seconds_together(int nth, const std::function<void(int)>& work) {
  using clock = std::chrono::steady_clock;
  std::vector<clock::time_point> start_at(static_cast<size_t>(nth)), finish(start_at.size());
  std::barrier start(nth);
  std::vector<std::thread> threads;
  for (int t = 0; t < nth; ++t) {
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      start_at[size_t(t)] = clock::now();
      work(t);
      finish[size_t(t)] = clock::now();
    });
  }
  for (auto& th : threads) th.join();
  return std::chrono::duration<double>(*std::max_element(finish.begin(), finish.end()) -
                                       *std::min_element(start_at.begin(), start_at.end()))
      .count();
}

}  // namespace hearth::bench
