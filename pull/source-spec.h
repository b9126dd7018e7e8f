// A pull's source string, parsed (README.md, "Sources"): which kind of source, and its parts.
// Only the syntax is checked here; whether the repository, tag or file exists is the server's
// (or the disk's) to say.
#pragma once

#include <string>
#include <string_view>

#include "common/result.h"

namespace hearth::pull {

enum class source_kind { hf, ollama, url, local };

struct source_spec {
  source_kind kind = source_kind::local;
  // hf: "OWNER/REPO", a file in it ("" for the whole repository or a quantization), the
  // quantization (":Q4_K_M"), the revision ("main" unless "@REV" says).
  std::string repo, file, quant, revision;
  // ollama: "library/NAME" (or "NAMESPACE/NAME") and the tag ("latest" unless ":TAG").
  std::string ollama_repo, ollama_tag;
  std::string url;   // url: "https://..." or "http://..."
  std::string path;  // local: a file or folder
};

// "hf:OWNER/REPO[:QUANT][@REV]", "hf:OWNER/REPO/PATH[@REV]", "ollama:[NAMESPACE/]NAME[:TAG]",
// "http(s)://...", anything else a local path.
result<source_spec> parse_source(std::string_view source);

}  // namespace hearth::pull
