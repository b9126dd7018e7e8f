// Constraining generation to a grammar token by token, fast enough for a 150k-token vocabulary.
//
// The matcher's state is a set of pushdown stacks (every way the text so far can continue), each
// stack interned as a node of a shared tree, each set interned as one state of a lazily built
// DFA over bytes: a byte's transition from a state is computed once, then looked up. A token's
// admissibility is its bytes walked through the DFA; the mask of a state walks the vocabulary's
// byte trie once (a dead transition skips the subtree), and is cached by the state with its
// repetition counters clipped to what a short piece (<= grammar_short_piece bytes) can change: a
// count farther than that from its bounds acts the same for short pieces, and the few long pieces
// are then checked one by one, so x{0,1000} does not make 1000 masks. Partial UTF-8 characters
// whose every completion is allowed are one state, not one per prefix. Both caches are bounded
// and flushed when full.
//
// Special (control) tokens and tokens whose piece is empty are never allowed; end-of-generation
// tokens are allowed exactly when the grammar can end here.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/grammar/grammar.h"

namespace hearth {

class vocab;

// Pieces of at most this many bytes share masks across repetition counts (see allowed()).
inline constexpr size_t grammar_short_piece = 16;

// What the matcher needs of a vocabulary, built once per model (~100 ms for 150k tokens) and
// shared by every matcher: the pieces' byte trie (in preorder) and the end-of-generation tokens.
class grammar_vocab {
 public:
  static std::shared_ptr<const grammar_vocab> make(const vocab& v);
  // For tests and tools: a vocabulary given as its pieces (empty = never allowed) and its EOG ids.
  static std::shared_ptr<const grammar_vocab> make(const std::vector<std::string>& pieces,
                                                   const std::vector<int32_t>& eog);
  // The 256 single bytes as tokens 0..255, no EOG: for matching raw text (accept_bytes).
  static std::shared_ptr<const grammar_vocab> bytes();

  int32_t n_tokens() const { return n_tokens_; }
  const std::string& piece(int32_t id) const { return pieces_[size_t(id)]; }
  const std::vector<int32_t>& eog() const { return eog_; }
  bool is_eog(int32_t id) const;
  size_t max_piece_bytes() const { return max_piece_; }
  // Tokens whose piece is longer than grammar_short_piece bytes (EOG and empty ones excluded).
  const std::vector<int32_t>& long_tokens() const { return long_; }

  // The trie in preorder: node i (0 = the root) holds byte[i] at depth[i], its subtree ends
  // before subtree_end[i], and the tokens whose piece ends there are
  // token_ids[token_begin[i], token_begin[i + 1]).
  std::vector<uint8_t> byte;
  std::vector<uint16_t> depth;
  std::vector<uint32_t> subtree_end;
  std::vector<uint32_t> token_begin;
  std::vector<int32_t> token_ids;

 private:
  void build();
  int32_t n_tokens_ = 0;
  size_t max_piece_ = 0;
  std::vector<std::string> pieces_;
  std::vector<int32_t> eog_;
  std::vector<uint8_t> eog_flag_;
  std::vector<int32_t> long_;
};

class grammar_automaton;  // the interned stacks and the DFA, one per matcher

// One per sequence. Not thread-safe.
class grammar_matcher {
 public:
  grammar_matcher(std::shared_ptr<const grammar> g, std::shared_ptr<const grammar_vocab> v);
  ~grammar_matcher();
  grammar_matcher(grammar_matcher&&) noexcept;
  grammar_matcher& operator=(grammar_matcher&&) noexcept;
  // A copy continues from the same text with its own copy of the automaton and caches.
  grammar_matcher(const grammar_matcher& o);
  grammar_matcher& operator=(const grammar_matcher& o);

  // The tokens allowed next, a bitset of n_tokens bits (bit t of word t / 64): EOG tokens set
  // exactly when can_end(). Valid until the next accept() or reset().
  std::span<const uint64_t> allowed();
  bool is_allowed(int32_t token);

  // Advances by a token: false (state unchanged) when the grammar forbids it. An EOG token is
  // accepted when can_end() and ends the match (then only EOG tokens are allowed).
  bool accept(int32_t token);
  // Advances by raw bytes (tests, tools): false (state unchanged) when forbidden.
  bool accept_bytes(std::string_view bytes);

  // The fewest bytes that complete the match from here (0: it can end now; INT64_MAX when dead).
  int64_t min_completion();
  // The allowed tokens that bring the match closer to its end: those after which
  // min_completion() is smaller, or only EOG when it can end. Every byte-level vocabulary has
  // one (the next byte of a shortest completion), so at most min_completion() such tokens end
  // it: how a generation about to run out of tokens still ends complete (sampler budget).
  // O(allowed tokens' bytes); valid until the next accept() or reset().
  std::span<const uint64_t> allowed_shortening();

  bool can_end() const;  // the text so far is a complete match
  bool dead() const;     // nothing can follow (not even the end): only after a cap dropped paths
  void reset();          // back to the start of the grammar

  // Statistics for the benchmark: masks computed (cache misses) and served from the cache.
  size_t masks_computed() const { return masks_computed_; }
  size_t masks_cached() const { return masks_cached_; }

 private:
  void walk(int32_t from, size_t depth_limit, std::vector<uint64_t>& m);

  std::shared_ptr<const grammar> grammar_;
  std::shared_ptr<const grammar_vocab> vocab_;
  std::unique_ptr<grammar_automaton> dfa_;
  std::vector<uint64_t> composed_;  // a cached short-piece mask with the long pieces added
  std::vector<int32_t> walk_states_;
  std::vector<uint64_t> shortening_;
  int32_t state_ = 0;
  bool ended_ = false;  // an EOG token was accepted
  std::vector<uint64_t> eog_only_;
  size_t masks_computed_ = 0;
  size_t masks_cached_ = 0;
};

}  // namespace hearth
