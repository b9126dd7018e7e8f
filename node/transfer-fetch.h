// Copying a model from other nodes' transfer sockets into this node's store (schema/PROTOCOL.md
// 16.2, 16.4): each blob of model_fetch.files not in the store yet is fetched into a partial
// blob, in 4 MiB ranges with a window of requests in flight (a 1 Gbit/s link with a millisecond
// of latency needs ~125 KB in flight; 8 x 4 MiB keeps it full with room for the disk's hiccups),
// from the first peer of model_fetch.peers that answers. The written ranges are made durable
// every flush_bytes (or second), so a copy stopped at any point resumes from its partial blob.
//
// Faults: a peer that stops answering (peer_timeout), goes away or refuses for now
// (limit_reached): the copy goes on from where it stopped with the next peer, and comes back to
// it after retry_pause when every peer has failed since the last chunk; a peer that refuses for
// good (no ticket, no such blob, out of range) or breaks the protocol is dropped. A blob whose
// bytes do not hash to its digest is deleted (store::partial_blob::commit) and the peers it came
// from are dropped; it is fetched again from the others. The copy fails when every peer is
// dropped, or after `rounds` failures of each without a chunk between them.
//
// When every blob is in the store the manifest is put (source: model_fetch.origin, else
// "peer:NODE"; metadata.copied_from "peer:NODE"), which makes the model appear in the views the
// node's catalog scans.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "common/result.h"
#include "schema/curve-cert.h"
#include "schema/messages.h"
#include "store/model-store.h"

namespace hearth::node {

struct fetch_options {
  net::curve_cert key;      // this node's key pair; empty: plain connections
  uint64_t rate_limit = 0;  // bytes/s over the whole copy; 0: none
  uint32_t chunk_bytes = wire::max_blob_chunk;
  uint32_t window = 8;  // requests in flight
  uint64_t flush_bytes = uint64_t(64) << 20;
  std::chrono::milliseconds peer_timeout{10000};  // no answer this long: the peer failed
  std::chrono::milliseconds retry_pause{1000};
  uint32_t rounds = 3;
};

struct fetch_progress {
  uint64_t bytes_done = 0;        // in the store or durable in partial blobs (resumed bytes count)
  uint64_t bytes_total = 0;       // the model's size
  uint64_t bytes_from_peers = 0;  // of bytes_done, copied by this call
  std::string from;               // "peer:NODE": where bytes come from now
};

// Copies `fetch` (its files, from its peers) into `store` and puts the model's manifest; returns
// it, or why the copy failed. `progress` (may be empty) is called on this thread after each
// chunk and when a peer changes. `cancel` (may be null) stops the copy (error "cancelled"); what
// was written stays for a later resume.
result<store::manifest> fetch_model(store::model_store& store, const wire::model_fetch& fetch,
                                    const fetch_options& options,
                                    const std::function<void(const fetch_progress&)>& progress,
                                    const std::atomic<bool>* cancel);

// The manifest kind of a model's files: one .gguf, several .gguf (a split GGUF), else a folder.
std::string model_kind_of(const std::vector<store::store_file>& files);

}  // namespace hearth::node
