// The broker (docs/broker.md; docs/architecture.md "The one seam"): the one path from a
// run to the world. It drives a remit::Run, and for every host-call ATTEMPT the run stops at it
// applies, in the prototype's order:
//   (agent max_calls) → resource known → grant (R0303) → deny tags vs deep argument tags (R0301,
//   `violation` event) → arg_prefix, arg_one_of, arg_max (R0301) → call limit (R0402) → per-site
//   counter k and idempotency key → approval (store, single use; `pending_approval` and R0302) →
//   budget reservation (R0401) → dispatch to the adapter → reconcile cost → validate the result
//   against the declared type (R0501) or the ask type (R0502, `invalid_output`) → tag and
//   provenance every node of the result → `call` event.
// With a replay plan (resume, replay; broker/replay.h) step 7 comes between the counter and the
// approval, as in the prototype: the next recorded call must have the same resource, site and
// canonical arguments (else R0601); it is answered from the record, re-tagged, re-emitted with
// `replayed: true`, and never dispatched. Every live dispatch is announced by a synced `dispatch`
// event, so a crash during an effect leaves the call "in flight" for the next resume.
// A retry (attempt > 0) of a non-idempotent capability is R0405. Security and limit errors are
// final (not operational); adapter failures are operational, so the VM retries them or takes the
// site's `else` (for which the broker writes a `fallback` event).
//
// Invariants:
// - Nothing reaches the adapter before every rule passed and the trace was synced.
// - `seq` counts call events, 1-based; it is the provenance leaf of the call's result.
// - Between calls nothing is reserved: a reservation lives only across one dispatch.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "broker/adapter.h"
#include "broker/approvals.h"
#include "broker/replay.h"
#include "broker/trace.h"
#include "remit/remit.h"
#include "runtime/host_model.h"
#include "runtime/policy.h"

namespace remit {

// The request a paused run waits for (the `approval_required` envelope's `pending`).
struct PendingApproval {
    std::string digest, site, resource;
    nlohmann::ordered_json args;
    std::vector<std::string> reasons;
};

struct BrokerOptions {
    std::string runId;
    std::string idempotencyRoot;  // the first run's id (resume keeps it)
    std::string programHash;
    const HostModel* host = nullptr;
    const Policy* policy = nullptr;
    Adapter* adapter = nullptr;
    TraceWriter* trace = nullptr;         // null: no trace (tests)
    ApprovalStore* approvals = nullptr;   // null: every approval is denied (pending)
    bool approveAll = false;              // --approve-all: approved_by "auto-approve(test)"
    std::optional<double> programBudget;  // the program's `budget usd`
    uint64_t defaultTimeoutMs = 30'000;   // for calls without a `timeout`
    const ReplayPlan* replay = nullptr;   // resume and replay: the recorded calls
    // --interactive: asked when the store has no approval for a call; true approves it.
    std::function<bool(const PendingApproval&)> askOperator;
    // Strict flows: `deny` parameters refuse the pc's tags too (R0301 via control flow).
    bool strictFlows = false;
};

// A capability parameter that received data its `deny` list refuses: the parameter and the
// refused tags, sorted. The deep tags of each argument count; the pc counts only in strict-flows
// mode (docs/language.md "Strict flows"), and then `viaControl` says the tags came that way.
struct DenyViolation {
    std::string param;
    std::vector<std::string> tags;
    bool viaControl = false;
    // The R0301 message and details, in the broker's words.
    std::string message(const std::string& resource) const;
    nlohmann::ordered_json details(const std::string& resource) const;
};
// The first such parameter of `cap` among the call's arguments (`argTags[i]` belongs to
// `argNames[i]`), or nothing; `strictPc` is the pc in strict mode, else kNoTags. Shared by the
// broker and the serve sessions.
std::optional<DenyViolation> deniedArgument(const Heap& heap, const Capability& cap,
                                            const std::vector<std::string>& argNames,
                                            const std::vector<TagSetId>& argTags, TagSetId strictPc = kNoTags);

// The call a replay without live calls stopped at (the record was used up).
struct UnrecordedCall {
    std::string resource, site;
    nlohmann::ordered_json args;
};


class Broker {
public:
    Broker(BrokerOptions options, Run& run);

    // Performs host calls until the run completes or fails; returns the run's final status.
    RunStatus drive(RunStatus status);

    double spent() const { return spent_; }
    uint64_t calls() const { return seq_; }
    // Set when the run failed with R0302 because a call waits for approval.
    const std::optional<PendingApproval>& pending() const { return pending_; }
    // Set when the broker stopped the run (R0702) because the host could not keep its records: the
    // trace or the approval store could not be written (or the store read or locked). Nothing was
    // dispatched after it; the CLI reports it (exit 2), and the run can be resumed once fixed.
    const std::string& ioError() const { return stopped_; }
    // Replay: how many recorded calls were answered, and the call asked for after the last one.
    size_t replayed() const { return replayed_; }
    const std::optional<UnrecordedCall>& unrecorded() const { return unrecorded_; }
    // Resume: the in-flight calls of the plan this run has not sent again (for its run_start they
    // are known before it starts; this is what is left at the end).
    std::vector<InFlightCall> unresolvedInFlight() const;

private:
    struct Outcome {
        std::optional<Value> value;
        RuntimeError error;
        bool operational = false;
    };

    BrokerOptions options_;
    Run& run_;
    std::optional<double> budget_;
    double spent_ = 0, reserved_ = 0;
    uint64_t seq_ = 0;
    std::map<std::string, int64_t> calls_;       // per resource (agents under their model)
    std::map<std::string, int64_t> agentCalls_;  // per agent
    std::map<std::string, uint64_t> siteSeq_;    // per site: k
    std::optional<PendingApproval> pending_;
    std::string stopped_;
    size_t replayed_ = 0;
    std::optional<UnrecordedCall> unrecorded_;
    std::vector<bool> inFlightSent_;

    Outcome attempt(const HostCall& call);
    Outcome replayRecorded(const HostCall& call, const nlohmann::ordered_json& rawArgs, TagSetId allArgTags, ProvId prov,
                           uint64_t k, const std::string& key);
    AdapterRequest requestFor(const HostCall& call, const nlohmann::ordered_json& rawArgs, const std::string& key) const;
    // Writes an event to the trace (and fsyncs it when `durable`); false when the trace failed.
    bool record(const nlohmann::ordered_json& event, bool durable = false);
    // Stops the run: R0702, non-operational (no retry, no else), `why` kept for ioError().
    Outcome stop(std::string why);
    Outcome stopForTrace(const std::string& what);
    // Turns a result (live or recorded) into a value: tags, provenance, the declared or asked type.
    struct Decoded {
        std::optional<Value> value;
        std::optional<RuntimeError> error;  // the result does not fit (R0501), or out of memory
        bool operational = true;
        std::optional<std::string> invalidOutput;  // a model's output that does not fit its type
        TagSetId tags = kNoTags;
    };
    Decoded decodeResult(const HostCall& call, const nlohmann::ordered_json& result, TagSetId allArgTags, ProvId prov,
                         uint64_t seq);
    void emit(const nlohmann::ordered_json& event);
};

}  // namespace remit
