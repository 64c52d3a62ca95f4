// `remitc import mcp "CMD ARGS"|URL [--as NS] [-o host.rmti] [--timeout-ms N] [--token-env NAME]`
// (docs/import.md): starts an MCP server or reaches one by URL (broker/mcp_client.h), lists its
// tools and prints a draft host interface for them (compiler/host_import.h), or writes it to -o. Its flags are declared in cli/command_table.cpp;
// this is printing only.
#include <fmt/format.h>
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "broker/http_client.h"
#include "broker/mcp_client.h"
#include "cli/commands.h"
#include "compiler/driver.h"
#include "compiler/host_import.h"
#include "runtime/files.h"

namespace remit::cli {

namespace {

constexpr uint64_t kDefaultImportTimeoutMs = 30'000;

// A temporary file for the server's stderr, removed when this goes out of scope: a failure quotes
// its last line; a success keeps the terminal quiet.
struct StderrLog {
    std::string path;
    StderrLog() {
        std::string pattern = (std::filesystem::temp_directory_path() / "remitc-import-XXXXXX").string();
        int fd = ::mkstemp(pattern.data());
        if (fd >= 0) {
            ::close(fd);
            path = pattern;
        }
    }
    ~StderrLog() {
        if (!path.empty()) ::unlink(path.c_str());
    }
};

// What the tool's annotations say, as comment lines and the `idempotent` attribute.
ImportedOperation operationOf(const McpTool& tool) {
    ImportedOperation op;
    op.name = tool.name;
    op.title = tool.title;
    op.description = tool.description;
    op.input = tool.inputSchema;
    op.output = tool.outputSchema;
    auto hint = [&](const char* key) -> std::optional<bool> {
        if (!tool.annotations.is_object()) return std::nullopt;
        auto it = tool.annotations.find(key);
        if (it == tool.annotations.end() || !it->is_boolean()) return std::nullopt;
        return it->get<bool>();
    };
    if (op.title.empty() && tool.annotations.is_object() && tool.annotations.contains("title") &&
        tool.annotations["title"].is_string())
        op.title = tool.annotations["title"].get<std::string>();
    bool readOnly = hint("readOnlyHint").value_or(false);
    op.idempotent = readOnly || hint("idempotentHint").value_or(false);
    if (readOnly) op.remarks.push_back("read-only, says the server (readOnlyHint)");
    if (!readOnly && hint("destructiveHint").value_or(false))
        op.remarks.push_back("destructive, says the server (destructiveHint): consider `approval always`");
    if (hint("openWorldHint").value_or(false))
        op.remarks.push_back("reaches the outside world, says the server (openWorldHint): consider `tags untrusted`");
    return op;
}

}  // namespace

int importMcpCommand(std::string_view tool, Args& args) {
    if (args.positional.size() != 1) {
        fmt::print(stderr, "{}: error: import mcp needs exactly one command, quoted: the command that starts the server\n",
                   tool);
        fmt::print(stderr, "  hint: e.g. {} import mcp \"npx -y @modelcontextprotocol/server-memory\" --as notes\n", tool);
        return kUsage;
    }
    const std::string& command = args.positional[0];
    std::string ns;
    if (!importNamespace(tool, args, "files (capabilities become files.read_file, ...)", ns)) return kUsage;
    uint64_t timeoutMs = kDefaultImportTimeoutMs;
    if (const std::string* t = args.value("--timeout-ms")) {
        auto [end, ec] = std::from_chars(t->data(), t->data() + t->size(), timeoutMs);
        if (ec != std::errc() || end != t->data() + t->size() || timeoutMs == 0 || timeoutMs > 600'000) {
            fmt::print(stderr, "{}: error: --timeout-ms needs a number of milliseconds from 1 to 600000, not '{}'\n",
                       tool, *t);
            return kUsage;
        }
    }
    // A command starts a server over stdio; a URL reaches one over streamable HTTP.
    const bool overHttp = command.starts_with("http://") || command.starts_with("https://");
    std::vector<std::string> serverArgv;
    std::string error, token;
    const std::string* tokenEnv = args.value("--token-env");
    if (overHttp) {
        if (!checkMcpUrl(command, error)) {
            fmt::print(stderr, "{}: error: {}\n", tool, error);
            return kUsage;
        }
        if (tokenEnv) {
            const char* value = std::getenv(tokenEnv->c_str());
            if (!value || !*value) {
                fmt::print(stderr, "{}: error: the environment variable {} (--token-env) is not set\n", tool, *tokenEnv);
                return kUsage;
            }
            token = value;
        }
    } else if (tokenEnv) {
        fmt::print(stderr, "{}: error: --token-env is for servers reached by URL; a server started by a command "
                           "gets what it needs from its environment\n",
                   tool);
        return kUsage;
    } else if (!splitCommand(command, serverArgv, error) || !checkProgram(serverArgv, "", "MCP server", error)) {
        fmt::print(stderr, "{}: error: {}\n", tool, error);
        return kUsage;
    }

    StderrLog log;
    ChildProcessOptions process;
    process.stderrPath = log.path;
    McpClientOptions clientOptions;
    clientOptions.clientName = "remitc";
    clientOptions.clientVersion = std::string(remitVersion());
    McpClient client(overHttp ? makeHttpTransport(command, token) : makeStdioTransport(serverArgv, process),
                     clientOptions);
    if (!client.connect(McpClient::Clock::now() + std::chrono::milliseconds(timeoutMs), error)) {
        fmt::print(stderr, "{}: error: {}\n", tool, error);
        if (!overHttp)
            fmt::print(stderr, "  hint: check that the command starts an MCP server over stdio (try running it); "
                               "a slow first start (npx downloading) may need --timeout-ms 120000\n");
        return kFailure;
    }
    const McpServerInfo server = client.server();
    std::vector<ImportedOperation> operations;
    for (const McpTool& t : client.tools()) operations.push_back(operationOf(t));
    std::vector<std::string> skipped = client.skippedTools();
    client.disconnect();
    if (operations.empty()) {
        fmt::print(stderr, "{}: error: MCP server {} lists no tools to import\n", tool, client.describe());
        return kFailure;
    }

    if (ns.empty()) ns = namespaceFrom(server.name);
    std::vector<std::string> header = {
        fmt::format("Host interface drafted by `remitc import mcp` from the MCP server '{}'{} ({} tools).",
                    server.name.empty() ? "?" : server.name, server.version.empty() ? "" : " " + server.version,
                    operations.size()),
        overHttp ? "Server: " + redactedUrl(command) : "Server command: " + quoteForDisplay(serverArgv),
    };
    if (overHttp)
        header.push_back(fmt::format("Run programs against it with: remitvm run PROG.rmt --adapter \"mcp.{}+{}{}\"", ns,
                                     redactedUrl(command), tokenEnv ? " token_env=" + *tokenEnv : std::string()));
    else if (command.find('\'') == std::string::npos)
        header.push_back(fmt::format("Run programs against it with: remitvm run PROG.rmt --adapter mcp.{}:'{}'", ns,
                                     quoteForDisplay(serverArgv)));
    HostDraft draft = draftHostInterface(ns, header, operations);
    for (const std::string& s : skipped) draft.notImported.push_back(s + " (skipped from the tool list)");

    return writeDraft(tool, args, draft,
                      fmt::format("imported {} of {} tool(s) from MCP server '{}' as {}.*", draft.capabilities,
                                  operations.size() + skipped.size(), server.name, ns));
}

bool importNamespace(std::string_view tool, const Args& args, std::string_view example, std::string& ns) {
    const std::string* as = args.value("--as");
    if (!as) return true;
    ns = *as;
    if (isCapabilityNamespace(ns)) return true;
    fmt::print(stderr, "{}: error: --as '{}' is not a namespace: it must be an identifier that is not a keyword\n", tool,
               ns);
    fmt::print(stderr, "  hint: e.g. --as {}\n", example);
    return false;
}

int writeDraft(std::string_view tool, const Args& args, const HostDraft& draft, const std::string& summary) {
    const std::string* out = args.value("-o");
    if (out) {
        if (auto err = writeFileAtomically(*out, draft.text)) {
            fmt::print(stderr, "{}: error: {}\n", tool, err->message);
            return kFailure;
        }
    } else {
        std::fwrite(draft.text.data(), 1, draft.text.size(), stdout);
        std::fflush(stdout);
    }
    fmt::print(stderr, "{}{}\n", summary, out ? " into " + *out : std::string());
    for (const std::string& n : draft.notImported) fmt::print(stderr, "  not imported: {}\n", n);
    for (const std::string& n : draft.notes) fmt::print(stderr, "  note: {}\n", n);
    fmt::print(stderr, "next: decide the tags, approvals and costs marked TODO, then grant the capabilities a "
                       "program uses in policy.toml\n");
    return kOk;
}

}  // namespace remit::cli
