// See pg.h.
#include "session/pg.h"

#include "runtime/shared_library.h"

#include <fmt/format.h>
#include <poll.h>

#include <cerrno>
#include <cstdlib>

namespace remit::pg {

namespace {

// libpq's functions this layer calls, loaded once for the process and never unloaded.
struct PqApi : SharedLibraryApi {
    PGconn* (*connectdbParams)(const char* const*, const char* const*, int) = nullptr;
    ConnStatusType (*status)(const PGconn*) = nullptr;
    char* (*errorMessage)(const PGconn*) = nullptr;
    void (*finish)(PGconn*) = nullptr;
    PQnoticeProcessor (*setNoticeProcessor)(PGconn*, PQnoticeProcessor, void*) = nullptr;
    PGresult* (*execParams)(PGconn*, const char*, int, const Oid*, const char* const*, const int*, const int*,
                            int) = nullptr;
    PGresult* (*exec)(PGconn*, const char*) = nullptr;
    void (*clear)(PGresult*) = nullptr;
    ExecStatusType (*resultStatus)(const PGresult*) = nullptr;
    int (*ntuples)(const PGresult*) = nullptr;
    int (*getisnull)(const PGresult*, int, int) = nullptr;
    char* (*getvalue)(const PGresult*, int, int) = nullptr;
    int (*getlength)(const PGresult*, int, int) = nullptr;
    char* (*resultErrorField)(const PGresult*, int) = nullptr;
    char* (*resultErrorMessage)(const PGresult*) = nullptr;
    int (*consumeInput)(PGconn*) = nullptr;
    PGnotify* (*notifies)(PGconn*) = nullptr;
    int (*socket)(const PGconn*) = nullptr;
    void (*freemem)(void*) = nullptr;
    PQconninfoOption* (*conninfoParse)(const char*, char**) = nullptr;
    void (*conninfoFree)(PQconninfoOption*) = nullptr;
};

bool bindPq(const SharedLibrary& lib, PqApi& api) {
    return lib.bind("PQconnectdbParams", api.connectdbParams) && lib.bind("PQstatus", api.status) &&
           lib.bind("PQerrorMessage", api.errorMessage) && lib.bind("PQfinish", api.finish) &&
           lib.bind("PQsetNoticeProcessor", api.setNoticeProcessor) && lib.bind("PQexecParams", api.execParams) &&
           lib.bind("PQexec", api.exec) && lib.bind("PQclear", api.clear) &&
           lib.bind("PQresultStatus", api.resultStatus) && lib.bind("PQntuples", api.ntuples) &&
           lib.bind("PQgetisnull", api.getisnull) && lib.bind("PQgetvalue", api.getvalue) &&
           lib.bind("PQgetlength", api.getlength) && lib.bind("PQresultErrorField", api.resultErrorField) &&
           lib.bind("PQresultErrorMessage", api.resultErrorMessage) &&
           lib.bind("PQconsumeInput", api.consumeInput) && lib.bind("PQnotifies", api.notifies) &&
           lib.bind("PQsocket", api.socket) && lib.bind("PQfreemem", api.freemem) &&
           lib.bind("PQconninfoParse", api.conninfoParse) && lib.bind("PQconninfoFree", api.conninfoFree);
}

// Only called once a Connection or Result exists, or after displayUrl checked loaded().
const PqApi& pq() {
    static const PqApi api =
        loadSharedLibraryApi<PqApi>("libpq", {"libpq.so.5", "libpq.so"}, "libpq5", bindPq);  // thread-safe, once
    return api;
}

}  // namespace

Result::Result(PGresult* r) : r_(r, [](PGresult* p) {
    if (p) pq().clear(p);
}) {}

int Result::rows() const { return r_ ? pq().ntuples(r_.get()) : 0; }

bool Result::isNull(int row, int col) const { return !r_ || pq().getisnull(r_.get(), row, col); }

bool Result::ok() const {
    if (!r_) return false;
    ExecStatusType s = pq().resultStatus(r_.get());
    return s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK;
}

std::string Result::text(int row, int col) const {
    if (isNull(row, col)) return "";
    return std::string(pq().getvalue(r_.get(), row, col), static_cast<size_t>(pq().getlength(r_.get(), row, col)));
}

std::optional<double> Result::number(int row, int col) const {
    if (isNull(row, col)) return std::nullopt;
    char* end = nullptr;
    const char* s = pq().getvalue(r_.get(), row, col);
    double v = std::strtod(s, &end);
    if (end == s) return std::nullopt;
    return v;
}

std::string Result::state() const {
    if (!r_) return "08000";
    const char* s = pq().resultErrorField(r_.get(), PG_DIAG_SQLSTATE);
    return s ? s : "";
}

std::string Result::message() const {
    if (!r_) return "no result from the server";
    const char* m = pq().resultErrorField(r_.get(), PG_DIAG_MESSAGE_PRIMARY);
    return m ? m : pq().resultErrorMessage(r_.get());
}

namespace {

// libpq's messages end with a newline and may span lines; one line reads better in ours.
std::string oneLine(std::string text) {
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    for (char& c : text)
        if (c == '\n') c = ' ';
    return text;
}

}  // namespace

std::unique_ptr<Connection> Connection::open(const std::string& url, std::string& error) {
    if (!pq().loaded()) {
        error = pq().error;
        return nullptr;
    }
    // Keywords before dbname are defaults the URL (expanded from dbname) may override.
    const char* keys[] = {"connect_timeout", "application_name", "dbname", nullptr};
    const char* values[] = {"10", "remitvm", url.c_str(), nullptr};
    PGconn* c = pq().connectdbParams(keys, values, 1);
    if (!c) {
        error = "out of memory";
        return nullptr;
    }
    if (pq().status(c) != CONNECTION_OK) {
        error = oneLine(pq().errorMessage(c));
        pq().finish(c);
        return nullptr;
    }
    // Notices (such as "relation already exists, skipping") are not for the user.
    pq().setNoticeProcessor(c, [](void*, const char*) {}, nullptr);
    return std::unique_ptr<Connection>(new Connection(c));
}

bool Connection::alive() const { return pq().status(conn_) == CONNECTION_OK; }

Connection::~Connection() {
    if (conn_) pq().finish(conn_);
}

Result Connection::exec(const std::string& sql, const std::vector<Param>& params) {
    std::vector<const char*> values;
    values.reserve(params.size());
    for (const Param& p : params) values.push_back(p ? p->c_str() : nullptr);
    Result r(pq().execParams(conn_, sql.c_str(), static_cast<int>(values.size()), nullptr, values.data(), nullptr,
                          nullptr, 0));
    if (!r.ok()) lastError_ = alive() ? oneLine(r.message()) : oneLine(pq().errorMessage(conn_));
    return r;
}

bool Connection::script(const std::string& sql) {
    Result r(pq().exec(conn_, sql.c_str()));
    if (r.ok()) return true;
    lastError_ = alive() ? oneLine(r.message()) : oneLine(pq().errorMessage(conn_));
    return false;
}

bool Connection::waitForNotification(int timeoutMs) {
    auto drain = [&] {
        bool any = false;
        while (PGnotify* n = pq().notifies(conn_)) {
            any = true;
            pq().freemem(n);
        }
        return any;
    };
    if (!pq().consumeInput(conn_)) return false;
    if (drain()) return true;
    pollfd fd{pq().socket(conn_), POLLIN, 0};
    if (fd.fd < 0) return false;
    int rc = ::poll(&fd, 1, timeoutMs);
    if (rc <= 0) return false;
    if (!pq().consumeInput(conn_)) return false;
    return drain();
}

std::string displayUrl(const std::string& url, std::string& error) {
    if (!url.starts_with("postgresql://") && !url.starts_with("postgres://")) {
        error = "a store URL starts with postgresql:// (for a state directory, use --state-dir DIR)";
        return "";
    }
    if (!pq().loaded()) {
        error = pq().error;
        return "";
    }
    char* message = nullptr;
    PQconninfoOption* options = pq().conninfoParse(url.c_str(), &message);
    if (!options) {
        error = message ? oneLine(message) : "libpq cannot read it";
        if (message) pq().freemem(message);
        return "";
    }
    std::string user, host, port, dbname;
    for (PQconninfoOption* o = options; o->keyword; ++o) {
        std::string key = o->keyword, value = o->val ? o->val : "";
        if (key == "user") user = value;
        if (key == "host") host = value;
        if (key == "port") port = value;
        if (key == "dbname") dbname = value;
    }
    pq().conninfoFree(options);
    bool socketDir = host.starts_with("/");
    std::string shown = "postgresql://" + (user.empty() ? "" : user + "@") + (socketDir ? "" : host) +
                        (port.empty() ? "" : ":" + port) + "/" + dbname;
    if (socketDir) shown += "?host=" + host;
    return shown;
}

}  // namespace remit::pg
