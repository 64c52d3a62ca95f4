// Continuing runs from the web inbox (cli/inbox_http.cpp, docs/operators.md "Continuing the run"):
// each is `TOOL resume RUN_ID --state-dir D --json` started as a child process of the inbox — the
// command an operator would type, so a run continues exactly as from a shell: its recorded
// program, adapters and working directory, the approval store, the run lock that keeps a second
// resume out. One job per run at a time; what it printed is kept, for the run's page, until
// kMaxKept newer jobs have pushed it out. A job outlives the server that started it: stopping the
// inbox does not stop a run midway (its trace records how it ends).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace remit::cli {

class ResumeJobs {
public:
    static constexpr size_t kMaxRunning = 4;       // resumes at once; more are refused until one ends
    static constexpr size_t kMaxKept = 256;        // finished jobs remembered
    static constexpr size_t kMaxOutput = 1 << 20;  // bytes kept of each of stdout and stderr

    struct Job {
        std::string runId;
        std::string startedBy;  // the key id that asked
        int64_t startedAt = 0;  // seconds since the epoch
        bool running = true;
        int exitCode = -1;        // when finished: the resume's exit code (-1: killed by a signal)
        nlohmann::json envelope;  // when finished: its --json envelope, or null when it printed none
        std::string errors;       // when finished: what it printed on stderr
    };

    // `command`: the program and the arguments before the run id (the inbox's own executable and
    // "resume"); `stateDir` is passed as --state-dir, absolute.
    ResumeJobs(std::vector<std::string> command, std::filesystem::path stateDir);
    ~ResumeJobs();
    ResumeJobs(const ResumeJobs&) = delete;
    ResumeJobs& operator=(const ResumeJobs&) = delete;

    // Starts continuing `runId` (a well-formed run id) for `by`. Empty when it started or one for
    // the run is already running; otherwise why not (too many running, the process cannot start).
    std::string start(const std::string& runId, const std::string& by);
    // The newest job of `runId`, as it is now.
    std::optional<Job> find(const std::string& runId) const;

private:
    struct Shared;
    std::shared_ptr<Shared> shared_;  // the threads that wait for the children hold it too
    std::vector<std::string> command_;
    std::filesystem::path stateDir_;
};

}  // namespace remit::cli
