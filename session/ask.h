// `remit ask "REQUEST" FILE` (docs/models.md "remit ask"), the prototype's command: a model
// proposes a complete revised program for a change request; the proposal is checked against the
// host interface and the policy (parse, types, flows, bounds, budget, E05xx), and the checker's
// diagnostics go back to the model for at most `maxRepairs` more rounds. Nothing here writes a
// file: the front end (cli/remit_main.cpp) prints the unified diff and the authority diff, and
// writes only when asked and when the change does not widen authority (or widening is allowed).
// The host interface and the policy are read-only to the model: they are context, never edited.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "broker/adapter.h"
#include "compiler/driver.h"

namespace remit {

struct AskRequest {
    std::string request;       // the change request, in the user's words
    std::string programPath;   // as given: names the program in diagnostics and the prompt
    std::string programText;   // the current program
    std::string hostName, hostText;
    std::optional<std::string> policyName;  // none: proposals are checked without a policy
    std::string policyText;
    std::string spec;          // the language reference the model is given
    std::string model;         // the model resource name the adapter serves
    int maxRepairs = 2;
    uint64_t timeoutMs = 300'000;  // per round
    CheckOptions checkOptions;     // strict flows, limits
};

struct AskRound {
    int round = 0;
    std::vector<std::string> errors;  // the proposal's diagnostics, rendered
    std::string explanation;
    bool refused = false;
};

struct AskOutcome {
    std::string proposed;                 // the last proposal (the original when the model refused)
    std::vector<AskRound> rounds;
    bool refused = false;
    std::optional<CheckOutcome> checked;  // the last proposal's check (errors: !checked->ok())
    // The model could not be asked, or answered nothing usable: the adapter's message (no round
    // was completed for it).
    std::string failure;
    double costUsd = 0;       // what the rounds reported
    bool costComplete = true;  // false when a round reported no cost (no usage or no prices)
};

// The JSON Schema of a proposal: {"program": Str, "explanation": Str, "refused": Bool}.
Json askProposalSchema();

// Asks `model` (an adapter serving request.model) round by round.
AskOutcome askForChange(const AskRequest& request, Adapter& model);

// A unified diff of two texts, line by line, with three lines of context, as `diff -u` and
// Python's difflib print it ("--- a/PATH", "+++ b/PATH", "@@ -l,n +l,n @@"); empty when equal.
std::string unifiedDiff(std::string_view before, std::string_view after, const std::string& path);

}  // namespace remit
