// The commands that produce and run bytecode: `remitc build`, `remitc dis`, `remitc manifest
// PROG.rbc`, `run`, and the re-executions of a recorded run, `resume` and `replay` (remitvm and
// remit alike). Flag parsing and printing only: programs come
// from compiler/driver.h and session/pipeline.h, runs from the VM (vm/run.h), and every host
// call a run makes goes through the broker (broker/broker.h) with the adapter the flags choose.
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cctype>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "broker/approvals.h"
#include "broker/child_process.h"
#include "broker/broker.h"
#include "broker/fixture_adapter.h"
#include "broker/mcp_client.h"
#include "broker/process_adapter.h"
#include "session/run_adapters.h"
#include "broker/replay.h"
#include "broker/trace.h"
#include "bytecode/disasm.h"
#include "bytecode/rbc.h"
#include "bytecode/signature.h"
#include "cli/commands.h"
#include "cli/terminal.h"
#include "cli/yaml_json.h"
#include "compiler/driver.h"
#include "compiler/host_import.h"
#include "compiler/manifest.h"
#include "compiler/parser.h"
#include "runtime/canonical_json.h"
#include "runtime/json_text.h"
#include "runtime/numfmt.h"
#include "runtime/source.h"
#include "runtime/value_json.h"
#include "session/pipeline.h"
#include "session/run_lifecycle.h"
#include "session/pg_store.h"
#include "session/store.h"
#include "vm/run.h"

namespace remit::cli {

namespace {

bool isBytecodePath(const std::string& path) { return path.size() > 4 && path.ends_with(".rbc"); }

// What the commands print goes where this thread's output goes (a worker's run: its buffers).
std::FILE* stdOut() { return commandOutput().out; }
std::FILE* errOut() { return commandOutput().err; }

constexpr size_t kMaxInputsBytes = size_t(64) << 20;

// "an array", "a string", ...: what a JSON document is, for messages.
std::string jsonTypeArticle(const nlohmann::json& j) {
    std::string name = j.type_name();
    return (name == "array" || name == "object" ? "an " : "a ") + name;
}

// The shortest prefixes (at least 12 digits) that tell two hashes apart, for messages.
std::pair<std::string, std::string> distinctPrefixes(const std::string& a, const std::string& b) {
    size_t n = 12;
    while (n < std::max(a.size(), b.size()) && a.substr(0, n) == b.substr(0, n)) ++n;
    return {a.substr(0, n), b.substr(0, n)};
}

// A program ready to run or disassemble, from a .rmt (checked and compiled in memory) or a .rbc.
struct ProgramSource {
    std::shared_ptr<const LoadedProgram> program;
    std::optional<CheckOutcome> checked;  // .rmt: the check (diagnostics, policy, host, sources)
    std::string file;
    std::optional<RbcSignature> signature;  // a signed .rbc's signature (verified)
    std::optional<std::string> trustedKey;  // the trusted key that admitted it, when trust was checked
};

// Reads and verifies a .rbc into `source`. With `trust`, the file must first be signed by one of
// its keys and unchanged since (docs/bytecode.md "Signatures"): that is checked on the raw bytes,
// before any of them is parsed. Returns false after printing why: exit 2 for a file that cannot
// be read or is not a valid .rbc, 1 for one the trust directory refuses.
bool loadBytecodeFile(std::string_view tool, const std::string& path, const TrustStore* trust, ProgramSource& source,
                      int& exit) {
    std::string bytes;
    if (auto err = readSource(path, kMaxRbcBytes, bytes)) {
        fmt::print(errOut(), "{}: error: {}\n", tool, err->message);
        exit = kUsage;
        return false;
    }
    if (bytes.size() > kMaxRbcBytes) {
        fmt::print(errOut(), "{}: error: {} is larger than {} MiB, the limit for a .rbc file\n", tool, path,
                   kMaxRbcBytes >> 20);
        exit = kUsage;
        return false;
    }
    if (trust) {
        TrustVerdict verdict = checkTrusted(bytes, *trust);
        if (!verdict.trustedBy) {
            fmt::print(errOut(), "{}: error: refusing to run {}: {}\n  hint: {}\n", tool, path, verdict.error,
                       verdict.hint);
            exit = kFailure;
            return false;
        }
        source.trustedKey = verdict.trustedBy->name;
    }
    LoadOutcome loaded = loadProgram(bytes);
    if (!loaded.program) {
        // A signed file whose signature cannot be checked (no libcrypto) is not broken: its error
        // already says what to install, and rebuilding would not help.
        RbcParts parts;
        bool unverifiable = splitSignedRbc(bytes, parts).empty() && parts.signature && !signatureSupportError().empty();
        if (unverifiable) {
            fmt::print(errOut(), "{}: error: {}: {}\n", tool, path, loaded.error);
        } else {
            fmt::print(errOut(), "{}: error: {} is not a valid .rbc file: {}\n", tool, path, loaded.error);
            fmt::print(errOut(), "  hint: rebuild it from its source with `remitc build PROG.rmt`\n");
        }
        exit = kUsage;
        return false;
    }
    source.program = std::move(loaded.program);
    source.signature = std::move(loaded.signature);
    return true;
}

// Reads the trust directory a run of an artifact checks, named by `from` ("--trust", or the
// policy's [artifacts] trust) in the message when it cannot be used (exit 2).
bool loadTrustStore(std::string_view tool, const std::string& dir, std::string_view from, TrustStore& trust) {
    std::string error;
    if (trust.load(dir, error)) return true;
    fmt::print(errOut(), "{}: error: {} (named by {})\n", tool, error, from);
    if (signatureSupportError().empty())  // else the error says what to install
        fmt::print(errOut(),
                   "  hint: a trust directory holds the builders' Ed25519 public keys as NAME.pub.pem "
                   "(`remitc keygen` writes one beside each private key)\n");
    return false;
}

// Reads the private key `build --sign` signs with; prints why not (exit 2). A key other users can
// read is used, with a warning: it is the builder's identity.
bool loadSigningKey(std::string_view tool, const std::string& path, SigningKey& key) {
    std::string error;
    if (!key.load(path, error)) {
        fmt::print(errOut(), "{}: error: {}\n", tool, error);
        if (signatureSupportError().empty())  // else the error says what to install, not how to make a key
            fmt::print(errOut(),
                       "  hint: make a key with `remitc keygen KEY.pem` (or `openssl genpkey -algorithm ed25519 "
                       "-out KEY.pem`)\n");
        return false;
    }
    std::error_code ec;
    using std::filesystem::perms;
    perms mode = std::filesystem::status(path, ec).permissions();
    if (!ec && (mode & (perms::group_read | perms::others_read)) != perms::none)
        fmt::print(errOut(), "warning: the private key {} can be read by other users; `chmod 600 {}`\n", path, path);
    return true;
}


// The program text for excerpts in runtime errors and disassembly: the checked source, else the
// file the .rbc names if it is still there.
std::string sourceTextFor(const ProgramSource& source) {
    if (source.checked)
        if (const SourceFile* f = source.checked->sourceFor(source.file)) return std::string(f->text());
    std::string text;
    const std::string& named = source.program->module().sourceFile;
    if (!named.empty() && !readSource(named, size_t(1) << 20, text)) return text;
    return {};
}

}  // namespace

int buildCommand(std::string_view tool, Args& args) {
    // `-o OUT.rbc` (remitc) or `--out DIR` (the prototype's `remit build`, default `build`).
    if (args.positional.size() != 1) {
        fmt::print(errOut(), "{}: error: build needs exactly one PROGRAM.rmt\n", tool);
        return kUsage;
    }
    const std::string& file = args.positional[0];
    // The key first: a build that cannot be signed writes nothing.
    SigningKey key;
    const std::string* keyPath = args.value("--sign");
    if (keyPath && !loadSigningKey(tool, *keyPath, key)) return kUsage;
    CheckOptions options;
    options.checkPolicy = false;  // an artifact is checked against a policy where it runs
    options.strictFlows = args.has("--strict-flows");
    if (const std::string* host = args.value("--host")) options.hostPath = *host;
    CheckOutcome outcome = checkProgramFile(file, options);
    if (outcome.ioError) {
        fmt::print(errOut(), "{}: error: {}\n", tool, outcome.ioError->message);
        return kUsage;
    }
    printDiagnostics(outcome.diags, &outcome);
    if (!outcome.ok() || !outcome.checked) {
        fmt::print(errOut(), "{} error(s) in {}\n", outcome.diags.errorCount(), file);
        return kFailure;
    }
    int exit = kOk;
    auto program = compileChecked(outcome, exit);
    if (!program) return exit;

    std::string out;
    std::optional<std::string> manifestOut;
    if (const std::string* o = args.value("-o")) {
        out = *o;
    } else if (tool == "remit" || args.has("--out")) {
        std::filesystem::path dir = args.value("--out") ? *args.value("--out") : "build";
        std::error_code ec;
        std::filesystem::create_directories(dir, ec);
        if (ec) {
            fmt::print(errOut(), "{}: error: cannot create directory {}\n", tool, dir.string());
            return kUsage;
        }
        out = (dir / (outcome.program->name + ".rbc")).string();
        manifestOut = (dir / (outcome.program->name + ".manifest.json")).string();
    } else {
        out = std::filesystem::path(file).replace_extension(".rbc").string();
    }
    std::string bytes = writeRbc(program->module());
    if (keyPath && (bytes = key.sign(bytes)).empty()) {
        fmt::print(errOut(), "{}: error: OpenSSL could not sign {} with {}\n", tool, out, *keyPath);
        return kUsage;
    }
    if (auto err = writeFileAtomically(out, bytes)) {
        fmt::print(errOut(), "{}: error: {}\n", tool, err->message);
        return kUsage;
    }
    fmt::print(stdOut(), "wrote {}\n", out);
    if (keyPath) fmt::print(stdOut(), "signed by {}\n", signerName(key.publicKey()));
    if (manifestOut) {
        std::string manifest = manifestToJson(outcome.checked->manifest).dump(2) + "\n";
        if (auto err = writeFileAtomically(*manifestOut, manifest)) {
            fmt::print(errOut(), "{}: error: {}\n", tool, err->message);
            return kUsage;
        }
        fmt::print(stdOut(), "wrote {}\n", *manifestOut);
    }
    fmt::print(stdOut(), "program hash {}\n", program->module().programHash);
    return kOk;
}

namespace {

// Creates `path` for writing only if it does not exist, with `mode`: a key is never overwritten,
// and a private key is never readable by others, not even for a moment.
std::optional<std::string> writeNewFile(const std::string& path, const std::string& text, mode_t mode) {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0)
        return errno == EEXIST ? fmt::format("{} already exists; keygen never overwrites a key", path)
                               : fmt::format("cannot create {}: {}", path, std::strerror(errno));
    bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
    ::close(fd);
    if (ok) return std::nullopt;
    ::unlink(path.c_str());
    return fmt::format("cannot write {}", path);
}

}  // namespace

int keygenCommand(std::string_view tool, Args& args) {
    if (args.positional.size() != 1 || !args.positional[0].ends_with(".pem") ||
        args.positional[0].ends_with(".pub.pem")) {
        fmt::print(errOut(), "{}: error: keygen needs exactly one KEY.pem (the private key to write)\n", tool);
        return kUsage;
    }
    const std::string& privatePath = args.positional[0];
    std::string publicPath = privatePath.substr(0, privatePath.size() - 4) + ".pub.pem";
    SigningKey key;
    std::string error;
    if (!key.generate(error)) {
        fmt::print(errOut(), "{}: error: {}\n", tool, error);
        return kUsage;
    }
    std::string privateText = key.privatePem();
    std::string publicText = key.publicPem();
    if (privateText.empty() || publicText.empty()) {
        fmt::print(errOut(), "{}: error: OpenSSL could not write the key as PEM\n", tool);
        return kUsage;
    }
    // The public key first: if the private one cannot be written, nothing secret is left behind.
    if (auto problem = writeNewFile(publicPath, publicText, 0644)) {
        fmt::print(errOut(), "{}: error: {}\n", tool, *problem);
        return kUsage;
    }
    auto problem = writeNewFile(privatePath, privateText, 0600);
    explicit_bzero(privateText.data(), privateText.size());  // the private key's text
    if (problem) {
        ::unlink(publicPath.c_str());
        fmt::print(errOut(), "{}: error: {}\n", tool, *problem);
        return kUsage;
    }
    fmt::print(stdOut(), "wrote {} (private: keep it where programs are built)\n", privatePath);
    fmt::print(stdOut(), "wrote {} (public: copy it into the trust directory of each host)\n", publicPath);
    fmt::print(stdOut(), "key {}\n", signerName(key.publicKey()));
    return kOk;
}

int disCommand(std::string_view tool, Args& args) {
    if (args.positional.size() != 1) {
        fmt::print(errOut(), "{}: error: dis needs exactly one PROGRAM (.rbc, or .rmt to compile first)\n", tool);
        return kUsage;
    }
    ProgramSource source;
    source.file = args.positional[0];
    int exit = kOk;
    if (isBytecodePath(source.file)) {
        if (!loadBytecodeFile(tool, source.file, nullptr, source, exit)) return exit;
    } else {
        CheckOptions options;
        options.checkPolicy = false;
        options.strictFlows = args.has("--strict-flows");
        if (const std::string* host = args.value("--host")) options.hostPath = *host;
        source.checked = checkProgramFile(source.file, options);
        if (source.checked->ioError) {
            fmt::print(errOut(), "{}: error: {}\n", tool, source.checked->ioError->message);
            return kUsage;
        }
        if (!source.checked->ok() || !source.checked->checked) {
            printDiagnostics(source.checked->diags, &*source.checked);
            return kFailure;
        }
        source.program = compileChecked(*source.checked, exit);
    }
    if (!source.program) return exit;
    // Only a signed file has a signer line, so an unsigned .rbc lists exactly as its source does.
    std::string signer = source.signature ? signerName(source.signature->publicKey) : std::string();
    fmt::print(stdOut(), "{}", disassemble(source.program->module(), sourceTextFor(source), signer));
    return kOk;
}

int bytecodeManifest(std::string_view tool, const std::string& path) {
    int exit = kOk;
    ProgramSource source;
    if (!loadBytecodeFile(tool, path, nullptr, source, exit)) return exit;
    Json manifest = Json::parse(source.program->module().manifestJson);
    // The signer is the file's, not the program's: only a signed file has the member, so an
    // unsigned .rbc prints exactly its source's manifest.
    if (source.signature) manifest["signer"] = signerName(source.signature->publicKey);
    fmt::print(stdOut(), "{}\n", manifest.dump(2));
    return kOk;
}

namespace {

// Everything `run` needs besides the program: the host (input tags), the policy and the limits.
struct RunSetup {
    ProgramSource source;
    HostModel host;
    std::optional<Policy> policy;
    VmLimits limits;
    bool strictFlows = false;  // the program was compiled in strict-flows mode: the broker enforces it
};

// Collects -i/--inputs into one JSON object of main's inputs. Prints the problem and returns false
// on a usage error (exit 2).
bool collectInputs(std::string_view tool, const Args& args, const LoadedProgram& program, nlohmann::json& given) {
    const Function& main = program.module().functions[program.entry()];
    given = nlohmann::json::object();
    if (const std::string* inputsFile = args.value("--inputs")) {
        // Each problem is named for what it is: a file that is missing, special, too large, not
        // JSON (with the line and column), nested too deep, or JSON but not an object.
        std::string error;
        std::optional<nlohmann::json> parsed = readJsonFile(*inputsFile, kMaxInputsBytes, "an inputs file", error);
        if (!parsed) {
            fmt::print(errOut(), "{}: error: {}\n", tool, error);
            return false;
        }
        if (!parsed->is_object()) {
            fmt::print(errOut(), "{}: error: {} must hold a JSON object of inputs (name: value), not {}\n", tool,
                       *inputsFile, jsonTypeArticle(*parsed));
            return false;
        }
        given = std::move(*parsed);
    }
    for (const auto& [flag, value] : args.options) {
        if (flag != "--input") continue;
        size_t eq = value.find('=');
        if (eq == std::string::npos || eq == 0) {
            fmt::print(errOut(), "{}: error: input '{}' must be written NAME=VALUE\n", tool, value);
            return false;
        }
        std::string name = value.substr(0, eq), text = value.substr(eq + 1);
        auto param = std::find(main.paramNames.begin(), main.paramNames.end(), name);
        if (param == main.paramNames.end()) {
            fmt::print(errOut(), "{}: error: unknown input '{}': main takes {}\n", tool, name,
                       main.paramNames.empty() ? std::string("no inputs") : fmt::format("{}", fmt::join(main.paramNames, ", ")));
            return false;
        }
        TypeRef type = program.type(main.paramTypes[static_cast<size_t>(param - main.paramNames.begin())]);
        if (type && type->isStringLike() && type->kind == TypeKind::Str) {
            given[name] = text;  // a Str input is taken literally
            continue;
        }
        std::string error;
        std::optional<nlohmann::json> parsed = parseJsonText("input '" + name + "'", text, error);
        if (!parsed) {
            fmt::print(errOut(), "{}: error: {} (type {} is given as JSON)\n", tool, error, type ? showType(type) : "?");
            return false;
        }
        given[name] = std::move(*parsed);
    }
    return true;
}

// Turns the inputs (from the flags, or recorded in a trace) into main's arguments, typed and tagged
// per the host's `input` lines. Prints the problem and returns false when they do not fit.
bool inputValues(std::string_view tool, const LoadedProgram& program, const HostModel& host, Heap& heap,
                 const nlohmann::json& given, std::vector<Value>& out) {
    std::string problem;
    out = mainArguments(program, host, heap, given, problem);
    if (problem.empty()) return true;
    fmt::print(errOut(), "{}: error: {}\n", tool, problem);
    if (problem.starts_with("missing input"))
        fmt::print(errOut(), "  hint: pass -i NAME=VALUE or --inputs FILE.json\n");
    return false;
}

std::optional<uint64_t> parseLimitFlag(std::string_view tool, const Args& args, std::string_view flag) {
    const std::string* v = args.value(flag);
    if (!v) return std::nullopt;
    uint64_t n = 0;
    auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
    if (ec != std::errc() || end != v->data() + v->size() || n == 0) {
        fmt::print(errOut(), "{}: error: {} needs a positive integer, not '{}'\n", tool, flag, *v);
        throw std::invalid_argument("bad limit");
    }
    return n;
}

void printRuntimeFailure(const ProgramSource& source, const RunFailure& f) {
    Diagnostic d = makeDiagnostic(f.error.code, f.error.message, source.file,
                                  f.span);
    d.details = f.error.details;
    std::string text = sourceTextFor(source);
    SourceFile excerpt(source.file, text);
    fmt::print(errOut(), "{}\n", renderText(d, text.empty() ? nullptr : &excerpt, colorOn(Stream::Err)));
}

// `run --progress`: each attempt of a host call on stderr as it starts and as it ends, from the
// broker's decisions in the driving loop. At a terminal the start line is replaced by the end
// line; elsewhere both are printed.
class ProgressPrinter : public CallWatcher {
public:
    explicit ProgressPrinter(const Broker& broker) : broker_(broker), inPlace_(isTerminal(Stream::Err)) {}

    void started(const HostCall& call, const Decision& decision) override {
        ++attempts_;
        spentBefore_ = broker_.spent();
        begun_ = std::chrono::steady_clock::now();
        if (decision.kind != Decision::Kind::Dispatch) return;  // answered or refused at once: one line
        fmt::print(errOut(), "{}{}", line("→", call, "…"), inPlace_ ? "" : "\n");
        std::fflush(errOut());
        shown_ = true;
    }

    void finished(const HostCall& call, const Decision& outcome) override {
        auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - begun_);
        std::string what;
        if (outcome.kind == Decision::Kind::Answered) {
            what = shown_ ? fmt::format("{} ms, ${}", ms.count(), formatUsd(broker_.spent() - spentBefore_))
                          : std::string("answered from the recorded run");
        } else {
            what = fmt::format("{}: {}", diagInfo(outcome.error.code).name, firstCodePoints(outcome.error.message, 120));
        }
        std::string mark = outcome.kind == Decision::Kind::Answered
                               ? paint(Stream::Err, TextStyle::Ok, shown_ ? "✓" : "↺")
                               : paint(Stream::Err, TextStyle::Error, "✗");
        fmt::print(errOut(), "{}{}\n", inPlace_ && shown_ ? "\r\x1b[K" : "", line(mark, call, what));
        shown_ = false;
    }

private:
    // "  → web.fetch at main#1 (attempt 2): …"
    std::string line(std::string_view mark, const HostCall& call, std::string_view what) const {
        return fmt::format("  {} [{}] {} at {}{}: {}", mark, attempts_, call.site->resource, call.site->id,
                           call.attempt ? fmt::format(" (retry {})", call.attempt) : std::string(), what);
    }

    const Broker& broker_;
    bool inPlace_;
    bool shown_ = false;
    size_t attempts_ = 0;
    double spentBefore_ = 0;
    std::chrono::steady_clock::time_point begun_;
};

// Where the live adapter shim lives: $REMIT_PY_ADAPTER, else the source tree's scripts/.
std::string liveShimPath() {
    if (const char* env = std::getenv("REMIT_PY_ADAPTER"); env && *env) return env;
#ifdef REMIT_SOURCE_DIR
    return std::string(REMIT_SOURCE_DIR) + "/scripts/remit-py-adapter";
#else
    return "scripts/remit-py-adapter";
#endif
}

// Whether `name` can name an environment variable: letters, digits and `_`, not starting with a digit.
bool environmentVariableName(const std::string& name) {
    return !name.empty() && !(name[0] >= '0' && name[0] <= '9') &&
           name.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") ==
               std::string::npos;
}

// `--adapter mcp[.NS]:CMD` (a server over stdio) or `--adapter "mcp[.NS]+https://URL [token_env=NAME]"`
// (streamable HTTP; docs/adapters.md "MCP servers as capabilities"): an MCP server's spec, a stdio
// server started in `cwd`. Returns false for any other --adapter value (a process); sets `error`
// when the value is an MCP server written wrongly.
bool mcpAdapterSpec(const std::string& value, const std::string& cwd, AdapterSpec& spec, std::string& error) {
    if (!value.starts_with("mcp:") && !value.starts_with("mcp.") && !value.starts_with("mcp+")) return false;
    spec.kind = AdapterSpec::Kind::Mcp;
    std::size_t end = value.find_first_of(":+");
    if (value.starts_with("mcp.")) {
        spec.scope = value.substr(4, end == std::string::npos ? std::string::npos : end - 4);
        if (end == std::string::npos || !isCapabilityNamespace(spec.scope)) {
            error = "write an MCP server for one namespace as mcp.NS:\"CMD ARGS\" or mcp.NS+https://URL, NS being the "
                    "namespace of its capabilities (e.g. mcp.files:\"npx @modelcontextprotocol/server-filesystem /data\")";
            return true;
        }
    }
    std::string rest = value.substr(end + 1);
    if (value[end] == ':') {
        spec.command = rest;
        spec.workingDir = cwd;
        if (spec.command.find_first_not_of(" \t") == std::string::npos)
            error = "mcp: needs the command that starts the server, e.g. mcp:\"npx @modelcontextprotocol/server-memory\"";
        return true;
    }
    // Streamable HTTP: the URL, then settings as NAME=VALUE words.
    std::vector<std::string> words;
    for (std::size_t at = 0; at < rest.size();) {
        std::size_t start = rest.find_first_not_of(" \t", at);
        if (start == std::string::npos) break;
        std::size_t stop = rest.find_first_of(" \t", start);
        words.push_back(rest.substr(start, stop == std::string::npos ? std::string::npos : stop - start));
        at = stop == std::string::npos ? rest.size() : stop;
    }
    if (words.empty() || !checkMcpUrl(words[0], error)) {
        if (error.empty()) error = "an MCP server's URL starts with http:// or https://";
        error = fmt::format("mcp+URL: {}, as in \"mcp+https://mcp.example.com/mcp token_env=EXAMPLE_TOKEN\"", error);
        return true;
    }
    spec.url = words[0];
    for (std::size_t i = 1; i < words.size(); ++i) {
        const std::string& word = words[i];
        std::string name = word.starts_with("token_env=") ? word.substr(10) : std::string();
        if (!environmentVariableName(name)) {
            error = fmt::format("after an MCP server's URL only token_env=NAME may follow (NAME: the environment "
                                "variable that holds its bearer token), not '{}'",
                                firstCodePoints(word, 40));
            return true;
        }
        spec.tokenEnv = name;
    }
    return true;
}

// `--adapter "openapi[.NS]:SPEC [base_url=URL] [auth.SCHEME=NAME]..."` (docs/adapters.md "OpenAPI
// services as capabilities"): an OpenAPI service's spec, its document made absolute against `cwd`
// so a resume from elsewhere finds it. The words are split as a command line is, so a document
// whose path has spaces is quoted. Returns false for any other --adapter value; sets `error` when
// the value is an OpenAPI service written wrongly.
bool openApiAdapterSpec(const std::string& value, const std::string& cwd, AdapterSpec& spec, std::string& error) {
    if (!value.starts_with("openapi:") && !value.starts_with("openapi.")) return false;
    spec.kind = AdapterSpec::Kind::OpenApi;
    std::size_t colon = value.find(':');
    if (value.starts_with("openapi.")) {
        spec.scope = value.substr(8, colon == std::string::npos ? std::string::npos : colon - 8);
        if (colon == std::string::npos || !isCapabilityNamespace(spec.scope)) {
            error = "write an OpenAPI service for one namespace as openapi.NS:SPEC, NS being the namespace of its "
                    "capabilities (e.g. openapi.pets:petstore.yaml)";
            return true;
        }
    }
    std::vector<std::string> words;
    if (!splitCommand(value.substr(colon + 1), words, error) || words.empty()) {
        if (error.empty()) error = "openapi: needs the service's OpenAPI document, e.g. openapi:petstore.yaml";
        else error = "openapi: " + error;
        return true;
    }
    spec.path = (std::filesystem::path(cwd) / words[0]).lexically_normal().string();
    for (std::size_t i = 1; i < words.size(); ++i) {
        const std::string& word = words[i];
        std::size_t eq = word.find('=');
        std::string key = word.substr(0, eq), setting = eq == std::string::npos ? "" : word.substr(eq + 1);
        if (key == "base_url" && !setting.empty()) {
            spec.url = setting;
        } else if (key.starts_with("auth.") && key.size() > 5 && environmentVariableName(setting)) {
            spec.authEnv[key.substr(5)] = setting;
        } else {
            error = fmt::format("after an OpenAPI document only base_url=URL and auth.SCHEME=NAME may follow (SCHEME: "
                                "one of the document's security schemes; NAME: the environment variable that holds "
                                "its credential), not '{}'",
                                firstCodePoints(word, 40));
            return true;
        }
    }
    return true;
}

// The adapters the flags and the policy choose (docs/adapters.md "Which adapters a run uses"): first
// a model adapter for each model the program calls that the policy's [models."NAME"] or a --model
// flag configures (docs/models.md), then the MCP servers and OpenAPI services (--adapter mcp:CMD,
// mcp+URL or openapi:SPEC, any number, in the order of their flags; --base-url completes the one
// OpenAPI service without a base_url=), then the one adapter that serves everything else —
// --adapter CMD, --live, or fixtures (default fixtures/run.json next to the program). A program
// without host-call sites, whose every call goes to a configured model, or that has MCP servers or
// OpenAPI services, runs without a
// fixtures file (a call nothing serves then fails operationally). An --adapter process or stdio
// server starts in the current directory, which is recorded. `recorded` (a resume without adapter
// flags: the run's recorded adapters, process directory included) replaces the flags. Prints the
// problem and returns false on a usage error.
bool runAdapterSpecs(std::string_view tool, const Args& args, const ProgramSource& source, const Policy* policy,
                     const std::vector<AdapterSpec>* recorded, std::vector<AdapterSpec>& specs) {
    if (recorded) {
        specs = *recorded;
        return true;
    }
    std::error_code cwdError;
    const std::string cwd = std::filesystem::current_path(cwdError).string();
    std::vector<AdapterSpec> servers;
    std::vector<const std::string*> processes;
    for (const auto& [flag, value] : args.options) {
        if (flag != "--adapter") continue;
        AdapterSpec server;
        std::string error;
        if (!mcpAdapterSpec(value, cwd, server, error) && !openApiAdapterSpec(value, cwd, server, error)) {
            processes.push_back(&value);
        } else if (!error.empty()) {
            fmt::print(errOut(), "{}: error: --adapter {}\n", tool, error);
            return false;
        } else {
            servers.push_back(std::move(server));
        }
    }
    // --base-url: where the one OpenAPI service without a base_url= of its own is.
    if (const std::string* baseUrl = args.value("--base-url")) {
        std::vector<AdapterSpec*> open;
        for (AdapterSpec& server : servers)
            if (server.kind == AdapterSpec::Kind::OpenApi && server.url.empty()) open.push_back(&server);
        if (open.size() != 1) {
            fmt::print(errOut(), "{}: error: --base-url is for an --adapter openapi: service{}\n", tool,
                       open.empty() ? ", and this run has none without a base_url= of its own"
                                    : "; this run has several: give each its own base_url=URL");
            return false;
        }
        open.front()->url = *baseUrl;
    }
    if (processes.size() > 1) {
        fmt::print(errOut(),
                   "{}: error: one --adapter process per run; more --adapter flags must be MCP servers (mcp:CMD) or "
                   "OpenAPI services (openapi:SPEC)\n",
                   tool);
        return false;
    }
    int chosen = static_cast<int>(processes.size()) + (args.has("--live") ? 1 : 0) + (args.value("--fixtures") ? 1 : 0);
    if (chosen > 1) {
        fmt::print(errOut(), "{}: error: choose one of --fixtures, --live and --adapter\n", tool);
        return false;
    }
    specs.clear();
    // The configured models the program calls: --model flags over the policy's tables.
    std::map<std::string, ModelConfig> models;
    if (policy) models = policy->models;
    for (const std::string& value : args.values("--model")) {
        std::string error;
        std::optional<ModelConfig> config = modelConfigFromFlag(value, error);
        if (!config) {
            fmt::print(errOut(), "{}: error: --model {}: {}\n", tool, value, error);
            fmt::print(errOut(), "  hint: --model NAME=PROVIDER:MODEL[@BASE_URL], e.g. --model llm=openai:gpt-4o-mini\n");
            return false;
        }
        models[config->name] = std::move(*config);
    }
    const Module& module = source.program->module();
    bool everyCallServed = true;
    std::set<std::string> used;
    for (const Site& site : module.sites) {
        bool served = site.kind != SiteKind::Capability && models.count(site.resource);
        everyCallServed = everyCallServed && served;
        if (served && used.insert(site.resource).second) {
            AdapterSpec spec;
            spec.kind = AdapterSpec::Kind::Model;
            spec.model = models[site.resource];
            specs.push_back(std::move(spec));
        }
    }

    const bool haveServers = !servers.empty();
    for (AdapterSpec& server : servers) specs.push_back(std::move(server));

    std::filesystem::path programDir = std::filesystem::absolute(source.file).lexically_normal().parent_path();
    AdapterSpec spec;
    if (!processes.empty()) {
        spec.kind = AdapterSpec::Kind::Process;
        spec.command = *processes.front();
        spec.workingDir = cwd;
    } else if (args.has("--live")) {
        spec.kind = AdapterSpec::Kind::Live;
        spec.path = programDir.string();
    } else {
        std::string path = args.value("--fixtures") ? *args.value("--fixtures") : (programDir / "fixtures" / "run.json").string();
        std::error_code ec;
        if (std::filesystem::exists(path, ec)) {
            spec.kind = AdapterSpec::Kind::Fixtures;
            spec.path = path;
        } else if (!args.value("--fixtures") && (everyCallServed || haveServers)) {
            // Nothing left to perform (the models serve every call, or there is none), or MCP servers
            // perform the capability calls: no fixtures needed, and a call nothing serves fails
            // operationally.
            if (specs.empty()) specs.push_back(AdapterSpec{});
            return true;
        } else {
            fmt::print(errOut(), "error: no fixtures at {}; pass --fixtures or --live\n", path);
            return false;
        }
    }
    specs.push_back(std::move(spec));
    return true;
}

// Opens the specs, printing why one cannot be opened (under the flag that chose it). MCP servers
// take the policy's [mcp] settings and append their stderr to `mcpLog`; fixture files are checked
// against the host interface.
std::unique_ptr<Adapter> openRunAdapters(std::string_view tool, const std::vector<AdapterSpec>& specs,
                                         const HostModel& host, const Policy* policy, const std::string& mcpLog) {
    AdapterOpenError error;
    AdapterOpenOptions options;
    options.liveShim = liveShimPath();
    options.host = &host;
    options.mcp = policy ? &policy->mcp : nullptr;
    options.mcpStderrLog = mcpLog;
    options.clientVersion = std::string(remitVersion());
    options.yaml = parseYamlAsJson;
    options.host = &host;
    std::unique_ptr<Adapter> adapter = openAdapters(specs, options, error);
    if (adapter) return adapter;
    switch (specs[error.index].kind) {
        case AdapterSpec::Kind::Process: fmt::print(errOut(), "{}: error: --adapter: {}\n", tool, error.message); break;
        case AdapterSpec::Kind::Mcp: fmt::print(errOut(), "{}: error: --adapter mcp: {}\n", tool, error.message); break;
        case AdapterSpec::Kind::OpenApi:
            fmt::print(errOut(), "{}: error: --adapter openapi: {}\n", tool, error.message);
            break;
        case AdapterSpec::Kind::Live: fmt::print(errOut(), "{}: error: --live: {}\n", tool, error.message); break;
        case AdapterSpec::Kind::Model:
            fmt::print(errOut(), "{}: error: {}{}\n", tool, error.message,
                       specs[error.index].model.span.line ? "" : " (configured by --model)");
            break;
        default: fmt::print(errOut(), "{}: error: {}\n", tool, error.message); break;
    }
    if (!error.hint.empty()) fmt::print(errOut(), "  hint: {}\n", error.hint);
    return nullptr;
}

// Loads what a run needs (RunSetup) from PROGRAM: a .rmt checked against the host and policy and
// compiled in memory, or a verified .rbc with the host it was built for; then the limits (the
// defaults, the policy's [limits], the flags). `ignorePolicy` (replay) runs under allow-all.
// Returns kOk, or the exit code after printing why not.
int loadRunSetup(std::string_view tool, const Args& args, const std::string& file, bool ignorePolicy, RunSetup& setup) {
    bool json = args.has("--json");
    bool allowAll = ignorePolicy || args.has("--allow-all");
    ProgramSource& source = setup.source;
    source.file = file;
    int exit = kOk;
    auto rejected = [&](const DiagnosticList& diags) {
        if (json) {
            Json d = Json::array();
            for (const Diagnostic& x : diags.items()) d.push_back(toJson(x));
            fmt::print(stdOut(), "{}\n", Json{{"status", "rejected"}, {"diagnostics", d}}.dump(2));
        } else {
            printDiagnostics(diags, source.checked ? &*source.checked : nullptr);
            fmt::print(errOut(), "refusing to run a program with errors\n");
        }
        return kFailure;
    };
    std::optional<std::string> policyPath;
    if (const std::string* p = args.value("--policy"); p && !ignorePolicy) policyPath = *p;

    const std::string* trustFlag = args.value("--trust");
    if (!isBytecodePath(source.file)) {
        if (trustFlag) {
            fmt::print(errOut(), "{}: error: --trust checks the signatures of .rbc artifacts, and {} is source\n", tool,
                       source.file);
            fmt::print(errOut(), "  hint: build and sign it (`remitc build {} --sign KEY.pem`), or drop --trust\n",
                       source.file);
            return kUsage;
        }
        CheckOptions options;
        if (const std::string* host = args.value("--host")) options.hostPath = *host;
        options.policyPath = policyPath;
        options.checkPolicy = !allowAll;
        options.strictFlows = args.has("--strict-flows");
        source.checked = checkProgramFile(source.file, options);
        CheckOutcome& outcome = *source.checked;
        if (outcome.ioError) {
            fmt::print(errOut(), "{}: error: {}\n", tool, outcome.ioError->message);
            return kUsage;
        }
        if (!outcome.ok() || !outcome.checked) return rejected(outcome.diags);
        if (!json) printDiagnostics(outcome.diags, &outcome);  // warnings
        if (!allowAll && !outcome.policy) {
            fmt::print(errOut(), "error: no policy.toml next to the program; pass --policy or --allow-all\n");
            return kUsage;
        }
        setup.policy = allowAll ? Policy::allowAllPolicy() : *outcome.policy;
        setup.host = outcome.checked->host;
        setup.strictFlows = outcome.checked->manifest.strictFlows;
        DiagnosticList buildDiags;
        source.program = buildChecked(outcome, buildDiags);
        if (!source.program) return rejected(buildDiags);  // --json prints JSON for this too
    } else {
        // The policy before the file: its [artifacts] trust decides whether the file is read at all.
        std::string policyText;
        if (!allowAll) {
            if (!policyPath) policyPath = findPolicy(source.file);
            if (!policyPath) {
                fmt::print(errOut(), "error: no policy.toml next to the program; pass --policy or --allow-all\n");
                return kUsage;
            }
            if (auto err = readSource(*policyPath, size_t(1) << 20, policyText)) {
                fmt::print(errOut(), "{}: error: {}\n", tool, err->message);
                return kUsage;
            }
        }
        // The host interface the artifact runs against (it must be the one it was built for), read
        // before the policy is parsed so that the policy's problems, E0504 and E0505, come in one pass.
        std::optional<std::string> hostPath =
            args.value("--host") ? std::optional(*args.value("--host")) : findHostInterface(source.file);
        if (!hostPath) {
            fmt::print(errOut(), "{}: error: no host.rmti found next to {} or in a parent directory\n", tool,
                       source.file);
            fmt::print(errOut(), "  hint: pass --host PATH to name the host interface\n");
            return kUsage;
        }
        std::string hostText;
        if (auto err = readSource(*hostPath, size_t(1) << 20, hostText)) {
            fmt::print(errOut(), "{}: error: {}\n", tool, err->message);
            return kUsage;
        }
        DiagnosticList diags;
        SourceFile hostSource(*hostPath, hostText);
        auto hostAst = parseHost(hostSource, diags);
        if (hostAst && !diags.hasErrors()) resolveHost(*hostAst, *hostPath, setup.host, diags);
        if (diags.hasErrors()) return rejected(diags);
        if (!allowAll) {
            std::vector<std::string> hostResources = setup.host.resourceNames();
            std::vector<std::string> hostModels = setup.host.modelNames();
            setup.policy = parsePolicy(*policyPath, policyText, diags, &hostResources, &hostModels);
            if (diags.hasErrors()) return rejected(diags);
        } else {
            setup.policy = Policy::allowAllPolicy();
        }
        // --trust replaces the policy's directory, as the limit flags replace its [limits].
        std::optional<TrustStore> trust;
        if (trustFlag || setup.policy->trustDir) {
            trust.emplace();
            bool loaded = trustFlag ? loadTrustStore(tool, *trustFlag, "--trust", *trust)
                                    : loadTrustStore(tool, *setup.policy->trustDir,
                                                     fmt::format("[artifacts] trust in {}", *policyPath), *trust);
            if (!loaded) return kUsage;
        }
        if (!loadBytecodeFile(tool, source.file, trust ? &*trust : nullptr, source, exit)) return exit;
        const Module& module = source.program->module();
        if (setup.host.hash != module.hostHash) {
            auto [built, here] = distinctPrefixes(module.hostHash, setup.host.hash);
            fmt::print(errOut(),
                       "{}: error: {} was built for another host interface than {} (host hash {} in the "
                       "artifact, {} here)\n"
                       "  hint: rebuild it with `remitc build` against this host, or pass --host\n",
                       tool, source.file, *hostPath, built, here);
            return kFailure;
        }
        if (!allowAll) {
            // A forged manifest gains nothing (the broker enforces every rule again), but an honest
            // one that exceeds the policy is refused before anything runs.
            std::optional<Manifest> manifest = manifestFromJson(nlohmann::json::parse(module.manifestJson));
            if (setup.policy && manifest && !diags.hasErrors())
                checkManifestAgainstPolicy(*manifest, *setup.policy, source.file, Span{}, diags);
            if (diags.hasErrors()) return rejected(diags);
        }
        // Strict flows live in the bytecode (the code generator instruments guarded exits), so an
        // artifact built without them cannot be run as if it had them.
        std::optional<Manifest> manifest = manifestFromJson(nlohmann::json::parse(module.manifestJson, nullptr, false));
        setup.strictFlows = manifest && manifest->strictFlows;
        bool wanted = args.has("--strict-flows") || (setup.policy && setup.policy->strictFlows);
        if (wanted && !setup.strictFlows) {
            fmt::print(errOut(),
                       "{}: error: {} was built without strict flows, but {} asks for them\n"
                       "  hint: rebuild it from its source with `remitc build --strict-flows`\n",
                       tool, source.file, args.has("--strict-flows") ? "--strict-flows" : "the policy's [flows] strict");
            return kFailure;
        }
    }
    if (source.program->entry() == kNoType) {
        fmt::print(errOut(), "{}: error: {} has no main function to run\n", tool, source.file);
        return kUsage;
    }

    // The flags are one more layer over the policy's [limits] (docs/policy.md "[limits]").
    RunLimits flags;
    try {
        if (auto n = parseLimitFlag(tool, args, "--max-steps")) flags.maxSteps = static_cast<int64_t>(*n);
        if (auto n = parseLimitFlag(tool, args, "--max-memory")) {
            if (*n > kMaxMemoryBudget) {
                fmt::print(errOut(), "{}: error: --max-memory {} is more than the {} bytes (32 GiB) a run can have\n", tool,
                           *n, kMaxMemoryBudget);
                return kUsage;
            }
            flags.maxMemory = static_cast<int64_t>(*n);
        }
        if (auto n = parseLimitFlag(tool, args, "--max-wall-ms")) flags.maxWallMs = static_cast<int64_t>(*n);
    } catch (const std::invalid_argument&) {
        return kUsage;
    }
    setup.limits = overlay(overlay(VmLimits{}, setup.policy ? setup.policy->limits : RunLimits{}), flags);
    return kOk;
}

// Where a run goes: a worker runs a submitted run under the id `submit` gave it, holding its lock,
// with the adapters the submission recorded.
struct RunPlacement {
    std::string runId;  // empty: a new id
    bool held = false;  // the caller holds the run family's lock
    std::optional<std::vector<AdapterSpec>> adapters;
};

// What makes `resume` differ from `run`: the plan from the old trace and the run it continues.
struct Continuation {
    const ReplayPlan* plan = nullptr;
    std::string resumedFrom;
    std::string idempotencyRoot;
    // The recorded adapters, when the resume reuses them (no adapter flags).
    std::optional<std::vector<AdapterSpec>> adapters;
};

// --interactive: shows the request on stderr and reads y/N from the terminal (docs/broker.md "Approvals").
bool askAtTerminal(const PendingApproval& pending) {
    Json request = {{"resource", pending.resource}, {"args", pending.args}, {"reasons", pending.reasons}};
    fmt::print(errOut(), "\n=== approval required ===\n{}\ndigest {}\napprove this exact call? [y/N] ",
               prettyJson(request), pending.digest);
    std::fflush(errOut());
    std::string answer;
    for (int c = std::getchar(); c != EOF && c != '\n'; c = std::getchar())
        if (answer.size() < 16) answer += static_cast<char>(std::tolower(c));
    answer.erase(0, answer.find_first_not_of(" \t\r"));
    answer.erase(answer.find_last_not_of(" \t\r") + 1);
    return answer == "y" || answer == "yes";
}

// Runs main through the broker and prints the outcome as `run` does (docs/compatibility.md): the adapter the
// flags choose, approvals, the trace, the run lock, the envelopes and exit codes, with the records
// in `store`. `resume` passes the recorded inputs and its continuation; a worker, where the run
// goes (`placement`).
int executeRun(std::string_view tool, const Args& args, RunSetup& setup, const nlohmann::json& givenInputs,
               const Continuation* continuation, Store& store, const RunPlacement& placement = {}) {
    const ProgramSource& source = setup.source;
    const LoadedProgram& program = *source.program;
    const Module& module = program.module();
    bool json = args.has("--json");

    // The adapter, before anything runs: a bad flag or fixture file refuses the run (exit 2) and,
    // like every refusal before the start, writes no trace.
    std::vector<AdapterSpec> adapterSpecs;
    const std::vector<AdapterSpec>* recordedSpecs = continuation && continuation->adapters ? &*continuation->adapters
                                                    : placement.adapters                       ? &*placement.adapters
                                                                                               : nullptr;
    if (!runAdapterSpecs(tool, args, source, setup.policy ? &*setup.policy : nullptr, recordedSpecs, adapterSpecs))
        return kUsage;
    std::string runId = placement.runId.empty() ? newRunId() : placement.runId;
    // An MCP server's stderr goes to logs/ in the state directory; with a PostgreSQL store, to
    // logs/ of the local one (.remit or --state-dir) of the machine that runs it (docs/fleet.md).
    std::filesystem::path logDir = store.kind() == Store::Kind::Files ? static_cast<FileStore&>(store).stateDir()
                                                                       : stateDirOf(args);
    std::unique_ptr<Adapter> adapter = openRunAdapters(tool, adapterSpecs, setup.host, setup.policy ? &*setup.policy : nullptr,
                                                       mcpLogPath(logDir, runId).string());
    if (!adapter) return kUsage;
    std::string mode = adapterMode(adapterSpecs);

    bool approveAll = args.has("--approve-all");
    ApprovalStore& approvals = store.approvals();
    if (!approveAll) {
        std::string error;
        if (!approvals.usable(error)) {
            fmt::print(errOut(), "{}: error: {}\n", tool, error);
            return kUsage;
        }
    }

    Run run(source.program, setup.limits);
    std::vector<Value> inputs;  // after `run`: values go before the heap that holds them
    if (!inputValues(tool, program, setup.host, run.heap(), givenInputs, inputs)) return kUsage;
    std::string root = continuation ? continuation->idempotencyRoot : runId;
    std::string tracePath = store.traceName(runId);
    std::unique_ptr<TraceWriter> trace;  // the store's, once the run's record has begun
    std::unique_ptr<RunHold> hold;
    // Every run writes its trace and prints its `trace:` line, a program without call sites too
    // (as the prototype does): its run_start and run_end say what ran, on what inputs, and how it ended.
    if (std::string error; !continuation && !placement.held && !(hold = store.holdRun(root, error))) {
        fmt::print(errOut(), "{}: error: {}\n", tool, error);
        return kUsage;
    }
    // The store could not keep this run's records: exit 2, saying what happened to the run and how
    // to go on. Only the store is named (it is the one thing to fix).
    auto stateFailure = [&](const std::string& what, bool started) {
        commandOutput().storeFailed = true;
        fmt::print(errOut(), "{}: error: cannot keep this run's records in {}: {}\n", tool, store.describe(), what);
        std::string fix = store.kind() == Store::Kind::Files
                              ? fmt::format("make room in (or fix the permissions of) {}",
                                            static_cast<FileStore&>(store).stateDir().string())
                              : "once the database is reachable (and has room) again";
        if (started)
            fmt::print(errOut(), "  hint: {}, then continue the run without repeating its effects: {} resume {}{}\n", fix,
                       tool, runId, stateFlags(args));
        else
            fmt::print(errOut(), "  hint: {}, then run it again; nothing was performed\n", fix);
        return kUsage;
    };
    RunStart recorded;
    recorded.runId = runId;
    recorded.idempotencyRoot = root;
    recorded.module = &module;
    // Absolute, so a resume or `approvals show` typed in another directory finds the program.
    std::error_code absoluteError;
    recorded.path = std::filesystem::absolute(source.file, absoluteError).lexically_normal().string();
    if (absoluteError) recorded.path = source.file;
    recorded.policy = setup.policy ? &*setup.policy : nullptr;
    recorded.inputs = givenInputs;
    recorded.mode = mode;
    recorded.strictFlows = setup.strictFlows;
    recorded.adapters = adapterSpecs;
    if (source.signature) recorded.signer = signerName(source.signature->publicKey);
    recorded.trustedKey = source.trustedKey;
    if (continuation) {
        recorded.replaying = continuation->plan->calls.size();
        recorded.resumedFrom = continuation->resumedFrom;
        if (!continuation->plan->inFlight.empty()) recorded.inFlight = inFlightJson(continuation->plan->inFlight);
    }
    // Calls answered by fixtures (or none at all) have no effect in the world: such a trace is
    // written without waiting for the disk (docs/broker.md, "Durability"), in either store. A run
    // with any other adapter (--live, --adapter, and whatever kind comes next) keeps every sync.
    bool synced = !std::all_of(adapterSpecs.begin(), adapterSpecs.end(), [](const AdapterSpec& spec) {
        return spec.kind == AdapterSpec::Kind::Fixtures || spec.kind == AdapterSpec::Kind::None;
    });
    if (std::optional<std::string> problem = beginRunRecord(store, recorded, trace, synced))
        return stateFailure(*problem + "; the run did not start", false);
    if (approveAll)
        fmt::print(errOut(), "warning: --approve-all grants every approval (development and fixtures only)\n");
    // Only where there is something to grant: a pure program's output stays its own.
    if (args.has("--allow-all") && !module.sites.empty())
        fmt::print(errOut(), "warning: --allow-all grants every host resource with no limits (development only)\n");

    BrokerOptions options = brokerOptionsFor(module, setup.host, *setup.policy, runId, setup.strictFlows, root);
    options.adapterKind = adapter->kind();
    options.trace = trace.get();
    options.approvals = approveAll ? nullptr : &approvals;
    options.ledger = &store.ledger();
    options.approveAll = approveAll;
    options.replay = continuation ? continuation->plan : nullptr;
    // --interactive: a person at the terminal may approve a call the store has no approval for.
    Approver approver;
    if (args.has("--interactive") && !approveAll && ::isatty(STDIN_FILENO))
        approver = [](const PendingApproval& p) -> std::optional<std::string> {
            return askAtTerminal(p) ? std::optional<std::string>("interactive") : std::nullopt;
        };
    Broker broker(options, run);
    run.start(program.entry(), std::move(inputs));
    // --progress (on by default at a terminal): each call on stderr as it starts and ends.
    bool progress = args.has("--progress") || (!args.has("--no-progress") && isTerminal(Stream::Err));
    std::optional<ProgressPrinter> printer;
    if (progress) printer.emplace(broker);
    RunStatus status = driveWith(run, broker, adapter.get(), approver, nullptr, printer ? &*printer : nullptr);

    // Stopped by the broker (nothing was dispatched after the failure), or the trace failed on the
    // way: no run_end, so a resume continues the run exactly where it stopped.
    if (!broker.ioError().empty()) return stateFailure(broker.ioError(), true);
    if (!trace->ok())
        return stateFailure(fmt::format("the trace could not be written ({})", trace->failure()), true);
    // A call that did not reach the adapter: nothing was sent, the run stopped resumable.
    if (const std::optional<Broker::NotDelivered>& lost = broker.notDelivered()) {
        fmt::print(errOut(), "{}: error: the call to '{}' at {} did not reach the adapter: {}\n", tool, lost->resource,
                   lost->site, lost->message);
        fmt::print(errOut(), "  nothing was sent{}; the run stopped before that call\n",
                   lost->approvedBy.empty() ? ""
                                            : fmt::format(", and the approval by {} is kept for it", lost->approvedBy));
        fmt::print(errOut(),
                   "  hint: fix the adapter (or give another with --adapter CMD), then continue the run: {} resume "
                   "{}{}\n",
                   tool, runId, stateFlags(args));
        return kUsage;
    }
    auto endFailure = [&] {
        return stateFailure(fmt::format("the end of the run could not be recorded ({})", trace->failure()), true);
    };
    auto traceLine = [&] {
        fmt::print(errOut(), "trace: {}  (spent ${}, {} call(s), mode {})\n", tracePath, formatUsd(broker.spent()),
                   broker.calls(), mode);
    };
    if (status == RunStatus::Failed && run.failure().error.code == DiagCode::R0302 && broker.pending()) {
        const PendingApproval& pending = *broker.pending();
        if (!trace->emit(runEndPaused(runId, pending.digest)))
            return endFailure();
        if (json) {
            Json reasons(pending.reasons);
            Json envelope = {{"status", "approval_required"},
                             {"run_id", runId},
                             {"pending",
                              {{"digest", pending.digest},
                               {"site", pending.site},
                               {"resource", pending.resource},
                               {"args", pending.args},
                               {"reasons", reasons}}}};
            fmt::print(stdOut(), "{}\n", prettyJson(envelope));
        } else {
            printRuntimeFailure(source, run.failure());
            std::string argsText = dumpJson(pending.args, JsonTextStyle{false, false, -1, ", ", ": "});
            fmt::print(errOut(), "  args: {}\n", firstCodePoints(argsText, 400));
            fmt::print(errOut(),
                       "  to approve this exact call: {} approve {}{}\n"
                       "  then continue without repeating completed effects: {} resume {}{}\n",
                       tool, pending.digest, stateFlags(args), tool, runId, stateFlags(args));
        }
        traceLine();
        return kPaused;
    }
    if (status == RunStatus::Failed) {
        const RunFailure& f = run.failure();
        if (!trace->emit(runEndFailed(runId, f)))
            return endFailure();
        if (json)
            fmt::print(stdOut(), "{}\n", Json{{"status", "failed"}, {"run_id", runId}, {"error", failureJson(f)}}.dump(2));
        else
            printRuntimeFailure(source, f);
        traceLine();
        return kFailure;
    }
    RunResult result = resultOf(run);
    if (!trace->emit(runEndCompleted(runId, result, broker.spent())))
        return endFailure();
    if (json) {
        Json envelope = {{"status", "completed"},       {"run_id", runId},
                         {"result", result.value},      {"result_tags", result.tags},
                         {"spent_usd", broker.spent()}, {"calls", broker.calls()}};
        fmt::print(stdOut(), "{}\n", prettyJson(envelope));
    } else {
        fmt::print(stdOut(), "{}\n", prettyJson(result.value));
    }
    traceLine();
    return kOk;
}

// A recorded run read for `resume` or `replay`. Prints the problem and returns false (exit 2).
bool readRecordedRun(std::string_view tool, Store& store, const std::string& run, ReplayPurpose purpose,
                     ReplayPlan& plan) {
    std::string path;
    TraceFile trace;
    if (!readRunTrace(tool, store, run, TraceCheck::Verify, trace, path)) return false;
    if (!trace.error.empty()) {
        fmt::print(errOut(), "{}: error: {}\n", tool, trace.error);
        if (trace.unchained)
            fmt::print(errOut(), "  hint: run the program again; `{} trace {}` still shows the old run\n", tool, run);
        else
            fmt::print(errOut(), "  hint: a trace is written only by remitvm; restore the original file\n");
        return false;
    }
    if (!trace.warning.empty()) fmt::print(errOut(), "{}: warning: {}\n", tool, trace.warning);
    std::string error;
    plan = planFromTrace(trace, path, purpose, error);
    if (!error.empty()) {
        fmt::print(errOut(), "{}: error: {}\n", tool, error);
        return false;
    }
    return true;
}

// The plan a resume of `run` continues from: its own, or — when `run` is a resume that stopped
// before it had replayed everything it set out to — that of the run it resumed (whose record then
// holds everything `run`'s does), and so on up the chain. Prints the problem and returns false.
bool readResumePlan(std::string_view tool, Store& store, const std::string& run, const std::string& root,
                    ReplayPlan& plan) {
    if (!readRecordedRun(tool, store, run, ReplayPurpose::Resume, plan)) return false;
    for (size_t hops = 0; plan.replayUnfinished; ++hops) {
        std::string parent = stringField(plan.start, "resumed_from");
        if (hops > 10000) {
            fmt::print(errOut(), "{}: error: the chain of resumes of run {} does not end\n", tool, run);
            return false;
        }
        if (!readRecordedRun(tool, store, parent, ReplayPurpose::Resume, plan)) return false;
    }
    if (std::string r = stringField(plan.start, "idempotency_root"); !root.empty() && r != root) {
        fmt::print(errOut(), "{}: error: {} belongs to another run (idempotency root {}, not {})\n", tool,
                   plan.tracePath, r, root);
        return false;
    }
    return true;
}

}  // namespace

int runCommand(std::string_view tool, Args& args) {
    if (args.positional.size() != 1) {
        fmt::print(errOut(), "{}: error: run needs exactly one PROGRAM (.rmt or .rbc)\n", tool);
        return kUsage;
    }
    std::unique_ptr<Store> store = openStoreFor(tool, args);
    if (!store) return kUsage;
    RunSetup setup;
    if (int exit = loadRunSetup(tool, args, args.positional[0], false, setup); exit != kOk) return exit;
    nlohmann::json given;
    if (!collectInputs(tool, args, *setup.source.program, given)) return kUsage;
    return executeRun(tool, args, setup, given, nullptr, *store);
}

namespace {

// Continues the recorded run `run` (a run id in `store`, or a trace file) as `resume` does; with
// `held`, the caller already holds the run family's lock (a worker's claim).
int continueRun(std::string_view tool, Args& args, Store& store, const std::string& run, bool held) {
    ReplayPlan plan;
    if (!readRecordedRun(tool, store, run, ReplayPurpose::Resume, plan)) return kUsage;
    std::string root = stringField(plan.start, "idempotency_root");
    if (root.empty()) root = stringField(plan.start, "run_id");

    // One process at a time continues a run: the lock is taken before the newest trace is chosen.
    std::unique_ptr<RunHold> hold;
    if (std::string error; !held && !(hold = store.holdRun(root, error))) {
        fmt::print(errOut(), "{}: error: cannot resume: {}\n", tool, error);
        fmt::print(errOut(), "  hint: wait for it to finish, then resume again\n");
        return kFailure;
    }
    std::string recordedRun = plan.start["run_id"].get<std::string>();
    StateProblem problem;
    std::optional<std::string> found = newestResumeOf(store, recordedRun, root, problem);
    if (!found) {
        fmt::print(errOut(), "{}: error: {}\n  hint: {}\n", tool, problem.message, problem.hint);
        return kUsage;
    }
    std::string newest = *found;
    if (newest != recordedRun)
        fmt::print(errOut(), "note: run {} was resumed as {}; continuing from {}\n", recordedRun, newest, newest);
    if (newest != recordedRun || plan.replayUnfinished) {
        if (!readResumePlan(tool, store, newest, root, plan)) return kUsage;
        recordedRun = newest;
    }

    // The program: --file, else the path the run recorded.
    std::string file = args.value("--file") ? *args.value("--file") : stringField(plan.start, "path");
    if (file.empty()) {
        fmt::print(errOut(), "{}: error: the trace does not name its program; pass --file PROG\n", tool);
        return kUsage;
    }
    // Without adapter flags, the recorded adapters: the `adapters` a run records, or for a trace
    // written before they were, its mode (and for an adapter process, its command and directory).
    std::optional<std::vector<AdapterSpec>> recordedAdapters;
    if (!args.value("--fixtures") && !args.has("--live") && !args.value("--adapter") && !args.value("--model")) {
        std::string mode = stringField(plan.start, "mode");
        if (plan.start.contains("adapters")) {
            std::string error;
            recordedAdapters = adapterSpecsFromJson(plan.start["adapters"], error);
            if (!recordedAdapters) {
                fmt::print(errOut(), "{}: error: {}: run_start's adapters cannot be read: {}\n", tool, plan.tracePath,
                           error);
                fmt::print(errOut(), "  hint: pass the adapter flags (--fixtures, --adapter or --live) to resume with\n");
                return kUsage;
            }
        } else if (mode.starts_with("fixtures:")) {
            AdapterSpec fixtures;
            fixtures.kind = AdapterSpec::Kind::Fixtures;
            fixtures.path = mode.substr(9);
            recordedAdapters = {fixtures};
        } else if (mode == "live") {
            args.options.push_back({"--live", ""});
        } else if (mode == "adapter" && !stringField(plan.start, "adapter_command").empty()) {
            AdapterSpec process;
            process.kind = AdapterSpec::Kind::Process;
            process.command = stringField(plan.start, "adapter_command");
            process.workingDir = stringField(plan.start, "adapter_cwd");
            recordedAdapters = {process};
        }
    }
    // A run made in strict-flows mode resumes in it.
    if (plan.start.contains("strict_flows") && plan.start["strict_flows"] == true && !args.has("--strict-flows"))
        args.options.push_back({"--strict-flows", ""});
    RunSetup setup;
    if (int exit = loadRunSetup(tool, args, file, false, setup); exit != kOk) return exit;
    const Module& module = setup.source.program->module();
    if (module.programHash != plan.start["program_hash"].get<std::string>()) {
        fmt::print(errOut(), "error: the program changed since this run; recorded results and approvals no longer apply\n");
        fmt::print(errOut(), "  hint: start it afresh with `{} run {}`, or restore the program the run was made with\n",
                   tool, file);
        return kFailure;
    }
    if (!stringField(plan.start, "host_hash").empty() && stringField(plan.start, "host_hash") != module.hostHash) {
        fmt::print(errOut(), "error: the host interface changed since this run; recorded results may no longer fit it\n");
        fmt::print(errOut(), "  hint: start the run afresh, or restore the host.rmti the run was made with\n");
        return kFailure;
    }
    if (!plan.inFlight.empty())
        fmt::print(errOut(),
                   "note: {} call(s) were dispatched but not recorded when run {} stopped; they go out again with "
                   "the same idempotency key, so an adapter that de-duplicates performs them once\n",
                   plan.inFlight.size(), recordedRun);
    Continuation continuation{&plan, recordedRun, root, std::move(recordedAdapters)};
    return executeRun(tool, args, setup, plan.start["inputs"], &continuation, store, RunPlacement{"", true, std::nullopt});
}

}  // namespace

int resumeCommand(std::string_view tool, Args& args) {
    if (args.positional.size() != 1) {
        fmt::print(errOut(), "{}: error: resume needs exactly one RUN_ID (or trace path)\n", tool);
        return kUsage;
    }
    std::unique_ptr<Store> store = openStoreFor(tool, args);
    if (!store) return kUsage;
    return continueRun(tool, args, *store, args.positional[0], false);
}

int runSubmitted(std::string_view tool, Args& args, Store& store, const std::string& runId, const Json& submission,
                 bool traced) {
    if (traced) return continueRun(tool, args, store, runId, true);
    RunSetup setup;
    if (int exit = loadRunSetup(tool, args, args.positional[0], false, setup); exit != kOk) return exit;
    if (setup.source.program->module().programHash != stringField(submission, "program_hash")) {
        fmt::print(errOut(), "{}: error: {} changed since the run was submitted (its program hash is not the one "
                          "recorded)\n  hint: submit it again; every worker must see the program the run was "
                          "submitted with\n",
                   tool, args.positional[0]);
        return kFailure;
    }
    std::string error;
    std::optional<std::vector<AdapterSpec>> adapters =
        submission.contains("adapters") ? adapterSpecsFromJson(submission["adapters"], error) : std::nullopt;
    if (!adapters) {
        fmt::print(errOut(), "{}: error: the submission's adapters cannot be read: {}\n", tool, error);
        return kUsage;
    }
    RunPlacement placement{runId, true, std::move(adapters)};
    Json inputs = submission.is_object() && submission.contains("inputs") ? submission["inputs"] : Json::object();
    return executeRun(tool, args, setup, inputs, nullptr, store, placement);
}

namespace {

// The flags of `run` a submission records, so a worker loads the program as `run` would: each
// with a path value made absolute (a worker starts elsewhere). Adapter flags are recorded as
// specs, inputs as JSON, and the store is the worker's.
constexpr std::pair<const char*, bool> kSubmittedFlags[] = {
    {"--host", true},       {"--policy", true},       {"--trust", true},        {"--max-steps", false},
    {"--max-memory", false}, {"--max-wall-ms", false}, {"--allow-all", false},   {"--approve-all", false},
    {"--strict-flows", false}, {"--progress", false},     {"--no-progress", false}};

}  // namespace

int submitCommand(std::string_view tool, Args& args) {
    if (args.positional.size() != 1) {
        fmt::print(errOut(), "{}: error: submit needs exactly one PROGRAM (.rmt or .rbc)\n", tool);
        return kUsage;
    }
    std::unique_ptr<Store> opened = openStoreFor(tool, args);
    if (!opened) return kUsage;
    auto* store = dynamic_cast<PgStore*>(opened.get());
    if (!store) {
        fmt::print(errOut(), "{}: error: submit queues runs for workers that share a PostgreSQL store, and {} is a state "
                          "directory\n  hint: pass --store postgresql://… (or set REMIT_STORE); `{} run` runs a "
                          "program here\n",
                   tool, opened->describe(), tool);
        return kUsage;
    }
    // Everything a worker would refuse is refused now, with run's messages and exit codes: the
    // program against its host and policy, the inputs against main, the adapters.
    RunSetup setup;
    if (int exit = loadRunSetup(tool, args, args.positional[0], false, setup); exit != kOk) return exit;
    const LoadedProgram& program = *setup.source.program;
    nlohmann::json given;
    if (!collectInputs(tool, args, program, given)) return kUsage;
    {
        Run probe(setup.source.program, setup.limits);
        std::vector<Value> inputs;
        if (!inputValues(tool, program, setup.host, probe.heap(), given, inputs)) return kUsage;
    }
    std::vector<AdapterSpec> specs;
    if (!runAdapterSpecs(tool, args, setup.source, setup.policy ? &*setup.policy : nullptr, nullptr, specs)) return kUsage;
    for (AdapterSpec& spec : specs)
        if (!spec.path.empty()) spec.path = std::filesystem::absolute(spec.path).lexically_normal().string();
    // Every spec is opened as `run` opens it (an OpenAPI document read and checked against the host
    // interface), except that a model's API key belongs to the workers (it is never recorded, only
    // its variable's name): one unset here is noted, not refused. An MCP server is not started
    // here — starting one can have effects of its own — but by the worker that runs the run.
    // An OpenAPI service's credentials are the workers' too: one unset here is noted the same way.
    std::vector<AdapterSpec> checkable;
    auto unset = [](const std::string& variable) {
        const char* value = variable.empty() ? nullptr : std::getenv(variable.c_str());
        return !variable.empty() && (!value || !*value);
    };
    for (const AdapterSpec& spec : specs) {
        bool noted = false;
        if (spec.kind == AdapterSpec::Kind::Model && unset(spec.model.apiKeyEnv)) {
            fmt::print(errOut(), "note: model '{}': {} is not set here; every worker needs it in its environment\n",
                       spec.model.name, spec.model.apiKeyEnv);
            noted = true;
        }
        for (const auto& [scheme, variable] : spec.authEnv)
            if (spec.kind == AdapterSpec::Kind::OpenApi && unset(variable)) {
                fmt::print(errOut(), "note: --adapter openapi: {} (auth.{}) is not set here; every worker needs it in "
                                     "its environment\n",
                           variable, scheme);
                noted = true;
            }
        if (!noted && spec.kind != AdapterSpec::Kind::Mcp) checkable.push_back(spec);
    }
    if (!checkable.empty() &&
        !openRunAdapters(tool, checkable, setup.host, setup.policy ? &*setup.policy : nullptr, std::string()))
        return kUsage;

    Json flags = Json::array();
    for (const auto& [flag, value] : args.options)
        for (const auto& [name, isPath] : kSubmittedFlags)
            if (flag == name)
                flags.push_back({flag, isPath ? std::filesystem::absolute(value).lexically_normal().string() : value});
    SubmittedRun run;
    run.runId = newRunId();
    run.program = program.module().programName;
    run.path = std::filesystem::absolute(setup.source.file).lexically_normal().string();
    run.submission = {{"flags", flags},
                      {"inputs", given},
                      {"adapters", adapterSpecsJson(specs)},
                      {"program_hash", program.module().programHash}};
    std::string error;
    if (!store->submit(run, error)) {
        fmt::print(errOut(), "{}: error: {}\n", tool, error);
        return kUsage;
    }
    if (args.has("--json"))
        fmt::print(stdOut(), "{}\n", prettyJson(Json{{"status", "queued"}, {"run_id", run.runId}}));
    else
        fmt::print(stdOut(), "{}\n", run.runId);
    fmt::print(errOut(), "queued run {} in {}; a worker runs it (`{} runs show {}{}`)\n", run.runId, store->describe(),
               tool, run.runId, stateFlags(args));
    return kOk;
}

int replayCommand(std::string_view tool, Args& args) {
    if (args.positional.size() != 1) {
        fmt::print(errOut(), "{}: error: replay needs exactly one RUN_ID (or trace path)\n", tool);
        return kUsage;
    }
    bool json = args.has("--json");
    std::unique_ptr<Store> store = openStoreFor(tool, args);
    if (!store) return kUsage;
    ReplayPlan plan;
    if (!readRecordedRun(tool, *store, args.positional[0], ReplayPurpose::Replay, plan)) return kUsage;
    std::string file = args.value("--file") ? *args.value("--file") : stringField(plan.start, "path");
    if (file.empty()) {
        fmt::print(errOut(), "{}: error: the trace does not name its program; pass --file PROG\n", tool);
        return kUsage;
    }
    if (plan.start.contains("strict_flows") && plan.start["strict_flows"] == true && !args.has("--strict-flows"))
        args.options.push_back({"--strict-flows", ""});
    RunSetup setup;
    if (int exit = loadRunSetup(tool, args, file, true, setup); exit != kOk) return exit;
    const ProgramSource& source = setup.source;
    const Module& module = source.program->module();
    if (module.programHash != plan.start["program_hash"].get<std::string>())
        fmt::print(errOut(), "note: program hash differs from the recorded run; replay checks whether behaviour still matches\n");
    std::string recordedRun = plan.start["run_id"].get<std::string>();

    // A divergence: R0601 naming the first differing event, after the replay's own failure when
    // that explains it (a failure that is itself R0601 has been shown with its span).
    auto diverged = [&](const std::string& message, const RunFailure* replayFailure) {
        if (json) {
            Json error = {{"code", "R0601"}, {"name", diagInfo(DiagCode::R0601).name}, {"message", message}};
            fmt::print(stdOut(), "{}\n", prettyJson({{"status", "failed"}, {"run_id", recordedRun}, {"error", error}}));
        } else {
            if (replayFailure) printRuntimeFailure(source, *replayFailure);
            if (!replayFailure || replayFailure->error.code != DiagCode::R0601)
                fmt::print(errOut(), "{}\n", renderText(makeDiagnostic(DiagCode::R0601, message, plan.tracePath), nullptr,
                                                        colorOn(Stream::Err)));
        }
        return kFailure;
    };

    Run run(source.program, setup.limits);
    std::vector<Value> inputs;
    if (!inputValues(tool, *source.program, setup.host, run.heap(), plan.start["inputs"], inputs))
        return diverged("the recorded inputs do not fit the program's main", nullptr);
    Policy allowAll = Policy::allowAllPolicy();
    BrokerOptions options = brokerOptionsFor(module, setup.host, allowAll, recordedRun, setup.strictFlows,
                                             stringField(plan.start, "idempotency_root"));
    options.replay = &plan;  // no adapter, no trace, no approvals: nothing can go out
    Broker broker(options, run);
    run.start(source.program->entry(), std::move(inputs));
    RunStatus status = driveWith(run, broker, nullptr);

    ReplayVerdict verdict = replayVerdict(plan, run, status, broker);
    if (!verdict.reproduced) return diverged(verdict.divergence, verdict.showFailure ? &run.failure() : nullptr);
    size_t recorded = plan.calls.size();
    if (status != RunStatus::Failed) {
        RunResult result = resultOf(run);
        if (json) {
            fmt::print(stdOut(), "{}\n", prettyJson({{"status", "completed"}, {"run_id", recordedRun}, {"result", result.value},
                                           {"result_tags", result.tags}, {"spent_usd", broker.spent()},
                                           {"calls", broker.calls()}, {"replay", {{"ok", true}, {"reproduced", recorded}}}}));
        } else {
            fmt::print(stdOut(), "{}\n", prettyJson(result.value));
        }
    } else if (json) {
        fmt::print(stdOut(), "{}\n",
                   prettyJson({{"status", "replayed"},
                               {"run_id", recordedRun},
                               {"replay", {{"ok", true}, {"reproduced", recorded}, {"outcome", verdict.outcome}}}}));
    }
    fmt::print(errOut(), "{} {} recorded call(s) reproduced, no live effects{}\n",
               paint(Stream::Err, TextStyle::Ok, "replay ok:"), recorded,
               verdict.outcome.empty() ? "" : " (" + verdict.outcome + ")");
    return kOk;
}

}  // namespace remit::cli
