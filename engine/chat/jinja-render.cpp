#include "engine/chat/jinja-render.h"

#include <exception>
#include <new>

#include "engine/chat/jinja-builtins.h"
#include "engine/chat/jinja-parser.h"
#include "engine/chat/jinja.h"

namespace hearth::jinja {

const value* scope::find(const std::string& name) const {
  for (const scope* s = this; s; s = s->parent.get()) {
    auto it = s->vars.find(name);
    if (it != s->vars.end()) return &it->second;
  }
  return nullptr;
}

namespace {

// A {% macro %} (or the body of a {% call %} block, as `caller`): called, it renders its body in a
// scope of its own below the scope it was defined in.
class macro_object : public object {
 public:
  macro_object(const stmt* def, scope_ptr closure, std::string name)
      : def_(def), closure_(std::move(closure)), name_(std::move(name)) {}
  std::string_view type_name() const override { return "Macro"; }
  bool callable() const override { return true; }
  std::string repr() const override { return "<Macro '" + name_ + "'>"; }
  void release() override { closure_.reset(); }
  value attribute(std::string_view n) const override {
    if (n == "name") return value(name_);
    return object::attribute(n);
  }

  value call(interpreter& in, std::vector<value> args, kwargs_t kwargs) override {
    const auto& params = def_->params;
    if (args.size() > params.size())
      fail("TypeError", "macro '" + name_ + "' takes not more than " +
                            std::to_string(params.size()) + " argument(s)");
    auto s = std::make_shared<scope>();
    s->parent = closure_;
    std::vector<bool> bound(params.size(), false);
    for (size_t i = 0; i < args.size(); ++i) {
      s->vars[params[i].first] = std::move(args[i]);
      bound[i] = true;
    }
    for (auto& [k, v] : kwargs) {
      size_t i = 0;
      while (i < params.size() && params[i].first != k) ++i;
      if (i < params.size()) {
        if (bound[i])
          fail("TypeError", "macro '" + name_ + "' got multiple values for argument '" + k + "'");
        s->vars[k] = std::move(v);
        bound[i] = true;
      } else if (k == "caller") {
        s->vars["caller"] = std::move(v);
      } else {
        fail("TypeError", "macro '" + name_ + "' takes no keyword argument '" + k + "'");
      }
    }
    for (size_t i = 0; i < params.size(); ++i) {
      if (bound[i]) continue;
      s->vars[params[i].first] =
          params[i].second
              ? in.eval(*params[i].second, s)
              : value::undefined("parameter '" + params[i].first + "' was not provided");
    }
    in.enter_call();
    std::string out = in.capture(def_->body, s);
    in.leave_call();
    return value(std::move(out));
  }

 private:
  const stmt* def_;
  scope_ptr closure_;
  std::string name_;
};

// The `loop` variable of a for loop.
class loop_object : public object {
 public:
  loop_object(std::shared_ptr<const std::vector<value>> items, size_t index)
      : items_(std::move(items)), i_(index) {}
  std::string_view type_name() const override { return "LoopContext"; }
  void release() override { items_ = std::make_shared<const std::vector<value>>(); }
  std::string repr() const override {
    return "<LoopContext " + std::to_string(i_ + 1) + "/" + std::to_string(items_->size()) + ">";
  }
  value attribute(std::string_view n) const override {
    auto len = static_cast<int64_t>(items_->size());
    auto i = static_cast<int64_t>(i_);
    if (n == "index") return value(i + 1);
    if (n == "index0") return value(i);
    if (n == "revindex") return value(len - i);
    if (n == "revindex0") return value(len - i - 1);
    if (n == "first") return value(i == 0);
    if (n == "last") return value(i == len - 1);
    if (n == "length") return value(len);
    if (n == "depth") return value(int64_t{1});
    if (n == "depth0") return value(int64_t{0});
    if (n == "previtem")
      return i > 0 ? (*items_)[i_ - 1] : value::undefined("there is no previous item");
    if (n == "nextitem")
      return i + 1 < len ? (*items_)[i_ + 1] : value::undefined("there is no next item");
    if (n == "cycle") return value(std::shared_ptr<object>(std::make_shared<cycle_fn>(i_)));
    return object::attribute(n);
  }

 private:
  class cycle_fn : public object {
   public:
    explicit cycle_fn(size_t i) : i_(i) {}
    std::string_view type_name() const override { return "method"; }
    bool callable() const override { return true; }
    value call(interpreter&, std::vector<value> args, kwargs_t) override {
      if (args.empty()) fail("TypeError", "no items for cycling given");
      return args[i_ % args.size()];
    }

   private:
    size_t i_;
  };
  std::shared_ptr<const std::vector<value>> items_;
  size_t i_;
};

}  // namespace

interpreter::interpreter(std::chrono::system_clock::time_point n, limits lim)
    : now(n), lim_(lim), deadline_(std::chrono::steady_clock::now() + lim.max_time) {}

interpreter::~interpreter() {
  for (auto& o : owned_) o->release();
}

value interpreter::own(std::shared_ptr<object> o) {
  owned_.push_back(o);
  return value(std::move(o));
}

void interpreter::step() {
  ++steps_;
  if (steps_ > lim_.max_steps)
    fail("SecurityError", "the template did more work than a render is allowed (" +
                              std::to_string(lim_.max_steps) + " steps)");
  if ((steps_ & 4095) == 0 && std::chrono::steady_clock::now() > deadline_)
    fail("SecurityError", "the template ran longer than a render is allowed");
}

void interpreter::enter_call() {
  if (++call_depth_ > lim_.max_call_depth) {
    --call_depth_;
    fail("RecursionError", "maximum recursion depth exceeded");
  }
}

void interpreter::check_size(size_t n) const {
  if (n > lim_.max_output)
    fail("MemoryError",
         "the template's output passed " + std::to_string(lim_.max_output) + " bytes");
}

std::string interpreter::render(const std::vector<stmt_ptr>& body, scope_ptr root) {
  return capture(body, root);
}

std::string interpreter::capture(const std::vector<stmt_ptr>& body, const scope_ptr& s) {
  std::string buf;
  std::string* saved = out_;
  out_ = &buf;
  try {
    exec(body, s);
  } catch (...) {
    out_ = saved;
    throw;
  }
  out_ = saved;
  return buf;
}

interpreter::flow interpreter::exec(const std::vector<stmt_ptr>& body, const scope_ptr& s) {
  for (const auto& st : body) {
    flow f = exec_one(*st, s);
    if (f != flow::normal) return f;
  }
  return flow::normal;
}

void interpreter::assign(const scope_ptr& s, const std::vector<std::string>& targets,
                         const value& v) {
  if (targets.size() == 1) {
    s->vars[targets[0]] = v;
    return;
  }
  std::vector<value> items = iterate(v);
  if (items.size() < targets.size())
    fail("ValueError", "not enough values to unpack (expected " + std::to_string(targets.size()) +
                           ", got " + std::to_string(items.size()) + ")");
  if (items.size() > targets.size())
    fail("ValueError",
         "too many values to unpack (expected " + std::to_string(targets.size()) + ")");
  for (size_t i = 0; i < targets.size(); ++i) s->vars[targets[i]] = items[i];
}

interpreter::flow interpreter::exec_one(const stmt& st, const scope_ptr& s) {
  step();
  switch (st.kind) {
    case stmt_kind::text:
      out_->append(st.text);
      check_size(out_->size());
      return flow::normal;
    case stmt_kind::output: {
      value v = eval(*st.e, s);
      append_str(*out_, v);
      check_size(out_->size());
      return flow::normal;
    }
    case stmt_kind::if_:
      for (const auto& [cond, body] : st.branches)
        if (truthy(eval(*cond, s))) return exec(body, s);
      return exec(st.else_body, s);
    case stmt_kind::for_:
      return exec_for(st, s);
    case stmt_kind::set: {
      value v = eval(*st.e, s);
      if (!st.text.empty()) {
        const value* ns = s->find(st.targets[0]);
        auto* target =
            ns && ns->is_object() ? dynamic_cast<namespace_object*>(ns->obj().get()) : nullptr;
        if (!target)
          fail("TemplateRuntimeError", "cannot assign attribute on non-namespace object");
        target->attrs.set(value(st.text), std::move(v));
      } else {
        assign(s, st.targets, v);
      }
      return flow::normal;
    }
    case stmt_kind::set_block: {
      auto inner = std::make_shared<scope>();
      inner->parent = s;
      value body(capture(st.body, inner));
      if (st.e) {
        inner->vars["__body"] = body;
        body = eval(*st.e, inner);
      }
      s->vars[st.targets[0]] = std::move(body);
      return flow::normal;
    }
    case stmt_kind::macro:
      s->vars[st.text] = own(std::make_shared<macro_object>(&st, s, st.text));
      return flow::normal;
    case stmt_kind::call_block: {
      value caller = own(std::make_shared<macro_object>(&st, s, "caller"));
      const expr& c = *st.e;
      value f = eval(*c.args[0], s);
      std::vector<value> args;
      for (size_t i = 1; i < c.args.size(); ++i) args.push_back(eval(*c.args[i], s));
      kwargs_t kwargs;
      for (const auto& [k, e] : c.kwargs) kwargs.emplace_back(k, eval(*e, s));
      kwargs.emplace_back("caller", std::move(caller));
      append_str(*out_, call(f, std::move(args), std::move(kwargs)));
      check_size(out_->size());
      return flow::normal;
    }
    case stmt_kind::filter_block: {
      auto inner = std::make_shared<scope>();
      inner->parent = s;
      inner->vars["__body"] = value(capture(st.body, inner));
      append_str(*out_, eval(*st.e, inner));
      check_size(out_->size());
      return flow::normal;
    }
    case stmt_kind::break_:
      return flow::break_;
    case stmt_kind::continue_:
      return flow::continue_;
    case stmt_kind::scope: {
      auto inner = std::make_shared<scope>();
      inner->parent = s;
      for (const auto& [k, e] : st.params) inner->vars[k] = eval(*e, s);
      return exec(st.body, inner);
    }
  }
  return flow::normal;
}

interpreter::flow interpreter::exec_for(const stmt& st, const scope_ptr& s) {
  value seq = eval(*st.e, s);
  std::vector<value> items = iterate(seq);
  if (st.filter) {
    std::vector<value> kept;
    for (auto& item : items) {
      step();
      auto probe = std::make_shared<scope>();
      probe->parent = s;
      assign(probe, st.targets, item);
      if (truthy(eval(*st.filter, probe))) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  auto shared = std::make_shared<const std::vector<value>>(std::move(items));
  for (size_t i = 0; i < shared->size(); ++i) {
    step();
    auto inner = std::make_shared<scope>();
    inner->parent = s;
    assign(inner, st.targets, (*shared)[i]);
    inner->vars["loop"] = own(std::make_shared<loop_object>(shared, i));
    flow f = exec(st.body, inner);
    if (f == flow::break_) break;
  }
  if (shared->empty() && !st.else_body.empty()) {
    auto inner = std::make_shared<scope>();
    inner->parent = s;
    exec(st.else_body, inner);
  }
  return flow::normal;
}

value interpreter::call(const value& f, std::vector<value> args, kwargs_t kwargs) {
  step();
  if (f.is_undefined()) f.fail_undefined();
  if (!f.is_object() || !f.obj()->callable())
    fail("TypeError", "'" + type_name(f) + "' object is not callable");
  return f.obj()->call(*this, std::move(args), std::move(kwargs));
}

value interpreter::eval(const expr& e, const scope_ptr& s) {
  step();
  switch (e.kind) {
    case expr_kind::literal:
      return e.literal;
    case expr_kind::name: {
      if (const value* v = s->find(e.name)) return *v;
      return value::undefined("'" + e.name + "' is undefined");
    }
    case expr_kind::list:
    case expr_kind::tuple: {
      std::vector<value> items;
      items.reserve(e.args.size());
      for (const auto& a : e.args) items.push_back(eval(*a, s));
      return value(std::move(items), e.kind == expr_kind::tuple);
    }
    case expr_kind::dict: {
      auto d = std::make_shared<dict_data>();
      for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
        value k = eval(*e.args[i], s);
        if (k.is_list() && !k.is_tuple()) fail("TypeError", "unhashable type: 'list'");
        if (k.is_dict()) fail("TypeError", "unhashable type: 'dict'");
        d->set(std::move(k), eval(*e.args[i + 1], s));
      }
      return value(std::shared_ptr<const dict_data>(std::move(d)));
    }
    case expr_kind::attribute:
      return get_attribute(eval(*e.args[0], s), e.name);
    case expr_kind::item:
      return get_item(eval(*e.args[0], s), eval(*e.args[1], s));
    case expr_kind::slice: {
      value obj = eval(*e.args[0], s);
      auto part = [&](size_t i) { return e.args[i] ? eval(*e.args[i], s) : value(none_t{}); };
      return get_slice(obj, part(1), part(2), part(3));
    }
    case expr_kind::call: {
      value f = eval(*e.args[0], s);
      std::vector<value> args;
      args.reserve(e.args.size() - 1);
      for (size_t i = 1; i < e.args.size(); ++i) args.push_back(eval(*e.args[i], s));
      kwargs_t kwargs;
      for (const auto& [k, a] : e.kwargs) kwargs.emplace_back(k, eval(*a, s));
      return call(f, std::move(args), std::move(kwargs));
    }
    case expr_kind::filter:
    case expr_kind::test: {
      value subject = eval(*e.args[0], s);
      std::vector<value> args;
      for (size_t i = 1; i < e.args.size(); ++i) args.push_back(eval(*e.args[i], s));
      kwargs_t kwargs;
      for (const auto& [k, a] : e.kwargs) kwargs.emplace_back(k, eval(*a, s));
      if (e.kind == expr_kind::filter)
        return apply_filter(*this, e.name, subject, std::move(args), std::move(kwargs));
      bool r = apply_test(*this, e.name, subject, std::move(args), std::move(kwargs));
      return value(e.negated ? !r : r);
    }
    case expr_kind::unary: {
      value v = eval(*e.args[0], s);
      if (e.name == "not") return value(!truthy(v));
      if (v.is_undefined()) v.fail_undefined();
      if (!v.is_number())
        fail("TypeError", "bad operand type for unary " + e.name + ": '" + type_name(v) + "'");
      if (e.name == "+") return v.is_bool() ? value(v.to_int()) : v;
      if (v.is_float()) return value(-v.as_float());
      if (v.to_int() == INT64_MIN) fail("OverflowError", "integer overflow");
      return value(-v.to_int());
    }
    case expr_kind::binary: {
      const std::string& op = e.name;
      value a = eval(*e.args[0], s);
      if (op == "and") return truthy(a) ? eval(*e.args[1], s) : a;
      if (op == "or") return truthy(a) ? a : eval(*e.args[1], s);
      value b = eval(*e.args[1], s);
      if (op == "==") return value(equal(a, b));
      if (op == "!=") return value(!equal(a, b));
      if (op == "<") return value(less(a, b));
      if (op == ">") return value(less(b, a));
      if (op == "<=") return value(!less(b, a));
      if (op == ">=") return value(!less(a, b));
      if (op == "in") return value(contains(b, a));
      if (op == "not in") return value(!contains(b, a));
      return binary_op(*this, op, a, b);
    }
    case expr_kind::condition:
      if (truthy(eval(*e.args[0], s))) return eval(*e.args[1], s);
      if (e.args[2]) return eval(*e.args[2], s);
      return value::undefined("the inline if-expression on line " + std::to_string(e.line) +
                              " evaluated to false and no else section was defined.");
  }
  return value();
}

// The public API (jinja.h).

class chat_template_program {
 public:
  std::vector<stmt_ptr> body;
};

namespace {
constexpr size_t k_max_source = 4u << 20;
}

result<std::shared_ptr<const chat_template_program>> parse(std::string_view source) {
  if (source.size() > k_max_source)
    return hearth::error{"TemplateSyntaxError: the template is larger than " +
                         std::to_string(k_max_source) + " bytes"};
  try {
    auto p = std::make_shared<chat_template_program>();
    p->body = parse_template(source);
    return std::shared_ptr<const chat_template_program>(std::move(p));
  } catch (const error& e) {
    return hearth::error{e.message};
  } catch (const std::bad_alloc&) {
    return hearth::error{"MemoryError: out of memory parsing the template"};
  } catch (const std::exception& e) {
    return hearth::error{std::string("TemplateSyntaxError: ") + e.what()};
  }
}

result<std::string> render(const chat_template_program& t, const nlohmann::ordered_json& context,
                           const render_options& opts) {
  try {
    auto globals = std::make_shared<scope>();
    add_globals(*globals);
    auto root = std::make_shared<scope>();
    root->parent = globals;
    if (!context.is_null() && !context.is_object())
      return hearth::error{"TypeError: the context must be a JSON object"};
    if (context.is_object())
      for (const auto& [k, v] : context.items()) root->vars[k] = from_json(v);
    interpreter in(opts.now.value_or(std::chrono::system_clock::now()));
    return in.render(t.body, root);
  } catch (const error& e) {
    return hearth::error{e.message};
  } catch (const std::bad_alloc&) {
    return hearth::error{"MemoryError: out of memory rendering the template"};
  } catch (const std::exception& e) {
    return hearth::error{std::string("RuntimeError: ") + e.what()};
  }
}

}  // namespace hearth::jinja
