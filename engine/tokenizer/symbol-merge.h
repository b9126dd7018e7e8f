// The merge loop of the BPE and SentencePiece tokenizers (llama.cpp's llm_tokenizer_bpe_session
// and llm_tokenizer_spm_session run the same one): pieces of a word in a doubly linked list, and
// a queue of candidate pairs, best first.
#pragma once

#include <vector>

namespace hearth {

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
