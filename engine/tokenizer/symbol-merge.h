// The merge loop of the BPE and SentencePiece tokenizers (llama.cpp's llm_tokenizer_bpe_session
// and llm_tokenizer_spm_session run the same one): pieces of a word in a doubly linked list, and
// a queue of candidate pairs, best first.
#pragma once

#include <cstddef>
#include <functional>
#include <queue>
#include <vector>

namespace hearth {

// One piece of the text; merged pieces keep their start and grow, the absorbed right piece gets
// n = 0. prev/next link the live pieces (-1 at the ends). Start: where the piece begins (an
// offset into the word, a pointer into the text).
template <class Start>
struct merge_symbol {
  int prev = -1;
  int next = -1;
  Start start{};
  size_t n = 0;
};

// A candidate pair of adjacent pieces and what ranks it (a merge's rank, a token's score).
template <class Key>
struct merge_bigram {
  int left = 0;
  int right = 0;
  Key key{};
  size_t size = 0;  // bytes of the merged text, to spot pairs made stale by an earlier merge
};

// The queue of candidate pairs: the one whose key Better prefers first (std::less: the lowest
// BPE rank, as llama.cpp's llm_bigram_bpe; std::greater: the highest SentencePiece score), then
// the leftmost pair.
template <class Key, class Better>
struct merge_bigram_order {
  bool operator()(const merge_bigram<Key>& l, const merge_bigram<Key>& r) const {
    return Better{}(r.key, l.key) || (l.key == r.key && l.left > r.left);
  }
};
template <class Key, class Better>
using merge_queue = std::priority_queue<merge_bigram<Key>, std::vector<merge_bigram<Key>>,
                                        merge_bigram_order<Key, Better>>;

// Offers every adjacent pair of `symbols` to add_bigram(left, right), then merges the best pair
// of `queue` until it is empty: the right piece joins the left one (n grows, the right's becomes
// 0) and the merged piece's new pairs are offered (add_bigram ignores an index of -1). A queued
// pair whose pieces changed since (their sizes no longer add up to its `size`; pieces only grow)
// is skipped. Symbol: {prev, next, n}; the queue's entries: {left, right, size}.
template <class Symbol, class Queue, class AddBigram>
void merge_symbols(std::vector<Symbol>& symbols, Queue& queue, const AddBigram& add_bigram) {
  for (int i = 1; i < int(symbols.size()); ++i) add_bigram(i - 1, i);
  while (!queue.empty()) {
    const auto bigram = queue.top();
    queue.pop();
    Symbol& left = symbols[bigram.left];
    Symbol& right = symbols[bigram.right];
    if (left.n == 0 || right.n == 0 || left.n + right.n != bigram.size) continue;
    left.n += right.n;
    right.n = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = bigram.left;
    add_bigram(left.prev, bigram.left);
    add_bigram(bigram.left, left.next);
  }
}

}  // namespace hearth
