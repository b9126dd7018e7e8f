// One follower's view of a job's events (the asynchronous face, broker-link.h, keeps one per
// follower): what the broker sends, which after a re-attach or a second watch on the same
// connection repeats itself, turned into the stream a follower wants — each attempt's text exactly
// once, in order, its chunks numbered without gaps, and a job_restarted before every new attempt.
//
// Chunks are placed by byte, not only by token (PROTOCOL.md section 11): the broker's catch-up
// pages carry no token boundaries (every page but the last has n_tokens 0 at the same seq), so a
// repeated page can only be recognised by where its text falls in the attempt's output. The
// filter keeps the broker's stream position (`cursor`: the seq and byte the next chunk continues
// from) apart from what it passed on (`given`), and passes on only the bytes beyond `given`.
#pragma once

#include <cstdint>
#include <vector>

#include "client/protocol.h"

namespace hearth::client {

// A point in one attempt's stream: tokens [0, seq) are output bytes [0, byte).
struct stream_mark {
  uint32_t attempt = 0;  // 0: nothing of any attempt yet
  uint64_t seq = 0;
  uint64_t byte = 0;
  bool operator==(const stream_mark&) const = default;
};

class follow_stream {
 public:
  explicit follow_stream(uint64_t job_id) : job_id_(job_id) {}

  // Appends to `out` what the follower is to get for one event of its job from the broker (none
  // for a repeat). A link_failure and job_done end the stream: later events give nothing.
  void feed(const job_event& in, std::vector<job_event>& out);

  // Where the broker's stream stands for this follower: what to re-attach with (watch's attempt,
  // seq and output_offset). Never beyond what the broker sent.
  stream_mark resume_mark() const { return {given_.attempt, cursor_.seq, cursor_.byte}; }
  // A watch was sent saying the follower has `m`: the broker's next chunk of m.attempt at m.seq
  // continues from m.byte (or, at seq 0, restates the attempt from its start).
  void resume_from(const stream_mark& m);

  bool done() const { return done_; }
  // What was passed on of the current attempt (for tests and logs).
  const stream_mark& given() const { return given_; }

 private:
  // Makes `attempt` current when newer; a new attempt after an earlier one is announced with a
  // job_restarted unless the broker's own (`announced`) is what makes it current.
  bool begin_attempt(uint32_t attempt, std::vector<job_event>& out, bool announced);
  void feed_tokens(const wire::job_tokens& t, std::vector<job_event>& out);

  uint64_t job_id_;
  stream_mark given_;           // attempt, and tokens/bytes of it passed on
  stream_mark cursor_;          // the broker's stream: where its next chunk is expected to start
  bool running_given_ = false;  // job_running of the current attempt was passed on
  bool done_ = false;
};

}  // namespace hearth::client
