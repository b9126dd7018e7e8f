// The renderer: walks a parsed template with jinja2's scoping (a for loop's body and a macro's body
// are scopes of their own; if is not), its loop object, macros and caller, and the sandbox's
// bounds: output size, work (every node evaluated counts) and call depth.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/chat/jinja-ast.h"
#include "engine/chat/jinja-value.h"

namespace hearth::jinja {

struct scope {
  std::unordered_map<std::string, value> vars;
  std::shared_ptr<scope> parent;
  const value* find(const std::string& name) const;
};
using scope_ptr = std::shared_ptr<scope>;

struct limits {
  size_t max_output = 16u << 20;   // bytes
  uint64_t max_steps = 5'000'000;  // expressions and statements evaluated (a shared pair: < 100k)
  int max_call_depth = 100;        // macro calls nested (Python's recursion limit is ~1000)
  std::chrono::milliseconds max_time{3'000};
};

class interpreter {
 public:
  interpreter(std::chrono::system_clock::time_point now, limits lim = {});
  ~interpreter();
  interpreter(const interpreter&) = delete;
  interpreter& operator=(const interpreter&) = delete;

  // Keeps `o` to release it when the render ends (object::release); returns it as a value.
  value own(std::shared_ptr<object> o);

  // Renders `body` with `root` as the template's variables.
  std::string render(const std::vector<stmt_ptr>& body, scope_ptr root);

  value eval(const expr& e, const scope_ptr& s);
  // Calls a callable value (macro, function, bound method) as jinja2's sandbox would.
  value call(const value& f, std::vector<value> args,
             std::vector<std::pair<std::string, value>> kwargs);
  // Renders `body` into a string in scope `s` (macros, block set, filter blocks).
  std::string capture(const std::vector<stmt_ptr>& body, const scope_ptr& s);
  // Counts work; throws when a bound is passed.
  void step();
  void enter_call();
  void leave_call() { --call_depth_; }
  // Output size check for values built without writing them (`'x' * n`, joins).
  void check_size(size_t n) const;

  std::chrono::system_clock::time_point now;

 private:
  enum class flow { normal, break_, continue_ };
  flow exec(const std::vector<stmt_ptr>& body, const scope_ptr& s);
  flow exec_one(const stmt& st, const scope_ptr& s);
  flow exec_for(const stmt& st, const scope_ptr& s);
  void assign(const scope_ptr& s, const std::vector<std::string>& targets, const value& v);

  std::string* out_ = nullptr;
  limits lim_;
  uint64_t steps_ = 0;
  int call_depth_ = 0;
  std::chrono::steady_clock::time_point deadline_;
  std::vector<std::shared_ptr<object>> owned_;
};

}  // namespace hearth::jinja
