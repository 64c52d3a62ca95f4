#include "compiler/driver.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "compiler/ast_equal.h"
#include "compiler/formatter.h"
#include "compiler/parser.h"
#include "runtime/files.h"

namespace remit {

namespace fs = std::filesystem;

std::optional<IoError> readSource(const std::string& path, size_t maxBytes, std::string& text) {
    // At most one byte past the limit is read: enough for the lexer to report E0003 without holding
    // a huge file in memory. A directory, FIFO or device is refused, never read.
    if (std::optional<FileProblem> problem = readRegularFile(path, maxBytes, text)) return IoError{problem->message};
    return std::nullopt;
}

std::optional<IoError> writeFileAtomically(const std::string& path, const std::string& text) {
    // Through a symlink, replace the file it points to (not the link); keep the file's mode.
    std::error_code ec;
    bool isLink = fs::is_symlink(fs::symlink_status(path, ec));  // false for a new file
    std::string target = isLink ? fs::canonical(path, ec).string() : path;
    if (isLink && ec) return IoError{fmt::format("cannot resolve {}", path)};
    fs::perms mode = fs::status(target, ec).permissions();
    bool keepMode = !ec;
    std::string temporary = target + ".remit-tmp";
    {
        std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
        if (!out) return IoError{fmt::format("cannot write {}: {}", path, std::strerror(errno))};
        out << text;
        out.flush();
        if (!out) {
            std::error_code ignored;
            fs::remove(temporary, ignored);
            return IoError{fmt::format("cannot write {}: {}", path, std::strerror(errno))};
        }
    }
    if (keepMode) fs::permissions(temporary, mode, ec);
    fs::rename(temporary, target, ec);
    if (ec) {
        fs::remove(temporary, ec);
        return IoError{fmt::format("cannot replace {}", path)};
    }
    return std::nullopt;
}

std::optional<std::string> findHostInterface(const std::string& programPath) {
    std::error_code ec;
    fs::path dir = fs::absolute(fs::path(programPath), ec).parent_path();
    if (ec) return std::nullopt;
    while (true) {
        fs::path candidate = dir / "host.rmti";
        // The first host.rmti that exists is the one: a directory or FIFO of that name is reported
        // when it is read, rather than skipped for a parent's host interface without a word.
        if (fs::exists(candidate, ec)) {
            // Name it as the user would: relative to the current directory when that is shorter.
            fs::path relative = fs::relative(candidate, fs::current_path(ec), ec);
            if (!ec && !relative.empty() && relative.native().size() < candidate.native().size())
                return relative.string();
            return candidate.string();
        }
        if (dir.parent_path() == dir) return std::nullopt;
        dir = dir.parent_path();
    }
}

std::optional<std::string> findPolicy(const std::string& programPath) {
    fs::path candidate = fs::path(programPath).parent_path() / "policy.toml";
    std::error_code ec;
    // Found when it exists at all: reading it says so if it is not a regular file.
    if (fs::exists(candidate, ec)) return candidate.string();
    return std::nullopt;
}

std::vector<std::string> expandProgramPaths(const std::vector<std::string>& paths, std::vector<IoError>& errors) {
    std::vector<std::string> out;
    for (const std::string& path : paths) {
        std::error_code ec;
        if (!fs::is_directory(path, ec)) {
            out.push_back(path);
            continue;
        }
        std::vector<std::string> found;
        fs::recursive_directory_iterator it(path, fs::directory_options::skip_permission_denied, ec), end;
        if (ec) {
            errors.push_back(IoError{fmt::format("cannot list {}", path)});
            continue;
        }
        for (; it != end; it.increment(ec)) {
            if (ec) break;
            const fs::path& p = it->path();
            std::string leaf = p.filename().string();
            if (it->is_directory(ec) && (leaf == ".venv" || (leaf.size() > 1 && leaf[0] == '.'))) {
                it.disable_recursion_pending();
                continue;
            }
            if (p.extension() == ".rmt" && it->is_regular_file(ec)) found.push_back(p.string());
        }
        std::sort(found.begin(), found.end());
        out.insert(out.end(), found.begin(), found.end());
    }
    return out;
}

bool isHostInterfacePath(const std::string& path) { return fs::path(path).extension() == ".rmti"; }

const SourceFile* CheckOutcome::sourceFor(const std::string& name) const {
    auto it = sources.find(name);
    return it == sources.end() ? nullptr : it->second.get();
}

CheckOutcome checkSources(const std::string& programName, std::string programText, const SourceProvider& provider,
                          const CheckOptions& options) {
    CheckOutcome out;
    out.file = programName;
    auto source = std::make_unique<SourceFile>(programName, std::move(programText));
    out.program = parseProgram(*source, out.diags, options.limits);
    out.sources[programName] = std::move(source);
    bool programParsed = !out.diags.hasErrors() && out.program;
    if (!programParsed && !options.hostDespiteProgramErrors) return out;

    std::string hostText;
    if (auto err = provider.host(out.hostPath, hostText)) {
        out.ioError = err;
        return out;
    }
    if (!out.hostPath) {
        // At the program's header, so it renders like every other diagnostic (file:line:col and
        // the line); a program whose header did not parse gets its first line.
        Span at = out.program && out.program->span.valid() ? out.program->span : Span{1, 1, 1, 1};
        out.diags.add(makeDiagnostic(DiagCode::E0002, "no host.rmti found next to the program or in a parent directory",
                                     programName, at, "pass --host PATH to name the host interface"));
        return out;
    }
    auto hostSource = std::make_unique<SourceFile>(*out.hostPath, std::move(hostText));
    out.host = parseHost(*hostSource, out.diags, options.limits);
    out.sources[*out.hostPath] = std::move(hostSource);
    if (!programParsed || out.diags.hasErrors() || !out.host) return out;

    HostModel host;
    resolveHost(*out.host, *out.hostPath, host, out.diags);
    if (out.diags.hasErrors()) return out;
    std::vector<std::string> hostResources = host.resourceNames();
    std::vector<std::string> hostModels = host.modelNames();

    // The policy is read before the program is checked: its [flows] strict decides how. Its own
    // problems are reported after the program's.
    DiagnosticList policyDiags;
    if (options.checkPolicy && provider.policy) {
        std::string policyText;
        if (auto err = provider.policy(out.policyPath, policyText)) {
            out.ioError = err;
            return out;
        }
        if (out.policyPath) {
            if (policyText.size() > options.limits.maxSourceBytes) {
                policyDiags.add(makeDiagnostic(
                    DiagCode::E0504,
                    fmt::format("policy file is over the limit of {} bytes", options.limits.maxSourceBytes),
                    *out.policyPath, {}, "a policy is a short list of grants; check that this is the right file"));
            } else {
                out.sources[*out.policyPath] = std::make_unique<SourceFile>(*out.policyPath, policyText);
                out.policy = parsePolicy(*out.policyPath, policyText, policyDiags, &hostResources, &hostModels);
            }
        }
    }
    CheckerOptions checkerOptions{programName, *out.hostPath};
    checkerOptions.strictFlows = options.strictFlows || (out.policy && out.policy->strictFlows);
    if (out.policy) checkerOptions.policy = &*out.policy;
    checkerOptions.interrupted = options.interrupted;
    checkerOptions.recordFacts = options.recordFacts;
    out.checked = checkProgram(*out.program, std::move(host), out.diags, checkerOptions);
    bool programOk = !out.diags.hasErrors();
    for (Diagnostic& d : policyDiags.items()) out.diags.add(std::move(d));
    if (!out.policy) return out;
    // The policy comparison is only meaningful for a program that checks (as in the prototype).
    if (programOk && !out.diags.hasErrors())
        checkManifestAgainstPolicy(out.checked->manifest, *out.policy, programName, out.program->span, out.diags);
    return out;
}

SourceProvider textSources(std::string hostName, std::string hostText, std::optional<std::string> policyName,
                           std::string policyText) {
    SourceProvider provider;
    provider.host = [=](std::optional<std::string>& name, std::string& text) -> std::optional<IoError> {
        name = hostName;
        text = hostText;
        return std::nullopt;
    };
    provider.policy = [=](std::optional<std::string>& name, std::string& text) -> std::optional<IoError> {
        name = policyName;
        text = policyText;
        return std::nullopt;
    };
    return provider;
}

CheckOutcome checkProgramFile(const std::string& path, const CheckOptions& options) {
    std::string text;
    if (auto err = readSource(path, options.limits.maxSourceBytes, text)) {
        CheckOutcome out;
        out.file = path;
        out.ioError = err;
        return out;
    }
    // The files the check needs, discovered only once the program parses.
    SourceProvider files;
    files.host = [&](std::optional<std::string>& name, std::string& hostText) -> std::optional<IoError> {
        name = options.hostPath ? options.hostPath : findHostInterface(path);
        if (!name) return std::nullopt;
        return readSource(*name, options.limits.maxSourceBytes, hostText);
    };
    files.policy = [&](std::optional<std::string>& name, std::string& policyText) -> std::optional<IoError> {
        name = options.policyPath ? options.policyPath : findPolicy(path);
        if (!name) return std::nullopt;
        return readSource(*name, options.limits.maxSourceBytes, policyText);
    };
    return checkSources(path, std::move(text), files, options);
}

// `fmt` rewrites files in place, so it proves each result before handing it back: the output
// must parse within the same limits and mean the same (sameProgram/sameHost). A formatter bug then
// costs a diagnostic, never a changed or unreadable file.
template <class Tree, class Parse, class Format, class Same>
void formatChecked(FormatOutcome& out, const FrontendLimits& limits, Parse parse, Format format, Same same) {
    std::unique_ptr<Tree> tree = parse(*out.source, out.diags, limits);
    if (!tree || out.diags.hasErrors()) return;
    std::string formatted = format(*tree, limits);
    SourceFile again(out.source->name(), formatted);
    DiagnosticList scratch;
    std::unique_ptr<Tree> reparsed = parse(again, scratch, limits);
    if (!reparsed || scratch.hasErrors() || !same(*tree, *reparsed)) {
        out.diags.add(makeDiagnostic(
            DiagCode::E0003,
            "formatting this file would exceed a front-end limit or change its meaning; it was left unchanged",
            out.source->name(), {}, "split long lines or deep nesting by hand, and please report the file"));
        return;
    }
    out.formatted = std::move(formatted);
}

FormatOutcome formatText(std::string name, std::string text, bool isHost, const FrontendLimits& limits) {
    FormatOutcome out;
    out.diags = DiagnosticList(limits.maxErrors);
    out.source = std::make_unique<SourceFile>(std::move(name), std::move(text));
    if (isHost)
        formatChecked<ast::HostInterface>(out, limits, parseHost, formatHost, sameHost);
    else
        formatChecked<ast::Program>(out, limits, parseProgram, formatProgram, sameProgram);
    return out;
}

FormatOutcome formatFile(const std::string& path, const FrontendLimits& limits) {
    std::string text;
    if (auto err = readSource(path, limits.maxSourceBytes, text)) {
        FormatOutcome out;
        out.ioError = err;
        return out;
    }
    return formatText(path, std::move(text), isHostInterfacePath(path), limits);
}

}  // namespace remit
