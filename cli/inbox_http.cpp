// `remitvm inbox` / `remit inbox` (docs/operators.md, "The web inbox"): the operators' web page
// over HTTP — the pending approval requests, one in full, approve and deny — for people who are
// not at a shell. What it shows and does is session/approval_requests.h, the same functions
// `remitvm approvals` prints; this file is only HTTP and HTML: who is asking (keys, sessions,
// roles), CSRF, the security headers, and the pages, every string in them escaped. Continuing a
// run after a decision is cli/resume_jobs.h: the resume command, run as a child process — or, on a
// fleet's PostgreSQL store (docs/fleet.md, "The web inbox of a fleet"), the store's queue, from
// which a worker continues it. The inbox's server answers on several threads and a PostgreSQL
// connection is one thread's, so each request opens the store for itself (openRecords).
//
// Security, as for any admin page:
// - A key is required: keys.json as for `mcp --http` (session/api_keys.h), only keys with a role.
//   A script sends `Authorization: Bearer TOKEN`; a browser logs in once with the token (POST
//   /login) and gets a session cookie (HttpOnly, SameSite=Strict, Path=/), kept in memory only.
// - Viewers see, approvers decide; the approver's identity is the key's id.
// - Every state-changing request is a POST. A POST carrying the session cookie must carry the
//   session's CSRF token (a hidden form field, compared in constant time); any POST with an Origin
//   header must come from this server's own origin. A Bearer POST needs no token: a page elsewhere
//   cannot make a browser send an Authorization header.
// - Every response carries a strict Content-Security-Policy (scripts and styles from this server
//   only, nothing inline, no frames, forms posting only here), X-Frame-Options: DENY, nosniff,
//   same-origin referrers and no-store. Every value on a page — arguments above all, which the program's
//   untrusted inputs shape — goes through escapeHtml.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <unordered_map>

#include "broker/approvals.h"
#include "broker/replay.h"
#include "broker/trace.h"
#include "cli/commands.h"
#include "cli/http_server.h"
#include "cli/inbox_assets.h"
#include "cli/resume_jobs.h"
#include "runtime/canonical_json.h"
#include "runtime/hash.h"
#include "runtime/source.h"
#include "session/api_keys.h"
#include "session/approval_requests.h"
#include "session/pg_store.h"
#include "session/run_lifecycle.h"
#include "session/store.h"

namespace remit::cli {

namespace {

using http::Request;
using http::Response;

constexpr const char* kCookie = "remit_inbox";
constexpr size_t kMaxSessions = 1024;
constexpr int64_t kSessionSeconds = 12 * 3600;
constexpr size_t kMaxReasonBytes = 2000;
constexpr size_t kListArgsChars = 200;  // the list cuts arguments; a request's page shows them whole
constexpr const char* kSee = "docs/operators.md, \"The web inbox\"";

constexpr const char* kPolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

// Text for HTML: in element content and in double-quoted attribute values alike.
std::string escapeHtml(std::string_view s) {
    std::string out;
    out.reserve(s.size() + s.size() / 8);
    for (char c : s) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '"': out += "&quot;"; break;
            case '\'': out += "&#39;"; break;
            default: out += c;
        }
    }
    return out;
}

bool constantTimeEqual(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    unsigned char diff = 0;
    for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
    return diff == 0;
}

bool isDigest(std::string_view s) {
    return s.size() == 64 && s.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

const char* roleName(KeyRole role) {
    return role == KeyRole::Approver ? "approver" : role == KeyRole::Viewer ? "viewer" : "none";
}

int64_t nowSeconds() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

// Who is asking, once authenticated.
struct Caller {
    std::string keyId;
    KeyRole role = KeyRole::None;
    std::string csrf;  // the session's token; empty for a Bearer caller (which needs none)
};

struct InboxOptions {
    std::string host = "127.0.0.1";
    uint16_t port = 8001;
    std::string keysPath;
    std::filesystem::path stateDir;  // absolute; the store when storeUrl is empty
    std::string storeUrl;            // a fleet's PostgreSQL store (--store, $REMIT_STORE); empty: stateDir
    std::string shownUrl;            // storeUrl without its password, for pages and commands
    std::string executable;          // this program, which continues runs (`resume`)
};

class Inbox final : public http::Handler {
public:
    Inbox(std::string_view tool, InboxOptions options, ApiKeys keys)
        : tool_(tool), options_(std::move(options)), keys_(std::move(keys)),
          jobs_({options_.executable, "resume"}, options_.stateDir) {}

    std::optional<Response> screen(const Request& r) override {
        // Decisions are refused before their body is read when the caller may not make them.
        if (r.method == "POST" && (r.path.starts_with("/requests/") || r.path.starts_with("/runs/"))) {
            if (std::optional<Response> refused = crossOrigin(r)) return secured(std::move(*refused));
            Auth auth = authenticate(r);
            if (!auth.caller) return secured(unauthorized(auth));
            if (auth.caller->role != KeyRole::Approver)
                return secured(page(403, "Not allowed", *auth.caller,
                                    "<p class=\"error\">Your key (" + escapeHtml(auth.caller->keyId) +
                                        ") is a viewer's: it can see requests but not decide them or continue "
                                        "runs.</p>"));
        }
        return std::nullopt;
    }

    // Every answer is one page or redirect: the inbox never streams events.
    Response handle(const Request& r, http::EventStream&) override { return secured(route(r)); }

private:
    struct Session {
        std::string keyId;
        KeyRole role;
        std::string csrf;
        int64_t expires;
    };
    struct Auth {
        std::optional<Caller> caller;
        bool byCookie = false;
        std::string problem;  // why not, for the 401/403 page
        int status = 401;
    };

    std::string tool_;
    InboxOptions options_;
    ApiKeys keys_;
    ResumeJobs jobs_;
    std::mutex mutex_;
    std::unordered_map<std::string, Session> sessions_;  // guarded; by the SHA-256 of the cookie
    std::deque<std::string> sessionOrder_;              // guarded; oldest first

    // --- the store ----------------------------------------------------------------------------

    // A fleet's PostgreSQL store rather than a state directory: decisions queue the run for the
    // workers instead of resuming it here.
    bool fleet() const { return !options_.storeUrl.empty(); }

    // The store, opened for this request alone: the server answers on several threads, and a
    // PostgreSQL connection must not be shared between them. Null with `error` when it cannot be
    // opened (the schema was brought up to date when the inbox started).
    std::unique_ptr<Store> openRecords(std::string& error) const {
        if (!fleet()) return std::make_unique<FileStore>(options_.stateDir);
        return PgStore::open(options_.storeUrl, error, /*migrate=*/false);
    }

    // The submitted run a run id of a fleet names (its own, or one of its traces'); empty when none.
    static std::string submittedRunOf(Store& records, const std::string& runId) {
        std::string error;
        std::optional<SubmittedRun> run = static_cast<PgStore&>(records).findRunOf(runId, error);
        return run ? run->runId : "";
    }

    // --- who is asking -------------------------------------------------------------------------

    Auth authenticate(const Request& r) {
        Auth auth;
        if (std::optional<std::string> token = http::bearerToken(r)) {
            const ApiKey* key = keys_.find(*token);
            if (!key) {
                auth.problem = "That key is not valid here.";
                return auth;
            }
            if (key->role == KeyRole::None) {
                auth.problem = "That key is an MCP client's, with no role in the inbox.";
                auth.status = 403;
                return auth;
            }
            auth.caller = Caller{key->id, key->role, ""};
            return auth;
        }
        if (std::optional<std::string> sid = http::cookie(r, kCookie)) {
            std::lock_guard<std::mutex> lock(mutex_);
            auto it = sessions_.find(sha256Hex(*sid));
            if (it != sessions_.end() && it->second.expires > nowSeconds()) {
                auth.caller = Caller{it->second.keyId, it->second.role, it->second.csrf};
                auth.byCookie = true;
                return auth;
            }
            auth.problem = "Your session has ended; log in again.";
        }
        return auth;
    }

    // A POST whose Origin is not this server's own (a form on another site or port) is refused;
    // so is one the browser says came from another site.
    std::optional<Response> crossOrigin(const Request& r) {
        std::optional<std::string_view> origin = r.header("origin");
        std::optional<std::string_view> host = r.header("host");
        bool foreign = r.header("sec-fetch-site").value_or("same-origin") == "cross-site";
        if (origin && *origin != "null") {
            std::string o = http::lowerAscii(*origin), h = host ? http::lowerAscii(*host) : "";
            foreign = foreign || h.empty() || (o != "http://" + h && o != "https://" + h);
        } else if (origin) {
            foreign = true;  // "null": a sandboxed or opaque origin
        }
        if (!foreign) return std::nullopt;
        return Response::text(403, "refused: this request came from another origin (cross-site request)\n");
    }

    Response unauthorized(const Auth& auth) {
        Response response = loginPage(auth.status, auth.problem.empty() ? "" : auth.problem);
        if (auth.status == 401) response.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"remit inbox\"");
        return response;
    }

    std::string newSession(const ApiKey& key, std::string& csrf) {
        std::string sid = randomHex(32);
        csrf = randomHex(32);
        std::string hash = sha256Hex(sid);
        std::lock_guard<std::mutex> lock(mutex_);
        while (sessionOrder_.size() >= kMaxSessions) {
            sessions_.erase(sessionOrder_.front());
            sessionOrder_.pop_front();
        }
        sessions_[hash] = Session{key.id, key.role, csrf, nowSeconds() + kSessionSeconds};
        sessionOrder_.push_back(hash);
        return sid;
    }

    void endSession(const Request& r) {
        std::optional<std::string> sid = http::cookie(r, kCookie);
        if (!sid) return;
        std::lock_guard<std::mutex> lock(mutex_);
        std::string hash = sha256Hex(*sid);
        sessions_.erase(hash);
        sessionOrder_.erase(std::remove(sessionOrder_.begin(), sessionOrder_.end(), hash), sessionOrder_.end());
    }

    std::string cookieAttributes(const Request& r) const {
        // Secure when the page was reached over TLS (a proxy in front says so).
        bool tls = http::lowerAscii(r.header("x-forwarded-proto").value_or("")) == "https";
        return std::string("; Path=/; HttpOnly; SameSite=Strict") + (tls ? "; Secure" : "");
    }

    // --- routes --------------------------------------------------------------------------------

    Response route(const Request& r) {
        const std::string& path = r.path;
        bool get = r.method == "GET" || r.method == "HEAD";
        if (path == "/health" || path == "/healthz") return get ? Response::text(200, "ok\n") : notAllowed("GET, HEAD");
        if (path == "/static/inbox.js")
            return get ? Response::text(200, inbox::kScript, "text/javascript; charset=utf-8") : notAllowed("GET, HEAD");
        if (path == "/static/inbox.css")
            return get ? Response::text(200, inbox::kStyle, "text/css; charset=utf-8") : notAllowed("GET, HEAD");
        if (path == "/login") {
            if (get) return loginPage(200, "");
            if (r.method == "POST") return login(r);
            return notAllowed("GET, HEAD, POST");
        }
        if (path == "/logout") {
            if (r.method != "POST") return notAllowed("POST");
            if (std::optional<Response> refused = crossOrigin(r)) return *refused;
            Auth auth = authenticate(r);
            if (auth.caller && auth.byCookie && !csrfOk(r, *auth.caller)) return csrfRefused();
            endSession(r);
            Response out = redirect("/login");
            out.headers.emplace_back("Set-Cookie", std::string(kCookie) + "=; Max-Age=0" + cookieAttributes(r));
            return out;
        }
        bool known = path == "/" || path.starts_with("/requests/") || path.starts_with("/runs/");
        if (!known) return page404();
        Auth auth = authenticate(r);
        if (!auth.caller) return unauthorized(auth);
        const Caller& caller = *auth.caller;
        if (path == "/") return get ? listPage(r, caller) : notAllowed("GET, HEAD");
        if (path.starts_with("/runs/")) {
            // /runs/<run id>[/continue]
            std::string_view rest = std::string_view(path).substr(6);
            std::string runId(rest.substr(0, rest.find('/')));
            std::string_view action = rest.substr(runId.size());
            if (!isRunId(runId)) return page404();
            if (action.empty()) return get ? runPage(caller, runId) : notAllowed("GET, HEAD");
            if (action != "/continue") return page404();
            if (r.method != "POST") return notAllowed("POST");
            if (auth.byCookie && !csrfOk(r, caller)) return csrfRefused();
            return continueRun(caller, runId);
        }
        // /requests/<digest>[/approve|/deny]
        std::string_view rest = std::string_view(path).substr(10);
        std::string_view digest = rest.substr(0, rest.find('/'));
        std::string_view action = rest.size() > digest.size() ? rest.substr(digest.size()) : "";
        if (!isDigest(digest)) return page404();
        if (action.empty()) return get ? requestPage(caller, std::string(digest)) : notAllowed("GET, HEAD");
        if (action != "/approve" && action != "/deny") return page404();
        if (r.method != "POST") return notAllowed("POST");
        // screen() refused other origins and viewers; the token is in the body.
        if (auth.byCookie && !csrfOk(r, caller)) return csrfRefused();
        return decide(r, caller, std::string(digest), action == "/approve");
    }

    bool csrfOk(const Request& r, const Caller& caller) const {
        std::optional<std::string> token = http::formField(r.body, "csrf");
        return token && !caller.csrf.empty() && constantTimeEqual(*token, caller.csrf);
    }

    Response csrfRefused() const {
        return Response::text(403, "refused: the form's CSRF token is missing or wrong; reload the page and try again\n");
    }

    Response login(const Request& r) {
        if (std::optional<Response> refused = crossOrigin(r)) return *refused;
        std::optional<std::string> token = http::formField(r.body, "key");
        const ApiKey* key = token && !token->empty() ? keys_.find(*token) : nullptr;
        if (!key) {
            Response out = loginPage(401, "That key is not valid here.");
            out.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"remit inbox\"");
            return out;
        }
        if (key->role == KeyRole::None)
            return loginPage(403, "That key is an MCP client's, with no role in the inbox; use an approver's or "
                                  "viewer's key.");
        std::string csrf;
        std::string sid = newSession(*key, csrf);
        Response out = redirect("/");
        out.headers.emplace_back("Set-Cookie", std::string(kCookie) + "=" + sid + "; Max-Age=" +
                                                   std::to_string(kSessionSeconds) + cookieAttributes(r));
        return out;
    }

    Response decide(const Request& r, const Caller& caller, const std::string& digest, bool approve) {
        std::string error, reason, runId;
        if (!approve) {
            reason = http::formField(r.body, "reason").value_or("");
            reason.erase(0, reason.find_first_not_of(" \t\r\n"));
            reason.erase(reason.find_last_not_of(" \t\r\n") + 1);
            if (reason.empty() || reason.size() > kMaxReasonBytes || !validUtf8(reason))
                return page(400, "Deny: a reason is needed", caller,
                            fmt::format("<p class=\"error\">A denial needs a reason (at most {} bytes of text): the "
                                        "run's error names it. <a href=\"/requests/{}\">Back to the request</a></p>",
                                        kMaxReasonBytes, digest));
        }
        std::unique_ptr<Store> records = openRecords(error);
        if (!records) return storeError(caller, error);
        ApprovalStore& store = records->approvals();
        bool loaded = store.load(error);
        if (loaded && !store.pendingMatching(digest, true).empty())  // for the notice's Continue button
            if (nlohmann::json run = pendingRequestJson(store, digest)["run_id"]; run.is_string()) runId = run;
        // In a fleet the notice follows the submitted run, which the decision queues for the workers.
        if (fleet() && isRunId(runId)) runId = submittedRunOf(*records, runId);
        ApprovalProgress progress;
        bool done = loaded && (approve ? approveRequest(store, digest, caller.keyId, error, &progress)
                                       : denyRequest(store, digest, caller.keyId, reason, error));
        if (!done)
            return page(409, "Not decided", caller,
                        "<p class=\"error\">" + escapeHtml(error) + "</p><p><a href=\"/\">Back to the list</a></p>");
        // One approver of a quorum: the run waits for the others, so there is nothing to continue yet.
        std::string short_;
        if (approve && !progress.granted) {
            runId.clear();
            short_ = fmt::format(" ({} of the {} approvers it needs)", progress.approvers, progress.quorum);
        }
        fmt::print(stderr, "{} inbox: {} {} by {}{}\n", tool_, approve ? "approved" : "denied", digest, caller.keyId,
                   short_);
        return redirect(fmt::format("/?done={}&request={}{}", approve ? "approved" : "denied", digest,
                                    isRunId(runId) ? "&run=" + runId : ""));
    }

    static bool validUtf8(std::string_view s) {
        try {
            (void)nlohmann::json(std::string(s)).dump();
            return true;
        } catch (const nlohmann::json::exception&) {
            return false;
        }
    }

    // --- pages ---------------------------------------------------------------------------------

    static Response notAllowed(const char* allow) {
        Response r = Response::text(405, std::string("method not allowed; this path accepts ") + allow + "\n");
        r.headers.emplace_back("Allow", allow);
        return r;
    }

    static Response redirect(const std::string& to) {
        Response r{303, {{"Location", to}}, {}, false};
        return r;
    }

    Response page404() const { return html(404, "Not found", nullptr, "<p>There is no such page.</p><p><a href=\"/\">The inbox</a></p>"); }

    // Every response gets the security headers, whatever produced it.
    static Response secured(Response r) {
        r.headers.emplace_back("Content-Security-Policy", kPolicy);
        r.headers.emplace_back("X-Frame-Options", "DENY");
        r.headers.emplace_back("X-Content-Type-Options", "nosniff");
        // same-origin, not no-referrer: under no-referrer a browser sends `Origin: null` with the page's
        // own form posts, and the origin check could no longer tell them from a foreign page's.
        r.headers.emplace_back("Referrer-Policy", "same-origin");
        r.headers.emplace_back("Cache-Control", "no-store");
        r.headers.emplace_back("Cross-Origin-Opener-Policy", "same-origin");
        r.headers.emplace_back("Cross-Origin-Resource-Policy", "same-origin");
        return r;
    }

    // `head`: markup of the template's own for <head> (never a value).
    Response page(int status, const std::string& title, const Caller& caller, const std::string& body,
                  std::string_view head = {}) const {
        return html(status, title, &caller, body, head);
    }

    Response html(int status, const std::string& title, const Caller* caller, const std::string& body,
                  std::string_view head = {}) const {
        std::string out = "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">" +
                          std::string(head) + "<title>" + escapeHtml(title) + " — Remit inbox</title>"
                          "<link rel=\"stylesheet\" href=\"/static/inbox.css\">"
                          "<script src=\"/static/inbox.js\" defer></script></head>\n<body><header>"
                          "<a class=\"brand\" href=\"/\">Remit inbox</a>";
        if (caller) {
            out += "<span class=\"who\">" + escapeHtml(caller->keyId) + " (" + roleName(caller->role) + ")</span>";
            if (!caller->csrf.empty())
                out += "<form method=\"post\" action=\"/logout\"><input type=\"hidden\" name=\"csrf\" value=\"" +
                       escapeHtml(caller->csrf) + "\"><button type=\"submit\">Log out</button></form>";
        }
        out += "</header>\n<main>\n" + body + "\n</main></body></html>\n";
        return Response::text(status, std::move(out), "text/html; charset=utf-8");
    }

    Response loginPage(int status, const std::string& problem) const {
        std::string body = "<h1>Log in</h1>\n";
        if (!problem.empty()) body += "<p class=\"error\">" + escapeHtml(problem) + "</p>\n";
        body += "<form class=\"login\" method=\"post\" action=\"/login\">"
                "<label for=\"key\">Your API key (an approver's or a viewer's, from keys.json)</label>"
                "<input id=\"key\" name=\"key\" type=\"password\" autocomplete=\"current-password\" required autofocus>"
                "<button type=\"submit\">Log in</button></form>\n"
                "<p class=\"muted\">Scripts may send <code>Authorization: Bearer TOKEN</code> instead.</p>";
        return html(status, "Log in", nullptr, body);
    }

    std::string csrfField(const Caller& caller) const {
        if (caller.csrf.empty()) return "";
        return "<input type=\"hidden\" name=\"csrf\" value=\"" + escapeHtml(caller.csrf) + "\">";
    }

    // The command that continues a run, to paste into a shell anywhere (the state directory is
    // absolute; a store's URL is shown without its password, which comes from ~/.pgpass or $PGPASSWORD).
    std::string resumeCommand(const std::string& runId) const {
        if (fleet()) return fmt::format("{} resume {} --store {}", tool_, runId, shellQuote(options_.shownUrl));
        return fmt::format("{} resume {} --state-dir {}", tool_, runId, shellQuote(options_.stateDir.string()));
    }

    Response storeError(const Caller& caller, const std::string& error) const {
        return page(500, "The approval store cannot be read", caller,
                    "<p class=\"error\">" + escapeHtml(error) + "</p>");
    }

    Response listPage(const Request& r, const Caller& caller) {
        std::string error;
        std::unique_ptr<Store> records = openRecords(error);
        if (!records) return storeError(caller, error);
        ApprovalStore& store = records->approvals();
        if (!store.load(error)) return storeError(caller, error);
        nlohmann::json requests = pendingRequestsJson(store);
        std::string body;
        // After a decision: what happened, and what to do next.
        std::string query = r.target.size() > r.path.size() ? r.target.substr(r.path.size() + 1) : "";
        std::string done = http::formField(query, "done").value_or("");
        std::string decided = http::formField(query, "request").value_or("");
        if ((done == "approved" || done == "denied") && isDigest(decided)) {
            body += fmt::format("<p class=\"notice{}\" id=\"notice\">{} request <code>{}</code>. ", done == "denied" ? " denied" : "",
                                done == "approved" ? "Approved" : "Denied", decided.substr(0, 16));
            std::string run = http::formField(query, "run").value_or("");
            if (fleet() && isRunId(run)) {
                // The decision queued the run: a worker of the fleet continues it, nothing runs here.
                body += done == "approved"
                            ? "The run is queued again: a worker of the fleet continues it and uses the approval"
                            : "The run is queued again: a worker of the fleet fails it at this call, naming you and "
                              "your reason";
                body += ". <a id=\"follow\" href=\"/runs/" + escapeHtml(run) + "\">Follow the run</a></p>\n";
            } else {
                body += done == "approved" ? "The run uses the approval when it is resumed"
                                           : "The run fails at this call when it is resumed, naming you and your reason";
                body += ".</p>\n";
            }
            if (!fleet() && isRunId(run) && caller.role == KeyRole::Approver)
                body += continueForm(caller, run, done == "approved" ? "Continue the run now"
                                                                     : "Continue the run now (it fails at this call)");
        }
        body += "<h1>Pending approvals</h1>\n";
        body += fmt::format("<p class=\"store\">{} pending in <code>{}</code>, oldest first.</p>\n", requests.size(),
                            escapeHtml(store.where()));
        if (requests.empty()) {
            body += "<p class=\"empty\">No request is waiting for a decision.</p>\n";
            return page(200, "Pending approvals", caller, body);
        }
        body += "<table id=\"requests\"><thead><tr><th>Request</th><th>Call</th><th>Run</th><th>Asked</th>"
                "<th>Why approval</th><th>Arguments</th><th>Status</th></tr></thead><tbody>\n";
        for (const nlohmann::json& q : requests) {
            std::string digest = q["digest"].get<std::string>();
            std::string href = "/requests/" + digest;
            std::string args = oneLineJson(q["args"]);
            std::string_view cut = firstCodePoints(args, kListArgsChars);
            body += "<tr data-href=\"" + escapeHtml(href) + "\" data-digest=\"" + escapeHtml(digest) + "\">";
            body += "<td><a href=\"" + escapeHtml(href) + "\"><code>" + escapeHtml(digest.substr(0, 16)) + "</code></a></td>";
            body += "<td><code>" + escapeHtml(q["resource"].get<std::string>()) + "</code> @ <code>" +
                    escapeHtml(q["site"].get<std::string>()) + "</code></td>";
            body += "<td>" + (q["run_id"].is_string() ? "<code>" + escapeHtml(q["run_id"].get<std::string>()) + "</code>"
                                                       : std::string("<span class=\"muted\">unknown</span>")) + "</td>";
            body += "<td>" + escapeHtml(ageText(q["requested_at"])) + "</td><td><ul class=\"reasons\">";
            for (const auto& reason : q["reasons"]) body += "<li>" + escapeHtml(reason.get<std::string>()) + "</li>";
            body += "</ul></td><td class=\"args\"><code>" + escapeHtml(cut) + (cut.size() < args.size() ? "…" : "") +
                    "</code></td>";
            body += statusCell(q) + "</tr>\n";
        }
        body += "</tbody></table>\n";
        return page(200, "Pending approvals", caller, body);
    }

    static std::string statusCell(const nlohmann::json& q) {
        if (q["status"] == "approved")
            return "<td class=\"status-approved\">approved by " + escapeHtml(q["approved_by"].get<std::string>()) +
                   "; not used yet</td>";
        return "<td class=\"status-pending\">pending</td>";
    }

    static std::string tagText(const nlohmann::json& tags) {
        std::string out;
        if (tags.is_array())
            for (const auto& t : tags)
                if (t.is_string()) out += (out.empty() ? "" : ", ") + t.get<std::string>();
        return out;
    }

    static std::string callRef(const nlohmann::json& seq) {
        std::string n = seq.dump();
        return "<a href=\"#call-" + escapeHtml(n) + "\">#" + escapeHtml(n) + "</a>";
    }

    static std::string callRefs(const nlohmann::json& seqs) {
        std::string out;
        if (seqs.is_array())
            for (const auto& s : seqs)
                if (s.is_number_unsigned()) out += (out.empty() ? "" : ", ") + callRef(s);
        return out;
    }

    static std::string pre(const nlohmann::json& value) {
        return "<pre>" + escapeHtml(prettyJson(value)) + "</pre>";
    }

    Response requestPage(const Caller& caller, const std::string& digest) {
        std::string error;
        std::unique_ptr<Store> opened = openRecords(error);
        if (!opened) return storeError(caller, error);
        Store& records = *opened;
        ApprovalStore& store = records.approvals();
        if (!store.load(error)) return storeError(caller, error);
        if (store.pendingMatching(digest, true).empty())
            return page(404, "No such request", caller,
                        "<p class=\"error\">No pending request has this digest: it was decided and used, or never "
                        "asked for.</p><p><a href=\"/\">Back to the list</a></p>");
        nlohmann::json q = requestDetailsJson(records, digest);
        std::string resource = q["resource"].get<std::string>(), site = q["site"].get<std::string>();
        std::string b;
        b += "<p><a href=\"/\">← All pending approvals</a></p>\n";
        b += "<h1><code>" + escapeHtml(resource) + "</code> @ <code>" + escapeHtml(site) + "</code></h1>\n";
        b += "<dl class=\"facts\">";
        b += "<dt>Request</dt><dd><code id=\"digest\">" + escapeHtml(digest) + "</code></dd>";
        if (q["program"].is_object())
            b += "<dt>Program</dt><dd><code>" + escapeHtml(stringField(q["program"], "name")) + "</code> (" +
                 escapeHtml(stringField(q["program"], "path")) + "), hash <code>" +
                 escapeHtml(stringField(q["program"], "program_hash").substr(0, 16)) + "</code></dd>";
        if (q["run_id"].is_string())
            b += "<dt>Run</dt><dd><code>" + escapeHtml(q["run_id"].get<std::string>()) + "</code></dd>";
        if (std::string age = ageText(q["requested_at"]); !age.empty())
            b += "<dt>Asked</dt><dd>" + escapeHtml(age) + "</dd>";
        b += "<dt>Status</dt><dd id=\"status\">" +
             std::string(q["status"] == "approved"
                             ? "<span class=\"status-approved\">approved by " +
                                   escapeHtml(q["approved_by"].get<std::string>()) +
                                   "</span>, not used yet (the run uses it when it resumes)"
                             : "<span class=\"status-pending\">pending</span>") +
             "</dd></dl>\n";

        b += "<h2>Why it needs approval</h2><ul class=\"reasons\" id=\"reasons\">";
        for (const auto& reason : q["reasons"]) b += "<li>" + escapeHtml(reason.get<std::string>()) + "</li>";
        b += "</ul>\n";

        b += "<h2>Arguments, in full</h2>\n<div id=\"arguments\">";
        for (auto it = q["args"].begin(); it != q["args"].end(); ++it) {
            b += "<section class=\"argument\"><h3>" + escapeHtml(it.key()) + "</h3>" + pre(it.value());
            if (q["arg_tags"].is_object() && q["arg_tags"].contains(it.key()) && !tagText(q["arg_tags"][it.key()]).empty())
                b += "<p>carries <span class=\"tags\">" + escapeHtml(tagText(q["arg_tags"][it.key()])) + "</span></p>";
            if (q["arg_derived_from"].is_object() && q["arg_derived_from"].contains(it.key())) {
                std::string refs = callRefs(q["arg_derived_from"][it.key()]);
                b += refs.empty() ? "<p class=\"muted\">derives only from the run's inputs and the program's constants</p>"
                                  : "<p>derives from call " + refs + "</p>";
            }
            b += "</section>";
        }
        b += "</div>\n";

        b += "<h2>Where the arguments come from</h2>\n";
        if (!q["inputs"].is_null()) b += "<p>The run's inputs:</p>" + pre(q["inputs"]);
        if (q["provenance"].empty()) {
            b += "<p class=\"muted\">No earlier call: the arguments derive only from the run's inputs and the "
                 "program's constants.</p>\n";
        } else {
            b += "<ol class=\"provenance\" id=\"provenance\">";
            for (const nlohmann::json& c : q["provenance"]) {
                std::string seq = c["seq"].dump();
                b += "<li id=\"call-" + escapeHtml(seq) + "\"><strong>#" + escapeHtml(seq) + " <code>" +
                     escapeHtml(c["resource"].is_string() ? c["resource"].get<std::string>() : "?") +
                     "</code> @ <code>" + escapeHtml(c["site"].is_string() ? c["site"].get<std::string>() : "?") +
                     "</code></strong> " + escapeHtml(c["status"].is_string() ? c["status"].get<std::string>() : "");
                if (c.contains("args")) b += "<div>arguments:</div>" + pre(c["args"]);
                if (c.contains("arg_tags") && c["arg_tags"].is_object())
                    for (auto t = c["arg_tags"].begin(); t != c["arg_tags"].end(); ++t)
                        if (!tagText(*t).empty())
                            b += "<div>'" + escapeHtml(t.key()) + "' carries <span class=\"tags\">" +
                                 escapeHtml(tagText(*t)) + "</span></div>";
                if (c.value("status", "") == "ok") {
                    b += "<div>result";
                    if (!tagText(c["result_tags"]).empty())
                        b += " (<span class=\"tags\">" + escapeHtml(tagText(c["result_tags"])) + "</span>)";
                    b += ":</div>" + pre(c["result"]);
                } else if (c.contains("error") && c["error"].is_object()) {
                    b += "<div>error: " + escapeHtml(oneLineJson(c["error"])) + "</div>";
                }
                if (c.contains("approved_by") && c["approved_by"].is_string())
                    b += "<div>approved by " + escapeHtml(c["approved_by"].get<std::string>()) + "</div>";
                std::string refs = c.contains("derived_from") ? callRefs(c["derived_from"]) : "";
                b += refs.empty() ? "<div class=\"muted\">derived only from the run's inputs and the program's constants</div>"
                                  : "<div>derived from " + refs + "</div>";
                b += "</li>";
            }
            b += "</ol>\n";
        }

        b += "<h2>The program's manifest for this call</h2>\n" + manifestSection(q);

        b += "<h2>Decide</h2>\n";
        if (caller.role != KeyRole::Approver) {
            b += "<p class=\"muted\" id=\"viewer\">Your key is a viewer's: you can see this request but not decide it.</p>";
        } else {
            std::string what = resource + " @ " + site;
            b += "<div class=\"decide\">";
            b += "<form method=\"post\" action=\"/requests/" + digest + "/approve\" data-confirm=\"" +
                 escapeHtml("Approve " + what + " with these arguments, as " + caller.keyId + "?") + "\">" +
                 csrfField(caller) + "<button class=\"approve\" id=\"approve\" type=\"submit\">Approve</button></form>";
            b += "<form method=\"post\" action=\"/requests/" + digest + "/deny\" data-confirm=\"" +
                 escapeHtml("Deny " + what + ", as " + caller.keyId + "?") + "\">" + csrfField(caller) +
                 "<label for=\"reason\">Reason (the run's error names it)<input id=\"reason\" name=\"reason\" "
                 "type=\"text\" maxlength=\"" + std::to_string(kMaxReasonBytes) + "\" required></label>"
                 "<button class=\"deny\" id=\"deny\" type=\"submit\">Deny</button></form>";
            b += "</div>\n";
        }
        if (std::string submitted = q["run_id"].is_string() && isRunId(q["run_id"].get<std::string>()) && fleet()
                                        ? submittedRunOf(records, q["run_id"].get<std::string>())
                                        : "";
            !submitted.empty()) {
            b += "<p class=\"muted\" id=\"resume\">A decision queues the run for the fleet's workers: one of them "
                 "continues it with the approval, or fails it at this call when it is denied. <a href=\"/runs/" +
                 escapeHtml(submitted) + "\">Follow the run</a></p>\n";
        } else if (!fleet() && q["run_id"].is_string() && isRunId(q["run_id"].get<std::string>())) {
            std::string runId = q["run_id"].get<std::string>();
            if (q["status"] == "approved" && caller.role == KeyRole::Approver)
                b += continueForm(caller, runId, "Continue the run now");
            b += "<p class=\"muted\" id=\"resume\">After the decision the run continues from here (Continue) or "
                 "in a shell: <code>" + escapeHtml(resumeCommand(runId)) + "</code></p>\n";
        }
        return page(200, resource + " @ " + site, caller, b);
    }

    // A button that continues the run from here (POST /runs/RUN/continue); for approvers.
    std::string continueForm(const Caller& caller, const std::string& runId, const std::string& label) const {
        return "<form class=\"continue\" method=\"post\" action=\"/runs/" + escapeHtml(runId) + "/continue\">" +
               csrfField(caller) + "<button class=\"continue\" id=\"continue\" type=\"submit\">" + escapeHtml(label) +
               "</button></form>\n";
    }

    Response continueRun(const Caller& caller, const std::string& runId) {
        if (fleet()) return queueRun(caller, runId);
        std::error_code ec;
        if (!std::filesystem::is_regular_file(runTracePath(options_.stateDir, runId), ec))
            return page(404, "No such run", caller,
                        "<p class=\"error\">The state directory has no run " + escapeHtml(runId) +
                            ".</p><p><a href=\"/\">Back to the list</a></p>");
        if (std::string why = jobs_.start(runId, caller.keyId); !why.empty())
            return page(503, "Not continued", caller,
                        "<p class=\"error\">" + escapeHtml(why) + "</p><p><a href=\"/\">Back to the list</a></p>");
        fmt::print(stderr, "{} inbox: continuing run {} for {}\n", tool_, runId, caller.keyId);
        return redirect("/runs/" + runId);
    }

    // Continue in a fleet: a failed run (a call that never reached its adapter, once the adapter is
    // fixed) goes back to the queue and a worker continues it. A waiting run needs no button: the
    // decision that settles its request queues it.
    Response queueRun(const Caller& caller, const std::string& runId) {
        std::string error;
        std::unique_ptr<Store> records = openRecords(error);
        if (!records) return storeError(caller, error);
        PgStore& store = static_cast<PgStore&>(*records);
        std::optional<SubmittedRun> run = store.findRunOf(runId, error);
        if (!run)
            return error.empty() ? page(404, "No such run", caller,
                                        "<p class=\"error\">The store has no submitted run " + escapeHtml(runId) +
                                            ".</p><p><a href=\"/\">Back to the list</a></p>")
                                 : storeError(caller, error);
        if (!store.requeue(run->runId, error)) {
            std::string why = !error.empty() ? error
                                             : "The run is " + run->status +
                                                   ": only a failed run is queued again (a decision queues a "
                                                   "waiting one).";
            return page(error.empty() ? 409 : 503, "Not queued", caller,
                        "<p class=\"error\">" + escapeHtml(why) + "</p><p><a href=\"/runs/" + escapeHtml(run->runId) +
                            "\">The run</a></p>");
        }
        fmt::print(stderr, "{} inbox: queued run {} for the workers, for {}\n", tool_, run->runId, caller.keyId);
        return redirect("/runs/" + run->runId);
    }

    // A run of a fleet, as the store has it: queued or running (the page reloads itself each
    // second), waiting for a request, or how its last attempt ended.
    Response fleetRunPage(const Caller& caller, const std::string& runId) {
        std::string error;
        std::unique_ptr<Store> records = openRecords(error);
        if (!records) return storeError(caller, error);
        std::optional<SubmittedRun> run = static_cast<PgStore&>(*records).findRunOf(runId, error);
        std::string b = "<p><a href=\"/\">← All pending approvals</a></p>\n<h1>Run <code>" +
                        escapeHtml(run ? run->runId : runId) + "</code></h1>\n";
        if (!run) {
            if (!error.empty()) return storeError(caller, error);
            b += "<p class=\"error\">The store has no submitted run " + escapeHtml(runId) + ".</p>";
            return page(404, "Run " + runId, caller, b);
        }
        b += "<p class=\"muted\">Program <code>" + escapeHtml(run->program) + "</code>, " +
             std::to_string(run->attempts) + " attempt(s)" +
             (run->worker.empty() ? std::string() : ", the last by worker <code>" + escapeHtml(run->worker) + "</code>") +
             "; runs of this store are continued by its workers, not by this inbox.</p>\n";
        if (run->status == "queued" || run->status == "running") {
            b += "<p class=\"notice\" id=\"running\" data-status=\"" + escapeHtml(run->status) + "\">" +
                 (run->status == "queued" ? "The run is queued: the next free worker of the fleet continues it."
                                          : "A worker of the fleet is running it.") +
                 " This page reloads until it ends.</p>\n";
            return page(200, "Run " + run->runId, caller, b, "<meta http-equiv=\"refresh\" content=\"1\">");
        }
        if (run->status == "waiting") {
            b += "<p class=\"notice\" id=\"outcome\" data-status=\"approval_required\">The run waits for an approval.";
            if (isDigest(run->waitingDigest))
                b += " <a href=\"/requests/" + run->waitingDigest + "\">Open the request</a>";
            b += "</p>\n";
            return page(200, "Run " + run->runId, caller, b);
        }
        const nlohmann::json& e = run->outcome;
        int exitCode = e.is_object() && e.contains("exit") && e["exit"].is_number_integer() ? e["exit"].get<int>() : -1;
        std::string printed = e.is_object() ? stringField(e, "stderr") : "";
        b += outcomeHtml(e, exitCode, printed, "attempt");
        if (run->status == "failed" && caller.role == KeyRole::Approver)
            b += continueForm(caller, run->runId, "Queue the run again for the workers");
        b += "<p class=\"muted\">In a shell: <code>" + escapeHtml(resumeCommand(run->runId)) + "</code></p>\n";
        return page(200, "Run " + run->runId, caller, b);
    }

    // How a run's attempt ended, from its --json envelope (null when it printed none): the result,
    // another pause, an error, or what it printed. `what`: "resume" or "attempt".
    static std::string outcomeHtml(const nlohmann::json& e, int exitCode, const std::string& printed,
                                   const std::string& what) {
        std::string b;
        std::string status = e.is_object() ? stringField(e, "status") : "";
        std::string resumedAs = e.is_object() ? stringField(e, "run_id") : "";
        if (status == "completed") {
            b += "<p class=\"notice\" id=\"outcome\" data-status=\"completed\">The run completed";
            if (e.contains("calls") && e["calls"].is_number_unsigned())
                b += " (" + escapeHtml(e["calls"].dump()) + " call(s)";
            if (e.contains("spent_usd") && e["spent_usd"].is_number())
                b += ", $" + escapeHtml(fmt::format("{:.4f}", e["spent_usd"].get<double>())) + " spent";
            if (e.contains("calls") && e["calls"].is_number_unsigned()) b += ")";
            b += ".</p>\n<h2>Result</h2>\n<div id=\"result\">" + pre(e.value("result", nlohmann::json())) + "</div>\n";
            if (!tagText(e.value("result_tags", nlohmann::json())).empty())
                b += "<p>carries <span class=\"tags\">" + escapeHtml(tagText(e["result_tags"])) + "</span></p>\n";
        } else if (status == "approval_required") {
            std::string digest = e.contains("pending") && e["pending"].is_object() ? stringField(e["pending"], "digest") : "";
            b += "<p class=\"notice\" id=\"outcome\" data-status=\"approval_required\">The run paused again: another "
                 "call needs approval.";
            if (isDigest(digest))
                b += " <a href=\"/requests/" + digest + "\">Open the request</a>";
            b += "</p>\n";
        } else if (e.is_object() && e.contains("error") && e["error"].is_object()) {
            const nlohmann::json& err = e["error"];
            b += "<p class=\"notice denied\" id=\"outcome\" data-status=\"" + escapeHtml(status) + "\">The run " +
                 escapeHtml(status.empty() ? "ended" : status) + ": <code>" + escapeHtml(stringField(err, "code")) +
                 "</code> " + escapeHtml(stringField(err, "message")) + "</p>\n";
        } else {
            b += "<p class=\"notice denied\" id=\"outcome\" data-status=\"stopped\">The " + what + " stopped" +
                 (exitCode >= 0 ? " (exit " + std::to_string(exitCode) + ")" : std::string(" (killed)")) +
                 " without running to an end; what it said is below.</p>\n";
        }
        if (!resumedAs.empty()) b += "<p>Its trace: run <code>" + escapeHtml(resumedAs) + "</code>.</p>\n";
        if (!printed.empty())
            b += "<h2>What the " + what + " printed</h2>\n<pre id=\"errors\">" + escapeHtml(printed) + "</pre>\n";
        return b;
    }

    // A run continued from here: still going (the page reloads itself each second), or how it ended.
    Response runPage(const Caller& caller, const std::string& runId) {
        if (fleet()) return fleetRunPage(caller, runId);
        std::optional<ResumeJobs::Job> job = jobs_.find(runId);
        std::string b = "<p><a href=\"/\">← All pending approvals</a></p>\n<h1>Run <code>" + escapeHtml(runId) +
                        "</code></h1>\n";
        if (!job) {
            b += "<p class=\"muted\">This inbox has not continued this run since it started.</p>";
            if (caller.role == KeyRole::Approver) b += continueForm(caller, runId, "Continue the run now");
            b += "<p class=\"muted\">In a shell: <code>" + escapeHtml(resumeCommand(runId)) + "</code></p>\n";
            return page(404, "Run " + runId, caller, b);
        }
        b += "<p class=\"muted\">Continued by " + escapeHtml(job->startedBy) + ", " +
             escapeHtml(ageText(nlohmann::json(job->startedAt))) + ", with <code>" +
             escapeHtml(resumeCommand(runId)) + " --json</code>.</p>\n";
        if (job->running) {
            b += "<p class=\"notice\" id=\"running\">The run is going on; this page reloads until it ends.</p>\n";
            return page(200, "Run " + runId, caller, b, "<meta http-equiv=\"refresh\" content=\"1\">");
        }
        b += outcomeHtml(job->envelope, job->exitCode, job->errors, "resume");
        return page(200, "Run " + runId, caller, b);
    }

    static std::string manifestSection(const nlohmann::json& q) {
        const nlohmann::json& m = q["manifest"];
        std::string resource = q["resource"].get<std::string>();
        if (!m["resource"].is_object()) {
            std::string path = q["program"].is_object() ? stringField(q["program"], "path") : "";
            return "<p class=\"muted\">The program" + (path.empty() ? "" : " " + escapeHtml(path)) +
                   " cannot be read or checked any more, so its manifest is not shown.</p>\n";
        }
        const nlohmann::json& r = m["resource"];
        auto field = [](const nlohmann::json& o, const char* key) {
            if (!o.is_object() || !o.contains(key)) return std::string("—");
            return escapeHtml(o[key].is_string() ? o[key].get<std::string>() : oneLineJson(o[key]));
        };
        std::string b = "<table id=\"manifest\"><tbody>";
        b += "<tr><th>Resource</th><td><code>" + escapeHtml(resource) + "</code> (" + field(r, "kind") + ")</td></tr>";
        b += "<tr><th>Calls, at most</th><td>" + field(r, "max_calls") + "</td></tr>";
        // Costs with the digits they need, as `approvals show` prints them.
        auto usd = [](const nlohmann::json& o, const char* key) {
            return o.is_object() && o.contains(key) && o[key].is_number() ? "$" + usdOf(o[key]) : std::string("—");
        };
        b += "<tr><th>Cost per call</th><td>" + usd(r, "cost_per_call") + "</td></tr>";
        b += "<tr><th>Worst-case cost of these calls</th><td>" + usd(r, "worst_case_cost") + "</td></tr>";
        b += "<tr><th>The program's worst-case cost</th><td>" + usd(m, "worst_case_cost_usd") + " (budget " +
             (m["budget_usd"].is_number() ? usd(m, "budget_usd") : std::string("none")) + ")</td></tr>";
        if (m["call_site"].is_object()) {
            const nlohmann::json& s = m["call_site"];
            b += "<tr><th>Call site</th><td><code>" + field(s, "site") + "</code>, line " + field(s, "line") +
                 ", approval " + field(s, "approval") + ", retry " + field(s, "retry") + ", fallback " +
                 field(s, "fallback") + "</td></tr>";
        }
        b += "</tbody></table>\n";
        if (!m["flows"].empty()) {
            b += "<h3>Flows into its parameters</h3><table id=\"flows\"><thead><tr><th>Into</th><th>Tags</th>"
                 "<th>Verdict</th></tr></thead><tbody>";
            for (const auto& f : m["flows"])
                b += "<tr><td><code>" + escapeHtml(stringField(f, "sink")) + "</code></td><td class=\"tags\">" +
                     escapeHtml(tagText(f.value("tags", nlohmann::json::array()))) + "</td><td>" +
                     escapeHtml(stringField(f, "verdict")) + "</td></tr>";
            b += "</tbody></table>\n";
        }
        return b;
    }
};

}  // namespace

int inboxCommand(std::string_view tool, Args& args) {
    if (!args.positional.empty()) {
        fmt::print(stderr, "{}: error: inbox takes no arguments, only flags ({} inbox --help)\n", tool, tool);
        return kUsage;
    }
    InboxOptions options;
    if (const std::string* host = args.value("--host")) options.host = *host;
    if (options.host.empty()) {
        fmt::print(stderr, "{}: error: --host needs an address, e.g. 127.0.0.1 or 0.0.0.0\n", tool);
        return kUsage;
    }
    if (const std::string* port = args.value("--port")) {
        std::optional<uint64_t> n = parseCount(*port, 65535);
        if (!n) {
            fmt::print(stderr, "{}: error: --port must be a number from 0 to 65535 (0 picks a free port), not '{}'\n",
                       tool, *port);
            return kUsage;
        }
        options.port = static_cast<uint16_t>(*n);
    }
    const std::string* keysPath = args.value("--keys");
    if (!keysPath) {
        fmt::print(stderr,
                   "{}: error: the inbox needs --keys keys.json: every page asks for a key, and a key's role says "
                   "what it may do\n  hint: {{\"keys\": [{{\"id\": \"alice\", \"sha256\": \"<SHA-256 hex of the "
                   "token>\", \"role\": \"approver\"}}]}} ({})\n",
                   tool, kSee);
        return kUsage;
    }
    std::string problem;
    std::optional<ApiKeys> keys = ApiKeys::load(*keysPath, problem);
    if (!keys) {
        fmt::print(stderr, "{}: error: {}\n  hint: the format is {} plus \"role\": \"approver\" or \"viewer\" ({})\n",
                   tool, problem, kKeysFormat, kSee);
        return kUsage;
    }
    size_t approvers = 0, viewers = 0;
    for (const auto& [hash, key] : keys->byHash()) {
        approvers += key.role == KeyRole::Approver;
        viewers += key.role == KeyRole::Viewer;
    }
    if (approvers + viewers == 0) {
        fmt::print(stderr,
                   "{}: error: keys file '{}' has no key with a role, so nobody could use the inbox\n  hint: add "
                   "\"role\": \"approver\" (sees and decides) or \"role\": \"viewer\" (sees) to the operators' keys; "
                   "keys without a role are MCP clients' ({})\n",
                   tool, *keysPath, kSee);
        return kUsage;
    }
    options.keysPath = *keysPath;
    std::error_code ec;
    options.stateDir = std::filesystem::absolute(stateDirOf(args), ec).lexically_normal();
    if (ec) options.stateDir = stateDirOf(args);
    // This very program continues runs (`TOOL resume`), so a page resumes exactly as a shell does.
    options.executable = std::filesystem::read_symlink("/proc/self/exe", ec).string();
    if (ec || options.executable.empty()) {
        fmt::print(stderr, "{}: error: cannot find this program's own path (/proc/self/exe), which continues runs\n",
                   tool);
        return kFailure;
    }
    // The store as every command chooses it (--store, --state-dir, $REMIT_STORE, .remit), opened
    // and read now, so a damaged or unreachable one is reported at start-up, not on the first page;
    // a PostgreSQL store's schema is brought up to date here, once.
    std::unique_ptr<Store> records = openStoreFor(tool, args);
    if (!records) return kUsage;
    if (records->kind() == Store::Kind::PostgreSQL) {
        options.storeUrl = args.value("--store") ? *args.value("--store") : std::getenv("REMIT_STORE");
        options.shownUrl = static_cast<PgStore&>(*records).shownUrl();
    }
    if (!records->approvals().load(problem)) {
        fmt::print(stderr, "{}: error: {}\n", tool, problem);
        return kUsage;
    }
    std::string where = records->approvals().where();
    records.reset();  // each request opens its own

    http::Limits limits;
    limits.maxBody = size_t(64) << 10;  // a login or a decision: a few fields
    http::Server server(limits);
    Inbox inbox(tool, options, std::move(*keys));
    bool served =
        http::serveUntilSignalled(tool, server, options.host, options.port, inbox, [&](const std::string& base) {
            fmt::print(stderr, "{} inbox: listening on {}/ ({} approver key(s), {} viewer key(s); store {})\n", tool,
                       base, approvers, viewers, where);
            std::fflush(stderr);
        });
    return served ? kOk : kFailure;
}

}  // namespace remit::cli
