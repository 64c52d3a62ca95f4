// Python-compatible JSON text (see canonical_json.h).
#include "runtime/canonical_json.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <charconv>
#include <cmath>
#include <cstring>
#include <vector>

#include "runtime/numfmt.h"

namespace remit {

namespace {

constexpr char kHex[] = "0123456789abcdef";

// The bytes a JSON string holds as they are (no escape): one table lookup per byte in the scan
// of appendJsonString instead of four comparisons. With ensure_ascii, DEL and every byte of a
// non-ASCII character are escaped too.
constexpr std::array<bool, 256> plainBytes(bool ensureAscii) {
    std::array<bool, 256> plain{};
    for (int b = 0; b < 256; ++b) plain[b] = b >= 0x20 && b != '"' && b != '\\' && !(ensureAscii && b >= 0x7f);
    return plain;
}
constexpr std::array<bool, 256> kPlainUtf8 = plainBytes(false);
constexpr std::array<bool, 256> kPlainAscii = plainBytes(true);

void appendEscapedUnit(std::string& out, uint32_t unit) {
    out += "\\u";
    for (int shift = 12; shift >= 0; shift -= 4) out += kHex[(unit >> shift) & 0xf];
}

// Decodes one UTF-8 sequence at `i`, advancing `i`. Malformed input (which Remit's producers
// never make) decodes byte by byte as U+FFFD rather than stopping.
uint32_t decodeUtf8(std::string_view s, size_t& i) {
    auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
    unsigned char lead = byte(i);
    size_t length = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xe ? 3 : (lead >> 3) == 0x1e ? 4 : 0;
    if (length == 0 || i + length > s.size()) {
        ++i;
        return 0xfffd;
    }
    uint32_t cp = length == 1 ? lead : lead & (0x7f >> length);
    for (size_t k = 1; k < length; ++k) {
        if ((byte(i + k) & 0xc0) != 0x80) {
            ++i;
            return 0xfffd;
        }
        cp = (cp << 6) | (byte(i + k) & 0x3f);
    }
    i += length;
    return cp;
}

template <class Json>
void appendScalar(std::string& out, const Json& value, bool ensureAscii) {
    switch (value.type()) {
        case nlohmann::json::value_t::null:
            out += "null";
            break;
        case nlohmann::json::value_t::boolean:
            out += value.template get<bool>() ? "true" : "false";
            break;
        case nlohmann::json::value_t::number_integer:
        case nlohmann::json::value_t::number_unsigned: {
            char buf[24];
            auto [end, ec] = value.is_number_unsigned()
                                 ? std::to_chars(buf, buf + sizeof buf, value.template get<uint64_t>())
                                 : std::to_chars(buf, buf + sizeof buf, value.template get<int64_t>());
            out.append(buf, end);
            break;
        }
        case nlohmann::json::value_t::number_float: {
            double d = value.template get<double>();
            if (std::isnan(d)) {
                out += "NaN";
            } else if (std::isinf(d)) {
                out += d < 0 ? "-Infinity" : "Infinity";
            } else if (std::fabs(d) < 9007199254740992.0 && std::trunc(d) == d) {
                // An integral float below 2^53 (a cost of 0, an amount): its repr is the integer
                // and ".0", without formatFloatRepr's search for the shortest digits.
                char buf[24];
                if (std::signbit(d)) out += '-';
                out.append(buf, std::to_chars(buf, buf + sizeof buf, static_cast<int64_t>(std::fabs(d))).ptr);
                out += ".0";
            } else {
                out += formatFloatRepr(d);
            }
            break;
        }
        case nlohmann::json::value_t::string:
            appendJsonString(out, value.template get_ref<const std::string&>(), ensureAscii);
            break;
        default:
            // Binary and discarded values never come from JSON text or from Remit values.
            assert(false && "not a JSON scalar");
            out += "null";
    }
}

// A container of at most kFlatMembers members, none of them a non-empty container (the broker's
// arguments, tags and `meta`), written without dumpInto's frames: their two vectors are two
// allocations a call's records would make several times. False, with nothing written, for any
// other value; the text is the same as dumpInto's.
constexpr size_t kFlatMembers = 8;

template <class Json>
bool dumpFlat(std::string& out, const Json& value, const JsonTextStyle& style) {
    if (!value.is_structured() || value.empty() || value.size() > kFlatMembers || style.indent >= 0) return false;
    typename Json::const_iterator members[kFlatMembers];
    size_t n = 0;
    for (auto it = value.cbegin(); it != value.cend(); ++it) {
        if (it->is_structured() && !it->empty()) return false;
        members[n++] = it;
    }
    bool isArray = value.is_array();
    if (!isArray && style.sortKeys)
        std::sort(members, members + n, [](const auto& x, const auto& y) { return x.key() < y.key(); });
    out += isArray ? '[' : '{';
    for (size_t i = 0; i < n; ++i) {
        if (i) out += style.itemSeparator;
        if (!isArray) {
            appendJsonString(out, members[i].key(), style.ensureAscii);
            out += style.keySeparator;
        }
        const Json& member = *members[i];
        if (member.is_structured()) out += member.is_array() ? "[]" : "{}";
        else appendScalar(out, member, style.ensureAscii);
    }
    out += isArray ? ']' : '}';
    return true;
}

template <class Json>
void dumpInto(std::string& out, const Json& root, const JsonTextStyle& style) {
    if (dumpFlat(out, root, style)) return;
    // One frame per open container: its members in output order and the next one to write.
    struct Frame {
        const Json* container;
        std::vector<typename Json::const_iterator> members;
        size_t next = 0;
    };
    std::vector<Frame> stack;
    auto newline = [&](size_t depth) {
        if (style.indent < 0) return;
        out += '\n';
        out.append(depth * static_cast<size_t>(style.indent), ' ');
    };
    // Writes a scalar or an empty container whole, or opens a container and pushes its frame.
    auto open = [&](const Json& value) {
        if (!value.is_structured()) {
            appendScalar(out, value, style.ensureAscii);
            return;
        }
        if (value.empty()) {
            out += value.is_array() ? "[]" : "{}";
            return;
        }
        out += value.is_array() ? '[' : '{';
        Frame frame{&value, {}, 0};
        frame.members.reserve(value.size());
        for (auto it = value.cbegin(); it != value.cend(); ++it) frame.members.push_back(it);
        if (value.is_object() && style.sortKeys) {
            // std::string compares bytes as unsigned char: UTF-8 byte order is code-point order.
            std::sort(frame.members.begin(), frame.members.end(),
                      [](const auto& x, const auto& y) { return x.key() < y.key(); });
        }
        stack.push_back(std::move(frame));
    };
    open(root);
    while (!stack.empty()) {
        Frame& frame = stack.back();
        bool isArray = frame.container->is_array();
        if (frame.next == frame.members.size()) {
            newline(stack.size() - 1);
            out += isArray ? ']' : '}';
            stack.pop_back();
            continue;
        }
        auto it = frame.members[frame.next++];
        if (frame.next > 1) out += style.itemSeparator;
        newline(stack.size());
        if (!isArray) {
            appendJsonString(out, it.key(), style.ensureAscii);
            out += style.keySeparator;
        }
        open(*it);  // may push: `frame` is not used after this
    }
}

template <class Json>
std::string dumpImpl(const Json& root, const JsonTextStyle& style) {
    std::string out;
    dumpInto(out, root, style);
    return out;
}

const JsonTextStyle& canonicalStyle() {
    static const JsonTextStyle style = [] {
        JsonTextStyle s;
        s.sortKeys = true;
        s.ensureAscii = false;
        s.itemSeparator = ",";
        s.keySeparator = ":";
        return s;
    }();
    return style;
}

}  // namespace

void appendJsonString(std::string& out, std::string_view text, bool ensureAscii) {
    const bool* plain = ensureAscii ? kPlainAscii.data() : kPlainUtf8.data();
    size_t first = 0;
    while (first < text.size() && plain[static_cast<unsigned char>(text[first])]) ++first;
    if (first == text.size()) {
        // Nothing to escape (keys, ids, most values): the quotes and the text in one append, as
        // three would cost three calls into std::string.
        size_t at = out.size();
        out.append(text.size() + 2, '"');
        if (!text.empty()) std::memcpy(out.data() + at + 1, text.data(), text.size());
        return;
    }
    out += '"';
    out.append(text.data(), first);
    size_t i = first;
    while (i < text.size()) {
        // The bytes written as they are, appended as one run (most text is all of them).
        size_t run = i;
        while (run < text.size() && plain[static_cast<unsigned char>(text[run])]) ++run;
        if (run > i) {
            out.append(text.data() + i, run - i);
            i = run;
            continue;
        }
        auto c = static_cast<unsigned char>(text[i]);
        if (c >= 0x80) {
            if (!ensureAscii) {
                // Copy the whole run of non-ASCII bytes unchanged.
                size_t start = i;
                while (i < text.size() && static_cast<unsigned char>(text[i]) >= 0x80) ++i;
                out.append(text.substr(start, i - start));
                continue;
            }
            uint32_t cp = decodeUtf8(text, i);
            if (cp >= 0x10000) {
                cp -= 0x10000;
                appendEscapedUnit(out, 0xd800 | (cp >> 10));
                appendEscapedUnit(out, 0xdc00 | (cp & 0x3ff));
            } else {
                appendEscapedUnit(out, cp);
            }
            continue;
        }
        ++i;
        switch (c) {
            case '"':
                out += "\\\"";
                break;
            case '\\':
                out += "\\\\";
                break;
            case '\n':
                out += "\\n";
                break;
            case '\r':
                out += "\\r";
                break;
            case '\t':
                out += "\\t";
                break;
            case '\b':
                out += "\\b";
                break;
            case '\f':
                out += "\\f";
                break;
            default:
                if (c < 0x20 || (ensureAscii && c == 0x7f))
                    appendEscapedUnit(out, c);
                else
                    out += static_cast<char>(c);
        }
    }
    out += '"';
}

std::string dumpJson(const nlohmann::json& value, const JsonTextStyle& style) { return dumpImpl(value, style); }
std::string dumpJson(const Json& value, const JsonTextStyle& style) { return dumpImpl(value, style); }

std::string canonicalJson(const nlohmann::json& value) { return dumpImpl(value, canonicalStyle()); }
std::string canonicalJson(const Json& value) { return dumpImpl(value, canonicalStyle()); }

namespace {

// Whether key `a` sorts before `b` (byte order, as std::string_view's <), compared inline: a
// record's keys are short and mostly differ in their first bytes, where a call to memcmp for each
// comparison cost more than the comparison.
bool keyBefore(std::string_view a, std::string_view b) {
    size_t n = std::min(a.size(), b.size());
    for (size_t i = 0; i < n; ++i)
        if (a[i] != b[i]) return static_cast<unsigned char>(a[i]) < static_cast<unsigned char>(b[i]);
    return a.size() < b.size();
}

}  // namespace

CanonicalObject::Member& CanonicalObject::open(std::string_view key) {
    // std::string_view compares bytes as unsigned char: UTF-8 byte order is code-point order.
    if (members_.empty()) {
        // One allocation each for a trace record's members, keys and text (the `call` record has ~24).
        members_.reserve(24);
        keys_.reserve(256);
        body_.reserve(1024);
        body_ += '{';
    }
    Member* m = nullptr;
    // In key order so far, a key after the last one is new; otherwise it may replace any member.
    if (members_.empty() || (sorted_ && keyBefore(keyOf(members_.back()), key))) {
        if (joined_ && !members_.empty()) body_.back() = ',';  // the '}' that closed the text so far
    } else {
        for (Member& old : members_)
            if (keyOf(old) == key) {
                m = &old;  // replaced in place (the order holds): its old text stays unused in body_
                break;
            }
        if (!m) sorted_ = false;
        joined_ = false;  // body_ now holds text that is not part of the object: build() joins
    }
    if (!m) {
        m = &members_.emplace_back(Member{static_cast<uint32_t>(keys_.size()), static_cast<uint32_t>(key.size()), 0, 0});
        keys_ += key;
    }
    m->begin = body_.size();
    // A short key with nothing to escape (every key the broker writes) goes in as `"key":` with
    // one append, copied through a buffer while it is checked.
    char buf[64];
    size_t i = 0;
    if (key.size() + 3 <= sizeof buf)
        for (; i < key.size() && kPlainUtf8[static_cast<unsigned char>(key[i])]; ++i) buf[i + 1] = key[i];
    if (i == key.size() && key.size() + 3 <= sizeof buf) {
        buf[0] = '"';
        buf[i + 1] = '"';
        buf[i + 2] = ':';
        body_.append(buf, i + 3);
    } else {
        appendJsonString(body_, key, false);
        body_ += ':';
    }
    return *m;
}

CanonicalObject& CanonicalObject::add(std::string_view key, const Json& value) {
    Member& m = open(key);
    dumpInto(body_, value, canonicalStyle());
    close(m);
    return *this;
}

CanonicalObject& CanonicalObject::add(std::string_view key, std::string_view text) {
    Member& m = open(key);
    appendJsonString(body_, text, false);
    close(m);
    return *this;
}

namespace {

// An integer's decimal text, as a Json integer prints (appendScalar), in `buf`.
template <class Integer>
std::string_view integerText(char (&buf)[24], Integer number) {
    return {buf, static_cast<size_t>(std::to_chars(buf, buf + sizeof buf, number).ptr - buf)};
}

}  // namespace

CanonicalObject& CanonicalObject::addInteger(std::string_view key, int64_t number) {
    char buf[24];
    return addCanonical(key, integerText(buf, number));
}

CanonicalObject& CanonicalObject::addInteger(std::string_view key, uint64_t number) {
    char buf[24];
    return addCanonical(key, integerText(buf, number));
}

CanonicalObject& CanonicalObject::add(std::string_view key, double number) {
    // As a Json float prints (appendScalar): repr, or Python's names for the non-finite.
    Member& m = open(key);
    appendScalar(body_, Json(number), false);
    close(m);
    return *this;
}

CanonicalObject& CanonicalObject::addCanonical(std::string_view key, std::string_view canonicalText) {
    Member& m = open(key);
    body_ += canonicalText;
    close(m);
    return *this;
}

std::string CanonicalObject::text(std::string_view skip) const { return build(skip, {}, {}); }

std::string CanonicalObject::textWith(std::string_view key, std::string_view value) const {
    return build(key, key, value);
}

std::vector<CanonicalObject::Member>::const_iterator CanonicalObject::lowerBound(std::string_view key) const {
    return std::lower_bound(members_.begin(), members_.end(), key,
                            [this](const Member& m, std::string_view k) { return keyBefore(keyOf(m), k); });
}

std::string_view CanonicalObject::textWithout(std::string_view skip, std::string& scratch) const {
    if (joined_ && !members_.empty()) {
        auto at = lowerBound(skip);
        if (skip.empty() || at == members_.end() || keyOf(*at) != skip) return body_;
    }
    buildInto(scratch, skip, {}, {});
    return scratch;
}

void CanonicalObject::textWithInto(std::string& out, std::string_view key, std::string_view value) const {
    out.clear();
    auto at = joined_ && !members_.empty() ? lowerBound(key) : members_.end();
    if (!joined_ || members_.empty() || key.empty() || (at != members_.end() && keyOf(*at) == key)) {
        buildInto(out, key, key, value);
        return;
    }
    // body_ is the text without `key`: the member goes in before the first key above it, or last.
    size_t cut = at != members_.end() ? at->begin : body_.size() - 1;
    out.reserve(body_.size() + key.size() + value.size() + 8);
    out.append(body_, 0, cut);
    if (at == members_.end()) out += ',';
    appendJsonString(out, key, false);
    out += ':';
    appendJsonString(out, value, false);
    if (at != members_.end()) out += ',';
    out.append(body_, cut, std::string::npos);
}

std::string CanonicalObject::build(std::string_view skip, std::string_view extraKey, std::string_view extraValue) const {
    std::string out;
    buildInto(out, skip, extraKey, extraValue);
    return out;
}

void CanonicalObject::buildInto(std::string& out, std::string_view skip, std::string_view extraKey,
                                std::string_view extraValue) const {
    out.clear();
    out.reserve(body_.size() + members_.size() + extraKey.size() + extraValue.size() + 16);
    out += '{';
    bool extraDone = extraKey.empty();
    auto separate = [&] {
        if (out.size() > 1) out += ',';
    };
    auto put = [&](const Member& m) {
        if (!skip.empty() && keyOf(m) == skip) return;
        if (!extraDone && extraKey < keyOf(m)) {
            separate();
            appendJsonString(out, extraKey, false);
            out += ':';
            appendJsonString(out, extraValue, false);
            extraDone = true;
        }
        separate();
        out.append(body_, m.begin, m.end - m.begin);
    };
    if (sorted_) {
        for (const Member& m : members_) put(m);
    } else {
        std::vector<const Member*> order;
        order.reserve(members_.size());
        for (const Member& m : members_) order.push_back(&m);
        std::sort(order.begin(), order.end(), [this](const Member* x, const Member* y) { return keyOf(*x) < keyOf(*y); });
        for (const Member* m : order) put(*m);
    }
    if (!extraDone) {
        separate();
        appendJsonString(out, extraKey, false);
        out += ':';
        appendJsonString(out, extraValue, false);
    }
    out += '}';
}

}  // namespace remit
