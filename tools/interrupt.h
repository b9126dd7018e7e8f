// Ctrl-C while `hearth submit` streams a job: the first SIGINT only sets a flag, which ends the
// wait for the next event (broker_client::next_event) so that the follower can cancel the job
// (or, with --detach, say that it keeps running) before it exits with 130. A second SIGINT ends
// the process at once, as usual.
#pragma once

namespace hearth::cli {

// Installs the SIGINT handler.
void catch_interrupt();
// Whether SIGINT came since catch_interrupt().
bool interrupted();

}  // namespace hearth::cli
