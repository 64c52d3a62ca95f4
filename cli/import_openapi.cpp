// `remitc import openapi SPEC.json|SPEC.yaml [--as NS] [-o host.rmti]` (docs/import.md "OpenAPI"):
// reads an OpenAPI 3 document (broker/openapi.h, YAML through cli/yaml_json.h), lists its operations
// as the importer's ImportedOperations and prints the draft host interface
// (compiler/host_import.h), or writes it to -o. Its flags are declared in cli/command_table.cpp.
#include <fmt/format.h>

#include <cstdio>
#include <set>

#include "broker/openapi.h"
#include "broker/openapi_adapter.h"
#include "cli/commands.h"
#include "cli/yaml_json.h"
#include "compiler/host_import.h"

namespace remit::cli {

namespace {

// The schema an OpenAPI `$ref` names in the document, or null (a reference elsewhere: SchemaTyper
// then says which it could not follow).
const Json* referenced(const Json& ref, const Json& root) {
    if (!ref.is_string() || !ref.get_ref<const std::string&>().starts_with("#/")) return nullptr;
    try {
        Json::json_pointer pointer(ref.get<std::string>().substr(1));
        return root.contains(pointer) ? &root[pointer] : nullptr;
    } catch (const Json::exception&) {
        return nullptr;
    }
}

// Whether a parameter's schema is something a path, query or header can carry: a scalar or a list
// of scalars (what the adapter sends); an object cannot go there.
bool fitsInUrl(const Json& schema, const Json& root) {
    const Json* s = &schema;
    for (int hops = 0; s && s->is_object() && s->contains("$ref") && hops < 32; ++hops) s = referenced((*s)["$ref"], root);
    return !(s && s->is_object() && (s->value("type", Json()) == "object" || s->contains("properties")));
}

constexpr std::string_view kComponentSchemas = "#/components/schemas/";

// `schema` with its references to the document's component schemas written as SchemaTyper reads
// local definitions (`#/components/schemas/Pet` → `#/$defs/Pet`), and the definitions it reaches,
// directly or through others, collected into `defs` — so each operation's schemas carry only what
// they use, not the whole document.
Json withLocalRefs(const Json& schema, const Json& root, Json& defs) {
    if (schema.is_array()) {
        Json out = Json::array();
        for (const Json& item : schema) out.push_back(withLocalRefs(item, root, defs));
        return out;
    }
    if (!schema.is_object()) return schema;
    Json out = Json::object();
    for (auto it = schema.begin(); it != schema.end(); ++it) {
        if (it.key() == "$ref" && it->is_string() && it->get_ref<const std::string&>().starts_with(kComponentSchemas)) {
            std::string name = it->get<std::string>().substr(kComponentSchemas.size());
            out["$ref"] = "#/$defs/" + name;
            const Json* target = referenced(*it, root);
            if (target && !defs.contains(name)) {
                defs[name] = Json::object();  // before descending, so a recursive schema ends here
                defs[name] = withLocalRefs(*target, root, defs);
            }
            continue;
        }
        out[it.key()] = withLocalRefs(*it, root, defs);
    }
    return out;
}

// A schema the draft writer can type on its own: local references, and the definitions they need.
Json selfContained(const Json& schema, const Json& root) {
    Json defs = Json::object();
    Json out = withLocalRefs(schema, root, defs);
    if (!defs.empty() && out.is_object()) out["$defs"] = std::move(defs);
    return out;
}

std::string schemeWords(const OpenApiDocument& doc, const std::vector<std::vector<std::string>>& security) {
    std::vector<std::string> alternatives;
    for (const std::vector<std::string>& alternative : security) {
        if (alternative.empty()) {
            alternatives.push_back("none");
            continue;
        }
        std::string words;
        for (const std::string& name : alternative) {
            if (!words.empty()) words += " and ";
            words += name;
            auto s = doc.securitySchemes.find(name);
            if (s == doc.securitySchemes.end()) continue;
            const OpenApiSecurityScheme& scheme = s->second;
            if (scheme.type == "apiKey")
                words += fmt::format(" (an API key in the {} '{}')", scheme.in, scheme.paramName);
            else if (scheme.type == "http")
                words += fmt::format(" (HTTP {})", scheme.scheme);
            else if (!scheme.type.empty())
                words += fmt::format(" ({})", scheme.type);
        }
        alternatives.push_back(words);
    }
    std::string out;
    for (size_t i = 0; i < alternatives.size(); ++i) out += (i ? " or " : "") + alternatives[i];
    return out;
}

// One operation as the importer sees it: its parameters and body as the properties of one input
// object (optional ones left out of the signature by the draft), its result, and remarks. Sets
// `notImportable` instead when a call could never be sent as the document asks.
ImportedOperation operationOf(const OpenApiDocument& doc, const OpenApiOperation& op, std::string& notImportable) {
    ImportedOperation out;
    out.name = op.name;
    out.title = op.summary;
    out.description = op.description;
    out.idempotent = op.method == "GET" || op.method == "HEAD";
    out.remarks.push_back(fmt::format("{} {}", op.method, op.path));
    Json properties = Json::object();
    Json required = Json::array();
    for (const OpenApiParameter& p : op.parameters) {
        if (properties.contains(p.name)) {
            notImportable = fmt::format("it has two parameters named '{}' (in different places)", p.name);
            return out;
        }
        if (p.required && !fitsInUrl(p.schema, doc.root)) {
            notImportable = fmt::format("its {} parameter '{}' is an object, which cannot go in a {}",
                                            parameterPlace(p.in), p.name, parameterPlace(p.in));
            return out;
        }
        properties[p.name] = p.schema;
        if (p.required) required.push_back(p.name);
    }
    if (op.hasBody) {
        if (op.bodyMediaType.empty()) {
            std::string types;
            for (const std::string& t : op.bodyMediaTypes) types += (types.empty() ? "" : " or ") + t;
            if (op.bodyRequired) {
                notImportable = fmt::format("its request body is {}, not JSON", types.empty() ? "empty" : types);
                return out;
            }
            out.remarks.push_back(fmt::format("its optional request body ({}) is never sent", types));
        } else {
            std::string name = openApiBodyParameter(op);
            properties[name] = op.bodySchema;
            if (op.bodyRequired) required.push_back(name);
            if (!op.bodyDescription.empty()) out.remarks.push_back(fmt::format("{}: {}", name, op.bodyDescription));
        }
    }
    out.input = selfContained(
        Json{{"type", "object"}, {"properties", std::move(properties)}, {"required", std::move(required)}}, doc.root);
    switch (op.result) {
        case OpenApiOperation::Result::Json: out.output = selfContained(op.resultSchema, doc.root); break;
        case OpenApiOperation::Result::Text:
            out.output = nullptr;  // Str, the body as text
            out.remarks.push_back(fmt::format("answers {}: typed Str, the body as text", op.resultMediaType));
            break;
        case OpenApiOperation::Result::None: out.output = Json{{"type", "null"}}; break;
    }
    if (op.deprecated) out.remarks.push_back("deprecated, says the document");
    if (!op.security.empty()) out.remarks.push_back("credentials: " + schemeWords(doc, op.security));
    if (op.method == "PUT" || op.method == "DELETE")
        out.remarks.push_back(fmt::format("{} is idempotent by HTTP's definition: add `idempotent` if this service "
                                          "keeps to it",
                                          op.method));
    if (op.method != "GET" && op.method != "HEAD" && op.method != "OPTIONS")
        out.remarks.push_back("changes the service's state: consider `approval always`");
    return out;
}

}  // namespace

int importOpenApiCommand(std::string_view tool, Args& args) {
    if (args.positional.size() != 1) {
        fmt::print(stderr, "{}: error: import openapi needs exactly one OpenAPI document (JSON or YAML)\n", tool);
        fmt::print(stderr, "  hint: e.g. {} import openapi petstore.yaml --as pets -o host.rmti\n", tool);
        return kUsage;
    }
    const std::string& path = args.positional[0];
    std::string ns;
    if (!importNamespace(tool, args, "pets (capabilities become pets.getPetById, ...)", ns)) return kUsage;
    std::string error;
    std::optional<OpenApiDocument> doc = readOpenApiFile(path, error, parseYamlAsJson);
    if (!doc) {
        fmt::print(stderr, "{}: error: {}\n", tool, error);
        return kFailure;
    }
    std::vector<ImportedOperation> operations;
    std::vector<std::string> notImportable;  // "'name': why", for operations no call could be sent to
    for (const OpenApiOperation& op : doc->operations) {
        std::string why;
        ImportedOperation imported = operationOf(*doc, op, why);
        if (why.empty())
            operations.push_back(std::move(imported));
        else
            notImportable.push_back(fmt::format("'{}': {}", op.name, why));
    }
    if (operations.empty()) {
        fmt::print(stderr, "{}: error: {} describes no operation that can be imported\n", tool, path);
        for (const std::string& p : doc->problems) fmt::print(stderr, "  not imported: {}\n", p);
        return kFailure;
    }
    if (ns.empty()) ns = namespaceFrom(doc->title);
    std::vector<std::string> header = {
        fmt::format("Host interface drafted by `remitc import openapi` from the OpenAPI document '{}'{} ({} "
                    "operations).",
                    doc->title.empty() ? "?" : doc->title, doc->version.empty() ? "" : " " + doc->version,
                    doc->operations.size() + doc->problems.size()),
        "Document: " + path,
    };
    // The flag that runs programs against it: the operator names the variable of each scheme used.
    std::set<std::string> schemes;
    for (const OpenApiOperation& op : doc->operations)
        for (const std::vector<std::string>& alternative : op.security) schemes.insert(alternative.begin(), alternative.end());
    std::string adapter = fmt::format("openapi.{}:{}", ns, path);
    for (const std::string& scheme : schemes)
        if (doc->securitySchemes.count(scheme)) adapter += fmt::format(" auth.{}=VARIABLE", scheme);
    header.push_back(fmt::format("Run programs against it with: remitvm run PROG.rmt --adapter \"{}\" --base-url {}",
                                 adapter, absoluteServerUrl(*doc).value_or("URL")));
    // Operations left out before drafting are said at the top, as the draft says its own.
    for (const std::string& n : notImportable) header.push_back("NOT IMPORTED: " + n);
    for (const std::string& p : doc->problems) header.push_back("NOT IMPORTED: " + p);
    // The draft's comments speak of an OpenAPI document, not of an MCP server's tools.
    DraftWords words{.description = "OpenAPI document",
                     .textResult = "the response body as text",
                     .noOutput = "it declares no JSON response schema"};
    HostDraft draft = draftHostInterface(ns, header, operations, words);
    draft.notImported.insert(draft.notImported.begin(), notImportable.begin(), notImportable.end());
    for (const std::string& p : doc->problems) draft.notImported.push_back(p + " (the document could not be read there)");

    return writeDraft(tool, args, draft,
                      fmt::format("imported {} of {} operation(s) from '{}' as {}.*", draft.capabilities,
                                  doc->operations.size() + doc->problems.size(), doc->title.empty() ? path : doc->title,
                                  ns));
}

}  // namespace remit::cli
