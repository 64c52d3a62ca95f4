// What performs a run's host calls, as the host operator configured it (docs/adapters.md "Which
// adapters a run uses"): a list of adapter specs, each plain data that the run's `run_start`
// records (`adapters`), so a resume — or any other process that continues the run — opens the same
// adapters without the original command line. The command line builds the list from its flags
// (`--fixtures`, `--adapter`, `--live`, `--model`) and the policy's model tables; openAdapters turns it into the one Adapter the broker's
// dispatches go to. With several specs, each call goes to the first adapter that serves it
// (broker/routing_adapter.h): particular resources first, the adapter that serves everything last.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "broker/adapter.h"
#include "broker/openapi.h"
#include "runtime/json_text.h"
#include "runtime/policy.h"

namespace remit {

struct HostModel;

struct AdapterSpec {
    enum class Kind : uint8_t {
        Fixtures,  // canned results from a fixture file (broker/fixture_adapter.h)
        Process,   // an adapter process speaking JSON lines (broker/process_adapter.h)
        Live,      // a prototype-style adapters.py through the Python shim
        None,      // nothing performs calls: a program without host-call sites
        Mcp,       // an MCP server's tools (broker/mcp_adapter.h)
        Model,     // a model the host configured (broker/model_adapter.h): serves that model's calls only
        OpenApi,   // an OpenAPI service's operations (broker/openapi_adapter.h)
    } kind = Kind::None;
    std::string path;        // Fixtures: the fixture file; Live: the program's folder; OpenApi: the document (absolute)
    std::string command;     // Process, Mcp over stdio: the command line, as the operator wrote it
    std::string workingDir;  // Process, Mcp over stdio: the absolute directory the process starts in
    std::string scope = {};     // Mcp, OpenApi: the one namespace it serves (`mcp.NS:CMD`), or empty for any
    std::string url = {};       // Mcp over streamable HTTP: the server's URL (then no command); OpenApi: the base URL
    std::string tokenEnv = {};  // Mcp over HTTP: the environment variable holding its bearer token, or empty
    ModelConfig model = {};     // Model: the whole configuration — the key's variable name, never the key
    // OpenApi: security scheme → the environment variable that holds its credential (never the credential).
    std::map<std::string, std::string> authEnv = {};
};

// The run's `mode` as `run_start` and the `trace:` line show it (docs/broker.md "Traces"): that of
// the last spec — `fixtures:PATH`, `adapter`, `live`, `mcp`, `model`, `openapi` or `none`.
std::string adapterMode(const std::vector<AdapterSpec>& specs);

// The `adapters` array `run_start` records, and back. fromJson refuses (nullopt, `error` saying
// what is wrong) anything it does not know, so a damaged record never opens a different adapter.
Json adapterSpecsJson(const std::vector<AdapterSpec>& specs);
std::optional<std::vector<AdapterSpec>> adapterSpecsFromJson(const Json& value, std::string& error);

struct AdapterOpenOptions {
    std::string liveShim;  // the Python shim `Live` runs (scripts/remit-py-adapter)
    // When given, a fixture file is also checked against the host interface (an entry whose `args`
    // names a parameter its capability does not take is refused: FixtureAdapter::checkAgainst).
    const HostModel* host = nullptr;
    // Mcp: the policy's [mcp] settings (its tool map and start-up timeout), the file each server's
    // stderr is appended to (empty: inherited), and the version the client announces.
    const McpSettings* mcp = nullptr;
    std::string mcpStderrLog;
    std::string clientVersion = "0";
    // OpenApi: reads a YAML document as JSON (cli/yaml_json.h; without one, only JSON documents open).
    YamlReader yaml = nullptr;
};

// Why a spec could not be opened: which one, the message (naming the file, not the flag) and a hint.
struct AdapterOpenError {
    size_t index = 0;
    std::string message, hint;
};

// Opens every spec (a fixture file is read and validated now, a process is checked to exist and
// started on its first call). One spec gives its adapter, several a RoutingAdapter over them in
// order. Null with `error` set when one cannot be opened; nothing has been started then.
std::unique_ptr<Adapter> openAdapters(const std::vector<AdapterSpec>& specs, const AdapterOpenOptions& options,
                                      AdapterOpenError& error);

}  // namespace remit
