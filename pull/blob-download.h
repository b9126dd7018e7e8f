// One blob downloaded into a store partial blob: its missing ranges cut into pieces, fetched by
// parallel Range requests (curl's multi interface, one thread), each piece's bytes written where
// they belong and made durable every flush_bytes, so that a killed pull resumes from what it had
// flushed. A server that sends more than it announced is refused; a lost connection, a truncated
// body or a 5xx is retried from where that piece stopped, with backoff.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "pull/http-client.h"
#include "store/partial-blob.h"

namespace hearth::pull {

// Called with the blob's bytes done so far (flushed or not).
using blob_progress_fn = std::function<void(uint64_t bytes_done)>;

// Downloads what `blob` misses from `src` (probed: its URL, size and whether it takes Range
// requests; without ranges the blob is fetched whole from byte 0). Throws pull_error; the blob
// keeps what was flushed for a later resume.
void download_blob(http_client& http, store::partial_blob& blob, const download_source& src,
                   const blob_progress_fn& progress, const std::atomic<bool>* cancel);

}  // namespace hearth::pull
