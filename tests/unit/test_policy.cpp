// The policy loader (runtime/policy.h) and SHA-256 helper (runtime/hash.h): the prototype's
// policy.toml format, our extensions, every E0504 kind at its exact position, E0505 against a
// host's resources, and the allow-all policy.
#include <doctest/doctest.h>

#include <cstdlib>

#include "runtime/hash.h"
#include "runtime/policy.h"

using namespace remit;

namespace {

struct Parsed {
    std::optional<Policy> policy;
    DiagnosticList diags;
};

Parsed parse(std::string_view text) {
    Parsed out;
    out.policy = parsePolicy("policy.toml", text, out.diags);
    return out;
}

// Parses text that must yield exactly one diagnostic and returns it.
Diagnostic onlyError(std::string_view text) {
    Parsed parsed = parse(text);
    CHECK_FALSE(parsed.policy);
    REQUIRE(parsed.diags.items().size() == 1);
    return parsed.diags.items()[0];
}

void checkSpan(const Span& span, uint32_t line, uint32_t col, uint32_t endLine, uint32_t endCol) {
    CHECK(span.line == line);
    CHECK(span.col == col);
    CHECK(span.endLine == endLine);
    CHECK(span.endCol == endCol);
}

// The prototype's example policy (the format of docs/policy.md), verbatim.
constexpr std::string_view kPrototypePolicy = R"([budget]
max_usd = 0.75

[grant."inbox.list"]            # table name is `grant` (singular); key = resource name, quoted if dotted
max_calls = 1
arg_one_of = { folder = ["inbox"] }   # param -> list of allowed values (exact equality)

[grant."repo.edit"]
max_calls = 3
arg_prefix = { path = ["src/"] }      # param -> list of allowed string prefixes (value must be a Str)
approval = "always"                   # only "always" has an effect; strengthens the host declaration

[grant.llm]                            # models are granted by model name; agent calls count against their model
max_calls = 50
)";

}  // namespace

TEST_CASE("hash: sha256Hex is bare lowercase hex") {
    CHECK(sha256Hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    CHECK(sha256Hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    CHECK(sha256Hex(std::string_view("a\0b", 3)) != sha256Hex("ab"));  // bytes, not a C string
    // FIPS 180-2's long vector: many blocks through one context.
    CHECK(sha256Hex(std::string(1'000'000, 'a')) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    // 56 bytes: the padding needs a second block.
    CHECK(sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
          "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST_CASE("hash: sha256Hex of two parts is the hash of their concatenation, cut to its digits") {
    // The trace chain and the idempotency keys hash two parts without joining them; the oracle is
    // the one-part hash of the joined bytes, on every split of generated text across block sizes.
    std::string text;
    for (int i = 0; i < 200; ++i) text += static_cast<char>((i * 37 + 11) % 256);
    CHECK(sha256Hex("ab", "c") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    for (size_t length : {0, 1, 55, 56, 63, 64, 65, 128, 200})
        for (size_t split = 0; split <= length; split += 7) {
            std::string_view whole(text.data(), length);
            std::string joined = sha256Hex(whole);
            CHECK(sha256Hex(whole.substr(0, split), whole.substr(split)) == joined);
            CHECK(sha256Hex(whole.substr(0, split), whole.substr(split), 32) == joined.substr(0, 32));
        }
    CHECK(sha256Hex("abc", "", 100).size() == 64);
}

TEST_CASE("policy: the prototype's example policy") {
    Parsed parsed = parse(kPrototypePolicy);
    CHECK(parsed.diags.items().empty());
    REQUIRE(parsed.policy);
    const Policy& policy = *parsed.policy;
    CHECK(policy.file == "policy.toml");
    CHECK_FALSE(policy.allowAll);
    CHECK(policy.sha256 == sha256Hex(kPrototypePolicy));
    REQUIRE(policy.maxUsd);
    CHECK(*policy.maxUsd == doctest::Approx(0.75));
    REQUIRE(policy.grants.size() == 3);
    CHECK(policy.grants.begin()->first == "inbox.list");  // sorted by resource name

    const Grant* inbox = policy.grantFor("inbox.list");
    REQUIRE(inbox);
    CHECK(inbox->resource == "inbox.list");
    checkSpan(inbox->span, 4, 1, 4, 21);
    CHECK(inbox->maxCalls == 1);
    REQUIRE(inbox->argOneOf.count("folder"));
    CHECK(inbox->argOneOf.at("folder") == std::vector<nlohmann::json>{"inbox"});
    CHECK(inbox->argPrefix.empty());
    CHECK_FALSE(inbox->approvalAlways);

    const Grant* repo = policy.grantFor("repo.edit");
    REQUIRE(repo);
    CHECK(repo->maxCalls == 3);
    CHECK(repo->argPrefix.at("path") == std::vector<std::string>{"src/"});
    CHECK(repo->approvalAlways);
    CHECK(repo->span.line == 8);

    const Grant* llm = policy.grantFor("llm");
    REQUIRE(llm);
    CHECK(llm->maxCalls == 50);
    checkSpan(llm->span, 13, 1, 13, 12);

    CHECK(policy.grantFor("web.fetch") == nullptr);
    CHECK_FALSE(policy.limits.maxSteps);
    CHECK_FALSE(policy.limits.maxMemory);
    CHECK_FALSE(policy.limits.maxWallMs);
}

TEST_CASE("policy: optional keys and an empty policy") {
    Parsed parsed = parse("[grant.\"inbox.list\"]\n");
    REQUIRE(parsed.policy);
    CHECK_FALSE(parsed.policy->maxUsd);
    const Grant* grant = parsed.policy->grantFor("inbox.list");
    REQUIRE(grant);
    CHECK_FALSE(grant->maxCalls);  // no limit

    Parsed empty = parse("");
    REQUIRE(empty.policy);
    CHECK(empty.policy->grants.empty());
    CHECK(empty.policy->sha256 == sha256Hex(""));

    Parsed intBudget = parse("[budget]\nmax_usd = 2\n");  // an integer is a number too
    REQUIRE(intBudget.policy);
    CHECK(*intBudget.policy->maxUsd == 2.0);
}

TEST_CASE("policy: our extensions arg_max, approve and [limits]") {
    Parsed parsed = parse(R"([grant."payments.refund"]
max_calls = 2
arg_max = { amount = 100, ratio = 0.5 }
approve = { to = ["external", "pii"], note = [] }
arg_one_of = { currency = ["EUR", "USD"], cents = [1, 2.5, true, [1, 2], { a = "b" }] }

[limits]
max_steps = 1000
max_memory = 1048576
max_wall_ms = 2500
)");
    CHECK(parsed.diags.items().empty());
    REQUIRE(parsed.policy);
    const Grant* refund = parsed.policy->grantFor("payments.refund");
    REQUIRE(refund);
    CHECK(refund->argMax.at("amount") == 100.0);
    CHECK(refund->argMax.at("ratio") == 0.5);
    CHECK(refund->approve.at("to") == std::vector<std::string>{"external", "pii"});
    CHECK(refund->approve.at("note").empty());
    CHECK(refund->argOneOf.at("currency") == std::vector<nlohmann::json>{"EUR", "USD"});
    const std::vector<nlohmann::json>& cents = refund->argOneOf.at("cents");
    REQUIRE(cents.size() == 5);
    CHECK(cents[0] == 1);
    CHECK(cents[0].is_number_integer());
    CHECK(cents[1] == 2.5);
    CHECK(cents[2] == true);
    CHECK(cents[3] == nlohmann::json::array({1, 2}));
    CHECK(cents[4] == nlohmann::json{{"a", "b"}});
    CHECK(parsed.policy->limits.maxSteps == 1000);
    CHECK(parsed.policy->limits.maxMemory == 1048576);
    CHECK(parsed.policy->limits.maxWallMs == 2500);
}

TEST_CASE("policy: other TOML spellings of the same structure") {
    // A sub-table instead of an inline table, and a grant written inline or with dotted keys.
    Parsed inlineGrant = parse("grant = { llm = { max_calls = 2 } }\n");
    CHECK(inlineGrant.diags.items().empty());
    REQUIRE(inlineGrant.policy);
    const Grant* llm = inlineGrant.policy->grantFor("llm");
    REQUIRE(llm);
    CHECK(llm->maxCalls == 2);
    checkSpan(llm->span, 1, 11, 1, 14);  // the key, not the braces

    Parsed subTable = parse(R"(grant.llm.max_calls = 4

[grant."repo.edit".arg_prefix]
path = ["src/", "docs/"]
)");
    CHECK(subTable.diags.items().empty());
    REQUIRE(subTable.policy);
    CHECK(subTable.policy->grantFor("llm")->maxCalls == 4);
    const Grant* repo = subTable.policy->grantFor("repo.edit");
    REQUIRE(repo);
    CHECK(repo->argPrefix.at("path") == std::vector<std::string>{"src/", "docs/"});
}

TEST_CASE("policy: TOML syntax errors are E0504 at toml++'s position") {
    Diagnostic d = onlyError("[budget]\nmax_usd = \n");
    CHECK(d.code == DiagCode::E0504);
    CHECK(d.file == "policy.toml");
    CHECK(d.message == "policy is not valid TOML: error while parsing key-value pair: expected value, saw '\\n'");
    checkSpan(d.span, 2, 11, 2, 12);

    d = onlyError("[grant.llm]\nmax_calls = 1\nmax_calls = 2\n");  // TOML forbids redefinition
    CHECK(d.code == DiagCode::E0504);
    CHECK(d.span.line == 3);

    d = onlyError("[grant.\"inbox.list\"\nmax_calls = 1\n");
    CHECK(d.span.line == 1);
    CHECK(d.message.starts_with("policy is not valid TOML: error while parsing table header"));
}

TEST_CASE("policy: unknown keys are E0504 at the key, with the valid keys and a close match") {
    Diagnostic d = onlyError("[grant.\"web.fetch\"]\nmax_call = 1\n");
    CHECK(d.code == DiagCode::E0504);
    CHECK(d.message == "unknown key 'max_call' in [grant.\"web.fetch\"]");
    CHECK(d.hint ==
          "did you mean 'max_calls'? valid keys: max_calls, arg_prefix, arg_one_of, arg_max, approve, approval");
    checkSpan(d.span, 2, 1, 2, 9);

    d = onlyError("[grant.llm]\ncolour = \"red\"\n");
    CHECK(d.message == "unknown key 'colour' in [grant.llm]");
    CHECK(d.hint == "valid keys: max_calls, arg_prefix, arg_one_of, arg_max, approve, approval");

    d = onlyError("[grant.llm]\nmax_usd = 1\n");  // right key, wrong table
    CHECK(d.hint ==
          "'max_usd' belongs in [budget]; valid keys: max_calls, arg_prefix, arg_one_of, arg_max, approve, approval");

    d = onlyError("[budget]\nmax_used = 1\n");
    CHECK(d.message == "unknown key 'max_used' in [budget]");
    CHECK(d.hint == "did you mean 'max_usd'? valid keys: max_usd, scope, period");
    checkSpan(d.span, 2, 1, 2, 9);

    d = onlyError("[limits]\nmax_wall_time = 5\n");
    CHECK(d.message == "unknown key 'max_wall_time' in [limits]");
    CHECK(d.hint == "did you mean 'max_wall_ms'? valid keys: max_steps, max_memory, max_wall_ms");

    d = onlyError("max_usd = 1\n");
    CHECK(d.message == "unknown top-level key 'max_usd' in the policy");
    CHECK(d.hint == "'max_usd' belongs in [budget]; valid tables: [budget], [grant.\"<resource>\"], [limits], [flows], [artifacts], [mcp], "
          "[models.\"<model>\"]");
    checkSpan(d.span, 1, 1, 1, 8);

    d = onlyError("# limits\n[limit]\nmax_steps = 5\n");
    CHECK(d.message == "unknown table [limit] in the policy");
    CHECK(d.hint == "did you mean [limits]? valid tables: [budget], [grant.\"<resource>\"], [limits], [flows], [artifacts], [mcp], "
          "[models.\"<model>\"]");
    checkSpan(d.span, 2, 2, 2, 7);

    d = onlyError("[grants.llm]\nmax_calls = 1\n");  // the prototype's table is singular
    CHECK(d.message == "unknown table [grants] in the policy");
    CHECK(d.hint.starts_with("did you mean [grant]?"));
    checkSpan(d.span, 1, 2, 1, 8);

    d = onlyError("[grant.llm.extra]\n");  // a sub-table is a key of the grant too
    CHECK(d.message == "unknown key 'extra' in [grant.llm]");
    checkSpan(d.span, 1, 12, 1, 17);
}

TEST_CASE("policy: wrong value types are E0504 at the value") {
    Diagnostic d = onlyError("[grant.\"inbox.list\"]\nmax_calls = -1\n");
    CHECK(d.message == "max_calls in [grant.\"inbox.list\"] must be a non-negative integer, got -1");
    CHECK(d.hint == "e.g. max_calls = 5; leave it out for no limit");
    checkSpan(d.span, 2, 13, 2, 15);

    d = onlyError("[grant.llm]\nmax_calls = \"3\"\n");
    CHECK(d.message == "max_calls in [grant.llm] must be a non-negative integer, got \"3\"");
    checkSpan(d.span, 2, 13, 2, 16);

    d = onlyError("[grant.llm]\nmax_calls = 2.5\n");
    CHECK(d.message == "max_calls in [grant.llm] must be a non-negative integer, got 2.5");

    d = onlyError("[budget]\nmax_usd = \"0.75\"\n");
    CHECK(d.message == "max_usd in [budget] must be a non-negative number, got \"0.75\"");
    checkSpan(d.span, 2, 11, 2, 17);

    d = onlyError("[budget]\nmax_usd = -0.5\n");
    CHECK(d.message == "max_usd in [budget] must be a non-negative number, got -0.5");

    d = onlyError("[budget]\nmax_usd = inf\n");
    CHECK(d.message == "max_usd in [budget] must be a non-negative number, got inf");

    d = onlyError("[limits]\nmax_steps = 0\n");
    CHECK(d.message == "max_steps in [limits] must be a positive integer, got 0");
    CHECK(d.hint == "e.g. max_steps = 100000000; leave it out for the default");
    checkSpan(d.span, 2, 13, 2, 14);

    d = onlyError("[limits]\nmax_memory = \"256MB\"\n");
    CHECK(d.message == "max_memory in [limits] must be a positive integer, got \"256MB\"");
    checkSpan(d.span, 2, 14, 2, 21);

    // More than the heap can account: refused, not clamped (a clamp made R0701 quote a limit the
    // user never set).
    d = onlyError("[limits]\nmax_memory = 40_000_000_000\n");
    CHECK(d.message == "max_memory in [limits] is 40000000000 bytes, more than the 34359738368 bytes (32 GiB) a run can have");
    checkSpan(d.span, 2, 14, 2, 28);
}

TEST_CASE("policy: numbers that overflow to infinity are E0504 where they are written") {
    // A policy number is never taken as infinity (or, worse, as 0): toml++ refuses an exponent
    // that overflows and a literal of more than 126 characters, and an explicit `inf` is refused
    // by each key's own check above.
    Diagnostic d = onlyError("[budget]\nmax_usd = 1e309\n");
    CHECK(d.message == "policy is not valid TOML: error while parsing floating-point: '1e309' could not be interpreted as a value");
    CHECK(d.span.line == 2);
    d = onlyError("[budget]\nmax_usd = " + std::string(400, '9') + ".0\n");
    CHECK(d.message.find("numeric value too long") != std::string::npos);
    checkSpan(d.span, 2, 11, 2, 12);
    d = onlyError("[grant.llm]\narg_max = { n = -inf }\n");
    CHECK(d.message == "arg_max.n in [grant.llm] must be a finite number, got -inf");
}

TEST_CASE("policy: [flows] strict chooses strict flows") {
    CHECK_FALSE(parse("").policy->strictFlows);
    CHECK(parse("[flows]\nstrict = true\n").policy->strictFlows);
    CHECK_FALSE(parse("[flows]\nstrict = false\n").policy->strictFlows);
    CHECK(parse("flows.strict = true\n").policy->strictFlows);

    Diagnostic d = onlyError("[flows]\nstrict = \"yes\"\n");
    CHECK(d.message == "strict in [flows] must be true or false, got \"yes\"");
    CHECK(d.hint == "e.g. strict = true (no quotes)");
    checkSpan(d.span, 2, 10, 2, 15);

    d = onlyError("[flows]\nstrikt = true\n");
    CHECK(d.message == "unknown key 'strikt' in [flows]");
    CHECK(d.hint == "did you mean 'strict'? valid keys: strict");

    d = onlyError("[grant.llm]\nstrict = true\n");
    CHECK(d.message == "unknown key 'strict' in [grant.llm]");
    CHECK(d.hint.starts_with("'strict' belongs in [flows]"));

    d = onlyError("flows = true\n");
    CHECK(d.message == "'flows' must be a table, got true");
}

TEST_CASE("policy: [artifacts] trust names a key directory relative to the policy file") {
    CHECK_FALSE(parse("").policy->trustDir);
    CHECK(parse("[artifacts]\ntrust = \"keys\"\n").policy->trustDir == "keys");
    DiagnosticList diags;
    auto nested = parsePolicy("hosts/a/policy.toml", "[artifacts]\ntrust = \"../shared-keys\"\n", diags);
    REQUIRE(nested);
    CHECK(nested->trustDir == "hosts/shared-keys");
    auto absolute = parsePolicy("hosts/a/policy.toml", "[artifacts]\ntrust = \"/etc/remit/keys\"\n", diags);
    REQUIRE(absolute);
    CHECK(absolute->trustDir == "/etc/remit/keys");

    Diagnostic d = onlyError("[artifacts]\ntrust = 3\n");
    CHECK(d.message == "trust in [artifacts] must be a directory path, got 3");
    checkSpan(d.span, 2, 9, 2, 10);
    d = onlyError("[artifacts]\ntrust = \"\"\n");
    CHECK(d.message.starts_with("trust in [artifacts] must be a directory path"));
    d = onlyError("[artifacts]\ntrusted = \"keys\"\n");
    CHECK(d.hint == "did you mean 'trust'? valid keys: trust");
    d = onlyError("[flows]\ntrust = \"keys\"\n");
    CHECK(d.hint.starts_with("'trust' belongs in [artifacts]"));
}

TEST_CASE("policy: [mcp] maps capabilities to MCP tools and bounds a server's start-up") {
    Parsed empty = parse("");
    REQUIRE(empty.policy);
    CHECK(empty.policy->mcp.tools.empty());
    CHECK_FALSE(empty.policy->mcp.startupTimeoutMs);
    Parsed parsed = parse(R"([mcp]
startup_timeout_ms = 5000

[mcp.tools]
"files.read" = "read_text_file"
"kg.add" = "create-entities"
)");
    REQUIRE(parsed.policy);
    CHECK(parsed.policy->mcp.startupTimeoutMs == 5000);
    REQUIRE(parsed.policy->mcp.tools.size() == 2);
    CHECK(parsed.policy->mcp.tools.at("files.read") == "read_text_file");
    CHECK(parsed.policy->mcp.tools.at("kg.add") == "create-entities");
    // The inline spelling means the same.
    Parsed inlined = parse("mcp = { tools = { \"files.read\" = \"read_text_file\" } }\n");
    REQUIRE(inlined.policy);
    CHECK(inlined.policy->mcp.tools.at("files.read") == "read_text_file");

    Diagnostic d = onlyError("[mcp]\nstartup_timeout_ms = 0\n");
    CHECK(d.code == DiagCode::E0504);
    CHECK(d.message == "startup_timeout_ms in [mcp] must be a positive integer of at most 600000 (milliseconds), got 0");
    checkSpan(d.span, 2, 22, 2, 23);
    d = onlyError("[mcp]\nstartup_timeout_ms = 600001\n");
    CHECK(d.message.starts_with("startup_timeout_ms in [mcp] must be a positive integer of at most 600000"));
    d = onlyError("[mcp]\nstartup_timeout_ms = \"30s\"\n");
    CHECK(d.message.ends_with("got \"30s\""));
    d = onlyError("[mcp]\nstartup_timeout = 3\n");
    CHECK(d.message == "unknown key 'startup_timeout' in [mcp]");
    CHECK(d.hint == "did you mean 'startup_timeout_ms'? valid keys: tools, startup_timeout_ms");
    d = onlyError("[mcp]\ntools = [\"read\"]\n");
    CHECK(d.message == "tools in [mcp] must be a table mapping capabilities to tool names, got an array");
    d = onlyError("[mcp.tools]\nread = \"read_text_file\"\n");
    CHECK(d.message == "[mcp.tools] maps capabilities, and 'read' is not a capability name");
    checkSpan(d.span, 2, 1, 2, 5);
    d = onlyError("[mcp.tools]\n\"files.read\" = 3\n");
    CHECK(d.message ==
          "\"files.read\" in [mcp.tools] must be a tool name (a non-empty string of at most 256 bytes), got 3");
    checkSpan(d.span, 2, 16, 2, 17);
    d = onlyError("[mcp.tools]\n\"files.read\" = \"\"\n");
    CHECK(d.message.starts_with("\"files.read\" in [mcp.tools] must be a tool name"));
    d = onlyError("[mcp.tools]\n\"files.read\" = \"" + std::string(257, 'x') + "\"\n");
    CHECK(d.message.ends_with("got a string"));
    d = onlyError("mcp = 1\n");
    CHECK(d.message == "'mcp' must be a table, got 1");
    d = onlyError("[limits]\nstartup_timeout_ms = 1\n");
    CHECK(d.hint.starts_with("'startup_timeout_ms' belongs in [mcp]"));

    // A map entry for a capability the host does not declare is E0505, at its key.
    DiagnosticList diags;
    checkPolicyAgainstHost(*parsed.policy, {"files.read", "kg.ad"}, diags);
    REQUIRE(diags.items().size() == 1);
    const Diagnostic& undeclared = diags.items()[0];
    CHECK(undeclared.code == DiagCode::E0505);
    CHECK(undeclared.message == "policy maps 'kg.add' to MCP tool 'create-entities', but the host does not declare 'kg.add'");
    CHECK(undeclared.hint == "did you mean 'kg.ad'?");
    checkSpan(undeclared.span, 6, 1, 6, 9);
}

TEST_CASE("policy: approval must be \"always\"") {
    Diagnostic d = onlyError("[grant.\"repo.edit\"]\napproval = \"sometimes\"\n");
    CHECK(d.code == DiagCode::E0504);
    CHECK(d.message == "approval in [grant.\"repo.edit\"] must be \"always\", got \"sometimes\"");
    CHECK(d.hint == "approval = \"always\", or a table such as approval = { quorum = 2, expires = \"24h\" }; leave it "
                    "out to follow the host's declaration");
    checkSpan(d.span, 2, 12, 2, 23);

    d = onlyError("[grant.llm]\napproval = true\n");
    CHECK(d.message == "approval in [grant.llm] must be \"always\", got true");
    checkSpan(d.span, 2, 12, 2, 16);
}

TEST_CASE("policy: argument constraint shapes") {
    Diagnostic d = onlyError("[grant.\"repo.edit\"]\narg_prefix = [\"src/\"]\n");
    CHECK(d.message ==
          "arg_prefix in [grant.\"repo.edit\"] must be a table mapping parameter names to arrays, got an array");
    CHECK(d.hint == "e.g. arg_prefix = { path = [\"src/\"] }");
    checkSpan(d.span, 2, 14, 2, 22);

    d = onlyError("[grant.\"repo.edit\"]\narg_prefix = { path = \"src/\" }\n");
    CHECK(d.message == "arg_prefix.path in [grant.\"repo.edit\"] must be an array, got \"src/\"");
    CHECK(d.hint == "list the allowed prefixes in brackets, e.g. arg_prefix = { path = [\"src/\"] }");
    checkSpan(d.span, 2, 23, 2, 29);

    d = onlyError("[grant.\"repo.edit\"]\narg_prefix = { path = [\"src/\", 3] }\n");
    CHECK(d.message == "arg_prefix.path[1] in [grant.\"repo.edit\"] must be a string, got 3");
    checkSpan(d.span, 2, 32, 2, 33);

    d = onlyError("[grant.\"inbox.list\"]\narg_one_of = { since = [1979-05-27] }\n");
    CHECK(d.message ==
          "arg_one_of.since[0] in [grant.\"inbox.list\"] must be a string, number, boolean, array or table, "
          "got a date");
    checkSpan(d.span, 2, 25, 2, 35);

    d = onlyError("[grant.\"inbox.list\"]\narg_one_of = { folder = \"inbox\" }\n");
    CHECK(d.message == "arg_one_of.folder in [grant.\"inbox.list\"] must be an array, got \"inbox\"");

    d = onlyError("[grant.\"payments.refund\"]\narg_max = { amount = \"100\" }\n");
    CHECK(d.message == "arg_max.amount in [grant.\"payments.refund\"] must be a finite number, got \"100\"");
    CHECK(d.hint == "e.g. arg_max = { amount = 100 }");
    checkSpan(d.span, 2, 22, 2, 27);

    d = onlyError("[grant.\"payments.refund\"]\narg_max = 100\n");
    CHECK(d.message ==
          "arg_max in [grant.\"payments.refund\"] must be a table mapping parameter names to numbers, got 100");

    d = onlyError("[grant.\"mail.send\"]\napprove = { to = [\"external\", \"\"] }\n");
    CHECK(d.message == "approve.to[1] in [grant.\"mail.send\"] must be a non-empty tag name, got \"\"");
    checkSpan(d.span, 2, 31, 2, 33);

    d = onlyError("[grant.\"mail.send\"]\napprove = \"external\"\n");
    CHECK(d.message ==
          "approve in [grant.\"mail.send\"] must be a table mapping parameter names to arrays, got \"external\"");
}

TEST_CASE("policy: grant must be a table of tables") {
    Diagnostic d = onlyError("grant = 3\n");
    CHECK(d.message == "'grant' must be a table, got 3");
    checkSpan(d.span, 1, 9, 1, 10);

    d = onlyError("[grant]\nllm = 5\n");
    CHECK(d.message == "grant 'llm' must be a table of settings, got 5");
    CHECK(d.hint == "write [grant.llm] on its own line, with settings such as max_calls = 5 under it");
    checkSpan(d.span, 2, 7, 2, 8);

    d = onlyError("[[grant]]\nmax_calls = 1\n");
    CHECK(d.message == "'grant' must be a table, got an array");

    d = onlyError("budget = 0.5\n");
    CHECK(d.message == "'budget' must be a table, got 0.5");
    CHECK(d.hint == "write a [budget] table with max_usd = 0.75 under it");
}

TEST_CASE("policy: every problem is reported, in file order") {
    Parsed parsed = parse(R"([limits]
max_steps = -5

[grant."web.fetch"]
max_call = 1
approval = "sometimes"

[budget]
max_usd = "lots"
)");
    CHECK_FALSE(parsed.policy);
    const std::vector<Diagnostic>& items = parsed.diags.items();
    REQUIRE(items.size() == 4);
    CHECK(items[0].span.line == 2);
    CHECK(items[1].span.line == 5);
    CHECK(items[2].span.line == 6);
    CHECK(items[3].span.line == 9);
    for (const Diagnostic& d : items) {
        CHECK(d.code == DiagCode::E0504);
        CHECK(d.file == "policy.toml");
    }

    SourceFile source("policy.toml", "[grant.\"web.fetch\"]\nmax_call = 1\n");
    CHECK(renderText(onlyError(source.text()), &source) ==
          "policy.toml:2:1: error[E0504]: unknown key 'max_call' in [grant.\"web.fetch\"]\n"
          "   2 | max_call = 1\n"
          "       ^^^^^^^^\n"
          "  hint: did you mean 'max_calls'? valid keys: max_calls, arg_prefix, arg_one_of, arg_max, approve, "
          "approval");
}

TEST_CASE("policy: E0505 for grants of resources the host does not declare") {
    Parsed parsed = parse(R"([grant."web.fetch"]
max_calls = 1

[grant."web.fetc"]
max_calls = 1

[grant."payments.refund"]
)");
    REQUIRE(parsed.policy);
    DiagnosticList diags;
    checkPolicyAgainstHost(*parsed.policy, {"inbox.list", "web.fetch", "llm"}, diags);
    const std::vector<Diagnostic>& items = diags.items();
    REQUIRE(items.size() == 2);
    CHECK(items[0].code == DiagCode::E0505);
    CHECK(items[0].file == "policy.toml");
    CHECK(items[0].message == "policy grants 'web.fetc', which the host does not declare");
    CHECK(items[0].hint == "did you mean 'web.fetch'?");
    checkSpan(items[0].span, 4, 1, 4, 19);
    CHECK(items[1].message == "policy grants 'payments.refund', which the host does not declare");
    CHECK(items[1].hint ==
          "grant only capabilities and models declared in the host interface, or remove this grant");
    checkSpan(items[1].span, 7, 1, 7, 26);

    DiagnosticList none;
    checkPolicyAgainstHost(*parsed.policy, {"web.fetch", "web.fetc", "payments.refund"}, none);
    CHECK(none.items().empty());
}

TEST_CASE("policy: allow-all grants everything without limits") {
    Policy policy = Policy::allowAllPolicy();
    CHECK(policy.allowAll);
    CHECK(policy.sha256.empty());
    CHECK_FALSE(policy.maxUsd);
    CHECK(policy.grants.empty());
    const Grant* grant = policy.grantFor("payments.refund");
    REQUIRE(grant);
    CHECK_FALSE(grant->maxCalls);
    CHECK(grant->argPrefix.empty());
    CHECK(grant->argOneOf.empty());
    CHECK(grant->argMax.empty());
    CHECK(grant->approve.empty());
    CHECK_FALSE(grant->approvalAlways);
    CHECK(policy.grantFor("llm") == grant);
    CHECK_FALSE(policy.limits.maxSteps);

    DiagnosticList diags;
    checkPolicyAgainstHost(policy, {}, diags);
    CHECK(diags.items().empty());
}

TEST_CASE("policy: nesting is bounded before toml++ builds anything") {
    // 150,000 dotted-key parts (300 KB) overflowed the stack when toml++ freed its tables.
    auto dotted = [](size_t parts) {
        std::string key = "a";
        for (size_t i = 1; i < parts; ++i) key += ".a";
        return key;
    };
    const char* kMessage = "policy nests keys, tables or arrays more than 32 levels deep";
    Diagnostic d = onlyError("[grant.llm]\n" + dotted(150'000) + " = 1\n");
    CHECK(d.code == DiagCode::E0504);
    CHECK(d.message == kMessage);
    // [grant.llm] is two levels, so the key's 30th dot (column 60) starts the 33rd level.
    checkSpan(d.span, 2, 60, 2, 61);
    d = onlyError("[" + dotted(150'000) + "]\n");
    CHECK(d.message == kMessage);
    checkSpan(d.span, 1, 65, 1, 66);  // the 32nd dot
    d = onlyError("[grant.llm]\narg_one_of = { x = " + std::string(100'000, '[') + " }\n");
    CHECK(d.message == kMessage);
    d = onlyError("x = {" + dotted(100) + " = 1}\n");
    CHECK(d.message == kMessage);
    d = onlyError("[[" + dotted(40) + "]]\n");
    CHECK(d.message == kMessage);

    // Dots in strings, quoted keys, comments and values are no levels; nor are many keys.
    std::string wide = "[grant.\"a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q.r.s.t.u.v.w.x.y.z.0.1.2.3.4.5.6.7.8.9\"]\n"
                       "# a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q.r.s.t.u.v.w.x.y.z.0.1.2.3.4.5.6.7.8.9\n"
                       "arg_prefix = { path = [\"a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q.r.s.t.u.v.w.x.y.z.0.1.2.3.4\", "
                       "'''x.y.z\n.a.b.c.[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[''']}\n"
                       "arg_max = { n = 1.5 }\n"
                       "[budget]\nmax_usd = 0.7500000000000000000000000000000000000000000000000000001\n";
    Parsed ok = parse(wide);
    CHECK(ok.diags.items().empty());
    REQUIRE(ok.policy);
    CHECK(ok.policy->grants.count("a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q.r.s.t.u.v.w.x.y.z.0.1.2.3.4.5.6.7.8.9") == 1);
    Parsed proto = parse(kPrototypePolicy);
    CHECK(proto.diags.items().empty());
}

TEST_CASE("policy: [models] tables configure models, with every default filled in") {
    Parsed parsed = parse(R"([models.llm]
provider = "openai"
model = "gpt-4o-mini"
input_usd_per_mtok = 0.15
output_usd_per_mtok = 0.6

[models."local"]
provider = "openai"
model = "qwen2.5"
base_url = "http://127.0.0.1:8000/v1/"
api_key_env = ""
max_tokens = 512
temperature = 0
timeout_ms = 5000

[models.claude]
provider = "anthropic"
model = "claude-haiku-4-5"
)");
    REQUIRE(parsed.policy);
    const auto& models = parsed.policy->models;
    REQUIRE(models.size() == 3);
    const ModelConfig& llm = models.at("llm");
    CHECK(llm.provider == "openai");
    CHECK(llm.baseUrl == "https://api.openai.com/v1");
    CHECK(llm.apiKeyEnv == "OPENAI_API_KEY");
    CHECK(llm.maxTokens == 4096);
    CHECK(llm.timeoutMs == 120000);
    CHECK_FALSE(llm.temperature);
    CHECK(llm.inputUsdPerMtok == 0.15);
    CHECK(llm.outputUsdPerMtok == 0.6);
    checkSpan(llm.span, 1, 1, 1, 13);
    const ModelConfig& local = models.at("local");
    CHECK(local.baseUrl == "http://127.0.0.1:8000/v1");
    CHECK(local.apiKeyEnv.empty());
    CHECK(local.maxTokens == 512);
    CHECK(local.temperature == 0.0);
    CHECK(local.timeoutMs == 5000);
    const ModelConfig& claude = models.at("claude");
    CHECK(claude.baseUrl == "https://api.anthropic.com/v1");
    CHECK(claude.apiKeyEnv == "ANTHROPIC_API_KEY");
}

TEST_CASE("policy: [models] errors are E0504 at the key or value, and never echo a pasted key") {
    Diagnostic unknown = onlyError("[models.llm]\nprovider = \"openai\"\nmodel = \"m\"\nmax_token = 5\n");
    CHECK(unknown.code == DiagCode::E0504);
    CHECK(unknown.message == "unknown key 'max_token' in [models.llm]");
    CHECK(unknown.hint.find("did you mean 'max_tokens'?") == 0);
    checkSpan(unknown.span, 4, 1, 4, 10);

    Diagnostic provider = onlyError("[models.llm]\nprovider = \"openia\"\nmodel = \"m\"\n");
    CHECK(provider.message == "provider in [models.llm] must be \"openai\" or \"anthropic\", got \"openia\"");
    checkSpan(provider.span, 2, 12, 2, 20);

    Diagnostic missing = onlyError("[models.llm]\nprovider = \"openai\"\n");
    CHECK(missing.message == "[models.llm] needs model");

    Diagnostic key = onlyError("[models.llm]\nprovider = \"openai\"\nmodel = \"m\"\napi_key_env = \"sk-live-abc123\"\n");
    CHECK(key.message.find("must name an environment variable") != std::string::npos);
    CHECK(key.message.find("sk-live") == std::string::npos);
    CHECK(key.hint.find("sk-live") == std::string::npos);

    Diagnostic url = onlyError("[models.llm]\nprovider = \"openai\"\nmodel = \"m\"\nbase_url = \"api.openai.com\"\n");
    CHECK(url.message == "base_url in [models.llm] must start with http:// or https://, got \"api.openai.com\"");

    Diagnostic tokens = onlyError("[models.llm]\nprovider = \"openai\"\nmodel = \"m\"\nmax_tokens = 0\n");
    CHECK(tokens.message == "max_tokens in [models.llm] must be a positive integer of at most 1000000, got 0");
    Diagnostic price = onlyError("[models.llm]\nprovider = \"openai\"\nmodel = \"m\"\ninput_usd_per_mtok = \"0.1\"\n");
    CHECK(price.message == "input_usd_per_mtok in [models.llm] must be a number from 0 to 1000000, got \"0.1\"");
    Diagnostic temperature = onlyError("[models.llm]\nprovider = \"openai\"\nmodel = \"m\"\ntemperature = 3\n");
    CHECK(temperature.message == "temperature in [models.llm] must be a number from 0 to 2, got 3");
    Diagnostic notTable = onlyError("[models]\nllm = \"gpt-4o\"\n");
    CHECK(notTable.message == "model 'llm' must be a table of settings, got \"gpt-4o\"");
    Diagnostic misplaced = onlyError("[grant.llm]\nprovider = \"openai\"\n");
    CHECK(misplaced.hint.find("'provider' belongs in [models.\"<model>\"]") == 0);
}

TEST_CASE("policy: a [models] table must name a model the host declares (E0505)") {
    Parsed parsed = parse(R"([models.lm]
provider = "openai"
model = "m"

[models."web.fetch"]
provider = "openai"
model = "m"
)");
    REQUIRE(parsed.policy);
    std::vector<std::string> models = {"llm"};
    DiagnosticList diags;
    checkPolicyAgainstHost(*parsed.policy, {"llm", "web.fetch"}, diags, &models);
    REQUIRE(diags.items().size() == 2);
    CHECK(diags.items()[0].code == DiagCode::E0505);
    CHECK(diags.items()[0].message == "policy configures model 'lm', which the host does not declare");
    CHECK(diags.items()[0].hint == "did you mean 'llm'?");
    checkSpan(diags.items()[0].span, 1, 1, 1, 12);
    CHECK(diags.items()[1].message == "policy configures model 'web.fetch', which the host declares as a capability");
}

TEST_CASE("policy: --model NAME=PROVIDER:MODEL[@BASE_URL]") {
    std::string error;
    std::optional<ModelConfig> plain = modelConfigFromFlag("llm=anthropic:claude-haiku-4-5", error);
    REQUIRE(plain);
    CHECK(plain->name == "llm");
    CHECK(plain->provider == "anthropic");
    CHECK(plain->model == "claude-haiku-4-5");
    CHECK(plain->baseUrl == "https://api.anthropic.com/v1");
    CHECK(plain->apiKeyEnv == "ANTHROPIC_API_KEY");
    ::unsetenv("OPENAI_API_KEY");
    std::optional<ModelConfig> local = modelConfigFromFlag("llm=openai:qwen2.5:7b@http://127.0.0.1:11434/v1/", error);
    REQUIRE(local);
    CHECK(local->model == "qwen2.5:7b");
    CHECK(local->baseUrl == "http://127.0.0.1:11434/v1");
    CHECK(local->apiKeyEnv.empty());  // a server of your own, and no key in the environment
    for (const char* bad : {"llm", "llm=openai", "=openai:m", "llm=gemini:m", "llm=openai:"})
        CHECK_MESSAGE(!modelConfigFromFlag(bad, error), bad);
}
