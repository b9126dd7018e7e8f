// The transfers a broker started for `hearth pull --to|--all` and `hearth models place`, followed
// until each ends (done or failed): their progress polled from list_models (models_reply
// .transfers), one line redrawn on a terminal and a line every 2 s on a pipe, then a line per
// transfer on stdout (or its JSON). Written once for both commands.
#pragma once

#include "schema/messages.h"
#include "tools/broker-cli.h"

namespace hearth::cli {

// "pulled" / "placed": the verb of the result lines. Returns 0 when every transfer is done, 1
// when one failed.
int follow_transfers(broker_client& client, const wire::transfers_started& started,
                     const char* verb, bool as_json);

// One transfer as `hearth models` lists it: "MODEL -> NODE from SOURCE: STATE 42% of 1.2 GiB".
std::string transfer_text(const wire::transfer_info& t);

}  // namespace hearth::cli
