// JSON text exactly as Python's json.dumps writes it. The canonical form — json.dumps(x,
// sort_keys=True, separators=(",", ":"), ensure_ascii=False) — is what approval digests and
// idempotency keys hash (docs/compatibility.md "Hashes and canonical JSON"), so it must match the
// prototype's bytes: the broker hashes it, replay compares arguments with it. The same writer, with
// other options, prints results like the prototype (`run` output) and backs str() of lists and
// records (runtime/ops.h).
//
// Python's choices, kept here: integers print as decimal and floats as repr (`612.0`, `1e+16`,
// `1e-05`), so nlohmann's integer/float distinction is preserved — 1 and 1.0 print differently;
// non-finite floats print as NaN, Infinity, -Infinity (allow_nan); keys sort by code point (the
// byte order of UTF-8); strings escape `"` `\` and control characters (\n \r \t \b \f, others
// \u00XX in lowercase hex), and with ensureAscii also every non-ASCII character (\uXXXX, with
// surrogate pairs) and DEL. The writers are iterative: nesting depth costs heap, not stack.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "runtime/json_text.h"

namespace remit {

// json.dumps's parameters. The defaults are Python's, except that the separators must be given
// explicitly when indenting (Python then defaults item_separator to ",").
struct JsonTextStyle {
    bool sortKeys = false;
    bool ensureAscii = true;
    int indent = -1;  // < 0: one line; otherwise newline and `indent` spaces per level
    std::string_view itemSeparator = ", ";
    std::string_view keySeparator = ": ";
};

std::string dumpJson(const nlohmann::json& value, const JsonTextStyle& style);
std::string dumpJson(const Json& value, const JsonTextStyle& style);

// json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).
std::string canonicalJson(const nlohmann::json& value);
std::string canonicalJson(const Json& value);

// Appends `text` as a quoted JSON string literal, escaped as json.dumps does.
void appendJsonString(std::string& out, std::string_view text, bool ensureAscii);

// The canonical text of one JSON object, built member by member without a Json tree: each member
// is written (canonically, key and value) once, when it is added, and the members are put in key
// order when the text is taken. The broker writes its per-call trace records this way, and the
// trace writer adds each record's `chain` member to the text it hashed without serialising the
// record again (broker/trace.h). Adding a key again replaces its value, as `json[key] = value` does.
// Members added in key order (byte order, as canonical JSON sorts them) are joined as they are,
// without sorting: the broker adds the fixed keys of its `dispatch` and `call` records that way.
class CanonicalObject {
public:
    CanonicalObject& add(std::string_view key, const Json& value);
    CanonicalObject& add(std::string_view key, std::string_view text);  // a string
    CanonicalObject& add(std::string_view key, const char* text) { return add(key, std::string_view(text)); }
    CanonicalObject& add(std::string_view key, const std::string& text) { return add(key, std::string_view(text)); }
    // Numbers, printed as a Json of the same C++ type prints (an integer, or a float's repr).
    template <class Integer>
        requires(std::is_integral_v<Integer> && !std::is_same_v<Integer, bool>)
    CanonicalObject& add(std::string_view key, Integer number) {
        if constexpr (std::is_signed_v<Integer>) return addInteger(key, static_cast<int64_t>(number));
        else return addInteger(key, static_cast<uint64_t>(number));
    }
    CanonicalObject& add(std::string_view key, double number);
    CanonicalObject& add(std::string_view key, bool value) { return addCanonical(key, value ? "true" : "false"); }
    // A value whose canonical text the caller already has (canonicalJson of it).
    CanonicalObject& addCanonical(std::string_view key, std::string_view canonicalText);

    // {"key":value,...} in key order, without the member `skip` when there is one.
    std::string text(std::string_view skip = {}) const;
    // The same with the string member `key` set to `value` (replacing any member of that name).
    std::string textWith(std::string_view key, std::string_view value) const;
    // The trace writer's two texts of a record without copies it does not need (broker/trace.cpp):
    // text(skip) as a view of the object's own buffer when the members went in in key order and
    // none was replaced — the buffer then holds exactly that text — else built into `scratch`;
    // and textWith(key, value) written into `out` (cleared first; its capacity is reused). As for
    // text() and textWith(), an empty `skip` or `key` names no member.
    std::string_view textWithout(std::string_view skip, std::string& scratch) const;
    void textWithInto(std::string& out, std::string_view key, std::string_view value) const;
    // Whether every key was added after the ones before it, so text() joins without sorting. The
    // broker asserts it of its records, whose keys it adds in order for speed: a key added out of
    // place later would still give the right text, only slower, and the assertion says so.
    bool inKeyOrder() const { return sorted_; }

private:
    // A member: its key (raw, in keys_) and its text, "key":value, in body_. Keys live in one
    // buffer rather than a std::string each: a record has ~24 members.
    struct Member {
        uint32_t keyAt, keyLength;
        size_t begin, end;
    };
    std::vector<Member> members_;
    std::string keys_;
    // '{', then the members' texts. While `joined_` (every member added in key order, none
    // replaced) they are separated by ',' and closed by '}', so body_ is the object's canonical
    // text as it is; otherwise build() joins the members' ranges.
    std::string body_;
    bool sorted_ = true;  // members_ is in key order (every key was added after the ones before it)
    bool joined_ = true;
    std::string_view keyOf(const Member& m) const { return {keys_.data() + m.keyAt, m.keyLength}; }
    // The first member whose key is not below `key` (members_ sorted), or members_.end().
    std::vector<Member>::const_iterator lowerBound(std::string_view key) const;
    // Starts the member `key` (a new one, or the one it replaces) and writes its key into body_;
    // the caller writes the value and closes it with close().
    Member& open(std::string_view key);
    void close(Member& m) {
        m.end = body_.size();
        if (joined_) body_ += '}';
    }
    CanonicalObject& addInteger(std::string_view key, int64_t number);
    CanonicalObject& addInteger(std::string_view key, uint64_t number);
    std::string build(std::string_view skip, std::string_view extraKey, std::string_view extraValue) const;
    void buildInto(std::string& out, std::string_view skip, std::string_view extraKey, std::string_view extraValue) const;
};

}  // namespace remit
