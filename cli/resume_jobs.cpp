// Continuing runs from the web inbox: see resume_jobs.h.
#include "cli/resume_jobs.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <mutex>
#include <system_error>
#include <thread>

#include "broker/child_process.h"

namespace remit::cli {

struct ResumeJobs::Shared {
    std::mutex mutex;
    std::deque<std::shared_ptr<Job>> jobs;  // guarded; oldest first
    size_t running = 0;                     // guarded
};

namespace {

int64_t nowSeconds() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

// Reads the child's stdout and stderr to their ends (keeping the first `cap` bytes of each, and
// draining the rest so the child never blocks on a full pipe), then closes them.
void drain(int out, int err, size_t cap, std::string& outText, std::string& errText) {
    struct pollfd fds[2] = {{out, POLLIN, 0}, {err, POLLIN, 0}};
    std::string* texts[2] = {&outText, &errText};
    char buffer[16 * 1024];
    int open = 2;
    while (open > 0) {
        if (::poll(fds, 2, -1) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        for (int i = 0; i < 2; ++i) {
            if (fds[i].fd < 0 || fds[i].revents == 0) continue;
            ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) {
                ::close(fds[i].fd);
                fds[i].fd = -1;
                --open;
                continue;
            }
            std::string& text = *texts[i];
            if (text.size() < cap) text.append(buffer, std::min(static_cast<size_t>(n), cap - text.size()));
        }
    }
    for (const struct pollfd& f : fds)
        if (f.fd >= 0) ::close(f.fd);
}

}  // namespace

ResumeJobs::ResumeJobs(std::vector<std::string> command, std::filesystem::path stateDir)
    : shared_(std::make_shared<Shared>()), command_(std::move(command)), stateDir_(std::move(stateDir)) {}

ResumeJobs::~ResumeJobs() = default;

std::string ResumeJobs::start(const std::string& runId, const std::string& by) {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    for (const std::shared_ptr<Job>& job : shared_->jobs)
        if (job->runId == runId && job->running) return "";
    if (shared_->running >= kMaxRunning)
        return fmt::format("{} runs are being continued already; try again when one of them ends", kMaxRunning);

    int out[2] = {-1, -1}, err[2] = {-1, -1};
    int in = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (in < 0 || ::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
        std::string why = std::strerror(errno);
        for (int fd : {in, out[0], out[1], err[0], err[1]})
            if (fd >= 0) ::close(fd);
        return "cannot start the resume: " + why;
    }
    std::vector<std::string> argv = command_;
    for (const std::string& a : {runId, std::string("--state-dir"), stateDir_.string(), std::string("--json")})
        argv.push_back(a);
    pid_t pid = -1;
    int rc = spawnProcess(argv, ChildFds{in, out[1], err[1]}, "", pid);
    for (int fd : {in, out[1], err[1]}) ::close(fd);
    if (rc != 0) {
        ::close(out[0]);
        ::close(err[0]);
        return std::string("cannot start the resume: ") + std::strerror(rc);
    }

    auto job = std::make_shared<Job>();
    job->runId = runId;
    job->startedBy = by;
    job->startedAt = nowSeconds();
    shared_->jobs.push_back(job);
    ++shared_->running;
    while (shared_->jobs.size() > kMaxKept && !shared_->jobs.front()->running) shared_->jobs.pop_front();

    // The thread owns what it touches (the job and the shared table), so it may outlive this object.
    auto wait = [shared = shared_, job, pid, outFd = out[0], errFd = err[0]] {
        std::string outText, errText;
        drain(outFd, errFd, kMaxOutput, outText, errText);
        int status = 0;
        while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        nlohmann::json envelope = nlohmann::json::parse(outText, nullptr, false);
        std::lock_guard<std::mutex> done(shared->mutex);
        job->running = false;
        job->exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        job->envelope = envelope.is_object() ? std::move(envelope) : nlohmann::json();
        job->errors = std::move(errText);
        --shared->running;
    };
    try {
        std::thread(std::move(wait)).detach();
    } catch (const std::system_error&) {
        // No thread to wait with: the child is left to finish on its own (its trace says how).
        ::close(out[0]);
        ::close(err[0]);
        job->running = false;
        job->errors = "the inbox could not follow this resume (no thread); see the run's trace";
        --shared_->running;
    }
    return "";
}

std::optional<ResumeJobs::Job> ResumeJobs::find(const std::string& runId) const {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    for (auto it = shared_->jobs.rbegin(); it != shared_->jobs.rend(); ++it)
        if ((*it)->runId == runId) return **it;
    return std::nullopt;
}

}  // namespace remit::cli
