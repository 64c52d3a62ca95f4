// The resolved host interface: what the checker checks against and the broker enforces. Built
// from a parsed host.rmti by resolveHost (compiler/checker.h: types resolved, duplicates rejected);
// the broker and VM read it without knowing the syntax.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/source.h"
#include "runtime/types.h"

namespace remit {

struct CapabilityParam {
    std::string name;
    TypeRef type = nullptr;
    std::vector<std::string> deny;     // tags that may never reach this parameter
    std::vector<std::string> approve;  // tags that make a call need approval
};

struct Capability {
    std::string name;  // "email.send"
    Span span;
    std::vector<CapabilityParam> params;
    TypeRef ret = nullptr;             // Unit when the host declares no `-> T`
    std::vector<std::string> tags;     // added to every result
    std::vector<std::string> clears;   // removed from every result
    double cost = 0;                   // worst-case USD per call
    bool idempotent = false;
    bool approvalAlways = false;

    const CapabilityParam* param(std::string_view paramName) const;
};

struct ModelInfo {
    std::string name;
    Span span;
    double cost = 0;
};

struct HostModel {
    std::string file;
    std::shared_ptr<TypeArena> arena = std::make_shared<TypeArena>();  // owns every TypeRef below
    // Transparent comparators: lookups by string_view allocate nothing.
    std::map<std::string, TypeRef> types;                   // host `type` declarations
    std::map<std::string, Capability, std::less<>> capabilities;
    std::map<std::string, ModelInfo, std::less<>> models;
    std::map<std::string, std::vector<std::string>> inputs;  // `input NAME tags ...`
    std::string hash;                                       // hostHash of the parsed interface

    const Capability* capability(std::string_view name) const;
    const ModelInfo* model(std::string_view name) const;
    // The tags of a `main` parameter: declared by an `input` line, else `untrusted`.
    std::vector<std::string> inputTags(const std::string& param) const;
    std::vector<std::string> resourceNames() const;  // capabilities and models, sorted
    std::vector<std::string> modelNames() const;     // models, sorted
};

}  // namespace remit
