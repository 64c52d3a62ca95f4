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

// The candidate closest to `name` when it is a plausible typo (at most about two edits in five
// characters); ties go to the earlier candidate, so callers list likelier names first.
template <typename Range>
std::optional<std::string> closestName(std::string_view name, const Range& candidates) {
    size_t limit = std::max<size_t>(1, (name.size() * 2 + 4) / 5);
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
