#include "runtime/numfmt.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

namespace remit {

std::string formatFloatRepr(double value) {
    if (std::isnan(value)) return "nan";
    if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
    // Shortest round-trip digits in scientific form: "-d.ddde+XX".
    char buf[64];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::scientific);
    std::string sci(buf, end);
    bool negative = sci[0] == '-';
    if (negative) sci.erase(0, 1);
    size_t ePos = sci.find('e');
    int exponent = std::atoi(sci.c_str() + ePos + 1);
    std::string digits;
    for (size_t i = 0; i < ePos; ++i)
        if (sci[i] != '.') digits += sci[i];
    std::string out = negative ? "-" : "";
    if (exponent >= -4 && exponent < 16) {
        int pointAt = exponent + 1;  // digits before the decimal point
        if (pointAt <= 0) {
            out += "0." + std::string(static_cast<size_t>(-pointAt), '0') + digits;
        } else if (static_cast<size_t>(pointAt) >= digits.size()) {
            out += digits + std::string(static_cast<size_t>(pointAt) - digits.size(), '0') + ".0";
        } else {
            out += digits.substr(0, static_cast<size_t>(pointAt)) + "." + digits.substr(static_cast<size_t>(pointAt));
        }
        return out;
    }
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    out += fmt::format("e{}{:02d}", exponent < 0 ? '-' : '+', std::abs(exponent));
    return out;
}

}  // namespace remit
