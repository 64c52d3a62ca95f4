// libFuzzer harness for the approval store `<state>/approvals.json` (broker/approvals.h): the file
// that says which calls a person approved, edited by `remitvm approve` and by hand, and shared by
// every run of a state directory. A store that is misread either forgets consumed approvals (an
// effect approved once happens twice) or invents approvals, so the reader must refuse anything
// that is not a store, and the one-use rule must hold on whatever it accepts.
//
// The input is written to approvals.json in a directory of this process (on /dev/shm when there is
// one: the store fsyncs every change, and tmpfs makes that free, so the harness measures the
// reader, not the disk) and loaded with ApprovalStore::load. The harness traps when a promise
// breaks:
//   - only a missing store is empty: a load succeeds exactly when the text is one JSON object whose
//     "approved", "consumed" and "pending" (each optional) are objects of objects, as read here
//     apart from the loader;
//   - on an accepted store, pendingMatching("") lists exactly its pending digests;
//   - an approval is single use: deciding an approved digest returns its approver and consumes it;
//     the same attempt (idempotency key) gets it again, another attempt does not and leaves the
//     request pending; approving a pending digest lets the next decision take it.
//
// Build and run: `scripts/fuzz approvals SECONDS`. Replay: build/fuzz/tests/fuzz/fuzz_approvals_replay FILE...
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "broker/approvals.h"
#include "runtime/json_text.h"

namespace {

using namespace remit;

[[noreturn]] void broken(const std::string& what, std::string_view input) {
    std::fprintf(stderr, "\n*** fuzz_approvals: %s\n--- input (%zu bytes)\n%.*s\n---\n", what.c_str(), input.size(),
                 static_cast<int>(input.size()), input.data());
    __builtin_trap();
}

// One directory per process. libFuzzer ends with _Exit (after a crash, and at -max_total_time),
// so atexit handlers do not run: each process removes the directories of earlier ones that are
// gone instead, and its own at a normal exit (the replay binary).
constexpr const char* kDirPrefix = "remit-fuzz-approvals-";

void removeStale(const std::filesystem::path& base) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(base, ec)) {
        std::string name = entry.path().filename().string();
        if (name.rfind(kDirPrefix, 0) != 0) continue;
        char* end = nullptr;
        long pid = std::strtol(name.c_str() + std::strlen(kDirPrefix), &end, 10);
        if (pid <= 0 || *end != '\0' || (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)) {
            std::error_code ignored;
            if (pid > 0 && *end == '\0') std::filesystem::remove_all(entry.path(), ignored);
        }
    }
}

const std::filesystem::path& stateDir() {
    // Never destroyed, so the exit handler still has it (a static's destructor would run first).
    static const std::filesystem::path* const dir = [] {
        std::error_code ec;
        std::filesystem::path base = std::filesystem::is_directory("/dev/shm", ec)
                                         ? std::filesystem::path("/dev/shm")
                                         : std::filesystem::temp_directory_path();
        removeStale(base);
        auto* d = new std::filesystem::path(base / (kDirPrefix + std::to_string(::getpid())));
        std::filesystem::create_directories(*d);
        return d;
    }();
    static const bool cleanup = std::atexit([] {
                                    std::error_code ignored;
                                    std::filesystem::remove_all(*dir, ignored);
                                }) == 0;
    (void)cleanup;
    return *dir;
}

// The shape approvals.h documents, read apart from the loader.
bool isStore(std::string_view text) {
    std::string error;
    std::optional<nlohmann::json> doc = parseJsonText("store", text, error);
    if (!doc || !doc->is_object()) return false;
    for (const char* section : {"approved", "consumed", "pending"}) {
        auto it = doc->find(section);
        if (it == doc->end()) continue;
        if (!it->is_object()) return false;
        for (const auto& entry : *it)
            if (!entry.is_object()) return false;
    }
    return true;
}

void write(const std::string& path, std::string_view bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string_view text(reinterpret_cast<const char*>(data), size);
    const std::string path = (stateDir() / "approvals.json").string();
    write(path, text);

    ApprovalStore store(path);
    std::string error;
    bool loaded = store.load(error);
    if (loaded != isStore(text))
        broken(loaded ? "a store that is not one was loaded" : "a store was refused: " + error, text);
    if (!loaded) {
        if (error.empty()) broken("a refusal without a reason", text);
        return 0;
    }

    std::string errorText;
    nlohmann::json doc = *parseJsonText("store", text, errorText);
    std::vector<std::string> pending = store.pendingMatching("");
    std::vector<std::string> expected;
    if (doc.contains("pending"))
        for (auto it = doc["pending"].begin(); it != doc["pending"].end(); ++it) expected.push_back(it.key());
    if (pending != expected) broken("pendingMatching(\"\") is not the pending digests", text);
    for (const std::string& digest : pending) {
        if (store.pendingMatching(digest, true).size() != 1) broken("an exact pending match that is not one", text);
        (void)store.pending(digest);
    }
    (void)store.consumedMatching("");

    const nlohmann::json request = {{"resource", "pay.refund"}, {"site", "main#0"}};
    // Consume the first approval, then try it again as the same and as another attempt.
    if (doc.contains("approved") && !doc["approved"].empty()) {
        const std::string digest = doc["approved"].begin().key();
        const nlohmann::json& entry = doc["approved"].begin().value();
        std::string by = entry.contains("by") && entry["by"].is_string() ? entry["by"].get<std::string>() : "unknown";
        std::optional<std::string> got = store.decide(digest, request, "20260101-000000-000000", "key-one", error);
        if (!error.empty()) broken("deciding failed: " + error, text);
        if (got != by) broken("deciding an approved digest did not return its approver", text);
        if (store.decide(digest, request, "20260101-000000-000000", "key-one", error) != by || !error.empty())
            broken("the same attempt did not get its approval again", text);
        if (store.decide(digest, request, "20260101-000000-000001", "key-two", error) || !error.empty())
            broken("an approval was used twice", text);
        if (store.pendingMatching(digest, true).size() != 1) broken("a refused decision left no pending request", text);
        ApprovalStore reread(path);
        if (!reread.load(error)) broken("the store written back does not load: " + error, text);
    }
    // Decide the first consumed approval (not also approved) again as the attempt that consumed it,
    // as a resume after a crash does.
    if (doc.contains("consumed") && !doc["consumed"].empty()) {
        const std::string digest = doc["consumed"].begin().key();
        const nlohmann::json& entry = doc["consumed"].begin().value();
        bool approvedToo = doc.contains("approved") && doc["approved"].contains(digest);
        auto key = entry.find("idempotency_key");
        bool hasKey = key != entry.end() && key->is_string() && !key->get<std::string>().empty();
        if (!approvedToo) {
            // Without a key of its own (hand-edited) no attempt is the one that consumed it.
            std::optional<std::string> got = store.decide(digest, request, "20260101-000000-000003",
                                                          hasKey ? key->get<std::string>() : "key-four", error);
            if (!error.empty()) broken("deciding failed: " + error, text);
            std::string by =
                entry.contains("by") && entry["by"].is_string() ? entry["by"].get<std::string>() : "unknown";
            if (hasKey && got != by) broken("the attempt that consumed an approval did not get it again", text);
            if (!hasKey && got) broken("an attempt got an approval another consumed", text);
        }
    }
    // Approve the first pending digest, then decide it.
    if (!pending.empty()) {
        const std::string& digest = pending.front();
        if (!store.approve(digest, "fuzz", error) || !error.empty())
            broken("approving a pending digest failed: " + error, text);
        if (store.decide(digest, request, "20260101-000000-000002", "key-three", error) != std::string("fuzz") ||
            !error.empty())
            broken("an approval just given was not taken", text);
    }
    return 0;
}
