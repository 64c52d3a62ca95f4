#include "cli/commands.h"
#include "cli/large_input_heap.h"
#include "cli/terminal.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "broker/trace.h"
#include "compiler/driver.h"
#include "compiler/manifest.h"
#include "runtime/canonical_json.h"
#include "runtime/json_schema.h"
#include "session/pipeline.h"
#include "session/pg_store.h"
#include "session/run_lifecycle.h"

namespace remit::cli {

std::filesystem::path stateDirOf(const Args& args) {
    return args.value("--state-dir") ? std::filesystem::path(*args.value("--state-dir")) : ".remit";
}

std::string prettyJson(const Json& value) { return dumpJson(value, JsonTextStyle{false, false, 2, ",", ": "}); }

std::string oneLineJson(const Json& value) { return dumpJson(value, JsonTextStyle{false, false, -1, ", ", ": "}); }

std::string shellQuote(std::string_view s) {
    bool plain = !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '/' || c == '.' || c == '_' || c == '-';
    });
    if (plain) return std::string(s);
    std::string quoted = "'";
    for (char c : s) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return quoted + "'";
}

std::optional<uint64_t> parseCount(const std::string& text, uint64_t max) {
    if (text.empty() || text.size() > 19 || text.find_first_not_of("0123456789") != std::string::npos)
        return std::nullopt;
    uint64_t n = std::stoull(text);
    return n <= max ? std::optional(n) : std::nullopt;
}

std::string stateFlags(const Args& args) {
    if (const std::string* url = args.value("--store")) {
        std::string error, shown = pg::displayUrl(*url, error);
        return shown.empty() ? "" : " --store " + shellQuote(shown);
    }
    const std::string* dir = args.value("--state-dir");
    if (!dir) return "";
    return " --state-dir " + shellQuote(*dir);
}

std::unique_ptr<Store> openStoreFor(std::string_view tool, const Args& args) {
    std::string error;
    std::unique_ptr<Store> store = openStore(args.value("--store"), args.value("--state-dir"), error);
    if (store) return store;
    fmt::print(stderr, "{}: error: {}\n", tool, error);
    if (error.starts_with("malformed store URL"))
        fmt::print(stderr, "  hint: e.g. --store postgresql://USER@HOST/DB (the password from $PGPASSWORD or ~/.pgpass)\n");
    else if (error.find("newer than this remitvm") == std::string::npos)
        fmt::print(stderr, "  hint: check that the database is running and reachable from here, and the URL\n");
    return nullptr;
}

bool readRunTrace(std::string_view tool, Store& store, const std::string& run, TraceCheck check, TraceFile& trace,
                  std::string& name) {
    std::error_code ec;
    if (run.ends_with(".jsonl") && std::filesystem::is_regular_file(run, ec)) {
        name = run;
        trace = readTrace(run, check);
        return true;
    }
    // A run id names a record in the store (a file under a state directory): only the exact format may.
    if (!isRunId(run)) {
        fmt::print(commandOutput().err, "{}: error: no trace for run '{}': not a run id (YYYYMMDD-HHMMSS-xxxxxx) nor a trace file\n",
                   tool, run);
        return false;
    }
    name = store.traceName(run);
    if (!store.hasTrace(run)) {
        fmt::print(commandOutput().err, "{}: error: no trace for run '{}' (looked for {})\n", tool, run, name);
        return false;
    }
    trace = store.readTrace(run, check);
    return true;
}

CommandOutput& commandOutput() {
    thread_local CommandOutput output;
    return output;
}

void readLines(size_t maxBytes, const std::function<void(std::string_view)>& onLine,
               const std::function<void()>& onOverlong) {
    std::string line;
    bool overlong = false;
    char buffer[1 << 16];
    while (true) {
        ssize_t n = ::read(STDIN_FILENO, buffer, sizeof buffer);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        std::string_view chunk(buffer, static_cast<size_t>(n));
        while (!chunk.empty()) {
            size_t newline = chunk.find('\n');
            std::string_view part = chunk.substr(0, newline);
            if (!overlong) {
                if (line.size() + part.size() > maxBytes) {
                    overlong = true;
                    line.clear();
                    line.shrink_to_fit();
                } else {
                    line.append(part);
                }
            }
            if (newline == std::string_view::npos) break;
            chunk.remove_prefix(newline + 1);
            if (overlong) {
                onOverlong();
                overlong = false;
            } else {
                onLine(line);
            }
            line.clear();
        }
    }
    if (!overlong) onLine(line);
}

void printDiagnostics(const DiagnosticList& diags, const CheckOutcome* outcome, const RenderOptions& options) {
    SourceLookup sources = [outcome](const std::string& file) { return outcome ? outcome->sourceFor(file) : nullptr; };
    RenderOptions coloured = options;
    coloured.color = colorOn(Stream::Err);
    fmt::print(stderr, "{}", renderDiagnostics(diags.items(), sources, coloured));
}

void printAuthorityDiff(const AuthorityDiff& diff, std::string_view widenedHeader) {
    fmt::print("{}\n", diff.widened ? paint(Stream::Out, TextStyle::Error, widenedHeader)
                                     : paint(Stream::Out, TextStyle::Ok, "no authority widening"));
    for (size_t i = 0; i < diff.changes.size(); ++i)
        fmt::print("  {} {}\n",
                   diff.widening[i] ? paint(Stream::Out, TextStyle::Error, "+") : paint(Stream::Out, TextStyle::Ok, "-"),
                   diff.changes[i]);
}

std::shared_ptr<const LoadedProgram> buildChecked(const CheckOutcome& outcome, DiagnosticList& diags) {
    return buildProgram(*outcome.program, *outcome.checked, outcome.file, diags);
}

std::shared_ptr<const LoadedProgram> compileChecked(const CheckOutcome& outcome, int& exit) {
    DiagnosticList diags;
    auto program = buildChecked(outcome, diags);
    if (!program) {
        printDiagnostics(diags, &outcome);
        exit = kFailure;
    }
    return program;
}

namespace {

Json checkJson(const CheckOutcome& outcome) {
    Json diagnostics = Json::array();
    for (const Diagnostic& d : outcome.diags.items()) diagnostics.push_back(toJson(d));
    Json j;
    j["file"] = outcome.file;
    j["ok"] = outcome.ok();
    j["diagnostics"] = std::move(diagnostics);
    j["manifest"] = outcome.ok() && outcome.checked ? manifestToJson(outcome.checked->manifest) : Json(nullptr);
    j["policy"] = outcome.policyPath ? Json(*outcome.policyPath) : Json(nullptr);
    return j;
}

}  // namespace

CheckOptions checkOptionsOf(const Args& args) {
    CheckOptions options;
    if (const std::string* host = args.value("--host")) options.hostPath = *host;
    if (const std::string* policy = args.value("--policy")) options.policyPath = *policy;
    options.strictFlows = args.has("--strict-flows");
    return options;
}

int checkCommand(std::string_view tool, Args& args) {
    if (args.positional.empty()) {
        fmt::print(stderr, "{}: error: check needs at least one FILE or directory\n", tool);
        return kUsage;
    }
    CheckOptions options = checkOptionsOf(args);
    bool json = args.has("--json");
    RenderOptions render;
    if (const std::string* max = args.value("--max-diagnostics")) {
        size_t n = 0;
        auto [end, ec] = std::from_chars(max->data(), max->data() + max->size(), n);
        if (ec != std::errc() || end != max->data() + max->size() || n == 0) {
            fmt::print(stderr, "{}: error: --max-diagnostics needs a positive integer, not '{}'\n", tool, *max);
            return kUsage;
        }
        // JSON is for programs, which take every diagnostic; the cap shapes text for readers.
        if (json) {
            fmt::print(stderr, "{}: error: --max-diagnostics applies to text output, not --json\n", tool);
            return kUsage;
        }
        render.maxDiagnostics = n;
    }

    std::vector<IoError> ioErrors;
    std::vector<std::string> files = expandProgramPaths(args.positional, ioErrors);
    int exit = kOk;
    for (const IoError& e : ioErrors) {
        fmt::print(stderr, "{}: error: {}\n", tool, e.message);
        exit = kUsage;
    }
    uintmax_t inputBytes = 0;
    for (const std::string& file : files) {
        std::error_code ec;
        uintmax_t size = std::filesystem::file_size(file, ec);
        if (!ec) inputBytes += size;
    }
    prepareHeapForLargeInput(inputBytes);
    Json results = Json::array();
    CheckOutcome last;  // assigning the next program's outcome frees the previous one
    for (const std::string& file : files) {
        last = checkProgramFile(file, options);
        const CheckOutcome& outcome = last;
        if (outcome.ioError) {
            fmt::print(stderr, "{}: error: {}\n", tool, outcome.ioError->message);
            exit = kUsage;
            continue;
        }
        if (!outcome.ok() && exit == kOk) exit = kFailure;
        if (json) {
            results.push_back(checkJson(outcome));
            continue;
        }
        printDiagnostics(outcome.diags, &outcome, render);
        if (outcome.ok()) {
            if (outcome.checked) fmt::print("{}", manifestSummary(outcome.checked->manifest));
            std::string ok = paint(Stream::Out, TextStyle::Ok, "ok:");
            if (outcome.policyPath) fmt::print("{} {} (policy {})\n", ok, file, *outcome.policyPath);
            else fmt::print("{} {} (no policy checked)\n", ok, file);
        } else {
            fmt::print(stderr, "{} error(s) in {}\n", outcome.diags.errorCount(), file);
        }
    }
    if (json && !results.empty()) {
        // One file gives one object, several a list (as the prototype prints them).
        const Json& shown = results.size() == 1 ? results[0] : results;
        fmt::print("{}\n", shown.dump(2, ' ', false, Json::error_handler_t::replace));
    }
    // The last program's syntax tree, sources and results are left to the process's exit: freeing
    // them node by node cost about a tenth of checking a 10 k-line program (docs/performance.md).
    keepUntilExit(std::move(last));
    return exit;
}

// Checks one program for a command that needs it to be valid: prints its diagnostics (warnings
// too) and returns null when it does not check.
static std::optional<CheckOutcome> checkedOrReport(std::string_view tool, const std::string& file,
                                                   const CheckOptions& options, int& exit, bool countLine = true) {
    CheckOutcome outcome = checkProgramFile(file, options);
    if (outcome.ioError) {
        fmt::print(stderr, "{}: error: {}\n", tool, outcome.ioError->message);
        exit = kUsage;
        return std::nullopt;
    }
    printDiagnostics(outcome.diags, &outcome);
    if (!outcome.ok() || !outcome.checked) {
        if (countLine) fmt::print(stderr, "{} error(s) in {}\n", outcome.diags.errorCount(), file);
        exit = kFailure;
        return std::nullopt;
    }
    return outcome;
}

int manifestCommand(std::string_view tool, Args& args) {
    if (args.positional.size() != 1) {
        fmt::print(stderr, "{}: error: manifest needs exactly one PROGRAM\n", tool);
        return kUsage;
    }
    const std::string& file = args.positional[0];
    if (file.size() > 4 && file.ends_with(".rbc")) return bytecodeManifest(tool, file);
    CheckOptions options = checkOptionsOf(args);
    int exit = kOk;
    auto outcome = checkedOrReport(tool, file, options, exit);
    if (!outcome) return exit;
    fmt::print("{}\n", manifestToJson(outcome->checked->manifest).dump(2));
    return kOk;
}

// remitc schema PROG.rmt [SITE] (docs/models.md "Schemas"): the JSON Schema of the type each model
// call asks for — exactly what an adapter receives as `schema` — for every model call site, or the
// bare schema of one site.
int schemaCommand(std::string_view tool, Args& args) {
    if (args.positional.empty() || args.positional.size() > 2) {
        fmt::print(stderr, "{}: error: schema needs a PROGRAM and at most one SITE\n", tool);
        return kUsage;
    }
    CheckOptions options = checkOptionsOf(args);
    int exit = kOk;
    auto outcome = checkedOrReport(tool, args.positional[0], options, exit);
    if (!outcome) return exit;
    std::shared_ptr<const LoadedProgram> program = compileChecked(*outcome, exit);
    if (!program) return exit;
    const Manifest& manifest = outcome->checked->manifest;
    Json sites = Json::array();
    std::vector<std::string> ids;
    for (const Site& site : program->module().sites) {
        if (site.kind == SiteKind::Capability) continue;
        TypeRef type = program->type(site.askType);
        Json entry;
        entry["site"] = site.id;
        for (const CallSiteInfo& info : manifest.callSites)
            if (info.site == site.id) {
                entry["line"] = info.line;
                entry["col"] = info.col;
            }
        entry["resource"] = site.resource;
        entry["agent"] = site.agent.empty() ? Json(nullptr) : Json(site.agent);
        entry["output_type"] = type ? showType(type) : "Unit";
        entry["schema"] = jsonSchemaFor(type);
        if (args.positional.size() == 2 && site.id == args.positional[1]) {
            fmt::print("{}\n", entry["schema"].dump(2));
            return kOk;
        }
        ids.push_back(site.id);
        sites.push_back(std::move(entry));
    }
    if (args.positional.size() == 2) {
        fmt::print(stderr, "{}: error: {} has no model call at site '{}'\n", tool, args.positional[0],
                   args.positional[1]);
        fmt::print(stderr, "  hint: {}\n",
                   ids.empty() ? std::string("the program makes no model call")
                               : fmt::format("its model call sites are {}", fmt::join(ids, ", ")));
        return kUsage;
    }
    fmt::print("{}\n", Json{{"program", manifest.program}, {"sites", std::move(sites)}}.dump(2));
    return kOk;
}

int diffCommand(std::string_view tool, Args& args) {
    if (args.positional.size() != 2) {
        fmt::print(stderr, "{}: error: diff needs OLD and NEW programs\n", tool);
        return kUsage;
    }
    CheckOptions options;
    if (const std::string* host = args.value("--host")) options.hostPath = *host;
    // The diff compares what the two versions ask for, whatever a deployment grants: a policy.toml
    // beside them is not applied (as in the prototype), so a version that asks for more than the
    // policy allows is still compared — that is the widening a reviewer must see.
    options.checkPolicy = false;
    int exit = kOk;
    // As the prototype's diff: a side that does not check prints its diagnostics, and no count line.
    auto before = checkedOrReport(tool, args.positional[0], options, exit, false);
    if (!before) return exit;
    auto after = checkedOrReport(tool, args.positional[1], options, exit, false);
    if (!after) return exit;
    AuthorityDiff diff = diffManifests(before->checked->manifest, after->checked->manifest);
    if (args.has("--json")) {
        fmt::print("{}\n", authorityDiffJson(diff).dump(2));
    } else {
        printAuthorityDiff(diff, "authority WIDENED:");
    }
    return diff.widened ? kWidened : kOk;
}

int fmtCommand(std::string_view tool, Args& args) {
    if (args.positional.empty()) {
        fmt::print(stderr, "{}: error: fmt needs at least one FILE\n", tool);
        return kUsage;
    }
    bool checkOnly = args.has("--check");
    int exit = kOk;
    auto worsen = [&](int code) {
        if (code == kUsage || exit == kOk) exit = code;
    };
    for (const std::string& file : args.positional) {
        FormatOutcome outcome = formatFile(file);
        if (outcome.ioError) {
            fmt::print(stderr, "{}: error: {}\n", tool, outcome.ioError->message);
            worsen(kUsage);
            continue;
        }
        if (outcome.diags.hasErrors()) {
            const SourceFile* source = outcome.source.get();
            fmt::print(stderr, "{}",
                       renderDiagnostics(outcome.diags.items(), [source](const std::string&) { return source; },
                                         RenderOptions{.color = colorOn(Stream::Err)}));
            worsen(kFailure);
            continue;
        }
        if (outcome.formatted == outcome.source->text()) continue;
        if (checkOnly) {
            fmt::print("would reformat {}\n", file);
            worsen(kFailure);
            continue;
        }
        if (auto err = writeFileAtomically(file, outcome.formatted)) {
            fmt::print(stderr, "{}: error: {}\n", tool, err->message);
            worsen(kUsage);
            continue;
        }
        fmt::print("formatted {}\n", file);
    }
    return exit;
}

}  // namespace remit::cli
