#include "compiler/habits.h"

namespace remit {

namespace {

constexpr HabitInfo kHabits[] = {
#define REMIT_HABIT(id, trigger, spellings, message, hint) \
    {Habit::id, #id, HabitTrigger::trigger, spellings, message, hint},
#include "compiler/habits.def"
#undef REMIT_HABIT
};

// What a placeholder reads as when the stage found no name for it: neutral Remit that still
// shows the shape of the fix.
constexpr std::pair<std::string_view, std::string_view> kStandIns[] = {
    {"cond", "c"}, {"name", "x"}, {"params", "x: Str"}, {"arg", "x"},   {"list", "xs"},  {"lhs", "a"},
    {"rhs", "b"},  {"op", "+"},   {"body", "x"},        {"value", "x"}, {"text", "..."}, {"form", "..."},
};

bool spells(std::string_view spellings, std::string_view spelling) {
    size_t start = 0;
    while (start < spellings.size()) {
        size_t end = spellings.find(' ', start);
        if (end == std::string_view::npos) end = spellings.size();
        if (spellings.substr(start, end - start) == spelling) return true;
        start = end + 1;
    }
    return false;
}

bool isPlaceholderChar(char c) { return c >= 'a' && c <= 'z'; }

std::string fill(std::string_view text, std::string_view word, const HabitNames& names) {
    std::string out;
    for (size_t i = 0; i < text.size();) {
        if (text[i] != '$') {
            out += text[i++];
            continue;
        }
        size_t end = i + 1;
        while (end < text.size() && isPlaceholderChar(text[end])) ++end;
        std::string_view key = text.substr(i + 1, end - i - 1);
        i = end;
        if (key == "word") {
            out += word;
            continue;
        }
        bool found = false;
        for (const auto& [k, v] : names)
            if (k == key) {
                out += v;
                found = true;
                break;
            }
        if (found) continue;
        for (const auto& [k, v] : kStandIns)
            if (k == key) {
                out += v;
                found = true;
                break;
            }
        if (!found) out += key;  // not a placeholder after all
    }
    return out;
}

}  // namespace

std::span<const HabitInfo> allHabits() { return kHabits; }

const HabitInfo& habitInfo(Habit habit) { return kHabits[static_cast<size_t>(habit) - 1]; }

Habit findHabit(HabitTrigger trigger, std::string_view spelling) {
    if (spelling.empty()) return Habit::None;
    for (const HabitInfo& h : kHabits)
        if (h.trigger == trigger && spells(h.spellings, spelling)) return h.id;
    return Habit::None;
}

DiagCode habitCode(HabitTrigger trigger, bool dotted) {
    switch (trigger) {
        case HabitTrigger::Lexical:
            return DiagCode::E0001;
        case HabitTrigger::Operator:
        case HabitTrigger::Form:
        case HabitTrigger::Word:
            return DiagCode::E0100;
        case HabitTrigger::Call:
            return dotted ? DiagCode::E0202 : DiagCode::E0107;
        case HabitTrigger::Method:
            return DiagCode::E0202;
        case HabitTrigger::Name:
            return DiagCode::E0101;
        case HabitTrigger::Field:
            return DiagCode::E0102;
        case HabitTrigger::Type:
            return DiagCode::E0105;
        case HabitTrigger::Arity:
            return DiagCode::E0104;
    }
    return DiagCode::E0100;
}

HabitText renderHabit(Habit habit, std::string_view word, const HabitNames& names) {
    const HabitInfo& info = habitInfo(habit);
    return HabitText{fill(info.message, word, names), fill(info.hint, word, names)};
}

std::optional<std::string> habitSnippet(std::string_view text) {
    while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
    while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r')) text.remove_suffix(1);
    if (text.empty() || text.size() > 60 || text.find('\n') != std::string_view::npos) return std::nullopt;
    return std::string(text);
}

}  // namespace remit
