// See api_keys.h.
#include "session/api_keys.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "runtime/files.h"
#include "runtime/hash.h"
#include "runtime/json_text.h"

namespace remit {

namespace {

constexpr size_t kMaxKeysDepth = 16;
constexpr size_t kMaxKeysBytes = size_t(16) << 20;

std::string lowerHex(std::string s) {
    for (char& c : s)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return s;
}

}  // namespace

std::optional<ApiKeys> ApiKeys::load(const std::string& path, std::string& problem) {
    std::string text;
    if (std::optional<FileProblem> bad = readRegularFile(path, kMaxKeysBytes, text)) {
        problem = fmt::format("cannot read keys file '{}': {}", path, bad->missing ? "no such file" : bad->message);
        return std::nullopt;
    }
    if (text.size() > kMaxKeysBytes) {
        problem = fmt::format("cannot read keys file '{}': {}", path, tooLargeMessage(path, kMaxKeysBytes, "a keys file"));
        return std::nullopt;
    }
    std::optional<nlohmann::json> doc =
        parseJsonText(fmt::format("keys file '{}'", path), text, problem, kMaxKeysDepth);
    if (!doc) return std::nullopt;
    auto fail = [&](std::string what) {
        problem = fmt::format("keys file '{}': {}", path, what);
        return std::nullopt;
    };
    if (!doc->is_object() || !doc->contains("keys") || !(*doc)["keys"].is_array())
        return fail("expected an object with a \"keys\" array");
    ApiKeys keys;
    std::map<std::string, size_t> seen;
    size_t i = 0;
    for (const nlohmann::json& entry : (*doc)["keys"]) {
        std::string at = fmt::format("keys[{}]", i);
        if (!entry.is_object()) return fail(at + " is not an object");
        auto id = entry.find("id");
        if (id == entry.end() || !id->is_string() || id->get_ref<const std::string&>().empty())
            return fail(at + ".id must be a non-empty string");
        auto hash = entry.find("sha256");
        std::string hex = hash != entry.end() && hash->is_string() ? lowerHex(hash->get<std::string>()) : "";
        if (hex.size() != 64 || hex.find_first_not_of("0123456789abcdef") != std::string::npos)
            return fail(at + ".sha256 must be 64 hex digits: the SHA-256 of the token, never the token itself");
        uint64_t limit = 0;
        if (auto l = entry.find("monthly_limit"); l != entry.end() && !l->is_null()) {
            if (!l->is_number_unsigned())  // the parser makes every non-negative integer unsigned
                return fail(at + ".monthly_limit must be a whole number of requests (0 or absent: unlimited)");
            limit = l->get<uint64_t>();
        }
        KeyRole role = KeyRole::None;
        if (auto r = entry.find("role"); r != entry.end() && !r->is_null()) {
            if (*r == "approver") role = KeyRole::Approver;
            else if (*r == "viewer") role = KeyRole::Viewer;
            else return fail(at + ".role must be \"approver\" or \"viewer\" (or absent: an MCP client key only)");
        }
        if (auto before = seen.find(hex); before != seen.end())
            return fail(fmt::format("{}.sha256 repeats keys[{}].sha256", at, before->second));
        seen.emplace(hex, i);
        keys.keys_.emplace(hex, ApiKey{id->get<std::string>(), limit, role});
        ++i;
    }
    return keys;
}

const ApiKey* ApiKeys::find(const std::string& token) const {
    auto found = keys_.find(sha256Hex(token));
    return found != keys_.end() ? &found->second : nullptr;
}

}  // namespace remit
