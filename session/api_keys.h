// The API keys file, keys.json (docs/mcp.md "Keys", docs/operators.md "Keys and roles"), shared by
// the servers that take Bearer tokens: `remitvm mcp --http` (cli/mcp_http.cpp) and `remitvm inbox`
// (cli/inbox_http.cpp). The file holds only the SHA-256 of each token:
//   {"keys": [{"id": "alice", "sha256": "<64 hex>", "monthly_limit": 10000, "role": "approver"}]}
// `monthly_limit` meters MCP clients; `role` ("approver" or "viewer") is what a key may do in the
// operators' inbox. A key without a role is an MCP client key only: the inbox refuses it, so an
// agent's key can never approve its own requests.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace remit {

enum class KeyRole : uint8_t { None, Viewer, Approver };

struct ApiKey {
    std::string id;
    uint64_t monthlyLimit = 0;  // 0: unlimited
    KeyRole role = KeyRole::None;
};

class ApiKeys {
public:
    // Reads keys.json. On failure returns nullopt with `problem` naming the file and the entry
    // (`keys[2].sha256 must be 64 hex digits …`).
    static std::optional<ApiKeys> load(const std::string& path, std::string& problem);
    // The key whose token is `token`, or null. Compares SHA-256 digests only (the file has no
    // tokens), so how long it takes says nothing about any token.
    const ApiKey* find(const std::string& token) const;
    const std::map<std::string, ApiKey>& byHash() const { return keys_; }

private:
    std::map<std::string, ApiKey> keys_;  // by the SHA-256 hex of the token
};

// The format, for error hints.
inline constexpr const char* kKeysFormat =
    R"({"keys": [{"id": "acme", "sha256": "<SHA-256 hex of the token>", "monthly_limit": 10000}]})";

}  // namespace remit
