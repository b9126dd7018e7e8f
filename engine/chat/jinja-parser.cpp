#include "engine/chat/jinja-parser.h"

#include <initializer_list>

#include "engine/chat/jinja-lexer.h"

namespace hearth::jinja {
namespace {

// Deeper nesting than any real template; bounds the parser's and the renderer's recursion.
constexpr int k_max_depth = 200;

class parser {
 public:
  explicit parser(std::vector<token> toks) : t_(std::move(toks)) {}

  std::vector<stmt_ptr> run() {
    auto body = subparse({});
    if (peek().kind != token_kind::eof) error_here("unexpected tag");
    return body;
  }

 private:
  const token& peek(size_t ahead = 0) const {
    size_t i = p_ + ahead;
    return i < t_.size() ? t_[i] : t_.back();
  }
  const token& next() {
    const token& t = peek();
    if (p_ < t_.size() - 1) ++p_;
    return t;
  }
  bool is_op(std::string_view op, size_t ahead = 0) const {
    return peek(ahead).kind == token_kind::op && peek(ahead).text == op;
  }
  bool is_name(std::string_view n, size_t ahead = 0) const {
    return peek(ahead).kind == token_kind::name && peek(ahead).text == n;
  }
  [[noreturn]] void error_here(std::string_view what) const {
    fail("TemplateSyntaxError", std::string(what) + " (line " + std::to_string(peek().line) + ")");
  }
  static std::string describe(const token& t) {
    switch (t.kind) {
      case token_kind::name:
      case token_kind::op:
        return "'" + t.text + "'";
      case token_kind::string:
        return "string";
      case token_kind::integer:
        return "integer";
      case token_kind::floating:
        return "float";
      case token_kind::block_end:
        return "end of statement block";
      case token_kind::var_end:
        return "end of print statement";
      case token_kind::eof:
        return "end of template";
      default:
        return "template data";
    }
  }
  void expect_op(std::string_view op) {
    if (!is_op(op)) error_here("expected '" + std::string(op) + "', got " + describe(peek()));
    next();
  }
  void expect_name(std::string_view n) {
    if (!is_name(n)) error_here("expected '" + std::string(n) + "', got " + describe(peek()));
    next();
  }
  std::string expect_identifier() {
    if (peek().kind != token_kind::name) error_here("expected a name, got " + describe(peek()));
    return next().text;
  }
  void expect_block_end() {
    if (peek().kind != token_kind::block_end)
      error_here("expected 'end of statement block', got " + describe(peek()));
    next();
  }

  struct depth_guard {
    explicit depth_guard(parser& owner) : p(owner) {
      if (++p.depth_ > k_max_depth) p.error_here("template nested too deeply");
    }
    ~depth_guard() { --p.depth_; }
    parser& p;
  };

  // Statements up to a {% tag %} named in `ends` (left at that name) or the end.
  std::vector<stmt_ptr> subparse(std::initializer_list<std::string_view> ends) {
    depth_guard g(*this);
    std::vector<stmt_ptr> body;
    while (true) {
      const token& t = peek();
      if (t.kind == token_kind::eof) {
        if (ends.size() == 0) return body;
        std::string want;
        for (auto e : ends) want += (want.empty() ? "'" : " or '") + std::string(e) + "'";
        error_here("Unexpected end of template. Jinja was looking for the following tags: " + want);
      }
      if (t.kind == token_kind::text) {
        auto s = std::make_unique<stmt>(stmt{stmt_kind::text, t.line});
        s->text = t.text;
        next();
        body.push_back(std::move(s));
      } else if (t.kind == token_kind::var_begin) {
        next();
        auto s = std::make_unique<stmt>(stmt{stmt_kind::output, t.line});
        s->e = parse_tuple(true);
        if (peek().kind != token_kind::var_end)
          error_here("expected 'end of print statement', got " + describe(peek()));
        next();
        body.push_back(std::move(s));
      } else if (t.kind == token_kind::block_begin) {
        next();
        if (peek().kind == token_kind::name)
          for (auto e : ends)
            if (peek().text == e) return body;
        body.push_back(statement());
      } else {
        error_here("unexpected " + describe(t));
      }
    }
  }

  stmt_ptr statement() {
    if (peek().kind != token_kind::name) error_here("tag name expected");
    std::string tag = peek().text;
    int line = peek().line;
    auto s = std::make_unique<stmt>(stmt{stmt_kind::text, line});
    next();
    if (tag == "if") {
      s->kind = stmt_kind::if_;
      while (true) {
        expr_ptr cond = parse_tuple(false);
        expect_block_end();
        auto body = subparse({"elif", "else", "endif"});
        s->branches.emplace_back(std::move(cond), std::move(body));
        std::string end = next().text;
        if (end == "elif") continue;
        if (end == "else") {
          expect_block_end();
          s->else_body = subparse({"endif"});
          next();
        }
        break;
      }
      expect_block_end();
    } else if (tag == "for") {
      s->kind = stmt_kind::for_;
      s->targets = assign_targets();
      expect_name("in");
      s->e = parse_tuple(false, true);
      if (is_name("if")) {
        next();
        s->filter = parse_expression(true);
      }
      if (is_name("recursive")) error_here("recursive loops are not supported");
      expect_block_end();
      ++loops_;
      s->body = subparse({"endfor", "else"});
      --loops_;
      if (next().text == "else") {
        expect_block_end();
        s->else_body = subparse({"endfor"});
        next();
      }
      expect_block_end();
    } else if (tag == "set") {
      if (peek().kind == token_kind::name && is_op(".", 1)) {
        s->targets.push_back(next().text);
        next();
        s->text = expect_identifier();
      } else {
        s->targets = assign_targets();
      }
      if (is_op("=")) {
        next();
        s->kind = stmt_kind::set;
        s->e = parse_tuple(true);
        expect_block_end();
      } else {
        if (!s->text.empty() || s->targets.size() != 1) error_here("expected '='");
        s->kind = stmt_kind::set_block;
        s->e = filter_chain();
        expect_block_end();
        s->body = subparse({"endset"});
        next();
        expect_block_end();
      }
    } else if (tag == "macro") {
      s->kind = stmt_kind::macro;
      s->text = expect_identifier();
      parse_params(*s);
      expect_block_end();
      int saved = loops_;
      loops_ = 0;
      s->body = subparse({"endmacro"});
      loops_ = saved;
      next();
      if (peek().kind == token_kind::name) next();  // {% endmacro name %}
      expect_block_end();
    } else if (tag == "call") {
      s->kind = stmt_kind::call_block;
      if (is_op("(")) parse_params(*s);
      s->e = parse_expression(true);
      if (s->e->kind != expr_kind::call) error_here("expected call");
      expect_block_end();
      int saved = loops_;
      loops_ = 0;
      s->body = subparse({"endcall"});
      loops_ = saved;
      next();
      expect_block_end();
    } else if (tag == "filter") {
      s->kind = stmt_kind::filter_block;
      auto subject = std::make_unique<expr>(expr{expr_kind::name, line});
      subject->name = "__body";
      s->e = filter_rest(std::move(subject), true);
      expect_block_end();
      s->body = subparse({"endfilter"});
      next();
      expect_block_end();
    } else if (tag == "with") {
      s->kind = stmt_kind::scope;
      while (peek().kind != token_kind::block_end) {
        if (!s->params.empty()) expect_op(",");
        std::string n = expect_identifier();
        expect_op("=");
        s->params.emplace_back(n, parse_expression(true));
      }
      expect_block_end();
      s->body = subparse({"endwith"});
      next();
      expect_block_end();
    } else if (tag == "generation") {
      // Hugging Face's extension marking the assistant's tokens; renders its body.
      s->kind = stmt_kind::scope;
      expect_block_end();
      s->body = subparse({"endgeneration"});
      next();
      expect_block_end();
    } else if (tag == "break" || tag == "continue") {
      if (loops_ == 0) error_here("'" + tag + "' outside of a loop");
      s->kind = tag == "break" ? stmt_kind::break_ : stmt_kind::continue_;
      expect_block_end();
    } else {
      fail("TemplateSyntaxError",
           "Encountered unknown tag '" + tag + "'. (line " + std::to_string(line) + ")");
    }
    return s;
  }

  // A name, or names separated by commas (optionally in parentheses).
  std::vector<std::string> assign_targets() {
    std::vector<std::string> names;
    bool paren = is_op("(");
    if (paren) next();
    names.push_back(expect_identifier());
    while (is_op(",")) {
      next();
      if (peek().kind != token_kind::name) break;
      names.push_back(expect_identifier());
    }
    if (paren) expect_op(")");
    if (names.size() == 1 && (names[0] == "true" || names[0] == "false" || names[0] == "none" ||
                              names[0] == "True" || names[0] == "False" || names[0] == "None"))
      error_here("cannot assign to " + names[0]);
    return names;
  }

  void parse_params(stmt& s) {
    expect_op("(");
    while (!is_op(")")) {
      if (!s.params.empty()) expect_op(",");
      if (is_op(")")) break;
      std::string n = expect_identifier();
      expr_ptr def;
      if (is_op("=")) {
        next();
        def = parse_expression(true);
      }
      s.params.emplace_back(std::move(n), std::move(def));
    }
    next();
  }

  // `| f(args) | g` after a block set: applied to the name "__body".
  expr_ptr filter_chain() {
    if (!is_op("|")) return nullptr;
    auto subject = std::make_unique<expr>(expr{expr_kind::name, peek().line});
    subject->name = "__body";
    return filter_rest(std::move(subject), false);
  }

  // Filters applied to `node`; `bare` = the first has no leading "|" ({% filter f %}).
  expr_ptr filter_rest(expr_ptr node, bool bare) {
    while (bare || is_op("|")) {
      if (!bare) next();
      bare = false;
      auto f = std::make_unique<expr>(expr{expr_kind::filter, peek().line});
      f->name = dotted_name();
      f->args.push_back(std::move(node));
      if (is_op("(")) call_args(*f);
      node = std::move(f);
    }
    return node;
  }

  std::string dotted_name() {
    std::string n = expect_identifier();
    while (is_op(".") && peek(1).kind == token_kind::name) {
      next();
      n += "." + next().text;
    }
    return n;
  }

  // Expressions separated by commas make a tuple (as jinja2's parse_tuple).
  expr_ptr parse_tuple(bool with_condexpr, bool for_iter = false, bool explicit_parens = false) {
    int line = peek().line;
    std::vector<expr_ptr> items;
    bool comma = false;
    while (true) {
      if (!items.empty()) {
        if (!is_op(",")) break;
        next();
        comma = true;
      }
      const token& t = peek();
      if (t.kind == token_kind::block_end || t.kind == token_kind::var_end || is_op(")") ||
          (for_iter && (is_name("if") || is_name("recursive"))))
        break;
      items.push_back(parse_expression(with_condexpr));
    }
    if (!comma) {
      if (items.empty()) {
        if (!explicit_parens) error_here("Expected an expression, got " + describe(peek()));
        auto e = std::make_unique<expr>(expr{expr_kind::tuple, line});
        return e;
      }
      return std::move(items[0]);
    }
    auto e = std::make_unique<expr>(expr{expr_kind::tuple, line});
    e->args = std::move(items);
    return e;
  }

  expr_ptr make(expr_kind k, int line, std::string name, expr_ptr a, expr_ptr b = nullptr) {
    auto e = std::make_unique<expr>(expr{k, line});
    e->name = std::move(name);
    e->args.push_back(std::move(a));
    if (b) e->args.push_back(std::move(b));
    return e;
  }

  expr_ptr parse_expression(bool with_condexpr) {
    depth_guard g(*this);
    if (!with_condexpr) return parse_or();
    expr_ptr e = parse_or();
    while (is_name("if")) {
      int line = next().line;
      expr_ptr cond = parse_or();
      expr_ptr other;
      if (is_name("else")) {
        next();
        other = parse_expression(true);
      }
      auto c = std::make_unique<expr>(expr{expr_kind::condition, line});
      c->args.push_back(std::move(cond));
      c->args.push_back(std::move(e));
      c->args.push_back(std::move(other));
      e = std::move(c);
    }
    return e;
  }

  expr_ptr parse_or() {
    expr_ptr e = parse_and();
    while (is_name("or")) {
      int line = next().line;
      e = make(expr_kind::binary, line, "or", std::move(e), parse_and());
    }
    return e;
  }
  expr_ptr parse_and() {
    expr_ptr e = parse_not();
    while (is_name("and")) {
      int line = next().line;
      e = make(expr_kind::binary, line, "and", std::move(e), parse_not());
    }
    return e;
  }
  expr_ptr parse_not() {
    if (is_name("not")) {
      depth_guard g(*this);
      int line = next().line;
      return make(expr_kind::unary, line, "not", parse_not());
    }
    return parse_compare();
  }

  // a < b < c is (a < b) and (b < c), b evaluated twice (templates compare plain values).
  expr_ptr parse_compare() {
    int line = peek().line;
    expr_ptr left = parse_math1();
    expr_ptr result;
    const expr* prev = left.get();
    expr_ptr owned_left = std::move(left);
    while (true) {
      std::string op;
      if (peek().kind == token_kind::op &&
          (peek().text == "==" || peek().text == "!=" || peek().text == "<" ||
           peek().text == "<=" || peek().text == ">" || peek().text == ">=")) {
        op = next().text;
      } else if (is_name("in")) {
        next();
        op = "in";
      } else if (is_name("not") && is_name("in", 1)) {
        next();
        next();
        op = "not in";
      } else {
        break;
      }
      expr_ptr right = parse_math1();
      expr_ptr lhs = owned_left ? std::move(owned_left) : clone(*prev);
      const expr* right_raw = right.get();
      expr_ptr cmp = make(expr_kind::binary, line, op, std::move(lhs), std::move(right));
      prev = right_raw;
      result = result ? make(expr_kind::binary, line, "and", std::move(result), std::move(cmp))
                      : std::move(cmp);
    }
    return result ? std::move(result) : std::move(owned_left);
  }

  static expr_ptr clone(const expr& e) {
    auto c = std::make_unique<expr>(expr{e.kind, e.line, e.literal, e.name, e.negated});
    for (const auto& a : e.args) c->args.push_back(a ? clone(*a) : nullptr);
    for (const auto& [k, v] : e.kwargs) c->kwargs.emplace_back(k, clone(*v));
    return c;
  }

  expr_ptr parse_math1() {
    expr_ptr e = parse_concat();
    while (is_op("+") || is_op("-")) {
      const token& t = next();
      e = make(expr_kind::binary, t.line, t.text, std::move(e), parse_concat());
    }
    return e;
  }
  expr_ptr parse_concat() {
    expr_ptr e = parse_math2();
    while (is_op("~")) {
      int line = next().line;
      e = make(expr_kind::binary, line, "~", std::move(e), parse_math2());
    }
    return e;
  }
  expr_ptr parse_math2() {
    expr_ptr e = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const token& t = next();
      std::string op = t.text;
      e = make(expr_kind::binary, t.line, op, std::move(e), parse_pow());
    }
    return e;
  }
  expr_ptr parse_pow() {
    expr_ptr e = parse_unary(true);
    while (is_op("**")) {
      int line = next().line;
      e = make(expr_kind::binary, line, "**", std::move(e), parse_unary(true));
    }
    return e;
  }

  expr_ptr parse_unary(bool with_filter) {
    depth_guard g(*this);
    expr_ptr e;
    if (is_op("-") || is_op("+")) {
      const token& t = next();
      std::string op = t.text;
      e = make(expr_kind::unary, t.line, op, parse_unary(false));
    } else {
      e = parse_primary();
    }
    e = postfix(std::move(e));
    if (with_filter) e = filter_expr(std::move(e));
    return e;
  }

  expr_ptr parse_primary() {
    depth_guard g(*this);
    const token& t = peek();
    int line = t.line;
    auto lit = [&](value v) {
      auto e = std::make_unique<expr>(expr{expr_kind::literal, line});
      e->literal = std::move(v);
      return e;
    };
    switch (t.kind) {
      case token_kind::name: {
        std::string n = next().text;
        if (n == "true" || n == "True") return lit(value(true));
        if (n == "false" || n == "False") return lit(value(false));
        if (n == "none" || n == "None") return lit(value(none_t{}));
        auto e = std::make_unique<expr>(expr{expr_kind::name, line});
        e->name = std::move(n);
        return e;
      }
      case token_kind::string: {
        std::string s = next().text;
        while (peek().kind == token_kind::string) s += next().text;
        return lit(value(std::move(s)));
      }
      case token_kind::integer:
        return lit(value(next().integer));
      case token_kind::floating:
        return lit(value(next().floating));
      case token_kind::op:
        if (t.text == "(") {
          next();
          expr_ptr e = parse_tuple(true, false, true);
          expect_op(")");
          return e;
        }
        if (t.text == "[") {
          next();
          auto e = std::make_unique<expr>(expr{expr_kind::list, line});
          while (!is_op("]")) {
            if (!e->args.empty()) expect_op(",");
            if (is_op("]")) break;
            e->args.push_back(parse_expression(true));
          }
          next();
          return e;
        }
        if (t.text == "{") {
          next();
          auto e = std::make_unique<expr>(expr{expr_kind::dict, line});
          while (!is_op("}")) {
            if (!e->args.empty()) expect_op(",");
            if (is_op("}")) break;
            e->args.push_back(parse_expression(true));
            expect_op(":");
            e->args.push_back(parse_expression(true));
          }
          next();
          return e;
        }
        break;
      default:
        break;
    }
    error_here("unexpected " + describe(t));
  }

  expr_ptr postfix(expr_ptr e) {
    while (true) {
      if (is_op(".") || is_op("["))
        e = subscript(std::move(e));
      else if (is_op("("))
        e = call(std::move(e));
      else
        return e;
    }
  }

  expr_ptr filter_expr(expr_ptr e) {
    while (true) {
      if (is_op("|")) {
        e = filter_rest(std::move(e), false);
      } else if (is_name("is")) {
        int line = next().line;
        auto t = std::make_unique<expr>(expr{expr_kind::test, line});
        if (is_name("not")) {
          next();
          t->negated = true;
        }
        t->name = dotted_name();
        t->args.push_back(std::move(e));
        const token& a = peek();
        if (is_op("(")) {
          call_args(*t);
        } else if ((a.kind == token_kind::name || a.kind == token_kind::string ||
                    a.kind == token_kind::integer || a.kind == token_kind::floating || is_op("[") ||
                    is_op("{")) &&
                   !is_name("else") && !is_name("or") && !is_name("and")) {
          if (is_name("is")) error_here("You cannot chain multiple tests with is");
          t->args.push_back(postfix(parse_primary()));
        }
        e = std::move(t);
      } else if (is_op("(")) {
        e = call(std::move(e));
      } else {
        return e;
      }
    }
  }

  expr_ptr subscript(expr_ptr e) {
    depth_guard g(*this);
    const token& t = next();
    int line = t.line;
    if (t.text == ".") {
      const token& a = next();
      if (a.kind == token_kind::name) {
        auto r = make(expr_kind::attribute, line, a.text, std::move(e));
        return r;
      }
      if (a.kind == token_kind::integer) {
        auto idx = std::make_unique<expr>(expr{expr_kind::literal, line});
        idx->literal = value(a.integer);
        return make(expr_kind::item, line, "", std::move(e), std::move(idx));
      }
      error_here("expected name or number");
    }
    // [ ... ]: an index, a slice, or a tuple of them.
    std::vector<expr_ptr> parts;
    while (!is_op("]")) {
      if (!parts.empty()) expect_op(",");
      parts.push_back(subscribed());
    }
    next();
    if (parts.empty()) error_here("expected subscript expression");
    if (parts.size() == 1) {
      if (parts[0]->kind == expr_kind::slice) {
        parts[0]->args[0] = std::move(e);
        return std::move(parts[0]);
      }
      return make(expr_kind::item, line, "", std::move(e), std::move(parts[0]));
    }
    auto tup = std::make_unique<expr>(expr{expr_kind::tuple, line});
    tup->args = std::move(parts);
    return make(expr_kind::item, line, "", std::move(e), std::move(tup));
  }

  // One part of a subscript: an expression or start:stop:step (a slice node whose args[0] is
  // filled in by the caller).
  expr_ptr subscribed() {
    int line = peek().line;
    expr_ptr start;
    if (!is_op(":")) {
      start = parse_expression(true);
      if (!is_op(":")) return start;
    }
    next();
    auto s = std::make_unique<expr>(expr{expr_kind::slice, line});
    s->args.resize(4);
    s->args[1] = std::move(start);
    if (!is_op("]") && !is_op(",") && !is_op(":")) s->args[2] = parse_expression(true);
    if (is_op(":")) {
      next();
      if (!is_op("]") && !is_op(",")) s->args[3] = parse_expression(true);
    }
    return s;
  }

  expr_ptr call(expr_ptr e) {
    depth_guard g(*this);
    auto c = std::make_unique<expr>(expr{expr_kind::call, peek().line});
    c->args.push_back(std::move(e));
    call_args(*c);
    return c;
  }

  void call_args(expr& c) {
    expect_op("(");
    bool first = true;
    while (!is_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (is_op(")")) break;
      if (is_op("*") || is_op("**")) error_here("*args and **kwargs in calls are not supported");
      if (peek().kind == token_kind::name && is_op("=", 1)) {
        std::string key = next().text;
        next();
        c.kwargs.emplace_back(std::move(key), parse_expression(true));
      } else {
        if (!c.kwargs.empty()) error_here("invalid syntax for function call expression");
        c.args.push_back(parse_expression(true));
      }
    }
    next();
  }

  std::vector<token> t_;
  size_t p_ = 0;
  int depth_ = 0;
  int loops_ = 0;
};

}  // namespace

std::vector<stmt_ptr> parse_template(std::string_view source) {
  return parser(lex(source)).run();
}

}  // namespace hearth::jinja
