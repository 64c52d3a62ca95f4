// THE command table: every command of remitc, remitvm and remit with its operands, summary, flags
// (each with one line of help) and handler, and each tool's list of commands. The parser, every
// --help, the completion scripts and the help test are generated from this file, so a flag exists
// exactly when it is declared here (cli/commands.h says how to add one). The command lines are the
// contract of docs/compatibility.md ("Command lines"); `remit` offers the prototype's commands with
// the same tables, so its flags are a superset of the prototype's.
#include "cli/commands.h"

namespace remit::cli {

namespace {

// Flags several commands share, so their help reads the same everywhere.
constexpr Flag kHost{"--host", "H", "the host interface (.rmti); default: host.rmti next to the program or above it"};
constexpr Flag kPolicy{"--policy", "P", "the deployment policy (.toml); default: policy.toml next to the program"};
constexpr Flag kStrictFlows{"--strict-flows", "",
                            "decisions on tagged data count for deny parameters, and early exits taint what follows"};
constexpr Flag kStateDir = Flag{"--state-dir", "D", "where runs and approvals are kept; default: .remit"}.completes(
    Complete::Dirs);
constexpr Flag kMaxSteps = Flag{"--max-steps", "N", "stop the run after N VM steps (R0701)"}.completes(Complete::Nothing);
constexpr Flag kMaxMemory =
    Flag{"--max-memory", "BYTES", "stop the run when its live memory exceeds BYTES (R0701)"}.completes(Complete::Nothing);
constexpr Flag kMaxWallMs =
    Flag{"--max-wall-ms", "N", "stop the run after N ms of VM time (R0701)"}.completes(Complete::Nothing);
constexpr Flag kStore = Flag{"--store", "URL",
                             "keep runs and approvals in this PostgreSQL store (postgresql://…) instead of a state "
                             "directory; default: $REMIT_STORE (docs/fleet.md)"}
                            .completes(Complete::Nothing);
constexpr Flag kFile{"--file", "PROG", "the program to run; default: the path the run recorded"};
constexpr Flag kBy = Flag{"--by", "NAME", "who decides, as recorded in the store; default: $USER"}.completes(
    Complete::Nothing);

// The flags `run` and `resume` share: where calls go, who approves them, the limits.
std::vector<Flag> runFlags() {
    return {
        kHost,
        kPolicy,
        Flag{"--allow-all", "", "grant every host capability without a policy (development only)"},
        Flag{"--approve-all", "", "grant every approval as auto-approve(test) (development and fixtures only)"},
        Flag{"--interactive", "", "ask at the terminal for approvals the store does not hold"},
        Flag{"--fixtures", "F.json", "answer host calls from this fixtures file; default: fixtures/run.json"},
        Flag{"--live", "", "perform host calls with the program folder's adapters.py"},
        Flag{"--adapter", "\"CMD ARGS\"",
             "perform host calls with this adapter process; or, repeatable, with an MCP server's tools: "
             "mcp[.NS]:\"CMD ARGS\" or \"mcp[.NS]+URL [token_env=NAME]\"; or an OpenAPI service's operations: "
             "\"openapi[.NS]:SPEC [base_url=URL] [auth.SCHEME=NAME]...\""}
            .repeatable()
            .completes(Complete::Nothing),
        Flag{"--base-url", "URL", "where an --adapter openapi: service is (over its document's server URL)"}
            .completes(Complete::Nothing),
        Flag{"--json", "", "print the outcome as one JSON envelope on stdout"},
        Flag{"--progress", "", "show each host call on stderr as it starts and ends (default at a terminal)"},
        Flag{"--no-progress", "", "do not show host calls as they happen, even at a terminal"},
        kStateDir,
        kStore,
        kMaxSteps,
        kMaxMemory,
        kMaxWallMs,
        kStrictFlows,
        Flag{"--trust", "KEYS_DIR", "run a .rbc only if signed by a public key in KEYS_DIR"}.completes(Complete::Dirs),
        Flag{"--model", "NAME=SPEC",
             "model NAME's calls go to SPEC, PROVIDER:MODEL[@URL] (docs/models.md), over the policy's table"}
            .repeatable()
            .completes(Complete::Nothing),
    };
}

// main's inputs, as `run` and `submit` take them.
std::vector<Flag> inputFlags() {
    return {Flag{"--input", "NAME=VALUE", "one of main's inputs: a Str as written, another type as JSON"}
                .alias("-i")
                .repeatable()
                .completes(Complete::Nothing),
            Flag{"--inputs", "FILE.json", "main's inputs as a JSON object (name: value); -i overrides"}};
}

// `flags` followed by `more`.
std::vector<Flag> with(std::vector<Flag> flags, const std::vector<Flag>& more) {
    flags.insert(flags.end(), more.begin(), more.end());
    return flags;
}

// ---- remitc ----

const Command kCheck{
    .name = "check",
    .operands = "FILE|DIR...",
    .summary = "check programs (directories are searched) and report their diagnostics",
    .flags = {kHost, kPolicy, Flag{"--json", "", "print one JSON object per file (a list for several) on stdout"},
              Flag{"--max-diagnostics", "N", "print at most N diagnostics in full per file (text only)"}.completes(
                  Complete::Nothing),
              kStrictFlows},
    .run = checkCommand,
};

const Command kFmt{
    .name = "fmt",
    .operands = "FILE...",
    .summary = "format .rmt and .rmti files in place",
    .flags = {Flag{"--check", "", "change nothing; list the files that would be reformatted (exit 1 if any)"}},
    .run = fmtCommand,
};

const Command kBuild{
    .name = "build",
    .operands = "PROG.rmt",
    .summary = "compile a program to a verified .rbc",
    .flags = {Flag{"-o", "OUT.rbc", "write the .rbc here; default (remitc): PROG.rbc beside PROG.rmt"},
              Flag{"--out", "DIR", "write DIR/<program>.rbc and DIR/<program>.manifest.json (remit's default: build)"}
                  .completes(Complete::Dirs),
              kHost, kStrictFlows, Flag{"--sign", "KEY.pem", "sign the .rbc with this Ed25519 key (remitc keygen)"}},
    .run = buildCommand,
};

const Command kKeygen{
    .name = "keygen",
    .operands = "KEY.pem",
    .summary = "make an Ed25519 signing key: KEY.pem (private) and KEY.pub.pem",
    .flags = {},
    .run = keygenCommand,
};

const Command kDis{
    .name = "dis",
    .operands = "PROG.rbc|PROG.rmt",
    .summary = "disassemble a program, each instruction with its source line",
    .flags = {kHost, kStrictFlows},
    .run = disCommand,
};

const Command kManifest{
    .name = "manifest",
    .operands = "PROG.rmt|PROG.rbc",
    .summary = "print a program's manifest as JSON",
    .flags = {kHost, kPolicy, kStrictFlows},
    .run = manifestCommand,
};

const Command kSchema{
    .name = "schema",
    .operands = "PROG.rmt [SITE]",
    .summary = "print the JSON Schema of each model call's output type (or of one site's)",
    .flags = {kHost, kPolicy, kStrictFlows},
    .run = schemaCommand,
};

const Command kAsk{
    .name = "ask",
    .operands = "\"REQUEST\" FILE",
    .summary = "a model proposes a checked change to FILE: a unified diff and the authority diff (docs/models.md)",
    .flags = {kHost, kPolicy,
              Flag{"--spec", "FILE", "the language reference the model reads; default: the built-in AI guide"},
              Flag{"--model", "M",
                   "the model: PROVIDER:MODEL[@URL], or the name of a [models.\"NAME\"] table of the policy"}
                  .completes(Complete::Nothing),
              Flag{"--apply", "", "write the change (only if it checks, and does not widen authority)"},
              Flag{"--allow-widening", "", "with --apply: write a change that widens authority too"}, kStrictFlows},
    .run = askCommand,
    .details = "Exit 4: --apply refused a widening change; exit 5: the model declined the change.",
};

const Command kDiff{
    .name = "diff",
    .operands = "OLD NEW",
    .summary = "did the edit from OLD to NEW widen authority? (exit 4 if so)",
    .flags = {kHost, Flag{"--json", "", "print {\"widened\", \"changes\"} as JSON on stdout"}},
    .run = diffCommand,
};

const Command kCompletions{
    .name = "completions",
    .operands = "bash|zsh|fish",
    .summary = "print a shell's completion script for remitc, remitvm and remit",
    .flags = {},
    .run = completionsCommand,
    .details = "bash: source <(remitc completions bash) in ~/.bashrc\n"
               "zsh:  remitc completions zsh > a directory of $fpath/_remitc (or source <(...) after compinit)\n"
               "fish: remitc completions fish > ~/.config/fish/conf.d/remit.fish",
};

const Command kImport{
    .name = "import",
    .operands = "",
    .summary = "draft a host interface from a service's own description (docs/import.md)",
    .flags = {},
    .run = nullptr,
    .subcommands =
        {
            Command{.name = "mcp",
                    .operands = "\"CMD ARGS\"|URL",
                    .summary = "from the tools of the MCP server CMD starts, or the one at URL (streamable HTTP)",
                    .flags = {Flag{"--as", "NS", "the capabilities' namespace; default: from the server's name"}
                                  .completes(Complete::Nothing),
                              Flag{"-o", "host.rmti", "write the draft here; default: stdout"},
                              Flag{"--timeout-ms", "N",
                                   "how long the server may take to start and list its tools; default: 30000"}
                                  .completes(Complete::Nothing),
                              Flag{"--token-env", "NAME",
                                   "a server at a URL: the environment variable that holds its bearer token"}
                                  .completes(Complete::Nothing)},
                    .run = importMcpCommand,
                    .details = "The draft's capabilities are NS.TOOL; `remitvm run --adapter mcp.NS:\"CMD ARGS\"`\n"
                               "performs them with the same server. Decide the tags, approvals and costs its TODO\n"
                               "lists before granting them."},
            Command{.name = "openapi",
                    .operands = "SPEC.json|SPEC.yaml",
                    .summary = "from the operations of an OpenAPI 3 document (JSON or YAML)",
                    .flags = {Flag{"--as", "NS", "the capabilities' namespace; default: from the document's title"}
                                  .completes(Complete::Nothing),
                              Flag{"-o", "host.rmti", "write the draft here; default: stdout"}},
                    .run = importOpenApiCommand,
                    .details = "The draft's capabilities are NS.OPERATION (its operationId); `remitvm run --adapter\n"
                               "openapi.NS:SPEC --base-url URL` performs them against the service. GET and HEAD are\n"
                               "idempotent; decide the tags, approvals and costs its TODO lists before granting them."},
        },
};

const Command kLsp{
    .name = "lsp",
    .operands = "",
    .summary = "the language server for editors, over LSP on stdin/stdout (docs/editors.md)",
    .flags = {Flag{"--stdio", "", "speak LSP on stdin and stdout (the only transport; editors' clients pass it)"}},
    .run = lspCommand,
};

// ---- remitvm ----

const Command kRun{
    .name = "run",
    .operands = "PROG.rmt|PROG.rbc",
    .summary = "run main through the broker and print its result as JSON",
    .flags = with(inputFlags(), runFlags()),
    .run = runCommand,
};

const Command kResume{
    .name = "resume",
    .operands = "RUN_ID|TRACE.jsonl",
    .summary = "continue a paused or stopped run; recorded calls are answered from its trace",
    .flags = with({kFile}, runFlags()),
    .run = resumeCommand,
    .details = "Without --fixtures, --live, --adapter or --model the run resumes with the adapters it recorded.",
};

const Command kReplay{
    .name = "replay",
    .operands = "RUN_ID|TRACE.jsonl",
    .summary = "re-execute a run against its trace only and check that it reproduces (no live effects)",
    .flags = {kFile, kHost, Flag{"--json", "", "print the outcome as one JSON envelope on stdout"}, kStateDir, kStore,
              kMaxSteps, kMaxMemory, kMaxWallMs, kStrictFlows},
    .run = replayCommand,
};

const Command kTrace{
    .name = "trace",
    .operands = "RUN_ID|TRACE.jsonl",
    .summary = "print a run's timeline, or what one call derives from and who approved it",
    .flags = {Flag{"--why", "SEQ", "explain call SEQ: the calls it derives from and its approval"}.completes(
                  Complete::Nothing),
              Flag{"--full", "", "print values whole instead of cut"}, kStateDir, kStore},
    .run = traceCommand,
};

const Command kApprove{
    .name = "approve",
    .operands = "DIGEST-PREFIX|RUN_ID",
    .summary = "approve one pending call (single use)",
    .flags = {kBy, kStateDir, kStore},
    .run = approveCommand,
};

const Command kApprovals{
    .name = "approvals",
    .operands = "",
    .summary = "the pending approval requests: list them, show one in full, approve or deny one",
    .flags = {},
    .run = nullptr,
    .subcommands =
        {
            Command{.name = "list",
                    .operands = "",
                    .summary = "list the pending requests",
                    .flags = {Flag{"--json", "", "print them as JSON on stdout"}, kStateDir, kStore},
                    .run = approvalsListCommand},
            Command{.name = "show",
                    .operands = "ID",
                    .summary = "show one request in full: arguments, provenance, the program's manifest",
                    .flags = {Flag{"--json", "", "print it as JSON on stdout"}, kStateDir, kStore},
                    .run = approvalsShowCommand},
            Command{.name = "approve",
                    .operands = "ID",
                    .summary = "approve one request (single use; with a quorum, one of its approvers)",
                    .flags = {kBy, Flag{"--json", "", "print the request as decided as JSON on stdout"}, kStateDir,
                              kStore},
                    .run = approvalsApproveCommand},
            Command{.name = "deny",
                    .operands = "ID",
                    .summary = "deny one request: the run fails at that call when it resumes",
                    .flags = {Flag{"--reason", "R", "why, as recorded in the store"}.completes(Complete::Nothing), kBy,
                              Flag{"--json", "", "print the request as decided as JSON on stdout"}, kStateDir, kStore},
                    .run = approvalsDenyCommand},
        },
    .details = "ID is a digest, a unique prefix of one, or a run id (that run's pending call) (docs/operators.md).",
};

const Command kTest{
    .name = "test",
    .operands = "[PATH...]",
    .summary = "run the test blocks of .rmt files (directories are searched; default: .)",
    .flags = {kHost},
    .run = testCommand,
};

const Command kServe{
    .name = "serve",
    .operands = "",
    .summary = "checked runs over JSON lines on stdin/stdout (docs/serve.md)",
    .flags = {},
    .run = serveCommand,
};

const Command kMcp{
    .name = "mcp",
    .operands = "",
    .summary = "Model Context Protocol server on stdin/stdout, or over HTTP with --http (docs/mcp.md)",
    .flags =
        {
            Flag{"--http", "", "serve streamable HTTP instead of stdio, with API keys and metering"},
            Flag{"--host", "ADDR", "the address to listen on (--http); default: 127.0.0.1"}.completes(Complete::Nothing),
            Flag{"--port", "N", "the port to listen on (--http); 0 picks a free one"}.completes(Complete::Nothing),
            Flag{"--keys", "keys.json", "the API keys file (--http)"},
            Flag{"--usage", "usage.sqlite", "where requests are metered (--http)"},
            Flag{"--free-monthly", "N", "requests per key and month before a key is refused (--http)"}.completes(
                Complete::Nothing),
            Flag{"--approvals", "client|operator", "who approves the calls paused runs wait for; default: client"},
            Flag{"--state-dir", "D", "where the operator approves calls (with --approvals operator)"}.completes(
                Complete::Dirs),
            Flag{"--store", "URL",
                 "refused: the server's paused runs live in its memory, so its approvals stay in --state-dir "
                 "(docs/fleet.md)"}
                .completes(Complete::Nothing),
            Flag{"--elicitation-timeout", "S",
                 "seconds the user has to answer a request to approve a call (with --approvals operator); default: "
                 "300"}
                .completes(Complete::Nothing),
        },
    .run = mcpCommand,
};

const Command kInbox{
    .name = "inbox",
    .operands = "",
    .summary = "the operators' web inbox: pending approvals, each in full, approved or denied in a browser",
    .flags =
        {
            Flag{"--http", "", "serve HTTP (the only transport; accepted for symmetry with mcp --http)"},
            Flag{"--host", "ADDR", "the address to listen on; default: 127.0.0.1"}.completes(Complete::Nothing),
            Flag{"--port", "N", "the port to listen on; default: 8001, 0 picks a free one"}.completes(Complete::Nothing),
            Flag{"--keys", "keys.json", "the API keys file, as for mcp --http, each operator's key with a role (required)"},
            kStateDir,
            kStore,
        },
    .run = inboxCommand,
    .details = "A key's \"role\" says what it may do: \"approver\" sees and decides, \"viewer\" only sees; keys\n"
               "without a role are MCP clients' and are refused. Browsers log in with the key; scripts send\n"
               "Authorization: Bearer TOKEN (docs/operators.md, \"The web inbox\").",
};

// ---- remitvm: a fleet (docs/fleet.md) ----

// `run`'s flags but --interactive (a queued run has no terminal) and --state-dir (a fleet's store
// is PostgreSQL).
std::vector<Flag> submitFlags() {
    std::vector<Flag> flags;
    for (const Flag& f : with(inputFlags(), runFlags()))
        if (f.name != "--interactive" && f.name != "--state-dir") flags.push_back(f);
    return flags;
}

const Command kSubmit{
    .name = "submit",
    .operands = "PROG.rmt|PROG.rbc",
    .summary = "check a run as `run` would and queue it for the workers of a PostgreSQL store; print its run id",
    .flags = submitFlags(),
    .run = submitCommand,
    .details = "The submission records the program's absolute path and hash, the inputs, the flags and the\n"
               "adapters; every worker must see the same program and adapters at the same paths.",
};

const Command kWorker{
    .name = "worker",
    .operands = "",
    .summary = "take queued runs from a PostgreSQL store and run them, resuming approved and abandoned ones",
    .flags = {kStore,
              Flag{"--concurrency", "N", "how many runs at a time (threads, each with its connection); default 1"}
                  .completes(Complete::Nothing),
              Flag{"--lease", "SECONDS", "how long a run stays this worker's without a heartbeat; default 10"}
                  .completes(Complete::Nothing),
              Flag{"--name", "NAME", "how the store names this worker; default HOST:PID"}.completes(Complete::Nothing),
              Flag{"--drain", "", "stop once no run is queued (batches, benchmarks)"}},
    .run = workerCommand,
    .details = "SIGTERM or SIGINT: finish the runs in hand, then stop.",
};

const Command kRuns{
    .name = "runs",
    .operands = "",
    .summary = "the runs of a PostgreSQL store: queued, running, waiting, completed, failed",
    .flags = {},
    .run = nullptr,
    .subcommands =
        {
            Command{.name = "list",
                    .operands = "",
                    .summary = "list every run, oldest first",
                    .flags = {Flag{"--json", "", "print them as JSON on stdout"}, kStore},
                    .run = runsListCommand},
            Command{.name = "show",
                    .operands = "RUN_ID",
                    .summary = "show one run with its calls and outcome",
                    .flags = {Flag{"--json", "", "print it as JSON on stdout"}, kStore},
                    .run = runsShowCommand},
        },
};

const Command kStoreCommand{
    .name = "store",
    .operands = "",
    .summary = "manage a PostgreSQL store",
    .flags = {},
    .run = nullptr,
    .subcommands = {Command{.name = "migrate",
                            .operands = "",
                            .summary = "bring the store's schema up to this remitvm's version",
                            .flags = {kStore},
                            .run = storeMigrateCommand}},
};

}  // namespace

const std::vector<Flag>& commonFlags() {
    static const std::vector<Flag> flags = {
        Flag{"--color", "auto|always|never",
             "colour diagnostics and highlights; auto: on a terminal, unless NO_COLOR is set"},
        Flag{"--help", "", "print this help and exit"}.alias("-h"),
    };
    return flags;
}

const std::vector<Tool>& allTools() {
    static const std::vector<Tool> tools = {
        Tool{.name = "remitc",
             .summary = "remitc: check, format, compile and compare Remit programs",
             .commands = {&kCheck, &kFmt, &kBuild, &kKeygen, &kDis, &kManifest, &kSchema, &kDiff, &kImport, &kLsp,
                          &kCompletions},
             .details = "--strict-flows: decisions on tagged data count for deny parameters too, and early exits\n"
                        "taint what follows (docs/language.md \"Strict flows\"); a policy's [flows] strict = true\n"
                        "does the same."},
        Tool{.name = "remitvm",
             .summary = "remitvm: run Remit programs through the broker, and resume, replay and inspect runs",
             .commands = {&kRun, &kApprove, &kApprovals, &kResume, &kReplay, &kTrace, &kTest, &kServe, &kMcp, &kInbox,
                          &kSubmit, &kWorker, &kRuns, &kStoreCommand}},
        Tool{.name = "remit",
             .summary = "remit: the Remit prototype's command lines (docs/compatibility.md)",
             .commands = {&kCheck, &kFmt, &kDiff, &kBuild, &kRun, &kApprove, &kApprovals, &kResume, &kReplay, &kTest,
                          &kMcp, &kInbox, &kAsk}},
    };
    return tools;
}

}  // namespace remit::cli
