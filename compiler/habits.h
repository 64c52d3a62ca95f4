// Habits from other languages (compiler/habits.def): the constructs of Python, JavaScript, C and
// their kin that Remit does not have, each with the message that says so and a hint that shows
// the Remit form with the user's own names. The lexer, the parser and the checker look habits up
// here where they would otherwise report a generic error, so a habit replaces that error and
// never adds one (docs/diagnostics.md, "Habits from other languages").
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/diagnostics.h"

namespace remit {

// Where a habit is recognised; it decides the code (see habits.def).
enum class HabitTrigger : uint8_t { Lexical, Operator, Form, Word, Call, Method, Name, Field, Type, Arity };

enum class Habit : uint8_t {
    None,
#define REMIT_HABIT(id, trigger, spellings, message, hint) id,
#include "compiler/habits.def"
#undef REMIT_HABIT
};

struct HabitInfo {
    Habit id;
    std::string_view name;  // the id as habits.def spells it ("AndAnd"): its golden is habit_and_and
    HabitTrigger trigger;
    std::string_view spellings;  // space-separated
    std::string_view message;
    std::string_view hint;
};

// Every habit, in the order of habits.def.
std::span<const HabitInfo> allHabits();
const HabitInfo& habitInfo(Habit habit);
// The habit with this trigger one of whose spellings is `spelling`; Habit::None when there is none.
Habit findHabit(HabitTrigger trigger, std::string_view spelling);
// The code a habit of this trigger is reported with; `dotted` picks E0202 over E0107 for calls.
DiagCode habitCode(HabitTrigger trigger, bool dotted = false);

// The user's names for a hint's placeholders: ("cond", "i < n"), ("name", "total"), ...
using HabitNames = std::vector<std::pair<std::string_view, std::string>>;

struct HabitText {
    std::string message;
    std::string hint;
};
// The message and hint with `$word` replaced by `word` and the other placeholders by `names`,
// or by a neutral stand-in (`c`, `x`, `xs`, ...) for any the stage could not fill.
HabitText renderHabit(Habit habit, std::string_view word, const HabitNames& names = {});

// Source text fit to quote in a hint: one line of at most 60 characters; nullopt otherwise (the
// hint then uses a stand-in rather than a long or broken excerpt).
std::optional<std::string> habitSnippet(std::string_view text);

}  // namespace remit
