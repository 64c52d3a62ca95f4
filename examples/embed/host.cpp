// A C++ host that embeds Remit (docs/embedding.md): it runs examples/refund_bot as the program's
// operator would, performing each call itself from a table of canned answers, and approving the
// refund the broker asks about after printing why.
//
//   host_cpp EXAMPLE_DIR [STATE_DIR]     e.g. host_cpp examples/refund_bot /tmp/state
#include <remit/remit.hpp>

#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>

namespace {

std::string readFile(const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

// What the shop's systems, the payment service, the mailer and the model answer.
std::string answer(const remit::api::HostCallView& call) {
    static const std::map<std::string, std::string> answers = {
        {"crm.customer_by_email", R"({"id": "C-1", "name": "Ada Lovelace", "email": "ada@example.com"})"},
        {"shop.order", R"({"id": "A-1001", "customer_id": "C-1", "total": 49.5, "status": "delivered"})"},
        {"payments.refund", R"("rf_7731")"},
        {"email.send", "null"},
        {"Triager", R"({"intent": "refund", "order_id": "A-1001", "reason": "the kettle from order A-1001 arrived with a cracked lid"})"},
        {"Writer", R"("Dear Ada, we are sorry the kettle arrived damaged. We have refunded 49.50 for order A-1001.")"},
    };
    auto it = answers.find(call.agent.empty() ? call.resource : call.agent);
    return it == answers.end() ? "null" : it->second;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::cerr << "usage: host_cpp EXAMPLE_DIR [STATE_DIR]\n";
        return 2;
    }
    std::string dir = argv[1];
    auto compiled = remit::api::Program::compile(readFile(dir + "/refund_bot.rmt"), readFile(dir + "/host.rmti"),
                                                 {.programName = "refund_bot.rmt"});
    if (!compiled.program) {
        std::cerr << compiled.rendered;
        return 1;
    }
    remit::api::RunOptions options;
    options.policyToml = readFile(dir + "/policy.toml");
    if (argc > 2) options.stateDir = argv[2];
    auto created = remit::api::Run::create(*compiled.program, options);
    if (!created.run) {
        std::cerr << created.rendered;
        return 1;
    }
    remit::api::Run& run = *created.run;
    remit::api::Status status = run.start(readFile(dir + "/inputs.json"));
    while (!run.finished()) {
        const remit::api::HostCallView& call = run.hostCall();
        if (status == remit::api::Status::NeedsApproval) {
            std::cerr << "approval: " << call.resource << " " << call.argsJson << " because";
            for (const std::string& reason : call.approvalReasons) std::cerr << " " << reason << ";";
            std::cerr << "\n";
            status = run.approve("operator");
            continue;
        }
        status = run.complete(answer(call));
    }
    if (status == remit::api::Status::Failed) {
        std::cerr << run.failure().rendered << "\n";
        return 1;
    }
    std::cout << run.resultJson() << "\n";
    if (!run.tracePath().empty()) std::cerr << "trace: " << run.tracePath() << "\n";
    return 0;
}
