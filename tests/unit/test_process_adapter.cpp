// Adapter processes (broker/process_adapter.*): the JSON-lines protocol, its failure modes (late,
// malformed, mismatched, oversized replies; dead, deaf and one-shot processes), process hygiene
// (restarts, reaping, killing, no inherited fds, no SIGPIPE) and the --live Python shim.
// Helper scripts live in tests/e2e/adapters/.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "broker/process_adapter.h"
#include "runtime/json_text.h"
#include "adapter_request.h"
#include "temp_dir.h"

using namespace remit;

namespace {

const std::string kSource = REMIT_SOURCE_DIR;
const std::string kAdapters = kSource + "/tests/e2e/adapters";
const std::string kFake = "python3 " + kAdapters + "/fake_adapter.py";
const std::string kShim = kSource + "/scripts/remit-py-adapter";

std::unique_ptr<Adapter> make(const std::string& command, ProcessAdapterOptions options = {}) {
    std::string error;
    auto adapter = makeProcessAdapter(command, options, error);
    REQUIRE_MESSAGE(adapter, error);
    return adapter;
}

AdapterRequest call(Json args = Json::object(), uint64_t timeoutMs = 5000) {
    return test::callRequest("notes.echo", std::move(args), timeoutMs);
}

AdapterRequest ask(const std::string& model) {
    AdapterRequest r;
    r.kind = AdapterRequest::Kind::Ask;
    r.runId = "run-1";
    r.site = "main#1";
    r.idempotencyKey = "fedcba9876543210fedcba9876543210";
    r.timeoutMs = 5000;
    r.model = model;
    r.agent = "Verifier";
    r.system = "Be brief.";
    r.prompt = "Is it true?";
    r.context = Json{{"claim", "x"}};
    r.renderedPrompt = "Is it true?\n\n<context>...";
    r.schema = Json{{"type", "string"}};
    r.typeName = "Str";
    return r;
}

using test::TempDir;

int lineCount(const std::string& path) {
    std::ifstream in(path);
    int n = 0;
    for (std::string line; std::getline(in, line);) ++n;
    return n;
}

std::string slurp(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// Gone, or a zombie of someone else (an orphan waiting for init): not running.
bool processGone(pid_t pid) {
    if (::kill(pid, 0) != 0) return true;
    std::string stat = slurp("/proc/" + std::to_string(pid) + "/stat");
    auto close = stat.rfind(')');
    return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z';
}

bool eventually(auto predicate, int ms = 2000) {
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < until) {
        if (predicate()) return true;
        ::usleep(5000);
    }
    return predicate();
}

long long elapsedMs(std::chrono::steady_clock::time_point since) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - since).count();
}

}  // namespace

TEST_CASE("process adapter: command splitting without a shell") {
    std::vector<std::string> argv;
    std::string error;
    CHECK(splitCommand("python3 my_adapter.py --flag", argv, error));
    CHECK(argv == std::vector<std::string>{"python3", "my_adapter.py", "--flag"});
    CHECK(splitCommand("  a  'b c'  \"d \\\" e\" f\\ g ''  ", argv, error));
    CHECK(argv == std::vector<std::string>{"a", "b c", "d \" e", "f g", ""});
    CHECK(splitCommand("x 'it''s'", argv, error));
    CHECK(argv == std::vector<std::string>{"x", "its"});
    CHECK(splitCommand("run '|' \"a;b\"", argv, error));
    CHECK(argv == std::vector<std::string>{"run", "|", "a;b"});
    CHECK_FALSE(splitCommand("   ", argv, error));
    CHECK(error.find("empty") != std::string::npos);
    CHECK_FALSE(splitCommand("a 'b", argv, error));
    CHECK(error.find("unterminated") != std::string::npos);
    CHECK_FALSE(splitCommand("a | b", argv, error));
    CHECK(error.find("without a shell") != std::string::npos);
    CHECK_FALSE(splitCommand("echo $HOME", argv, error));

    CHECK_FALSE(makeProcessAdapter("no-such-adapter-program-xyz --x", error));
    CHECK(error.find("not found") != std::string::npos);
    CHECK_FALSE(makeProcessAdapter("", error));
}

TEST_CASE("process adapter: call and ask round trips, one process for the run") {
    auto adapter = make(kFake);
    CHECK(std::string(adapter->kind()) == "process");

    AdapterReply r = adapter->perform(call(Json{{"path", "inbox/a.txt"}, {"n", 1}}));
    REQUIRE_MESSAGE(r.ok, r.message);
    CHECK(r.result["type"] == "call");
    CHECK(r.result["id"] == 1);
    CHECK(r.result["resource"] == "notes.echo");
    CHECK(r.result["args"] == Json{{"path", "inbox/a.txt"}, {"n", 1}});
    CHECK(r.result["idempotency_key"] == "0123456789abcdef0123456789abcdef");
    CHECK(r.result["timeout_ms"] == 5000);
    CHECK(r.result["run_id"] == "run-1");
    REQUIRE(r.costUsd.has_value());
    CHECK(*r.costUsd == doctest::Approx(0.25));
    CHECK(r.meta == Json{{"adapter", "fake"}});
    const auto pid = r.result["pid"].get<int>();

    r = adapter->perform(ask("llm"));
    REQUIRE_MESSAGE(r.ok, r.message);
    CHECK(r.result["id"] == 2);
    CHECK(r.result["type"] == "ask");
    for (const char* key : {"model", "agent", "system", "prompt", "context", "rendered_prompt", "schema", "type_name",
                            "idempotency_key", "timeout_ms", "run_id"})
        CHECK_MESSAGE(r.result.contains(key), key);
    CHECK(r.result["agent"] == "Verifier");
    CHECK(r.result["context"] == Json{{"claim", "x"}});
    CHECK(r.result["rendered_prompt"] == "Is it true?\n\n<context>...");
    CHECK(r.result["pid"] == pid);  // the same process

    AdapterRequest plain = ask("llm");
    plain.agent.clear();
    plain.system.clear();
    plain.context = nullptr;
    r = adapter->perform(plain);
    REQUIRE(r.ok);
    CHECK(r.result["agent"].is_null());
    CHECK(r.result["system"].is_null());
    CHECK(r.result["context"].is_null());

    // An adapter's own error replies pass through.
    r = adapter->perform(call(Json{{"fail", "Timeout"}}));
    CHECK_FALSE(r.ok);
    CHECK(r.errorCode == "Timeout");
    CHECK(r.message == "failed on purpose");
    r = adapter->perform(call(Json{{"fail", "ModelOutputInvalid"}}));
    CHECK(r.errorCode == "ModelOutputInvalid");
    r = adapter->perform(call(Json{{"fail", "Whatever"}}));
    CHECK(r.errorCode == "CapabilityFailed");
    CHECK(r.message.find("unknown error 'Whatever'") != std::string::npos);
}

TEST_CASE("process adapter: requests carry the site, the attempt, the tags and the repair turn") {
    auto adapter = make(kFake);
    AdapterRequest c = call(Json{{"email", "a@b"}});
    c.attempt = 2;
    c.argTags = Json{{"email", {"untrusted"}}};
    c.pcTags = Json::array({"private"});
    AdapterReply r = adapter->perform(c);
    REQUIRE_MESSAGE(r.ok, r.message);
    CHECK(r.result["site"] == "main#0");
    CHECK(r.result["attempt"] == 2);
    CHECK(r.result["arg_tags"] == Json{{"email", {"untrusted"}}});
    CHECK(r.result["pc_tags"] == Json::array({"private"}));
    CHECK_FALSE(r.result.contains("previous"));  // model calls only

    AdapterRequest first = ask("llm");
    r = adapter->perform(first);
    REQUIRE(r.ok);
    CHECK(r.result["previous"].is_null());
    CHECK(r.result["attempt"] == 0);
    CHECK(r.result["arg_tags"] == Json::object());
    AdapterRequest retry = ask("llm");
    retry.attempt = 1;
    retry.previous = AdapterRequest::Previous{Json{{"verdict", "maybe"}}, "model output does not match"};
    r = adapter->perform(retry);
    REQUIRE(r.ok);
    CHECK(r.result["previous"] == Json{{"answer", {{"verdict", "maybe"}}}, {"error", "model output does not match"}});
}

TEST_CASE("process adapter: a late reply is a Timeout, and the next call gets a fresh process") {
    ProcessAdapterOptions options;
    options.startupGraceMs = 0;
    auto adapter = make(kFake, options);
    AdapterReply warm = adapter->perform(call());
    REQUIRE(warm.ok);
    const auto pid = warm.result["pid"].get<pid_t>();

    auto t0 = std::chrono::steady_clock::now();
    AdapterReply r = adapter->perform(call(Json{{"sleep_ms", 10000}}, 300));
    auto took = elapsedMs(t0);
    CHECK_FALSE(r.ok);
    CHECK(r.errorCode == "Timeout");
    CHECK(r.message.find("300 ms") != std::string::npos);
    CHECK(took >= 300);
    CHECK(took < 2000);  // the timeout plus the kill grace (and a loaded machine), not the 10 s sleep
    CHECK(processGone(pid));

    r = adapter->perform(call());
    REQUIRE_MESSAGE(r.ok, r.message);
    CHECK(r.result["pid"].get<pid_t>() != pid);
}

TEST_CASE("process adapter: a fresh process gets a start-up grace on its first request only") {
    ProcessAdapterOptions options;
    options.startupGraceMs = 3000;
    auto adapter = make(kFake, options);
    AdapterReply r = adapter->perform(call(Json{{"sleep_ms", 400}}, 200));
    CHECK_MESSAGE(r.ok, r.message);
    r = adapter->perform(call(Json{{"sleep_ms", 400}}, 200));
    CHECK(r.errorCode == "Timeout");
}

TEST_CASE("process adapter: malformed and incomplete replies are CapabilityFailed naming the problem") {
    auto adapter = make(kFake);
    struct Case {
        const char* raw;
        const char* expect;
    } cases[] = {
        {"this is not json", "not valid JSON"},
        {"{\"id\": {id}, \"ok\": true, \"result\": ", "not valid JSON"},
        {"[1, 2]", "not a JSON object"},
        {"{\"ok\": true, \"result\": 1}", "no 'id'"},
        {"{\"id\": \"{id}\", \"ok\": true, \"result\": 1}", "'id' is not an integer"},
        {"{\"id\": {id}, \"result\": 1}", "no 'ok'"},
        {"{\"id\": {id}, \"ok\": \"yes\", \"result\": 1}", "'ok' is not a boolean"},
        {"{\"id\": {id}, \"ok\": true}", "no 'result'"},
        {"{\"id\": {id}, \"ok\": true, \"result\": 1, \"cost_usd\": -1}", "cost_usd"},
        {"{\"id\": {id}, \"ok\": true, \"result\": 1, \"cost_usd\": \"free\"}", "cost_usd"},
        {"{\"id\": {id}, \"ok\": true, \"result\": 1, \"meta\": [1]}", "'meta' is not an object"},
        {"{\"id\": {id}, \"ok\": false, \"message\": \"m\"}", "no 'error'"},
        {"{\"id\": {id}, \"ok\": false, \"error\": \"CapabilityFailed\"}", "no 'message'"},
        {"{\"id\": {id}, \"ok\": true, \"result\": \"\\ud800\"}", "not valid JSON"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.raw);
        AdapterReply r = adapter->perform(call(Json{{"raw", c.raw}}));
        CHECK_FALSE(r.ok);
        CHECK(r.errorCode == "CapabilityFailed");
        CHECK_MESSAGE(r.message.find(c.expect) != std::string::npos, r.message);
    }
    // An invalid reply to the current request keeps the process (the stream is in step); one that
    // cannot be matched to it does not.
    const auto pid = adapter->perform(call()).result["pid"].get<pid_t>();
    adapter->perform(call(Json{{"raw", "{\"id\": {id}, \"ok\": 1, \"result\": 1}"}}));
    CHECK(adapter->perform(call()).result["pid"].get<pid_t>() == pid);
    adapter->perform(call(Json{{"raw", "{\"id\": {id}, \"ok\": true, \"result\": [}"}}));
    CHECK(adapter->perform(call()).result["pid"].get<pid_t>() != pid);
    // Bytes that are not UTF-8: refused, and the message stays valid UTF-8 (it goes into the trace).
    AdapterReply bad = adapter->perform(call(Json{{"raw_latin1", "{\"id\": {id}, \"ok\": true, \"result\": \"\xc3\xbf\xc3\xbe\"}"}}));
    CHECK(bad.errorCode == "CapabilityFailed");
    CHECK(bad.message.find("not valid JSON") != std::string::npos);
    CHECK_NOTHROW((void)Json(bad.message).dump());
    // Deeply nested replies are refused before parsing.
    std::string deep = "{\"id\": {id}, \"ok\": true, \"result\": " + std::string(5000, '[') + std::string(5000, ']') + "}";
    AdapterReply r = adapter->perform(call(Json{{"raw", deep}}));
    CHECK(r.errorCode == "CapabilityFailed");
    CHECK(r.message.find("nests deeper") != std::string::npos);
    // A well-formed reply still works after all that (the process was restarted as needed).
    r = adapter->perform(call());
    CHECK_MESSAGE(r.ok, r.message);
    // null cost and meta are "not given".
    r = adapter->perform(call(Json{{"raw", "{\"id\": {id}, \"ok\": true, \"result\": null, \"cost_usd\": null, \"meta\": null}"}}));
    REQUIRE_MESSAGE(r.ok, r.message);
    CHECK(r.result.is_null());
    CHECK_FALSE(r.costUsd.has_value());
}

TEST_CASE("process adapter: a stale reply is skipped, a wrong id is a mismatch") {
    auto adapter = make(kFake);
    REQUIRE(adapter->perform(call()).ok);  // id 1
    AdapterReply r = adapter->perform(call(Json{{"stale", true}}));  // id 2, preceded by a reply to id 1
    REQUIRE_MESSAGE(r.ok, r.message);
    CHECK(r.result["id"] == 2);

    r = adapter->perform(call(Json{{"raw", "{\"id\": 999, \"ok\": true, \"result\": 1}"}}));
    CHECK_FALSE(r.ok);
    CHECK(r.errorCode == "CapabilityFailed");
    CHECK(r.message.find("id 999, expected 3") != std::string::npos);
    r = adapter->perform(call(Json{{"raw", "{\"id\": -1, \"ok\": true, \"result\": 1}"}}));
    CHECK(r.message.find("id -1") != std::string::npos);
}

TEST_CASE("process adapter: a reply line with a NUL byte is not a reply") {
    // The JSON parser takes a NUL for the end of its input, so the part before one used to pass
    // as the whole reply (found by tests/fuzz/fuzz_adapter_reply.cpp).
    auto adapter = make(kFake);
    AdapterReply r = adapter->perform(
        call(Json{{"raw", std::string("{\"id\": {id}, \"ok\": true, \"result\": 1}") + '\0' + "junk"}}));
    CHECK_FALSE(r.ok);
    CHECK(r.errorCode == "CapabilityFailed");
    CHECK(r.message == "adapter reply contains a NUL byte");
    // The process was out of step, so it was restarted; the next call is answered.
    CHECK(adapter->perform(call()).ok);

    AdapterReplyLine line = parseAdapterReply(std::string("{\"id\": 1, \"ok\": true, \"result\": 1}") + '\0', 1);
    CHECK(line.kind == AdapterReplyLine::Kind::OutOfStep);
}

TEST_CASE("process adapter: the fuzz regressions of the reply reader") {
    // tests/fuzz/regressions/adapter_reply-*: the first byte picks the request id (1 to 4), the
    // rest is the adapter's output, judged a line at a time as fuzz_adapter_reply does. No line
    // holding a NUL may be taken for a reply.
    const std::filesystem::path dir = std::filesystem::path(kSource) / "tests" / "fuzz" / "regressions";
    size_t replayed = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
        if (entry.path().filename().string().rfind("adapter_reply-", 0) != 0) continue;
        std::ifstream in(entry.path(), std::ios::binary);
        std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        CAPTURE(entry.path().string());
        REQUIRE_FALSE(bytes.empty());
        const uint64_t id = 1 + static_cast<unsigned char>(bytes[0]) % 4;
        std::istringstream lines(bytes.substr(1));
        std::string line;
        while (std::getline(lines, line)) {
            if (!line.empty() && line.back() == '\r') line.pop_back();
            AdapterReplyLine judged = parseAdapterReply(line, id);
            if (line.find('\0') != std::string::npos) CHECK(judged.kind == AdapterReplyLine::Kind::OutOfStep);
        }
        ++replayed;
    }
    CHECK(replayed >= 1);
}

TEST_CASE("process adapter: a process that dies is restarted once per attempt") {
    TempDir tmp;
    SUBCASE("dies once, then works") {
        auto adapter = make(kFake + " --count-file " + tmp.file("starts") + " --die-first 3");
        AdapterReply r = adapter->perform(call());
        CHECK_MESSAGE(r.ok, r.message);
        CHECK(r.delivered);
        CHECK(lineCount(tmp.file("starts")) == 2);
    }
    SUBCASE("dies on every start: two starts, then CapabilityFailed") {
        auto adapter = make(kFake + " --count-file " + tmp.file("starts") + " --die-always 7");
        // A large request, so the write hits a closed pipe: EPIPE, never SIGPIPE.
        AdapterReply r = adapter->perform(call(Json{{"blob", std::string(1 << 20, 'b')}}));
        CHECK_FALSE(r.ok);
        CHECK(r.errorCode == "CapabilityFailed");
        CHECK(r.message.find("adapter process exited") != std::string::npos);
        CHECK(r.message.find("exit status 7") != std::string::npos);
        CHECK(lineCount(tmp.file("starts")) == 2);
        // Neither process read a byte of the request: it reached nobody (docs/adapters.md).
        CHECK_FALSE(r.delivered);
        CHECK(r.message.find("without reading the request") != std::string::npos);
        // The next attempt gets its own restart budget.
        r = adapter->perform(call());
        CHECK_FALSE(r.ok);
        CHECK(lineCount(tmp.file("starts")) == 4);
    }
    SUBCASE("dies while handling a request") {
        auto adapter = make(kFake + " --count-file " + tmp.file("starts"));
        AdapterReply r = adapter->perform(call(Json{{"exit", 5}}));
        CHECK_FALSE(r.ok);
        CHECK(r.message.find("adapter process exited") != std::string::npos);
        CHECK(r.message.find("closed its stdout") != std::string::npos);
        CHECK(lineCount(tmp.file("starts")) == 2);
        CHECK(r.delivered);  // it read the request: it may have acted on it
    }
    SUBCASE("closes its stdin and keeps running: EPIPE, not SIGPIPE") {
        // It counts its start before closing its stdin: a request that reaches nobody has its
        // process group killed at once, so a count made after the close could be cut off.
        auto adapter = make("sh -c 'echo start >> " + tmp.file("starts") + "; exec 0<&-; sleep 5'");
        AdapterReply r = adapter->perform(call(Json{{"blob", std::string(256 << 10, 'b')}}));
        CHECK_FALSE(r.ok);
        CHECK(r.errorCode == "CapabilityFailed");
        CHECK(r.message.find("closed its stdin") != std::string::npos);
        CHECK(lineCount(tmp.file("starts")) == 2);
        CHECK_FALSE(r.delivered);
    }
    SUBCASE("a one-shot adapter that exits after each reply is simply started again") {
        auto adapter = make(kFake + " --count-file " + tmp.file("starts") + " --one-shot");
        for (int i = 0; i < 3; ++i) {
            ::usleep(100000);  // let it exit between calls
            AdapterReply r = adapter->perform(call());
            CHECK_MESSAGE(r.ok, r.message);
        }
        CHECK(lineCount(tmp.file("starts")) == 3);
    }
    SUBCASE("a program whose interpreter is missing cannot be started: not delivered") {
        std::string script = tmp.file("bad-interpreter.py");
        std::ofstream(script) << "#!/nonexistent/python3\n";
        std::filesystem::permissions(script, std::filesystem::perms::owner_all);
        auto adapter = make(script);
        AdapterReply r = adapter->perform(call());
        CHECK_FALSE(r.ok);
        CHECK_FALSE(r.delivered);
        CHECK(r.message.find("cannot start adapter process") != std::string::npos);
    }
    SUBCASE("a process that reads part of the request and dies: delivered, since it may have acted") {
        auto adapter = make("sh -c 'head -c 10 >/dev/null; exit 4'");
        AdapterReply r = adapter->perform(call(Json{{"blob", std::string(1000, 'b')}}));
        CHECK_FALSE(r.ok);
        CHECK(r.delivered);
    }
    SUBCASE("a program that cannot be executed") {
        std::string script = tmp.file("not-executable.sh");
        std::ofstream(script) << "#!/bin/sh\n";
        std::string error;
        CHECK_FALSE(makeProcessAdapter(script, error));
        CHECK(error.find("not executable") != std::string::npos);
    }
}

TEST_CASE("process adapter: reply lines are bounded") {
    SUBCASE("over a small limit") {
        ProcessAdapterOptions options;
        options.maxLineBytes = 1 << 20;
        auto adapter = make(kFake, options);
        AdapterReply r = adapter->perform(call(Json{{"huge", 3 << 20}}));
        CHECK_FALSE(r.ok);
        CHECK(r.errorCode == "CapabilityFailed");
        CHECK(r.message.find("longer than 1048576 bytes") != std::string::npos);
        r = adapter->perform(call());
        CHECK_MESSAGE(r.ok, r.message);
    }
    SUBCASE("over the default 64 MiB") {
        auto adapter = make(kFake);
        AdapterReply r = adapter->perform(call(Json{{"huge", (64 << 20) + (1 << 20)}}, 20000));
        CHECK_FALSE(r.ok);
        CHECK(r.message.find("longer than 67108864 bytes") != std::string::npos);
    }
}

TEST_CASE("process adapter: an adapter that never reads its stdin cannot block us") {
    ProcessAdapterOptions options;
    options.startupGraceMs = 0;
    auto adapter = make(kFake + " --never-read", options);
    // Far more than a pipe buffer holds.
    AdapterRequest big = call(Json{{"blob", std::string(1 << 20, 'x')}}, 400);
    auto t0 = std::chrono::steady_clock::now();
    AdapterReply r = adapter->perform(big);
    CHECK(r.errorCode == "Timeout");
    CHECK_MESSAGE(elapsedMs(t0) < 2000, elapsedMs(t0));

    // One that answers without reading: the reply is taken, the process replaced.
    auto eager = make(kFake + " --reply-unread", options);
    r = eager->perform(call(Json{{"blob", std::string(1 << 20, 'x')}}, 2000));
    REQUIRE_MESSAGE(r.ok, r.message);
    CHECK(r.result == "unread");
}

TEST_CASE("process adapter: children are reaped, killed on destruction, and inherit no fds") {
    TempDir tmp;
    int devnull = ::open("/dev/null", O_RDONLY);  // deliberately without O_CLOEXEC
    REQUIRE(devnull >= 0);
    const int leaked = ::dup2(devnull, 100);
    ::close(devnull);
    REQUIRE(leaked == 100);
    pid_t pid = 0;
    pid_t grandchild = 0;
    {
        auto adapter = make(kFake);
        AdapterReply r = adapter->perform(call(Json{{"child_pid_file", tmp.file("child")}}));
        REQUIRE_MESSAGE(r.ok, r.message);
        pid = r.result["pid"].get<pid_t>();
        grandchild = std::stoi(slurp(tmp.file("child")));
        std::vector<int> fds = r.result["fds"].get<std::vector<int>>();
        CHECK(std::find(fds.begin(), fds.end(), leaked) == fds.end());
        CHECK(fds.size() <= 4);  // 0, 1, 2 and the one listing /proc/self/fd
        CHECK(::kill(pid, 0) == 0);
    }
    ::close(leaked);
    // Reaped by us: not even a zombie, and waitpid knows no such child.
    CHECK(::kill(pid, 0) != 0);
    CHECK(::waitpid(pid, nullptr, WNOHANG) == -1);
    // Its process group went with it.
    CHECK(eventually([&] { return processGone(grandchild); }));

    // A child that ignores stdin EOF and SIGTERM is still stopped, quickly.
    ProcessAdapterOptions options;
    options.exitGraceMs = 50;
    options.termGraceMs = 100;
    auto t0 = std::chrono::steady_clock::now();
    {
        auto stubborn = make("sh -c 'trap \"\" TERM; sleep 30 & wait; wait'", options);
        AdapterReply r = stubborn->perform(call(Json::object(), 200));
        CHECK(r.errorCode == "Timeout");
    }
    CHECK(elapsedMs(t0) < 5000);
}

TEST_CASE("process adapter: the adapter's stderr passes through to ours") {
    TempDir tmp;
    std::fflush(stderr);
    int saved = ::dup(2);
    int file = ::open(tmp.file("stderr").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    REQUIRE(file >= 0);
    ::dup2(file, 2);
    {
        auto adapter = make(kFake);
        AdapterReply r = adapter->perform(call(Json{{"stderr", "diagnostic from the adapter\n"}}));
        CHECK(r.ok);
    }
    ::dup2(saved, 2);
    ::close(saved);
    ::close(file);
    CHECK(slurp(tmp.file("stderr")).find("diagnostic from the adapter") != std::string::npos);
}

TEST_CASE("live adapter: the Python shim runs a prototype-style adapters.py") {
    TempDir tmp;
    ::setenv("LIVE_APP_LEDGER", tmp.file("ledger.jsonl").c_str(), 1);
    std::string error;
    auto adapter = makeLiveAdapter(kShim, kAdapters + "/live_app", error);
    REQUIRE_MESSAGE(adapter, error);
    CHECK(std::string(adapter->kind()) == "live");

    AdapterRequest req = call(Json{{"q", "hello"}}, 2500);
    AdapterReply r = adapter->perform(req);
    REQUIRE_MESSAGE(r.ok, r.message);
    CHECK(r.result == Json{{"args", {{"q", "hello"}}},
                           {"key", "0123456789abcdef0123456789abcdef"},
                           {"timeout", 2.5},
                           {"run_id", "run-1"}});
    CHECK_FALSE(r.costUsd.has_value());

    req.resource = "notes.priced";
    r = adapter->perform(req);
    REQUIRE(r.ok);
    CHECK(r.result == Json::array({1, 2, 3}));
    CHECK(*r.costUsd == doctest::Approx(0.5));
    CHECK(r.meta == Json{{"source", "test"}});

    auto failing = [&](const char* resource) {
        AdapterRequest q = call();
        q.resource = resource;
        return adapter->perform(q);
    };
    r = failing("notes.fail");
    CHECK(r.errorCode == "CapabilityFailed");
    CHECK(r.message == "nope");
    r = failing("notes.boom");
    CHECK(r.errorCode == "CapabilityFailed");
    CHECK(r.message == "'notes.boom' failed: KeyError: 'missing'");
    r = failing("notes.slow");
    CHECK(r.errorCode == "Timeout");
    r = failing("notes.denied");
    CHECK(r.errorCode == "CapabilityFailed");
    CHECK(r.message.find("PolicyViolation") != std::string::npos);
    r = failing("notes.set");
    CHECK(r.errorCode == "CapabilityFailed");
    CHECK(r.message.find("not plain JSON") != std::string::npos);
    r = failing("notes.unknown");
    CHECK(r.message.find("no adapter configured for 'notes.unknown'") != std::string::npos);
    // Printing (even from a subprocess) does not corrupt the protocol.
    r = failing("notes.noisy");
    CHECK_MESSAGE(r.ok, r.message);
    CHECK(r.result == "quiet");

    // The prototype's Ledger de-duplicates by idempotency key.
    req = call(Json{{"amount", 5}});
    req.resource = "ledger.post";
    r = adapter->perform(req);
    REQUIRE_MESSAGE(r.ok, r.message);
    CHECK_FALSE(r.result.contains("deduplicated"));
    r = adapter->perform(req);
    REQUIRE(r.ok);
    CHECK(r.result["deduplicated"] == true);
    CHECK(lineCount(tmp.file("ledger.jsonl")) == 1);

    // A model with an adapter, and one without.
    r = adapter->perform(ask("llm"));
    REQUIRE_MESSAGE(r.ok, r.message);
    CHECK(r.result["agent"] == "Verifier");
    CHECK(r.result["type_name"] == "Str");
    CHECK(r.result["rendered"] == "Is it true?\n\n<context>...");
    CHECK(r.result["prompt"].get<std::string>().find("<context>") != std::string::npos);
    CHECK(*r.costUsd == doctest::Approx(0.01));
    r = adapter->perform(ask("gpt"));
    CHECK_FALSE(r.ok);
    CHECK(r.errorCode == "CapabilityFailed");
    CHECK(r.message.find("no live model adapter for model 'gpt'") != std::string::npos);
    ::unsetenv("LIVE_APP_LEDGER");
}

TEST_CASE("live adapter: a missing or broken adapters.py") {
    std::string error;
    auto none = makeLiveAdapter(kShim, kAdapters, error);  // no adapters.py there
    REQUIRE_MESSAGE(none, error);
    AdapterReply r = none->perform(call());
    CHECK(r.errorCode == "CapabilityFailed");
    CHECK(r.message.find("no adapter configured for 'notes.echo'") != std::string::npos);

    auto broken = makeLiveAdapter(kShim, kAdapters + "/live_broken", error);
    REQUIRE_MESSAGE(broken, error);
    r = broken->perform(call());
    CHECK(r.errorCode == "CapabilityFailed");
    CHECK(r.message == "adapters.py failed to load: RuntimeError: database unreachable");

    CHECK_FALSE(makeLiveAdapter(kShim, kAdapters + "/no-such-app", error));
    CHECK(error.find("not a directory") != std::string::npos);
    CHECK_FALSE(makeLiveAdapter(kSource + "/scripts/no-such-shim", kAdapters, error));
    CHECK(error.find("missing") != std::string::npos);
}
