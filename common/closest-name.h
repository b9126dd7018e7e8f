// "Did you mean ...?": the known name closest to a misspelt one (a model, a flag, a setting), by
// edit distance with transpositions, ignoring case. Only a close match is offered: one edit for a
// name of up to 4 letters, two up to 8, three beyond.
#pragma once

#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>
#include <vector>

namespace hearth {

// Insertions, deletions, substitutions and swaps of neighbours (optimal string alignment),
// ignoring ASCII case.
inline size_t name_distance(std::string_view a, std::string_view b) {
  auto lower = [](char c) { return char(std::tolower(static_cast<unsigned char>(c))); };
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) &&
          lower(a[i - 2]) == lower(b[j - 1])) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

// The candidate closest to `name`, or "" when none is close enough (or `name` is one of them).
inline std::string closest_name(std::string_view name, const std::vector<std::string>& candidates) {
  const size_t letters = name.size();
  const size_t allowed = letters <= 4 ? 1 : letters <= 8 ? 2 : 3;
  std::string best;
  size_t best_d = allowed + 1;
  for (const auto& c : candidates) {
    if (c == name) return "";
    const size_t d = name_distance(name, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  return best;
}

}  // namespace hearth
