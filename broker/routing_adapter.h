// Several adapters behind one (docs/adapters.md "Several adapters in one run"): the fixtures or
// adapter process the operator chose for capabilities, beside the adapters that serve particular
// resources (a configured model, an MCP server). Each call goes to the first adapter, in the order
// given, that serves it (Adapter::serves); so list the particular adapters first and the one that
// serves everything last. The trace's `adapter` field of each call names the adapter that
// performed it (AdapterReply::adapter). session/run_adapters.h builds one from a run's
// configuration.
#pragma once

#include <memory>
#include <vector>

#include "broker/adapter.h"

namespace remit {

class RoutingAdapter final : public Adapter {
public:
    explicit RoutingAdapter(std::vector<std::unique_ptr<Adapter>> adapters);

    // The first adapter that serves the call performs it; when none does, the call fails
    // operationally (CapabilityFailed) naming the resource.
    AdapterReply perform(const AdapterRequest& request) override;
    void replayed(const AdapterRequest& request) override;
    bool serves(AdapterRequest::Kind kind, const std::string& name) const override;
    // The kind of the last adapter (the one that serves what the others do not).
    const char* kind() const override;

    // The adapter that would perform a call of `kind` to `name`, or null.
    Adapter* route(AdapterRequest::Kind kind, const std::string& name) const;

private:
    std::vector<std::unique_ptr<Adapter>> adapters_;
};

}  // namespace remit
