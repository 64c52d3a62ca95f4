// `remit ask "REQUEST" FILE` (docs/models.md "remit ask"): the flags, the model, and the printing
// of session/ask.h's outcome — the unified diff, each round, the cost, the authority diff — and
// the write, only with --apply, refused (exit 4) for a widening change without --allow-widening.
// Exit 5 when the model declines the change, 1 when the proposal still fails the checker.
#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "broker/model_adapter.h"
#include "cli/commands.h"
#include "cli/terminal.h"
#include "compiler/manifest.h"
#include "runtime/files.h"
#include "runtime/numfmt.h"
#include "session/ask.h"
#include "session/mcp_tools.h"

namespace remit::cli {

namespace {

constexpr int kDeclined = 5;
constexpr const char* kAskModelName = "ask";

// The model `ask` uses: --model PROVIDER:MODEL[@BASE_URL], or the name of a [models."NAME"] table
// of the policy; else $REMIT_MODEL (the same forms); else Anthropic's or OpenAI's default model,
// whichever provider's key is set.
std::optional<ModelConfig> askModel(std::string_view tool, const Args& args, const std::optional<Policy>& policy) {
    std::string chosen;
    if (const std::string* flag = args.value("--model")) chosen = *flag;
    else if (const char* env = std::getenv("REMIT_MODEL"); env && *env) chosen = env;
    else if (const char* anthropic = std::getenv("ANTHROPIC_API_KEY"); anthropic && *anthropic)
        chosen = "anthropic:claude-haiku-4-5";
    else if (const char* openai = std::getenv("OPENAI_API_KEY"); openai && *openai)
        chosen = "openai:gpt-4o-mini";
    if (chosen.empty()) {
        fmt::print(stderr, "{}: error: ask needs a model, and none is configured\n", tool);
        fmt::print(stderr, "  hint: pass --model openai:gpt-4o-mini (with OPENAI_API_KEY set) or --model "
                           "anthropic:claude-haiku-4-5 (with ANTHROPIC_API_KEY), or name a [models.\"NAME\"] "
                           "table of the policy\n");
        return std::nullopt;
    }
    if (policy)
        if (auto it = policy->models.find(chosen); it != policy->models.end()) return it->second;
    std::string error;
    std::optional<ModelConfig> config = modelConfigFromFlag(std::string(kAskModelName) + "=" + chosen, error);
    if (!config) {
        fmt::print(stderr, "{}: error: --model {}: {}\n", tool, chosen, error);
        fmt::print(stderr, "  hint: --model PROVIDER:MODEL[@BASE_URL], or the name of a [models.\"NAME\"] table\n");
        return std::nullopt;
    }
    // A whole program comes back in each answer: room for a long one.
    config->maxTokens = 16'000;
    config->timeoutMs = 300'000;
    return config;
}

std::string readText(const std::string& path, std::string& error) {
    constexpr std::size_t kMaxBytes = std::size_t{16} << 20;
    std::string text;
    if (auto problem = readRegularFile(path, kMaxBytes, text)) error = problem->message;
    else if (text.size() > kMaxBytes) error = tooLargeMessage(path, kMaxBytes, "a file ask reads");
    return text;
}

// A unified diff as git colours one on a terminal: removed lines red, added green, hunks cyan.
std::string colouredDiff(std::string_view diff) {
    if (!colorOn(Stream::Out)) return std::string(diff);
    std::string out;
    for (size_t start = 0; start < diff.size();) {
        size_t end = diff.find('\n', start);
        std::string_view line = diff.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
        bool header = line.starts_with("---") || line.starts_with("+++");
        if (header) out += paint(Stream::Out, TextStyle::Bold, line);
        else if (line.starts_with('-')) out += paint(Stream::Out, TextStyle::Error, line);
        else if (line.starts_with('+')) out += paint(Stream::Out, TextStyle::Ok, line);
        else if (line.starts_with("@@")) out += paint(Stream::Out, TextStyle::Note, line);
        else out += line;
        if (end == std::string_view::npos) break;
        out += '\n';
        start = end + 1;
    }
    return out;
}

}  // namespace

int askCommand(std::string_view tool, Args& args) {
    if (args.positional.size() != 2) {
        fmt::print(stderr, "{}: error: ask needs a REQUEST and a FILE: {} ask \"add a retry to the fetch\" prog.rmt\n",
                   tool, tool);
        return kUsage;
    }
    const std::string& change = args.positional[0];
    const std::string& file = args.positional[1];
    CheckOptions options = checkOptionsOf(args);
    CheckOutcome current = checkProgramFile(file, options);
    if (current.ioError) {
        fmt::print(stderr, "{}: error: {}\n", tool, current.ioError->message);
        return kUsage;
    }
    if (!current.ok() || !current.checked) {
        printDiagnostics(current.diags, &current);
        fmt::print(stderr, "fix the current program first\n");
        return kFailure;
    }

    AskRequest request;
    request.request = change;
    request.programPath = file;
    request.checkOptions = options;
    std::string error;
    request.programText = current.sourceFor(file) ? std::string(current.sourceFor(file)->text()) : readText(file, error);
    request.hostName = *current.hostPath;
    request.hostText = readText(*current.hostPath, error);
    if (current.policyPath) {
        request.policyName = *current.policyPath;
        request.policyText = readText(*current.policyPath, error);
    }
    if (const std::string* spec = args.value("--spec")) {
        request.spec = readText(*spec, error);
    } else if (std::optional<std::string_view> guide = mcp::embeddedText("docs/ai-guide.md")) {
        request.spec = std::string(*guide);
    }
    if (!error.empty()) {
        fmt::print(stderr, "{}: error: {}\n", tool, error);
        return kUsage;
    }
    std::optional<ModelConfig> config = askModel(tool, args, current.policy);
    if (!config) return kUsage;
    std::unique_ptr<Adapter> model = makeModelAdapter(*config, error);
    if (!model) {
        fmt::print(stderr, "{}: error: {}\n", tool, error);
        return kUsage;
    }
    request.model = config->name;
    request.timeoutMs = static_cast<uint64_t>(config->timeoutMs);

    AskOutcome outcome = askForChange(request, *model);
    if (!outcome.failure.empty()) {
        fmt::print(stderr, "{}: error: the model could not be asked: {}\n", tool, outcome.failure);
        return kFailure;
    }
    std::string diff = unifiedDiff(request.programText, outcome.proposed, file);
    fmt::print("{}", diff.empty() ? std::string("(no textual change)\n") : colouredDiff(diff));
    for (const AskRound& round : outcome.rounds) {
        std::string what = round.refused ? std::string("refused") : fmt::format("{} error(s)", round.errors.size());
        fmt::print("-- round {}: {}: {}\n", round.round, what, round.explanation.substr(0, 400));
    }
    // As every cost is printed: a cheap model's round costs a few millionths of a dollar, which
    // the prototype's four decimals would show as $0.0000.
    fmt::print("model cost ${}{}\n", formatUsd(outcome.costUsd),
               outcome.costComplete ? "" : " (a round reported no usage, or the model has no prices)");
    if (outcome.refused) {
        fmt::print("the model declined the change\n");
        return kDeclined;
    }
    if (!outcome.checked || !outcome.checked->ok() || !outcome.checked->checked) {
        fmt::print(stderr, "proposal still fails the checker after {} round(s); nothing written\n",
                   outcome.rounds.size());
        if (outcome.checked) printDiagnostics(outcome.checked->diags, &*outcome.checked);
        return kFailure;
    }
    AuthorityDiff widening = diffManifests(current.checked->manifest, outcome.checked->checked->manifest);
    printAuthorityDiff(widening, "authority WIDENED by this change:");
    if (!args.has("--apply")) {
        fmt::print("dry run: re-run with --apply to write the change\n");
        return kOk;
    }
    if (widening.widened && !args.has("--allow-widening")) {
        fmt::print(stderr, "refusing to apply: the change widens authority (pass --allow-widening after review)\n");
        return kWidened;
    }
    if (diff.empty()) {
        fmt::print("nothing to write\n");
        return kOk;
    }
    // Written whole or not at all: a new file beside the program, then renamed over it.
    std::filesystem::path target(file), temporary(file + ".remit-ask.tmp");
    {
        std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
        out << outcome.proposed;
        out.flush();
        if (!out) {
            std::error_code ignored;
            std::filesystem::remove(temporary, ignored);
            fmt::print(stderr, "{}: error: cannot write {}\n", tool, temporary.string());
            return kUsage;
        }
    }
    std::error_code ec;
    std::filesystem::rename(temporary, target, ec);
    if (ec) {
        std::filesystem::remove(temporary, ec);
        fmt::print(stderr, "{}: error: cannot replace {}\n", tool, file);
        return kUsage;
    }
    fmt::print("wrote {}\n", file);
    return kOk;
}

}  // namespace remit::cli
