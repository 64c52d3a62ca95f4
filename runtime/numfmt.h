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

}  // namespace remit
