// The fleet's commands (docs/fleet.md): `remitvm worker` takes queued runs from a PostgreSQL store
// and runs them on its threads, `remitvm runs list|show` shows them, `remitvm store migrate`
// brings a store's schema up to date. `submit` (cli/run_commands.cpp) queues runs. Each run a
// worker takes goes through the same code as `run` and `resume --json` (runSubmitted), its
// output kept in buffers: the --json envelope becomes the run's outcome in the store.
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "broker/replay.h"
#include "broker/trace.h"
#include "cli/commands.h"
#include "runtime/json_text.h"
#include "session/pg_store.h"
#include "session/run_lifecycle.h"

namespace remit::cli {

namespace {

// The PostgreSQL store a fleet command needs, or why not (printed; exit 2).
std::unique_ptr<PgStore> openFleetStore(std::string_view tool, const Args& args, const char* what) {
    std::unique_ptr<Store> opened = openStoreFor(tool, args);
    if (!opened) return nullptr;
    if (opened->kind() != Store::Kind::PostgreSQL) {
        fmt::print(stderr, "{}: error: {} works on the runs of a PostgreSQL store, and {} is a state directory\n",
                   tool, what, opened->describe());
        fmt::print(stderr, "  hint: pass --store postgresql://… (or set REMIT_STORE)\n");
        return nullptr;
    }
    return std::unique_ptr<PgStore>(static_cast<PgStore*>(opened.release()));
}

// ---------------------------------------------------------------- worker

std::atomic<bool> gStop{false};

void onStopSignal(int) { gStop = true; }

// One run's output, captured while it runs on a worker thread.
class CapturedOutput {
public:
    CapturedOutput() {
        out_ = ::open_memstream(&outText_, &outSize_);
        err_ = ::open_memstream(&errText_, &errSize_);
        saved_ = commandOutput();
        if (out_ && err_) commandOutput() = CommandOutput{out_, err_};
    }
    ~CapturedOutput() {
        close();
        std::free(outText_);
        std::free(errText_);
    }
    bool ok() const { return out_ && err_; }
    void close() {
        commandOutput() = saved_;
        if (out_) std::fclose(out_);
        if (err_) std::fclose(err_);
        out_ = err_ = nullptr;
    }
    std::string out() const { return outText_ ? std::string(outText_, outSize_) : ""; }
    std::string err() const { return errText_ ? std::string(errText_, errSize_) : ""; }

private:
    std::FILE* out_ = nullptr;
    std::FILE* err_ = nullptr;
    char* outText_ = nullptr;
    char* errText_ = nullptr;
    size_t outSize_ = 0, errSize_ = 0;
    CommandOutput saved_;
};

struct WorkerConfig {
    std::string url;
    std::string name;
    double leaseSeconds = 10;
    size_t concurrency = 1;
    bool drain = false;  // exit once nothing is queued and nothing is in hand
};

// The slots' shared state: woken when the store says there is work.
struct WorkBoard {
    std::mutex mutex;
    std::condition_variable wake;
    uint64_t generation = 0;
    size_t busy = 0;
    size_t idleRounds = 0;  // consecutive claims that found nothing (--drain)
    std::set<std::string> inHand;  // the runs the heartbeat renews the leases of
    std::vector<std::string> held() {
        std::lock_guard<std::mutex> lock(mutex);
        return {inHand.begin(), inHand.end()};
    }
    void notifyAll() {
        {
            std::lock_guard<std::mutex> lock(mutex);
            ++generation;
        }
        wake.notify_all();
    }
};

// What the attempt's output says about the run: its status in the store and the outcome recorded.
struct AttemptEnd {
    std::string status;  // completed | failed | waiting | "" (leave it: the store failed)
    std::string latest, digest;
    Json outcome;
};

AttemptEnd judge(int exit, const std::string& out, const std::string& err, const std::string& worker,
                 bool storeFailed) {
    AttemptEnd end;
    std::string problem;
    std::optional<Json> envelope = out.empty() ? std::nullopt : parseJsonText("the run's output", out, problem);
    if (storeFailed) return end;  // the records could not be kept: another attempt continues later
    std::string tail = err.size() > 8192 ? err.substr(err.size() - 8192) : err;
    end.outcome = envelope && envelope->is_object() ? *envelope : Json::object();
    end.outcome["exit"] = exit;
    end.outcome["worker"] = worker;
    if (!tail.empty()) end.outcome["stderr"] = tail;
    std::string status = envelope && envelope->is_object() ? stringField(*envelope, "status") : "";
    end.latest = envelope && envelope->is_object() ? stringField(*envelope, "run_id") : "";
    if (status == "completed") {
        end.status = "completed";
    } else if (status == "approval_required") {
        end.status = "waiting";
        if ((*envelope)["pending"].is_object()) end.digest = stringField((*envelope)["pending"], "digest");
        if (end.digest.empty()) end.status = "failed";
    } else {
        end.status = "failed";  // a runtime error, a refused program, or a problem before it started
        if (!end.outcome.contains("status")) end.outcome["status"] = "failed";
    }
    return end;
}

// Runs one claimed run on this thread, with `store` (whose connection holds its lock).
void runClaimed(std::string_view tool, PgStore& store, const SubmittedRun& run, const WorkerConfig& config) {
    const std::string& worker = config.name;
    Args args;
    args.positional = {run.path};
    if (run.submission.is_object() && run.submission.contains("flags") && run.submission["flags"].is_array())
        for (const auto& flag : run.submission["flags"])
            if (flag.is_array() && flag.size() == 2 && flag[0].is_string() && flag[1].is_string())
                args.options.emplace_back(flag[0].get<std::string>(), flag[1].get<std::string>());
    args.options.emplace_back("--json", "");
    int exit = kUsage;
    CapturedOutput captured;
    if (captured.ok()) {
        commandOutput().storeFailed = false;
        try {
            exit = runSubmitted(tool, args, store, run.runId, run.submission, run.traced);
        } catch (const std::exception&) {
            fmt::print(commandOutput().err, "{}: error: internal error while running the run\n", tool);
            exit = kFailure;
        }
    }
    bool storeFailed = commandOutput().storeFailed || !store.connection().alive();
    captured.close();
    AttemptEnd end = judge(exit, captured.out(), captured.err(), worker, storeFailed);
    if (end.status.empty()) {
        // The lease is given up at once, over a connection of its own (this one failed); when the
        // database cannot be reached at all, the lease runs out instead, since the heartbeat no
        // longer renews it. The run lock goes with the failed connection.
        std::string error;
        std::unique_ptr<PgStore> other = PgStore::open(config.url, error);
        if (other) other->abandon(run.runId, worker, error);
        fmt::print(stderr, "worker {}: run {}: the store failed during the attempt; another attempt continues it{}\n",
                   worker, run.runId, error.empty() ? "" : " once its lease runs out (" + error + ")");
        return;
    }
    std::string error;
    if (!store.finish(run.runId, end.status, end.latest, end.digest, end.outcome, error))
        fmt::print(stderr, "worker {}: run {}: {}\n", worker, run.runId, error);
    else
        fmt::print(stderr, "worker {}: run {} {}{}\n", worker, run.runId, end.status,
                   end.status == "waiting" ? " for approval " + end.digest.substr(0, 16) : "");
}

void slotLoop(std::string_view tool, const WorkerConfig& config, WorkBoard& board) {
    std::unique_ptr<PgStore> store;
    while (!gStop) {
        if (!store || !store->connection().alive()) {
            std::string error;
            store = PgStore::open(config.url, error);
            if (!store) {
                fmt::print(stderr, "worker {}: {}; trying again in a second\n", config.name, error);
                std::this_thread::sleep_for(std::chrono::seconds(1));
                continue;
            }
        }
        uint64_t seen;
        {
            std::lock_guard<std::mutex> lock(board.mutex);
            seen = board.generation;
            ++board.busy;
        }
        std::unique_ptr<RunHold> hold;
        std::string error;
        std::optional<SubmittedRun> run = store->claim(config.name, config.leaseSeconds, hold, error);
        if (run) {
            {
                std::lock_guard<std::mutex> lock(board.mutex);
                board.inHand.insert(run->runId);
            }
            runClaimed(tool, *store, *run, config);
            std::lock_guard<std::mutex> lock(board.mutex);
            board.inHand.erase(run->runId);
        }
        hold.reset();
        if (!error.empty()) fmt::print(stderr, "worker {}: {}\n", config.name, error);
        std::unique_lock<std::mutex> lock(board.mutex);
        --board.busy;
        if (run) {
            board.idleRounds = 0;
            continue;  // there may be more
        }
        ++board.idleRounds;
        if (config.drain && board.busy == 0 && board.idleRounds >= config.concurrency) {
            gStop = true;
            board.wake.notify_all();
            return;
        }
        // Wait for a notification (submit, approve, deny), or poll again after a while anyway.
        board.wake.wait_for(lock, std::chrono::milliseconds(1000), [&] { return gStop || board.generation != seen; });
    }
}

}  // namespace

int workerCommand(std::string_view tool, Args& args) {
    if (!args.positional.empty()) {
        fmt::print(stderr, "{}: error: worker takes no arguments (the runs come from the store)\n", tool);
        return kUsage;
    }
    WorkerConfig config;
    auto positive = [&](const char* flag, double& value, double max) {
        const std::string* v = args.value(flag);
        if (!v) return true;
        char* end = nullptr;
        double n = std::strtod(v->c_str(), &end);
        if (v->empty() || *end || !(n > 0) || n > max) {
            fmt::print(stderr, "{}: error: {} needs a positive number up to {}, not '{}'\n", tool, flag, max, *v);
            return false;
        }
        value = n;
        return true;
    };
    double concurrency = 1;
    if (!positive("--concurrency", concurrency, 64) || !positive("--lease", config.leaseSeconds, 3600)) return kUsage;
    if (concurrency != static_cast<double>(static_cast<size_t>(concurrency))) {
        fmt::print(stderr, "{}: error: --concurrency needs a whole number of runs\n", tool);
        return kUsage;
    }
    config.concurrency = static_cast<size_t>(concurrency);
    config.drain = args.has("--drain");
    char host[256] = "host";
    ::gethostname(host, sizeof host - 1);
    config.name = args.value("--name") ? *args.value("--name") : fmt::format("{}:{}", host, ::getpid());

    std::unique_ptr<PgStore> control = openFleetStore(tool, args, "worker");
    if (!control) return kUsage;
    if (const char* env = std::getenv("REMIT_STORE"); !args.value("--store") && env) config.url = env;
    else config.url = *args.value("--store");
    std::string error;
    if (!control->listen(error)) {
        fmt::print(stderr, "{}: error: cannot listen for runs in {}: {}\n", tool, control->describe(), error);
        return kUsage;
    }
    std::unique_ptr<PgStore> beats = PgStore::open(config.url, error);
    if (!beats) {
        fmt::print(stderr, "{}: error: {}\n", tool, error);
        return kUsage;
    }
    std::signal(SIGTERM, onStopSignal);
    std::signal(SIGINT, onStopSignal);
    fmt::print(stderr, "worker {}: taking runs from {} ({} at a time, lease {} s)\n", config.name,
               control->describe(), config.concurrency, config.leaseSeconds);

    WorkBoard board;
    std::vector<std::thread> slots;
    for (size_t i = 0; i < config.concurrency; ++i)
        slots.emplace_back([&] { slotLoop(tool, config, board); });
    // The heartbeat renews the leases of this worker's runs; it stops with the process, and then
    // the leases run out and other workers take the runs over.
    std::thread heartbeat([&] {
        auto period = std::chrono::milliseconds(static_cast<int64_t>(config.leaseSeconds * 1000 / 3));
        while (!gStop) {
            std::string why;
            if (!beats->connection().alive()) beats = PgStore::open(config.url, why);
            if (beats && !beats->heartbeat(config.name, board.held(), config.leaseSeconds, why))
                fmt::print(stderr, "worker {}: heartbeat: {}\n", config.name, why);
            for (auto waited = std::chrono::milliseconds(0); waited < period && !gStop;
                 waited += std::chrono::milliseconds(100))
                std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
    });
    auto lastExpiryCheck = std::chrono::steady_clock::now() - std::chrono::hours(1);
    while (!gStop) {
        if (!control->connection().alive()) {
            control = PgStore::open(config.url, error);
            if (!control || !control->listen(error)) {
                std::this_thread::sleep_for(std::chrono::seconds(1));
                continue;
            }
        }
        if (control->waitForWork(250)) board.notifyAll();
        if (std::chrono::steady_clock::now() - lastExpiryCheck > std::chrono::seconds(5)) {
            lastExpiryCheck = std::chrono::steady_clock::now();
            if (control->wakeExpired(error) > 0) board.notifyAll();
        }
    }
    board.notifyAll();
    for (std::thread& t : slots) t.join();
    heartbeat.join();
    fmt::print(stderr, "worker {}: stopped\n", config.name);
    return kOk;
}

// ---------------------------------------------------------------- runs, store

namespace {

Json runSummary(const SubmittedRun& run) {
    return {{"run_id", run.runId}, {"status", run.status}, {"program", run.program}, {"updated_at", run.updatedAt}};
}

std::string timeText(double unixTime) {
    std::time_t t = static_cast<std::time_t>(unixTime);
    std::tm local{};
    localtime_r(&t, &local);
    char text[32];
    std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &local);
    return text;
}

}  // namespace

int runsListCommand(std::string_view tool, Args& args) {
    if (!args.positional.empty()) {
        fmt::print(stderr, "{}: error: runs list takes no arguments\n", tool);
        return kUsage;
    }
    std::unique_ptr<PgStore> store = openFleetStore(tool, args, "runs list");
    if (!store) return kUsage;
    std::string error;
    std::optional<std::vector<SubmittedRun>> runs = store->listRuns(error);
    if (!runs) {
        fmt::print(stderr, "{}: error: {}\n", tool, error);
        return kUsage;
    }
    if (args.has("--json")) {
        Json out = Json::array();
        for (const SubmittedRun& r : *runs) out.push_back(runSummary(r));
        fmt::print("{}\n", prettyJson(out));
        return kOk;
    }
    if (runs->empty()) fmt::print("no runs in {}\n", store->describe());
    for (const SubmittedRun& r : *runs)
        fmt::print("{}  {:<9}  {}  updated {}{}\n", r.runId, r.status, r.program, timeText(r.updatedAt),
                   r.status == "waiting" ? "  approval " + r.waitingDigest.substr(0, 16) : "");
    return kOk;
}

int runsShowCommand(std::string_view tool, Args& args) {
    if (args.positional.size() != 1) {
        fmt::print(stderr, "{}: error: runs show needs exactly one RUN_ID\n", tool);
        return kUsage;
    }
    std::unique_ptr<PgStore> store = openFleetStore(tool, args, "runs show");
    if (!store) return kUsage;
    bool json = args.has("--json");
    std::string error;
    const std::string& id = args.positional[0];
    std::optional<SubmittedRun> run = isRunId(id) ? store->findRun(id, error) : std::nullopt;
    if (!run) {
        fmt::print(stderr, "{}: error: {}\n", tool,
                   !error.empty() ? error : fmt::format("no run '{}' in {}", id, store->describe()));
        return kUsage;
    }
    // Its calls, from the newest trace of the run (which answers every earlier call again).
    Json calls = Json::array();
    std::string traceError;
    if (!run->latest.empty() && store->hasTrace(run->latest)) {
        TraceFile trace = store->readTrace(run->latest, TraceCheck::Verify, static_cast<size_t>(-1));
        traceError = trace.error;
        for (const auto& e : trace.events)
            if (stringField(e, "event") == "call") {
                auto member = [&](const char* key) { return e.contains(key) ? Json(e[key]) : Json(nullptr); };
                calls.push_back({{"seq", member("seq")},
                                 {"resource", stringField(e, "resource")},
                                 {"site", stringField(e, "site")},
                                 {"status", stringField(e, "status")},
                                 {"cost_usd", member("cost_usd")},
                                 {"replayed", member("replayed") == true},
                                 {"idempotency_key", stringField(e, "idempotency_key")}});
            }
    }
    if (json) {
        Json out = runSummary(*run);
        out["path"] = run->path;
        out["created_at"] = run->createdAt;
        out["attempts"] = run->attempts;
        out["worker"] = run->worker.empty() ? Json(nullptr) : Json(run->worker);
        out["trace"] = run->latest.empty() ? Json(nullptr) : Json(run->latest);
        out["waiting_digest"] = run->waitingDigest.empty() ? Json(nullptr) : Json(run->waitingDigest);
        out["outcome"] = run->outcome;
        out["calls"] = calls;
        fmt::print("{}\n", prettyJson(out));
        return kOk;
    }
    fmt::print("run {}  {}  program {} ({})\n", run->runId, run->status, run->program, run->path);
    fmt::print("  submitted {}, updated {}, {} attempt(s){}\n", timeText(run->createdAt), timeText(run->updatedAt),
               run->attempts, run->worker.empty() ? "" : ", last by " + run->worker);
    if (run->status == "waiting")
        fmt::print("  waiting for approval {}: `{} approvals show {}{}`\n", run->waitingDigest, tool,
                   run->waitingDigest.substr(0, 16), stateFlags(args));
    if (!run->latest.empty()) fmt::print("  trace {}\n", run->latest);
    for (const auto& c : calls)
        fmt::print("  #{} {} @ {} {}{}\n", c["seq"].dump(), c["resource"].get<std::string>(),
                   c["site"].get<std::string>(), c["status"].get<std::string>(),
                   c["replayed"] == true ? " (replayed)" : "");
    if (!traceError.empty()) fmt::print("  the trace cannot be read: {}\n", traceError);
    if (run->outcome.is_object()) {
        if (run->outcome.contains("result")) fmt::print("  result: {}\n", prettyJson(run->outcome["result"]));
        if (run->outcome.contains("error") && run->outcome["error"].is_object())
            fmt::print("  error: {}\n", stringField(run->outcome["error"], "message"));
        else if (run->status == "failed" && run->outcome.contains("stderr"))
            fmt::print("  {}", stringField(run->outcome, "stderr"));
    }
    return kOk;
}

int storeMigrateCommand(std::string_view tool, Args& args) {
    if (!args.positional.empty()) {
        fmt::print(stderr, "{}: error: store migrate takes no arguments\n", tool);
        return kUsage;
    }
    const char* env = std::getenv("REMIT_STORE");
    std::string url = args.value("--store") ? *args.value("--store") : env ? env : "";
    if (url.empty()) {
        fmt::print(stderr, "{}: error: store migrate needs a PostgreSQL store: pass --store postgresql://… (or set "
                           "REMIT_STORE)\n",
                   tool);
        return kUsage;
    }
    std::string error, shown = pg::displayUrl(url, error);
    if (shown.empty()) {
        fmt::print(stderr, "{}: error: malformed store URL: {}\n", tool, error);
        return kUsage;
    }
    std::unique_ptr<pg::Connection> c = pg::Connection::open(url, error);
    if (!c) {
        fmt::print(stderr, "{}: error: cannot connect to the PostgreSQL store {}: {}\n", tool, shown, error);
        return kUsage;
    }
    int applied = 0;
    if (!PgStore::migrateSchema(*c, applied, error)) {
        fmt::print(stderr, "{}: error: the PostgreSQL store {}: {}\n", tool, shown, error);
        return kUsage;
    }
    fmt::print("the PostgreSQL store {} is at schema version {} ({} migration(s) applied)\n", shown,
               kStoreSchemaVersion, applied);
    return kOk;
}

}  // namespace remit::cli
