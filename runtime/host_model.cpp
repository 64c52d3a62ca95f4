#include "runtime/host_model.h"

#include <algorithm>

namespace remit {

const CapabilityParam* Capability::param(std::string_view paramName) const {
    for (const CapabilityParam& p : params)
        if (p.name == paramName) return &p;
    return nullptr;
}

const Capability* HostModel::capability(std::string_view name) const {
    auto it = capabilities.find(name);
    return it == capabilities.end() ? nullptr : &it->second;
}

const ModelInfo* HostModel::model(std::string_view name) const {
    auto it = models.find(name);
    return it == models.end() ? nullptr : &it->second;
}

std::vector<std::string> HostModel::inputTags(const std::string& param) const {
    auto it = inputs.find(param);
    if (it != inputs.end()) return it->second;
    return {"untrusted"};
}

std::vector<std::string> HostModel::resourceNames() const {
    std::vector<std::string> out;
    for (const auto& [name, cap] : capabilities) out.push_back(name);
    for (const auto& [name, model] : models) out.push_back(name);
    std::sort(out.begin(), out.end());
    return out;
}

std::vector<std::string> HostModel::modelNames() const {
    std::vector<std::string> out;
    for (const auto& [name, model] : models) out.push_back(name);
    return out;
}

}  // namespace remit
