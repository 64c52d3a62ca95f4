#include "runtime/numfmt.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

namespace remit {

namespace {

// A finite double as its shortest round-trip decimal digits: value = 0.DIGITS × 10^(pointAt).
struct Decimal {
    bool negative = false;
    std::string digits;
    int pointAt = 0;  // digits before the decimal point
};

Decimal shortestDecimal(double value) {
    char buf[64];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::scientific);
    std::string_view sci(buf, static_cast<size_t>(end - buf));
    Decimal d;
    d.negative = sci[0] == '-';
    if (d.negative) sci.remove_prefix(1);
    size_t ePos = sci.find('e');
    for (size_t i = 0; i < ePos; ++i)
        if (sci[i] != '.') d.digits += sci[i];
    d.pointAt = std::atoi(std::string(sci.substr(ePos + 1)).c_str()) + 1;
    return d;
}

// Plain notation: "612.0", "0.00001", "10000000000000000.0".
std::string plainDecimal(const Decimal& d) {
    std::string out = d.negative ? "-" : "";
    if (d.pointAt <= 0) {
        out += "0." + std::string(static_cast<size_t>(-d.pointAt), '0') + d.digits;
    } else if (static_cast<size_t>(d.pointAt) >= d.digits.size()) {
        out += d.digits + std::string(static_cast<size_t>(d.pointAt) - d.digits.size(), '0') + ".0";
    } else {
        out += d.digits.substr(0, static_cast<size_t>(d.pointAt)) + "." + d.digits.substr(static_cast<size_t>(d.pointAt));
    }
    return out;
}

}  // namespace

std::string formatFloatRepr(double value) {
    if (std::isnan(value)) return "nan";
    if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
    Decimal d = shortestDecimal(value);
    int exponent = d.pointAt - 1;
    if (exponent >= -4 && exponent < 16) return plainDecimal(d);
    std::string out = d.negative ? "-" : "";
    out += d.digits.substr(0, 1);
    if (d.digits.size() > 1) out += "." + d.digits.substr(1);
    out += fmt::format("e{}{:02d}", exponent < 0 ? '-' : '+', std::abs(exponent));
    return out;
}

std::string formatFloatPlain(double value) {
    if (!std::isfinite(value)) return formatFloatRepr(value);
    return plainDecimal(shortestDecimal(value));
}

std::string formatUsd(double usd) {
    if (!std::isfinite(usd)) return fmt::format("{}", usd);
    double magnitude = std::fabs(usd);
    // The decimals that show two significant digits: the first sits at 10^floor(log10(magnitude)).
    int twoDigits = magnitude > 0 ? 1 - static_cast<int>(std::floor(std::log10(magnitude))) : 4;
    int most = std::min(std::max(4, twoDigits), 17);
    for (int decimals = 4; decimals < most; ++decimals) {
        std::string text = fmt::format("{:.{}f}", usd, decimals);
        if (std::fabs(std::strtod(text.c_str(), nullptr) - usd) <= magnitude * 1e-9) return text;  // exact
    }
    return fmt::format("{:.{}f}", usd, most);
}

}  // namespace remit
