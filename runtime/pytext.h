// Python 3.11's text and number rules behind the builtins (runtime/builtins.cpp), on plain strings
// and numbers instead of heap values: for code that implements the same semantics independently of
// the VM — the differential test's reference evaluator (tests/difftest), and the type mismatches of
// runtime/value_json.cpp, which quote as the prototype did — so that it shares these
// tables and algorithms, which tests/unit/test_builtins.cpp checks against Python, instead of
// copying them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace remit::pytext {

// str.lower() and str.upper(): full Unicode case mappings, final sigma included.
std::string lower(std::string_view text);
std::string upper(std::string_view text);
// str.strip(): without the whitespace str.isspace accepts, at both ends.
std::string_view strip(std::string_view text);

enum class NumberParse { Ok, Invalid, OutOfRange };
// int(text) in base 10 and float(text), with Python's syntax (spaces, sign, `_`, non-ASCII digits).
// OutOfRange: the number does not fit an Int, or is not a finite Float.
NumberParse parseInt(std::string_view text, int64_t& out);
NumberParse parseFloat(std::string_view text, double& out);

// repr(text) as Python quotes a string in its messages ('12x', "it's"), cut after `maxCodePoints`
// code points as Python's int() cuts its message: for messages that keep the prototype's quoting.
std::string repr(std::string_view text, size_t maxCodePoints = 200);

// round(x) for a Float, ties to even (the result is integral, maybe out of the Int range).
double roundHalfEven(double x);
// round(x, ndigits) for a finite Float; may return a non-finite value, which callers reject.
double roundFloatTo(double x, int64_t ndigits);
// round(i, ndigits) for an Int (unchanged for ndigits >= 0); nullopt when it leaves the Int range.
std::optional<int64_t> roundIntTo(int64_t value, int64_t ndigits);

}  // namespace remit::pytext
