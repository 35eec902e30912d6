// The processes of a run joined with MPI. Three duplicated communicators keep the kinds of traffic
// apart: control (the trainer's thread), gradients (the tower threads' buckets) and failures (a
// receive posted for the whole run: the message of a process that failed), and a fourth, status,
// on which a process whose wait timed out asks the others how far they got. Every wait is a loop
// of MPI_Test calls that also looks at the failure receive, this process's abort, the status
// questions (answered at once) and a timeout, so that no process ever blocks in MPI on a peer
// that will not come, and a timeout names the processes that did not come.
// The C API only (Open MPI and MPICH would otherwise pull in their deprecated C++ bindings).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "engine/dist/process_group.h"
#include "engine/dist/process_state.h"

namespace towers::engine {

namespace {

constexpr int kFailureTag = 77;
constexpr std::size_t kFailureBytes = 4096;
// A question "how far did you get?" carries the tag its answer is to come back with (from
// kAnswerTag on, one per question, so that the answers of two questions never mix).
constexpr int kQuestionTag = 78, kAnswerTag = 100;
using Clock = std::chrono::steady_clock;

// The collectives a process has started on each ordered channel (the same sequence everywhere,
// so a count beyond another's wait means it came to that one), and the wait it is in.
struct Position
{
    std::uint64_t control = 0, gradients = 0;
    char waitingIn[112] = {};
};

enum class Channel
{
    Control,
    Gradients
};

std::string mpiError(int code)
{
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
        return "MPI error " + std::to_string(code);
    return std::string(text, std::size_t(length));
}

void check(int code, const char* what)
{
    if (code != MPI_SUCCESS) throw Error(std::string("MPI: ") + what + ": " + mpiError(code));
}

double timeoutFromEnvironment()
{
    const char* v = std::getenv("TOWERS_MPI_TIMEOUT");
    if (!v || !*v) return 300;
    char* end = nullptr;
    const double s = std::strtod(v, &end);
    if (*end != '\0' || !(s > 0))
        throw InvalidArgument(std::string("TOWERS_MPI_TIMEOUT: expected a number of seconds > 0, "
                                          "got '") +
                              v + "'");
    return s;
}

class MpiProcessGroup final : public ProcessGroup
{
public:
    MpiProcessGroup()
    {
        m_timeout = timeoutFromEnvironment();
        int provided = 0;
        check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
        m_initialised = true;
        // Errors come back as codes (and become exceptions with the reason), never abort here.
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        if (provided < MPI_THREAD_SERIALIZED)
            throw Error("MPI: this MPI library gives no thread support (MPI_THREAD_SERIALIZED or "
                        "better is needed: the towers are threads)");
        check(MPI_Comm_rank(MPI_COMM_WORLD, &m_rank), "MPI_Comm_rank");
        check(MPI_Comm_size(MPI_COMM_WORLD, &m_size), "MPI_Comm_size");
        for (MPI_Comm* c : {&m_control, &m_gradients, &m_failures, &m_status}) {
            check(MPI_Comm_dup(MPI_COMM_WORLD, c), "MPI_Comm_dup");
            MPI_Comm_set_errhandler(*c, MPI_ERRORS_RETURN);
        }
        MPI_Comm local = MPI_COMM_NULL;
        check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, m_rank, MPI_INFO_NULL,
                                  &local),
              "MPI_Comm_split_type");
        MPI_Comm_rank(local, &m_localRank);
        MPI_Comm_size(local, &m_localSize);
        MPI_Comm_free(&local);
        char name[MPI_MAX_PROCESSOR_NAME];
        int length = 0;
        MPI_Get_processor_name(name, &length);
        m_host.assign(name, std::size_t(length));
        // Every process's machine, for the messages that name a process.
        std::vector<char> names(std::size_t(m_size) * MPI_MAX_PROCESSOR_NAME, '\0');
        std::memset(name + length, 0, std::size_t(MPI_MAX_PROCESSOR_NAME - length));
        check(MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, names.data(),
                            MPI_MAX_PROCESSOR_NAME, MPI_CHAR, MPI_COMM_WORLD),
              "MPI_Allgather");
        for (int r = 0; r < m_size; ++r) {
            const char* n = names.data() + std::size_t(r) * MPI_MAX_PROCESSOR_NAME;
            m_hosts.emplace_back(n, strnlen(n, MPI_MAX_PROCESSOR_NAME));
        }
        char library[MPI_MAX_LIBRARY_VERSION_STRING];
        MPI_Get_library_version(library, &length);
        m_library.assign(library, std::size_t(length));
        if (const auto nl = m_library.find_first_of(",\n"); nl != std::string::npos)
            m_library.resize(nl);
        check(MPI_Irecv(m_failureText.data(), int(kFailureBytes), MPI_CHAR, MPI_ANY_SOURCE,
                        kFailureTag, m_failures, &m_failureRequest),
              "MPI_Irecv");
        check(MPI_Irecv(&m_question, 1, MPI_INT, MPI_ANY_SOURCE, kQuestionTag, m_status,
                        &m_questionRequest),
              "MPI_Irecv");
    }

    ~MpiProcessGroup() override
    {
        if (!m_initialised) return;
        if (m_failed.load() || m_remote) {
            // A process failed: collectives may be pending that will never complete. MPI_Finalize
            // could wait on them forever; the process exits with its error instead, and the
            // launcher ends the others.
            return;
        }
        try {
            barrier(); // nobody sends a failure after the receive is withdrawn
        } catch (const Error&) {
            return;
        }
        for (MPI_Request* r : {&m_failureRequest, &m_questionRequest}) {
            MPI_Cancel(r);
            MPI_Wait(r, MPI_STATUS_IGNORE);
        }
        for (auto& answer : m_answers) MPI_Request_free(&answer.second);
        for (MPI_Comm* c : {&m_control, &m_gradients, &m_failures, &m_status}) MPI_Comm_free(c);
        MPI_Finalize();
    }

    int rank() const override { return m_rank; }
    int size() const override { return m_size; }
    int localRank() const override { return m_localRank; }
    int localSize() const override { return m_localSize; }
    std::string hostName() const override { return m_host; }
    std::string description() const override { return m_library; }
    double timeoutSeconds() const override { return m_timeout; }

    void barrier() override
    {
        onControl("MPI_Ibarrier", "a barrier",
                  [&](MPI_Request* r) { return MPI_Ibarrier(m_control, r); });
    }

    void broadcast(void* data, std::size_t bytes, int root) override
    {
        checkRoot(root);
        // MPI counts are ints: large payloads (a checkpoint) go in pieces of at most 1 GiB. Every
        // process passes the same `bytes`, so all skip an empty broadcast alike.
        constexpr std::size_t piece = std::size_t(1) << 30;
        auto* p = static_cast<char*>(data);
        for (std::size_t done = 0, n = 0; done < bytes; done += n) {
            n = std::min(piece, bytes - done);
            onControl("MPI_Ibcast",
                      root == m_rank ? "a broadcast"
                                     : "a broadcast from rank " + std::to_string(root),
                      [&](MPI_Request* r) {
                          return MPI_Ibcast(p + done, int(n), MPI_BYTE, root, m_control, r);
                      });
        }
    }

    std::string broadcastString(const std::string& mine, int root) override
    {
        std::uint64_t length = mine.size();
        broadcast(&length, sizeof length, root);
        std::string out = m_rank == root ? mine : std::string(length, '\0');
        broadcast(out.data(), out.size(), root);
        return out;
    }

    std::vector<std::string> allGatherStrings(const std::string& mine) override
    {
        std::uint64_t length = mine.size();
        std::vector<std::uint64_t> lengths(static_cast<std::size_t>(m_size));
        allGatherControl(&length, sizeof length, lengths.data());
        const std::uint64_t longest = *std::max_element(lengths.begin(), lengths.end());
        std::string padded = mine;
        padded.resize(longest, '\0');
        std::string all(longest * std::size_t(m_size), '\0');
        allGatherControl(padded.data(), longest, all.data());
        std::vector<std::string> out;
        for (int r = 0; r < m_size; ++r)
            out.push_back(all.substr(std::size_t(r) * longest, lengths[std::size_t(r)]));
        return out;
    }

    bool any(bool mine, const std::string& what) override
    {
        int in = mine ? 1 : 0, out = 0;
        onControl("MPI_Iallreduce", what, [&](MPI_Request* r) {
            return MPI_Iallreduce(&in, &out, 1, MPI_INT, MPI_MAX, m_control, r);
        });
        return out != 0;
    }

    Request startAllGather(const void* send, std::size_t bytes, void* recv) override
    {
        if (bytes > (std::size_t(1) << 31) - 1)
            throw InvalidArgument("MPI: a gradient bucket of " + std::to_string(bytes) +
                                  " bytes is beyond 2 GiB; use smaller buckets (--bucket-mb)");
        std::lock_guard lock(m_mpi);
        throwIfFailedLocked();
        MPI_Request r;
        check(
            MPI_Iallgather(send, int(bytes), MPI_BYTE, recv, int(bytes), MPI_BYTE, m_gradients, &r),
            "MPI_Iallgather");
        const Request id = m_nextRequest++;
        m_pending[id] = r;
        return id;
    }

    void wait(Request request) override
    {
        MPI_Request r;
        {
            std::lock_guard lock(m_mpi);
            const auto it = m_pending.find(request);
            if (it == m_pending.end())
                throw InvalidArgument("MPI: no pending collective " + std::to_string(request));
            r = it->second;
            m_pending.erase(it);
        }
        waitOn(r, "averaging gradients", Channel::Gradients, request);
    }

    void announceFailure(const std::string& message) override
    {
        if (m_failed.exchange(true)) return;
        abortLocal(message);
        std::lock_guard lock(m_mpi);
        if (m_remote) return; // the news came from another process: no echo
        const std::string text = message.substr(0, kFailureBytes - 1);
        std::vector<MPI_Request> sends;
        for (int r = 0; r < m_size; ++r) {
            if (r == m_rank) continue;
            MPI_Request s;
            if (MPI_Isend(text.c_str(), int(text.size() + 1), MPI_CHAR, r, kFailureTag, m_failures,
                          &s) == MPI_SUCCESS)
                sends.push_back(s);
        }
        // Small messages leave at once; a peer that is gone must not keep this one waiting long.
        const auto deadline = Clock::now() + std::chrono::seconds(2);
        for (MPI_Request& s : sends) {
            int done = 0;
            while (!done && Clock::now() < deadline) {
                MPI_Test(&s, &done, MPI_STATUS_IGNORE);
                if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
            }
            if (!done) MPI_Request_free(&s);
        }
    }

    void throwIfFailed() override
    {
        std::lock_guard lock(m_mpi);
        throwIfFailedLocked();
    }

    void abortLocal(const std::string& reason) override
    {
        std::lock_guard lock(m_abortMutex);
        if (m_abortReason.empty()) m_abortReason = reason.empty() ? "aborted" : reason;
        m_aborted = true;
    }

    void allGather(const void* mine, std::size_t bytes, void* all) override
    {
        allGatherControl(mine, bytes, all);
    }

private:
    void checkRoot(int root) const
    {
        if (root < 0 || root >= m_size)
            throw InvalidArgument("MPI: broadcast root " + std::to_string(root) +
                                  " out of range [0, " + std::to_string(m_size) + ")");
    }

    void allGatherControl(const void* send, std::size_t bytes, void* recv)
    {
        onControl("MPI_Iallgather", "an exchange between the processes", [&](MPI_Request* r) {
            return MPI_Iallgather(send, int(bytes), MPI_BYTE, recv, int(bytes), MPI_BYTE, m_control,
                                  r);
        });
    }

    // Starts a collective on the control channel (`start`, the MPI call named `call`), counted
    // in the channel's sequence, and waits for it as `what`.
    template <class Start> void onControl(const char* call, const std::string& what, Start&& start)
    {
        MPI_Request r;
        std::uint64_t seq;
        {
            std::lock_guard lock(m_mpi);
            check(start(&r), call);
            seq = m_controlStarted++;
        }
        waitOn(r, what, Channel::Control, seq);
    }

    // Under m_mpi. Looks at the failure receive once.
    void throwIfFailedLocked()
    {
        if (!m_remote) {
            int arrived = 0;
            MPI_Status status;
            if (MPI_Test(&m_failureRequest, &arrived, &status) == MPI_SUCCESS && arrived) {
                m_failureText.back() = '\0';
                m_remote = std::make_pair(status.MPI_SOURCE, std::string(m_failureText.data()));
            }
        }
        if (m_remote)
            throw ProcessFailed(m_remote->first, "rank " + std::to_string(m_remote->first) +
                                                     " failed: " + m_remote->second);
    }

    void throwIfAborted()
    {
        if (!m_aborted.load()) return;
        std::lock_guard lock(m_abortMutex);
        throw CollectiveAborted(m_abortReason);
    }

    // The one wait: polls the request, the failure receive, the others' questions, this
    // process's abort and the clock. `seq`: the collective's place on its channel.
    void waitOn(MPI_Request& r, const std::string& what, Channel channel, std::uint64_t seq)
    {
        const auto start = Clock::now();
        auto pause = std::chrono::microseconds(1);
        for (;;) {
            int done = 0;
            {
                std::lock_guard lock(m_mpi);
                const int code = MPI_Test(&r, &done, MPI_STATUS_IGNORE);
                if (code != MPI_SUCCESS)
                    throw ProcessFailed(-1, "MPI failed while waiting in " + what + ": " +
                                                mpiError(code));
                if (done) return;
                throwIfFailedLocked();
                answerQuestionsLocked(what);
            }
            throwIfAborted();
            const double waited = std::chrono::duration<double>(Clock::now() - start).count();
            if (waited > m_timeout) timedOut(what, channel, seq, waited);
            // Spin briefly (a bucket's gather between processes on one machine takes
            // microseconds), then back off to at most a millisecond.
            std::this_thread::sleep_for(pause);
            pause = std::min(pause * 2, std::chrono::microseconds(1000));
        }
    }

    // Under m_mpi: answers every question that came (how far this process got), and lets go of
    // the answers that left.
    void answerQuestionsLocked(const std::string& waitingIn)
    {
        for (auto it = m_answers.begin(); it != m_answers.end();) {
            int sent = 0;
            MPI_Test(&it->second, &sent, MPI_STATUS_IGNORE);
            it = sent ? m_answers.erase(it) : std::next(it);
        }
        for (;;) {
            int asked = 0;
            MPI_Status status;
            if (MPI_Test(&m_questionRequest, &asked, &status) != MPI_SUCCESS || !asked) return;
            auto& [position, request] = m_answers.emplace_back();
            position.control = m_controlStarted;
            position.gradients = m_nextRequest;
            std::strncpy(position.waitingIn, waitingIn.c_str(), sizeof position.waitingIn - 1);
            if (MPI_Isend(&position, int(sizeof position), MPI_BYTE, status.MPI_SOURCE, m_question,
                          m_status, &request) != MPI_SUCCESS)
                m_answers.pop_back();
            if (MPI_Irecv(&m_question, 1, MPI_INT, MPI_ANY_SOURCE, kQuestionTag, m_status,
                          &m_questionRequest) != MPI_SUCCESS)
                return; // no more questions answered; the waits still end by themselves
        }
    }

    // How far every other process got: asked, and answered by those in a wait of their own within
    // a couple of seconds; nothing for those that do not answer (busy outside MPI, stopped, gone).
    std::vector<std::optional<Position>> askPositions(const std::string& what)
    {
        const auto n = std::size_t(m_size);
        std::vector<Position> answers(n);
        std::vector<std::optional<Position>> out(n);
        std::vector<MPI_Request> questions(n, MPI_REQUEST_NULL), replies(n, MPI_REQUEST_NULL);
        int tag = 0;
        {
            std::lock_guard lock(m_mpi);
            tag = kAnswerTag + int(m_asked++ % 30000);
            // The question's buffer is its own, kept for the process's life: two threads may
            // time out together, and a send may still be on its way when this returns.
            const int& sent = m_tagsAsked.emplace_back(tag);
            for (int r = 0; r < m_size; ++r) {
                if (r == m_rank) continue;
                MPI_Irecv(&answers[std::size_t(r)], int(sizeof(Position)), MPI_BYTE, r, tag,
                          m_status, &replies[std::size_t(r)]);
                MPI_Isend(&sent, 1, MPI_INT, r, kQuestionTag, m_status, &questions[std::size_t(r)]);
            }
        }
        const auto deadline = Clock::now() + std::chrono::duration<double>(
                                                 std::min(2.0, std::max(0.5, m_timeout / 2)));
        for (bool all = false; !all && Clock::now() < deadline;) {
            {
                std::lock_guard lock(m_mpi);
                all = true;
                for (std::size_t r = 0; r < n; ++r) {
                    if (replies[r] == MPI_REQUEST_NULL) continue;
                    int got = 0;
                    MPI_Test(&replies[r], &got, MPI_STATUS_IGNORE);
                    if (got) {
                        answers[r].waitingIn[sizeof answers[r].waitingIn - 1] = '\0';
                        out[r] = answers[r];
                    } else {
                        all = false;
                    }
                }
                answerQuestionsLocked(what); // another process may be asking this one
            }
            if (!all) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        std::lock_guard lock(m_mpi);
        for (std::size_t r = 0; r < n; ++r) {
            if (replies[r] != MPI_REQUEST_NULL) {
                MPI_Cancel(&replies[r]);
                MPI_Wait(&replies[r], MPI_STATUS_IGNORE);
            }
            if (questions[r] != MPI_REQUEST_NULL) {
                int sent = 0;
                MPI_Test(&questions[r], &sent, MPI_STATUS_IGNORE);
                if (!sent) MPI_Request_free(&questions[r]);
            }
        }
        return out;
    }

    // A wait that timed out: which processes never came to it, as far as they can be asked, and
    // what this one waited for. Throws ProcessFailed (with the rank when one alone is missing).
    [[noreturn]] void timedOut(const std::string& what, Channel channel, std::uint64_t seq,
                               double waited)
    {
        const auto positions = askPositions(what);
        std::vector<int> missing;
        std::vector<std::string> why;
        const auto host = [&](int r) { return m_hosts.at(std::size_t(r)); };
        for (int r = 0; r < m_size; ++r) {
            if (r == m_rank) continue;
            const auto& p = positions[std::size_t(r)];
            if (p && (channel == Channel::Control ? p->control : p->gradients) > seq)
                continue; // it came (and waits there too, or went on: a broadcast's root)
            missing.push_back(r);
            std::string note = "rank " + std::to_string(r) + " on " + host(r);
            if (!p)
                note += " does not answer: it is busy outside MPI (computing, reading data), "
                        "stopped, or gone";
            else if (p->waitingIn[0])
                note += std::string(" waits in ") + p->waitingIn + ", an earlier wait";
            else
                note += " has not come to it yet";
            why.push_back(note);
        }
        const std::string limit = "; TOWERS_MPI_TIMEOUT sets the limit";
        const std::string waiter = "rank " + std::to_string(m_rank) + " (on " + m_host +
                                   ") waited " + std::to_string(int(waited)) + " s";
        if (missing.empty())
            throw ProcessFailed(-1, "no answer from the other processes while waiting in " + what +
                                        ": " + waiter +
                                        ", though every other rank says it came to it" + limit);
        std::string message = rankList(missing) + " did" + " not come to " + what + ": " + waiter +
                              " for " + (missing.size() == 1 ? "it" : "them") + " there (";
        for (std::size_t i = 0; i < why.size(); ++i) message += (i ? "; " : "") + why[i];
        throw ProcessFailed(missing.size() == 1 ? missing.front() : -1, message + ")" + limit);
    }

    bool m_initialised = false;
    int m_rank = 0, m_size = 1, m_localRank = 0, m_localSize = 1;
    double m_timeout = 300;
    std::string m_host, m_library;
    MPI_Comm m_control = MPI_COMM_NULL, m_gradients = MPI_COMM_NULL, m_failures = MPI_COMM_NULL,
             m_status = MPI_COMM_NULL;
    std::vector<std::string> m_hosts; // by rank
    // Under m_mpi: the collectives started on the control channel (the gradients' are
    // m_nextRequest), the question received (its answer's tag), the answers on their way, the
    // questions this process asked and their tags.
    std::uint64_t m_controlStarted = 0, m_asked = 0;
    int m_question = 0;
    std::list<int> m_tagsAsked; // each question's tag, sent from here
    MPI_Request m_questionRequest = MPI_REQUEST_NULL;
    std::list<std::pair<Position, MPI_Request>> m_answers;
    std::mutex m_mpi; // one thread in MPI at a time (the order of calls stays as issued)
    std::map<Request, MPI_Request> m_pending;
    Request m_nextRequest = 0;
    std::array<char, kFailureBytes> m_failureText{};
    MPI_Request m_failureRequest = MPI_REQUEST_NULL;
    std::optional<std::pair<int, std::string>> m_remote; // under m_mpi
    std::atomic<bool> m_failed{false}, m_aborted{false};
    std::mutex m_abortMutex;
    std::string m_abortReason;
};

} // namespace

bool processGroupsAvailable(std::string* whyNot)
{
    if (whyNot) whyNot->clear();
    return true;
}

std::unique_ptr<ProcessGroup> joinProcessGroup()
{
    const LaunchInfo launch = detectLaunch();
    if (launch.unjoinable) throw InvalidArgument(unjoinableReason(launch));
    if (!launch.launched) return nullptr;
    return std::make_unique<MpiProcessGroup>();
}

} // namespace towers::engine
