// remit_difftest: the differential test's driver (docs/testing.md "Differential testing").
//
//   remit_difftest [--count N] [--seed S] [--mode default|strict|both] [--jobs J] [--out DIR]
//                  [--disable F1,F2] [--max-reject-percent P] [--stats FILE]
//       generates N programs from seeds S, S+1, ..., runs each in the VM and the reference (in
//       both flow modes with --mode both: N cases per mode), prints the counts, writes each
//       divergent case to DIR/<mode>-<seed>/ and exits 1 if there was one (or if more than P % of
//       the programs were rejected). --stats writes the counts to FILE as JSON.
//   remit_difftest --replay PATH...
//       runs saved cases (a case directory, or a directory holding them) and exits 1 unless
//       every one compares equal.
//   remit_difftest --print SEED [--mode strict]
//       prints the case SEED generates.
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/difftest/generator.h"
#include "tests/difftest/harness.h"

using namespace remit::difftest;
using json = nlohmann::json;

namespace {

struct Stats {
    uint64_t generated = 0, checked = 0, compared = 0, limit = 0, divergent = 0, stripped = 0, unchecked = 0, calls = 0;
    std::map<std::string, uint64_t> rejected;  // not run: by code
    std::map<std::string, uint64_t> variants;  // run anyway as a variant: by the code the checker gave
    std::map<std::string, uint64_t> ends;      // how the VM's runs ended
    std::map<std::string, uint64_t> reasons;   // divergences by kind
    std::vector<std::string> failures;         // the first few, described

    json toJson() const {
        return json{{"generated", generated}, {"checked", checked}, {"compared", compared}, {"limit", limit},
                    {"divergent", divergent}, {"stripped", stripped}, {"unchecked", unchecked}, {"calls", calls},
                    {"rejected", rejected},   {"variants", variants}, {"ends", ends},       {"reasons", reasons},
                    {"failures", failures}};
    }
    void merge(const json& j) {
        generated += j.at("generated").get<uint64_t>();
        checked += j.at("checked").get<uint64_t>();
        compared += j.at("compared").get<uint64_t>();
        limit += j.at("limit").get<uint64_t>();
        divergent += j.at("divergent").get<uint64_t>();
        stripped += j.at("stripped").get<uint64_t>();
        unchecked += j.at("unchecked").get<uint64_t>();
        calls += j.at("calls").get<uint64_t>();
        for (const char* key : {"rejected", "variants", "ends", "reasons"}) {
            std::map<std::string, uint64_t>& m = std::string(key) == "rejected" ? rejected
                                                 : std::string(key) == "variants" ? variants
                                                 : std::string(key) == "ends"     ? ends
                                                                                  : reasons;
            for (auto it = j.at(key).begin(); it != j.at(key).end(); ++it) m[it.key()] += it.value().get<uint64_t>();
        }
        for (const auto& f : j.at("failures"))
            if (failures.size() < 5) failures.push_back(f.get<std::string>());
    }
};

std::string percent(uint64_t part, uint64_t whole) {
    return whole == 0 ? "0.0%" : fmt::format("{:.1f}%", 100.0 * static_cast<double>(part) / static_cast<double>(whole));
}

std::string counts(const std::map<std::string, uint64_t>& m, uint64_t whole) {
    std::string out;
    for (const auto& [k, v] : m) out += fmt::format("{}{} {} ({})", out.empty() ? "" : ", ", k, v, percent(v, whole));
    return out.empty() ? "none" : out;
}

void print(const Stats& s, double seconds) {
    uint64_t rejectedTotal = 0;
    for (const auto& [k, v] : s.rejected) rejectedTotal += v;
    uint64_t variantTotal = s.stripped + s.unchecked;
    fmt::print("programs generated: {}\n", s.generated);
    fmt::print("checked (accepted as written): {} ({})\n", s.checked, percent(s.checked, s.generated));
    fmt::print("rejected and not run: {} ({}): {}\n", rejectedTotal, percent(rejectedTotal, s.generated),
               counts(s.rejected, s.generated));
    fmt::print("rejected, then run as a variant: {} ({}): {} [without deny lists: {}, under an unchecked policy: {}]\n",
               variantTotal, percent(variantTotal, s.generated), counts(s.variants, s.generated), s.stripped, s.unchecked);
    fmt::print("compared: {} (host call attempts: {})\n", s.compared, s.calls);
    fmt::print("not compared, a run limit was hit: {}\n", s.limit);
    fmt::print("vm runs ended: {}\n", counts(s.ends, s.compared + s.divergent));
    fmt::print("divergences: {}{}\n", s.divergent, s.divergent ? " (" + counts(s.reasons, s.divergent) + ")" : "");
    for (const std::string& f : s.failures) fmt::print("\n{}\n", f);
    fmt::print("time: {:.1f} s\n", seconds);
}

std::string tracePath() {
    std::string dir = std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path().string();
    return fmt::format("{}/remit-difftest-{}.jsonl", dir, getpid());
}

std::string reportText(const CaseReport& r) {
    std::string out = "divergence: " + r.reason + "\n";
    for (const std::string& d : r.details) out += "  " + d + "\n";
    if (r.strippedDeny) out += "(compiled against the host without deny lists)\n";
    if (r.uncheckedPolicy) out += "(run under a policy it was not checked against)\n";
    return out;
}

void record(Stats& s, const CaseReport& r) {
    switch (r.kind) {
        case CaseReport::Kind::Rejected: ++s.rejected[r.reason]; return;
        case CaseReport::Kind::Limit: ++s.limit; break;
        case CaseReport::Kind::Compared: ++s.compared; break;
        case CaseReport::Kind::Divergent: ++s.divergent; ++s.reasons[r.reason]; break;
    }
    if (r.kind == CaseReport::Kind::Divergent && r.reason.starts_with("rejected")) return;
    if (r.strippedDeny || r.uncheckedPolicy) ++s.variants[r.reason];
    else ++s.checked;
    if (r.strippedDeny) ++s.stripped;
    if (r.uncheckedPolicy) ++s.unchecked;
    if (!r.vmEnd.empty()) ++s.ends[r.vmEnd];
    s.calls += r.calls;
}

struct RunOptions {
    uint64_t count = 100, seed = 1;
    std::vector<bool> modes = {false};  // strict?
    unsigned jobs = 1;
    std::string out = "/tmp/remit-difftest-failures";
    GeneratorOptions gen;
};

// Runs seeds first, first+step, ... (count of them) in every mode.
Stats runRange(const RunOptions& o, uint64_t first, uint64_t step) {
    Stats s;
    std::string trace = tracePath();
    for (uint64_t seed = first; seed < o.seed + o.count; seed += step) {
        for (bool strict : o.modes) {
            GeneratorOptions g = o.gen;
            g.strict = strict;
            Case c = generateCase(seed, g);
            ++s.generated;
            CaseReport r = runCase(c, trace);
            record(s, r);
            if (r.kind != CaseReport::Kind::Divergent) continue;
            std::string dir = fmt::format("{}/{}-{}", o.out, strict ? "strict" : "default", seed);
            std::string error, text = reportText(r);
            saveCase(c, dir, text, error);
            if (s.failures.size() < 5) {
                // The first few are also minimized, next to the full case.
                Case small = minimizeCase(c, r.reason, trace);
                CaseReport again = runCase(small, trace);
                saveCase(small, dir + "/min", reportText(again), error);
                text += "minimized program (" + dir + "/min):\n" + small.source;
            }
            if (s.failures.size() < 5)
                s.failures.push_back(fmt::format("seed {} ({} mode), saved in {}:\n{}", seed, strict ? "strict" : "default",
                                                 error.empty() ? dir : error, text));
        }
    }
    std::filesystem::remove(trace);
    return s;
}

// Rejections by the checker proper for reasons the generator cannot predict (E0301, E0403,
// E0404), whether or not the case then ran as a variant; the policy comparison's (E0501-E0503)
// come from deliberately tight policies and are not counted here.
uint64_t checkerRejections(const Stats& s) {
    uint64_t n = 0;
    for (const auto* m : {&s.rejected, &s.variants})
        for (const auto& [k, v] : *m)
            if (k == "E0301" || k == "E0403" || k == "E0404") n += v;
    return n;
}

int runMany(const RunOptions& o, std::optional<double> maxRejectPercent, const std::string& statsFile) {
    auto t0 = std::chrono::steady_clock::now();
    Stats total;
    if (o.jobs <= 1) {
        total = runRange(o, o.seed, 1);
    } else {
        // One process per job, each on every jobs-th seed; the counts come back as JSON on a pipe.
        std::vector<std::pair<pid_t, int>> children;
        for (unsigned j = 0; j < o.jobs; ++j) {
            int fds[2];
            if (pipe(fds) != 0) return 2;
            pid_t pid = fork();
            if (pid == 0) {
                close(fds[0]);
                std::string text = runRange(o, o.seed + j, o.jobs).toJson().dump();
                size_t written = 0;
                while (written < text.size()) {
                    ssize_t n = write(fds[1], text.data() + written, text.size() - written);
                    if (n <= 0) break;
                    written += static_cast<size_t>(n);
                }
                close(fds[1]);
                _exit(0);
            }
            close(fds[1]);
            children.emplace_back(pid, fds[0]);
        }
        for (auto [pid, fd] : children) {
            std::string text;
            char buffer[65536];
            for (ssize_t n; (n = read(fd, buffer, sizeof buffer)) > 0;) text.append(buffer, static_cast<size_t>(n));
            close(fd);
            int status = 0;
            waitpid(pid, &status, 0);
            json j = json::parse(text, nullptr, false);
            if (j.is_discarded()) {
                fmt::print(stderr, "remit_difftest: job {} died (status {})\n", pid, status);
                return 2;
            }
            total.merge(j);
        }
    }
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    print(total, seconds);
    if (!statsFile.empty()) {
        if (FILE* f = std::fopen(statsFile.c_str(), "w")) {
            fmt::print(f, "{}\n", total.toJson().dump());
            std::fclose(f);
        }
    }
    uint64_t rejections = checkerRejections(total);
    fmt::print("checker rejections (E0301, E0403, E0404): {} ({})\n", rejections, percent(rejections, total.generated));
    if (maxRejectPercent && 100.0 * static_cast<double>(rejections) > *maxRejectPercent * static_cast<double>(total.generated)) {
        fmt::print("the checker rejected more than {}% of the programs: the generator needs tuning\n", *maxRejectPercent);
        return 1;
    }
    return total.divergent ? 1 : 0;
}

void findCases(const std::filesystem::path& p, std::vector<std::string>& out) {
    if (std::filesystem::exists(p / "case.json")) {
        out.push_back(p.string());
        return;
    }
    if (!std::filesystem::is_directory(p)) return;
    std::vector<std::filesystem::path> children;
    for (const auto& e : std::filesystem::directory_iterator(p))
        if (e.is_directory()) children.push_back(e.path());
    std::sort(children.begin(), children.end());
    for (const auto& c : children) findCases(c, out);
}

int replay(const std::vector<std::string>& paths) {
    std::vector<std::string> cases;
    for (const std::string& p : paths) findCases(p, cases);
    if (cases.empty()) {
        fmt::print(stderr, "remit_difftest: no cases under {}\n", fmt::join(paths, ", "));
        return 2;
    }
    int failed = 0;
    std::string trace = tracePath();
    for (const std::string& dir : cases) {
        std::string error;
        std::optional<Case> c = loadCase(dir, error);
        if (!c) {
            fmt::print("FAIL  {}: {}\n", dir, error);
            ++failed;
            continue;
        }
        CaseReport r = runCase(*c, trace);
        if (r.kind == CaseReport::Kind::Compared) {
            fmt::print("ok    {} ({}{})\n", dir, r.vmEnd, r.strippedDeny ? ", without deny lists" : r.uncheckedPolicy ? ", unchecked policy" : "");
        } else {
            ++failed;
            fmt::print("FAIL  {}: {}", dir, r.kind == CaseReport::Kind::Divergent ? reportText(r)
                                             : r.kind == CaseReport::Kind::Rejected ? "rejected " + r.reason + "\n"
                                                                                    : std::string("hit a run limit\n"));
        }
    }
    std::filesystem::remove(trace);
    fmt::print("{} case(s), {} failed\n", cases.size(), failed);
    return failed ? 1 : 0;
}

int usage() {
    fmt::print(stderr,
               "usage: remit_difftest [--count N] [--seed S] [--mode default|strict|both] [--jobs J] [--out DIR]\n"
               "                      [--disable F1,F2] [--max-reject-percent P] [--stats FILE]\n"
               "       remit_difftest --replay PATH...\n"
               "       remit_difftest --print SEED [--mode strict]\n");
    return 2;
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<std::string> args(argv + 1, argv + argc);
    RunOptions o;
    std::optional<uint64_t> printSeed;
    std::optional<double> maxReject;
    std::string statsFile;
    std::vector<std::string> replayPaths;
    bool replaying = false;
    try {
        for (size_t i = 0; i < args.size(); ++i) {
            const std::string& a = args[i];
            auto value = [&]() -> const std::string& {
                if (i + 1 >= args.size()) throw std::invalid_argument(a + " needs a value");
                return args[++i];
            };
            if (a == "--count") o.count = std::stoull(value());
            else if (a == "--seed") o.seed = std::stoull(value());
            else if (a == "--jobs") o.jobs = static_cast<unsigned>(std::stoul(value()));
            else if (a == "--out") o.out = value();
            else if (a == "--stats") statsFile = value();
            else if (a == "--max-reject-percent") maxReject = std::stod(value());
            else if (a == "--print") printSeed = std::stoull(value());
            else if (a == "--replay") replaying = true;
            else if (a == "--mode") {
                std::string m = value();
                if (m == "default") o.modes = {false};
                else if (m == "strict") o.modes = {true};
                else if (m == "both") o.modes = {false, true};
                else throw std::invalid_argument("unknown mode " + m);
            } else if (a == "--disable") {
                std::string list = value();
                for (size_t at = 0; at <= list.size();) {
                    size_t comma = std::min(list.find(',', at), list.size());
                    std::string name = list.substr(at, comma - at);
                    if (!generatorSwitches().count(name))
                        throw std::invalid_argument("unknown generator switch " + name + " (known: " +
                                                    fmt::format("{}", fmt::join(generatorSwitches(), ", ")) + ")");
                    o.gen.disabled.insert(name);
                    at = comma + 1;
                }
            } else if (replaying && !a.starts_with("--")) replayPaths.push_back(a);
            else throw std::invalid_argument("unknown argument " + a);
        }
    } catch (const std::exception& e) {
        fmt::print(stderr, "remit_difftest: {}\n", e.what());
        return usage();
    }
    if (replaying) return replay(replayPaths);
    if (printSeed) {
        GeneratorOptions g = o.gen;
        g.strict = o.modes.back();
        Case c = generateCase(*printSeed, g);
        fmt::print("# ---- host.rmti\n{}\n# ---- policy.toml\n{}\n# ---- inputs: {}  world seed: {}\n# ---- prog.rmt\n{}",
                   c.host, c.policy, c.inputs.dump(), c.worldSeed, c.source);
        return 0;
    }
    return runMany(o, maxReject, statsFile);
}
