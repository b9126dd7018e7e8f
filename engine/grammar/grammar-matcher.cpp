#include "engine/grammar/grammar-matcher.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <numeric>
#include <unordered_map>

#include "engine/tokenizer/vocab.h"

namespace hearth {

namespace {

// Caps of the automaton (module comment): stacks deeper than this are dropped (a grammar
// nesting deeper is followed only as far as this), a state keeps at most this many stacks, and
// the interned stacks and states are flushed past these counts between tokens. One mask
// computation creates at most max_states_per_walk new states; tokens needing more are refused
// (a generation still follows the grammar, through fewer of its paths). One matcher per running
// sequence, so the sizes keep one under ~40 MB: nodes ~64 B with their index, a state's
// transitions 1 KB, a mask 19 KB for 151,936 tokens. A JSON Schema's generation stays far below
// (hundreds of states).
constexpr uint32_t max_depth = 2048;
constexpr size_t max_stacks = 1024;
constexpr size_t flush_nodes = size_t{1} << 18;
constexpr size_t flush_states = size_t{1} << 12;
constexpr size_t max_states_per_walk = size_t{1} << 13;
constexpr size_t max_masks = 256;
// Pieces longer than this are never allowed (their trie depth is 16-bit).
constexpr size_t piece_bytes_limit = 4096;

constexpr uint32_t no_parent = 0;  // node 0: the empty stack (the grammar is complete)

// A charset's partial UTF-8 character, kept in its frame's count: bit 31 set, the sequence's
// length, the bytes still needed and the code point's bits so far; or, with partial_whole set
// instead of the bits, "every completion is in the set" (a prefix whose whole interval of code
// points lies inside one range): then the bits no longer matter, and keeping them would make a
// state per prefix (a thousand for CJK text inside a JSON string, each with its own mask).
constexpr uint32_t partial_whole = 1u << 27;
constexpr uint32_t partial_encode(uint32_t len, uint32_t need, uint32_t value) {
  return 1u << 31 | len << 28 | need << 24 | value;
}

bool charset_contains(const grammar_charset& set, uint32_t lo, uint32_t hi) {
  auto it = std::lower_bound(set.begin(), set.end(), lo,
                             [](const auto& r, uint32_t v) { return r.second < v; });
  return it != set.end() && it->first <= lo && hi <= it->second;
}

bool charset_intersects(const grammar_charset& set, uint32_t lo, uint32_t hi) {
  auto it = std::lower_bound(set.begin(), set.end(), lo,
                             [](const auto& r, uint32_t v) { return r.second < v; });
  return it != set.end() && it->first <= hi;
}

enum class byte_step : uint8_t { reject, partial, complete };

// Feeds one byte to a charset terminal whose frame holds `partial`; a partial character
// survives only while some code point of the set can still complete it.
byte_step charset_feed(const grammar_charset& set, uint32_t& partial, uint8_t b) {
  uint32_t len, need, value;
  if (partial == 0) {
    if (b < 0x80) return charset_intersects(set, b, b) ? byte_step::complete : byte_step::reject;
    if (b >= 0xC2 && b <= 0xDF) {
      len = 2, value = b & 0x1F;
    } else if (b >= 0xE0 && b <= 0xEF) {
      len = 3, value = b & 0x0F;
    } else if (b >= 0xF0 && b <= 0xF4) {
      len = 4, value = b & 0x07;
    } else {
      return byte_step::reject;
    }
    need = len - 1;
  } else {
    if ((b & 0xC0) != 0x80) return byte_step::reject;
    len = (partial >> 28) & 7;
    need = ((partial >> 24) & 3) - 1;
    if (partial & partial_whole) {
      if (need == 0) return byte_step::complete;
      partial = partial_encode(len, need, partial_whole);
      return byte_step::partial;
    }
    value = (partial & 0x1FFFFF) << 6 | (b & 0x3F);
  }
  static constexpr uint32_t min_of_len[5] = {0, 0, 0x80, 0x800, 0x10000};
  const uint32_t first = value << (6 * need), last = first | ((1u << (6 * need)) - 1);
  const uint32_t lo = std::max(first, min_of_len[len]);
  const uint32_t hi = std::min(last, 0x10FFFFu);
  if (lo > hi || !charset_intersects(set, lo, hi)) return byte_step::reject;
  if (need == 0) return byte_step::complete;
  // Whole only when no completion is overlong or past U+10FFFF either (lo, hi unclipped).
  const bool whole = first == lo && last == hi && charset_contains(set, lo, hi);
  partial = partial_encode(len, need, whole ? partial_whole : value);
  return byte_step::partial;
}

}  // namespace

// The interned stacks (nodes: a frame and the node below it) and the DFA over their sets.
// State 0 is the dead state (no stack); a state is accepting when it holds node 0.
class grammar_automaton {
 public:
  explicit grammar_automaton(const grammar& g) : g_(g), clip_(grammar_short_piece + 1) { clear(); }

  int32_t start() {
    std::vector<uint32_t> work;
    for (uint32_t a : g_.rules()[g_.root()].alts) work.push_back(node(a, 0, no_parent));
    return intern_state(closure(work));
  }

  bool accepting(int32_t s) const { return accepting_[size_t(s)] != 0; }

  // The fewest bytes that complete the grammar from state s (0: it can end now).
  int64_t min_completion(int32_t s) {
    if (suffix_min_.empty()) compute_min_lengths();
    int64_t best = INT64_MAX;
    for (uint32_t n : configs_[size_t(s)]) {
      int64_t r = 0;
      if (n != no_parent) {
        const node_t& x = nodes_[n];
        // The top is a charset: the bytes its partial character still needs, or its cheapest
        // character; then the rest of its alternative and of every frame below.
        r = (x.count ? int64_t((x.count >> 24) & 3) : suffix_min_[x.pos] - suffix_min_[x.pos + 1]) +
            suffix_min_[x.pos + 1] + below(x.parent);
      }
      best = std::min(best, r);
    }
    return best;
  }

  // The state after byte b, computed once. -1: a cap of this walk refused a new state.
  int32_t step(int32_t s, uint8_t b) {
    const size_t at = size_t(s) * 256 + b;
    if (trans_[at] >= 0) return trans_[at];
    std::vector<uint32_t> work, tops;
    for (uint32_t n : configs_[size_t(s)]) {
      if (n == no_parent) continue;
      const node_t& x = nodes_[n];
      uint32_t partial = x.count;
      switch (charset_feed(g_.charsets()[g_.elements()[x.pos].a], partial, b)) {
        case byte_step::reject:
          break;
        case byte_step::partial:
          tops.push_back(node(x.pos, partial, x.parent));
          break;
        case byte_step::complete:
          work.push_back(node(x.pos + 1, 0, x.parent));
          break;
      }
    }
    std::vector<uint32_t> next = closure(work);
    next.insert(next.end(), tops.begin(), tops.end());
    if (walk_budget_ == 0 && !state_ids_.contains(key_of(normalize(next)))) return -1;
    const int32_t t = intern_state(std::move(next));
    trans_[at] = t;
    return t;
  }

  // The state with every repetition counter clipped to what a short piece can change, which has
  // the same mask for those: a count more than clip_ passes away from both of its bounds is moved
  // to exactly clip_ passes away (each non-empty pass takes a byte; nullable bodies have min 0).
  int32_t canonical(int32_t s) {
    if (canon_[size_t(s)] >= 0) return canon_[size_t(s)];
    std::vector<uint32_t> out;
    for (uint32_t n : configs_[size_t(s)]) out.push_back(clip_stack(n));
    const int32_t c = intern_state(std::move(out));
    canon_[size_t(s)] = c;
    canon_[size_t(c)] = c;
    return c;
  }

  void walk_begin() { walk_budget_ = max_states_per_walk; }
  void walk_end() { walk_budget_ = SIZE_MAX; }

  // Between tokens: past the flush counts, rebuilds from nothing but state s (returned anew).
  int32_t maybe_flush(int32_t s) {
    if (nodes_.size() < flush_nodes && configs_.size() < flush_states) return s;
    std::vector<std::vector<node_t>> stacks;
    for (uint32_t n : configs_[size_t(s)]) {
      std::vector<node_t> frames;
      for (; n != no_parent; n = nodes_[n].parent) frames.push_back(nodes_[n]);
      stacks.push_back(std::move(frames));
    }
    clear();
    std::vector<uint32_t> config;
    for (auto& frames : stacks) {
      uint32_t n = no_parent;
      for (auto it = frames.rbegin(); it != frames.rend(); ++it) n = node(it->pos, it->count, n);
      config.push_back(n);
    }
    return intern_state(std::move(config));
  }

  // Masks by canonical state, cleared when there are too many.
  // Masks by canonical state, of every piece (exact) or of the short ones.
  std::vector<uint64_t>* mask(int32_t canonical_state, bool exact) {
    auto it = masks_.find(int64_t(canonical_state) * 2 + exact);
    return it == masks_.end() ? nullptr : &it->second;
  }
  std::vector<uint64_t>& new_mask(int32_t canonical_state, bool exact, size_t words) {
    if (masks_.size() >= max_masks) masks_.clear();
    auto& m = masks_[int64_t(canonical_state) * 2 + exact];
    m.assign(words, 0);
    return m;
  }

 private:
  struct node_t {
    uint32_t pos;
    uint32_t count;   // repeat: passes entered; charset: partial character; else 0
    uint32_t parent;  // the node below; no_parent at the bottom
    uint32_t depth;
  };
  struct node_key_hash {
    size_t operator()(const std::pair<uint64_t, uint32_t>& k) const {
      return std::hash<uint64_t>{}(k.first * 0x9E3779B97F4A7C15ull ^ k.second);
    }
  };

  // Cheapest completions in bytes: per rule (fixpoint from "unreachable"), per element position
  // the rest of its alternative (suffix_min_), saturated far below overflow.
  void compute_min_lengths() {
    constexpr int64_t cap = int64_t{1} << 40;
    const auto& el = g_.elements();
    const auto& rules = g_.rules();
    std::vector<int64_t> rule_min(rules.size(), cap);
    suffix_min_.assign(el.size() + 1, 0);
    const auto element_min = [&](const grammar_element& e) -> int64_t {
      switch (e.op) {
        case grammar_op::charset: {
          const grammar_charset& set = g_.charsets()[e.a];
          if (set.empty()) return cap;
          const uint32_t c = set.front().first;
          return c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
        }
        case grammar_op::ref:
          return rule_min[e.a];
        case grammar_op::repeat:
          return std::min(cap, int64_t(e.b) * rule_min[e.a]);
        case grammar_op::end:
          return 0;
      }
      return cap;
    };
    const auto fill_suffixes = [&] {
      for (size_t i = el.size(); i-- > 0;) {
        suffix_min_[i] = el[i].op == grammar_op::end
                             ? 0
                             : std::min(cap, element_min(el[i]) + suffix_min_[i + 1]);
      }
    };
    for (bool changed = true; changed;) {
      fill_suffixes();
      changed = false;
      for (size_t r = 0; r < rules.size(); ++r) {
        int64_t m = cap;
        for (uint32_t a : rules[r].alts) m = std::min(m, suffix_min_[a]);
        if (m < rule_min[r]) {
          rule_min[r] = m;
          changed = true;
        }
      }
    }
    body_min_ = std::move(rule_min);
  }

  // The fewest bytes of the frames from node n down (n is not a top: a return frame).
  int64_t below(uint32_t n) {
    if (n == no_parent) return 0;
    if (below_.size() < nodes_.size()) below_.resize(nodes_.size(), -1);
    if (below_[n] >= 0) return below_[n];
    const node_t x = nodes_[n];
    const grammar_element& e = g_.elements()[x.pos];
    int64_t r =
        e.op == grammar_op::repeat
            ? int64_t(e.b > x.count ? e.b - x.count : 0) * body_min_[e.a] + suffix_min_[x.pos + 1]
            : suffix_min_[x.pos];
    r += below(x.parent);  // recursion as deep as the stack: at most max_depth frames
    below_[n] = r;
    return r;
  }

  void clear() {
    below_.clear();
    nodes_.assign(1, {0, 0, no_parent, 0});
    node_ids_.clear();
    configs_.clear();
    state_ids_.clear();
    trans_.clear();
    accepting_.clear();
    canon_.clear();
    masks_.clear();
    intern_state({});  // state 0: dead
  }

  uint32_t node(uint32_t pos, uint32_t count, uint32_t parent) {
    const std::pair<uint64_t, uint32_t> key{uint64_t(pos) << 32 | count, parent};
    auto [it, added] = node_ids_.try_emplace(key, uint32_t(nodes_.size()));
    if (added) nodes_.push_back({pos, count, parent, nodes_[parent].depth + 1});
    return it->second;
  }

  // Expands stacks until each one's top is a charset, or it is empty (complete). Iterative; a
  // node met twice is expanded once, which ends the loops of nullable repetitions.
  std::vector<uint32_t> closure(std::vector<uint32_t>& work) {
    std::vector<uint32_t> out;
    ++visit_stamp_;
    while (!work.empty()) {
      const uint32_t n = work.back();
      work.pop_back();
      if (visited_.size() <= n) visited_.resize(nodes_.size() * 2, 0);
      if (visited_[n] == visit_stamp_) continue;
      visited_[n] = visit_stamp_;
      if (n == no_parent) {
        out.push_back(n);
        continue;
      }
      const node_t x = nodes_[n];
      if (x.depth > max_depth) continue;
      const grammar_element& e = g_.elements()[x.pos];
      switch (e.op) {
        case grammar_op::charset:
          out.push_back(n);
          break;
        case grammar_op::end:
          work.push_back(x.parent);
          break;
        case grammar_op::ref: {
          const uint32_t ret = node(x.pos + 1, 0, x.parent);
          for (uint32_t a : g_.rules()[e.a].alts) work.push_back(node(a, 0, ret));
          break;
        }
        case grammar_op::repeat: {
          if (x.count < e.c) {
            // An unbounded repetition past its minimum counts no further: one state for all.
            const uint32_t c =
                e.c == grammar_repeat_unbounded ? std::min(x.count + 1, e.b) : x.count + 1;
            const uint32_t ret = node(x.pos, c, x.parent);
            for (uint32_t a : g_.rules()[e.a].alts) work.push_back(node(a, 0, ret));
          }
          if (x.count >= e.b) work.push_back(node(x.pos + 1, 0, x.parent));
          break;
        }
      }
    }
    return out;
  }

  uint32_t clip_count(const grammar_element& e, uint32_t c) const {
    if (c < e.b) return e.b - c > clip_ ? e.b - clip_ : c;
    if (e.c == grammar_repeat_unbounded) return c;
    return e.c - c > clip_ ? e.b : c;
  }

  uint32_t clip_stack(uint32_t n) {
    std::vector<node_t> frames;
    for (; n != no_parent; n = nodes_[n].parent) frames.push_back(nodes_[n]);
    uint32_t out = no_parent;
    for (auto it = frames.rbegin(); it != frames.rend(); ++it) {
      const grammar_element& e = g_.elements()[it->pos];
      out = node(it->pos, e.op == grammar_op::repeat ? clip_count(e, it->count) : it->count, out);
    }
    return out;
  }

  static std::vector<uint32_t> normalize(std::vector<uint32_t> v) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    if (v.size() > max_stacks) v.resize(max_stacks);
    return v;
  }
  static std::string key_of(const std::vector<uint32_t>& v) {
    return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(uint32_t));
  }

  int32_t intern_state(std::vector<uint32_t> config) {
    config = normalize(std::move(config));
    auto [it, added] = state_ids_.try_emplace(key_of(config), int32_t(configs_.size()));
    if (added) {
      if (walk_budget_ != SIZE_MAX && walk_budget_ > 0) --walk_budget_;
      accepting_.push_back(!config.empty() && config[0] == no_parent);
      configs_.push_back(std::move(config));
      trans_.resize(configs_.size() * 256, -1);
      canon_.push_back(-1);
      if (it->second == 0) std::fill(trans_.begin(), trans_.begin() + 256, 0);
    }
    return it->second;
  }

  const grammar& g_;
  const uint32_t clip_;
  std::vector<int64_t> suffix_min_;  // [element] fewest bytes from it to its alternative's end
  std::vector<int64_t> body_min_;    // [rule] fewest bytes it matches
  std::vector<int64_t> below_;       // [node] below(node), -1 not yet known
  std::vector<node_t> nodes_;
  std::unordered_map<std::pair<uint64_t, uint32_t>, uint32_t, node_key_hash> node_ids_;
  std::vector<std::vector<uint32_t>> configs_;  // state -> sorted node ids
  std::unordered_map<std::string, int32_t> state_ids_;
  std::vector<int32_t> trans_;  // [state * 256 + byte], -1 not yet computed
  std::vector<uint8_t> accepting_;
  std::vector<int32_t> canon_;
  std::unordered_map<int64_t, std::vector<uint64_t>> masks_;
  std::vector<uint32_t> visited_;
  uint32_t visit_stamp_ = 0;
  size_t walk_budget_ = SIZE_MAX;
};

std::shared_ptr<const grammar_vocab> grammar_vocab::make(const vocab& v) {
  std::vector<std::string> pieces(size_t(v.n_tokens()));
  std::vector<int32_t> eog;
  for (int32_t i = 0; i < v.n_tokens(); ++i) {
    pieces[size_t(i)] = v.token_to_piece(i, false);
    if (v.is_eog(i)) eog.push_back(i);
  }
  return make(pieces, eog);
}

std::shared_ptr<const grammar_vocab> grammar_vocab::make(const std::vector<std::string>& pieces,
                                                         const std::vector<int32_t>& eog) {
  auto gv = std::make_shared<grammar_vocab>();
  gv->n_tokens_ = int32_t(pieces.size());
  gv->pieces_ = pieces;
  gv->eog_flag_.assign(pieces.size(), 0);
  for (int32_t t : eog) {
    if (t >= 0 && size_t(t) < pieces.size() && !gv->eog_flag_[size_t(t)]) {
      gv->eog_flag_[size_t(t)] = 1;
      gv->eog_.push_back(t);
    }
  }
  gv->build();
  return gv;
}

std::shared_ptr<const grammar_vocab> grammar_vocab::bytes() {
  static const std::shared_ptr<const grammar_vocab> v = [] {
    std::vector<std::string> pieces;
    for (int b = 0; b < 256; ++b) pieces.push_back(std::string(1, char(b)));
    return make(pieces, {});
  }();
  return v;
}

bool grammar_vocab::is_eog(int32_t id) const {
  return id >= 0 && id < n_tokens_ && eog_flag_[size_t(id)];
}

// The trie in preorder from the pieces in byte order: a piece shares its first LCP bytes' nodes
// with the piece before it and adds the rest.
void grammar_vocab::build() {
  std::vector<int32_t> order;
  for (int32_t i = 0; i < n_tokens_; ++i) {
    const std::string& p = pieces_[size_t(i)];
    if (!p.empty() && p.size() <= piece_bytes_limit && !eog_flag_[size_t(i)]) order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    const int c = pieces_[size_t(a)].compare(pieces_[size_t(b)]);
    return c < 0 || (c == 0 && a < b);
  });
  byte.assign(1, 0);
  depth.assign(1, 0);
  subtree_end.assign(1, 0);
  std::vector<uint32_t> node_tokens(1, 0);  // tokens per node, turned into token_begin below
  std::vector<uint32_t> path(1, 0);         // path[d]: the node at depth d of the last piece
  const std::string* prev = nullptr;
  for (int32_t t : order) {
    const std::string& p = pieces_[size_t(t)];
    size_t lcp = 0;
    if (prev) {
      while (lcp < p.size() && lcp < prev->size() && p[lcp] == (*prev)[lcp]) ++lcp;
    }
    // Nodes deeper than the shared prefix are finished: their subtree ends here.
    for (size_t d = lcp + 1; d < path.size(); ++d) subtree_end[path[d]] = uint32_t(byte.size());
    path.resize(lcp + 1);
    for (size_t d = lcp; d < p.size(); ++d) {
      path.push_back(uint32_t(byte.size()));
      byte.push_back(uint8_t(p[d]));
      depth.push_back(uint16_t(d + 1));
      subtree_end.push_back(0);
      node_tokens.push_back(0);
    }
    ++node_tokens[path[p.size()]];
    if (p.size() > grammar_short_piece) long_.push_back(t);
    token_ids.push_back(t);
    max_piece_ = std::max(max_piece_, p.size());
    prev = &p;
  }
  for (uint32_t n : path) subtree_end[n] = uint32_t(byte.size());
  token_begin.assign(byte.size() + 1, 0);
  for (size_t i = 0; i < byte.size(); ++i) token_begin[i + 1] = token_begin[i] + node_tokens[i];
}

grammar_matcher::grammar_matcher(std::shared_ptr<const grammar> g,
                                 std::shared_ptr<const grammar_vocab> v)
    : grammar_(std::move(g)), vocab_(std::move(v)) {
  dfa_ = std::make_unique<grammar_automaton>(*grammar_);
  state_ = dfa_->start();
  eog_only_.assign((size_t(vocab_->n_tokens()) + 63) / 64, 0);
  for (int32_t t : vocab_->eog()) eog_only_[size_t(t) / 64] |= uint64_t{1} << (t % 64);
}

grammar_matcher::~grammar_matcher() = default;
grammar_matcher::grammar_matcher(grammar_matcher&&) noexcept = default;
grammar_matcher& grammar_matcher::operator=(grammar_matcher&&) noexcept = default;

grammar_matcher::grammar_matcher(const grammar_matcher& o)
    : grammar_(o.grammar_),
      vocab_(o.vocab_),
      dfa_(std::make_unique<grammar_automaton>(*o.dfa_)),
      composed_(o.composed_),
      state_(o.state_),
      ended_(o.ended_),
      eog_only_(o.eog_only_),
      masks_computed_(o.masks_computed_),
      masks_cached_(o.masks_cached_) {}

grammar_matcher& grammar_matcher::operator=(const grammar_matcher& o) {
  if (this != &o) *this = grammar_matcher(o);
  return *this;
}

std::span<const uint64_t> grammar_matcher::allowed() {
  if (ended_) return eog_only_;
  state_ = dfa_->maybe_flush(state_);
  // The canonical state (counters clipped to grammar_short_piece + 1 passes from their bounds)
  // has the mask of state_ for every piece of at most grammar_short_piece bytes. When clipping
  // changed nothing its mask is exact for every piece and is the answer; otherwise the short
  // pieces' mask is cached and the long pieces are walked from state_ itself.
  const int32_t c = dfa_->canonical(state_);
  const bool exact = c == state_;
  std::vector<uint64_t>* m = dfa_->mask(c, exact);
  if (m) {
    ++masks_cached_;
  } else {
    ++masks_computed_;
    m = &dfa_->new_mask(c, exact, eog_only_.size());
    walk(c, exact ? SIZE_MAX : grammar_short_piece, *m);
    if (dfa_->accepting(c)) {
      for (size_t w = 0; w < m->size(); ++w) (*m)[w] |= eog_only_[w];
    }
  }
  if (exact) return *m;
  composed_ = *m;
  for (int32_t t : vocab_->long_tokens()) {
    int32_t s = state_;
    for (char b : vocab_->piece(t)) {
      s = dfa_->step(s, uint8_t(b));
      if (s <= 0) break;
    }
    if (s > 0) composed_[size_t(t) / 64] |= uint64_t{1} << (t % 64);
  }
  return composed_;
}

// The trie walked from state `from` down to `depth_limit` bytes: every piece that stays alive
// sets its tokens' bits in `m`.
void grammar_matcher::walk(int32_t from, size_t depth_limit, std::vector<uint64_t>& m) {
  const grammar_vocab& v = *vocab_;
  // states[d]: the state after the first d bytes of the trie path being walked.
  walk_states_.assign(v.max_piece_bytes() + 1, 0);
  int32_t* states = walk_states_.data();
  states[0] = from;
  dfa_->walk_begin();
  const uint32_t n = uint32_t(v.byte.size());
  for (uint32_t i = 1; i < n;) {
    const uint32_t d = v.depth[i];
    if (d > depth_limit) {
      i = v.subtree_end[i];
      continue;
    }
    const int32_t s = dfa_->step(states[d - 1], v.byte[i]);
    if (s <= 0) {
      i = v.subtree_end[i];  // no piece starting so can match
      continue;
    }
    states[d] = s;
    for (uint32_t k = v.token_begin[i]; k < v.token_begin[i + 1]; ++k) {
      const int32_t t = v.token_ids[k];
      m[size_t(t) / 64] |= uint64_t{1} << (t % 64);
    }
    ++i;
  }
  dfa_->walk_end();
}

int64_t grammar_matcher::min_completion() {
  return ended_ ? 0 : state_ == 0 ? INT64_MAX : dfa_->min_completion(state_);
}

std::span<const uint64_t> grammar_matcher::allowed_shortening() {
  const std::span<const uint64_t> all = allowed();
  if (ended_) return all;
  const int64_t now = dfa_->min_completion(state_);
  if (now == 0) return eog_only_;  // it can end: end
  shortening_.assign(all.size(), 0);
  for (size_t w = 0; w < all.size(); ++w) {
    for (uint64_t bits = all[w]; bits; bits &= bits - 1) {
      const int32_t t = int32_t(w * 64 + size_t(std::countr_zero(bits)));
      if (vocab_->is_eog(t)) continue;
      int32_t s = state_;
      for (char b : vocab_->piece(t)) {
        s = dfa_->step(s, uint8_t(b));
        if (s <= 0) break;
      }
      if (s > 0 && dfa_->min_completion(s) < now) {
        shortening_[w] |= uint64_t{1} << (t % 64);
      }
    }
  }
  return shortening_;
}

bool grammar_matcher::is_allowed(int32_t token) {
  if (token < 0 || token >= vocab_->n_tokens()) return false;
  if (vocab_->is_eog(token)) return ended_ || dfa_->accepting(state_);
  if (ended_) return false;
  const std::string& p = vocab_->piece(token);
  if (p.empty()) return false;
  int32_t s = state_;
  for (char b : p) {
    s = dfa_->step(s, uint8_t(b));
    if (s <= 0) return false;
  }
  return true;
}

bool grammar_matcher::accept(int32_t token) {
  if (!is_allowed(token)) return false;
  if (vocab_->is_eog(token)) {
    ended_ = true;
    return true;
  }
  return accept_bytes(vocab_->piece(token));
}

bool grammar_matcher::accept_bytes(std::string_view bytes) {
  if (ended_) return bytes.empty();
  int32_t s = state_;
  for (char b : bytes) {
    s = dfa_->step(s, uint8_t(b));
    if (s <= 0) return false;
  }
  state_ = s;
  return true;
}

bool grammar_matcher::can_end() const {
  return ended_ || dfa_->accepting(state_);
}

bool grammar_matcher::dead() const {
  return !ended_ && state_ == 0;
}

void grammar_matcher::reset() {
  dfa_ = std::make_unique<grammar_automaton>(*grammar_);
  state_ = dfa_->start();
  ended_ = false;
}

}  // namespace hearth
