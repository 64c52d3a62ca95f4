// "Did you mean ...?" for every phase: the closest known name to a misspelled one, for hints on
// unknown variables, fields, capabilities, types and policy keys.
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>

namespace remit {

// Case-insensitive optimal-string-alignment distance: a transposition counts as one edit, so
// `emial` is one edit from `email` and `Max_Calls` zero from `max_calls`.
size_t editDistance(std::string_view a, std::string_view b);

// The most edits a misspelling of a `length`-character name may have and still be suggested:
// one per three characters, at least one, and never more than half the name — past that the
// candidate is another word, not a typo (`print` is two edits from `int`, which no one meant;
// `emial` is one from `email`). docs/diagnostics.md, "Did you mean".
constexpr size_t suggestionLimit(size_t length) { return std::min(std::max<size_t>(1, length / 3), length / 2); }

// The candidate closest to `name` within suggestionLimit(name's length) edits; ties go to the
// earlier candidate, so callers list likelier names first.
template <typename Range>
std::optional<std::string> closestName(std::string_view name, const Range& candidates) {
    size_t limit = suggestionLimit(name.size());
    std::optional<std::string> best;
    size_t bestDistance = limit + 1;
    for (const auto& candidate : candidates) {
        std::string_view view(candidate);
        if (view == name) continue;
        size_t distance = editDistance(name, view);
        if (distance < bestDistance) {
            bestDistance = distance;
            best = std::string(view);
        }
    }
    return best;
}

}  // namespace remit
