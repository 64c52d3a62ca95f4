// Number formatting shared by the formatter, str()/interpolation and JSON output. Remit prints a
// Float exactly as Python's repr() does (docs/language.md, decision 23): the shortest digits
// that round-trip, ".0" on integral values, and exponent form when the exponent is below -4 or
// at least 16.
#pragma once

#include <string>

namespace remit {

std::string formatFloatRepr(double value);
// The same shortest digits, always in plain notation (1e+16 -> "10000000000000000.0", 1e-05 ->
// "0.00001"): how the formatter spells a Float literal, since the lexer reads no exponents.
std::string formatFloatPlain(double value);

// A dollar amount as every tool prints one (without the `$`): 4 decimals, as the prototype's
// `{:.4f}`, and more for an amount under a cent, until it shows exactly or with two significant
// digits: 0.1 -> "0.1000", 0.123456 -> "0.1235", 0.000036 -> "0.000036", 0.00003 -> "0.00003",
// 0.0000361 -> "0.000036", 0 -> "0.0000". docs/compatibility.md, "Colour, completions and progress".
std::string formatUsd(double usd);

}  // namespace remit
