// Lists in replies (nodes_reply, models_reply) are capped so that a reply always fits one
// message: by item count, well under wire::max_array_items, and by encoded bytes, well under
// wire::max_message_bytes. A reply that leaves items out says so (truncated, total).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "schema/codec.h"

namespace hearth::broker {

inline constexpr size_t reply_max_items = 1024;
inline constexpr size_t reply_max_bytes = size_t(wire::max_message_bytes) / 2;

// Adds items to one list of a reply while the caps allow; every item offered counts in total.
template <class Reply, class Item>
class reply_list {
 public:
  reply_list(Reply& reply, std::vector<Item> Reply::*list) : reply_(reply), list_(list) {
    bytes_ = wire::encode(reply_).size();
  }

  // Adds the item if it fits; an item that does not is left out (a smaller later one may fit).
  void offer(Item item) {
    ++total_;
    auto& items = reply_.*list_;
    if (items.size() >= reply_max_items) return;
    const size_t size = item_bytes(item);
    if (bytes_ + size > reply_max_bytes) return;
    bytes_ += size;
    items.push_back(std::move(item));
  }

  uint32_t total() const { return total_; }
  bool truncated() const { return (reply_.*list_).size() < total_; }

 private:
  // The item's encoded size in a list of one, over an empty list's; msgpack's array header grows
  // by at most 4 bytes beyond 15 and 65535 items, which the half-message cap leaves room for.
  size_t item_bytes(const Item& item) const {
    Reply one;
    (one.*list_).push_back(item);
    return wire::encode(one).size() - wire::encode(Reply{}).size();
  }

  Reply& reply_;
  std::vector<Item> Reply::*list_;
  size_t bytes_ = 0;
  uint32_t total_ = 0;
};

}  // namespace hearth::broker
