// The processes of a run joined with MPI. Three duplicated communicators keep the kinds of traffic
// apart: control (the trainer's thread), gradients (the tower threads' buckets) and failures (a
// receive posted for the whole run: the message of a process that failed). Every wait is a loop
// of MPI_Test calls that also looks at the failure receive, this process's abort and a timeout,
// so that no process ever blocks in MPI on a peer that will not come.
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
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "engine/dist/process_group.h"

namespace towers::engine {

namespace {

constexpr int kFailureTag = 77;
constexpr std::size_t kFailureBytes = 4096;
using Clock = std::chrono::steady_clock;

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
        for (MPI_Comm* c : {&m_control, &m_gradients, &m_failures}) {
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
        char library[MPI_MAX_LIBRARY_VERSION_STRING];
        MPI_Get_library_version(library, &length);
        m_library.assign(library, std::size_t(length));
        if (const auto nl = m_library.find_first_of(",\n"); nl != std::string::npos)
            m_library.resize(nl);
        check(MPI_Irecv(m_failureText.data(), int(kFailureBytes), MPI_CHAR, MPI_ANY_SOURCE,
                        kFailureTag, m_failures, &m_failureRequest),
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
        MPI_Cancel(&m_failureRequest);
        MPI_Wait(&m_failureRequest, MPI_STATUS_IGNORE);
        for (MPI_Comm* c : {&m_control, &m_gradients, &m_failures}) MPI_Comm_free(c);
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
        MPI_Request r;
        {
            std::lock_guard lock(m_mpi);
            check(MPI_Ibarrier(m_control, &r), "MPI_Ibarrier");
        }
        waitOn(r, "a barrier");
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
            MPI_Request r;
            {
                std::lock_guard lock(m_mpi);
                check(MPI_Ibcast(p + done, int(n), MPI_BYTE, root, m_control, &r), "MPI_Ibcast");
            }
            waitOn(r, "a broadcast");
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

    bool any(bool mine) override
    {
        int in = mine ? 1 : 0, out = 0;
        MPI_Request r;
        {
            std::lock_guard lock(m_mpi);
            check(MPI_Iallreduce(&in, &out, 1, MPI_INT, MPI_MAX, m_control, &r), "MPI_Iallreduce");
        }
        waitOn(r, "the stop vote");
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
        waitOn(r, "averaging gradients");
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
        MPI_Request r;
        {
            std::lock_guard lock(m_mpi);
            check(MPI_Iallgather(send, int(bytes), MPI_BYTE, recv, int(bytes), MPI_BYTE, m_control,
                                 &r),
                  "MPI_Iallgather");
        }
        waitOn(r, "an exchange between the processes");
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

    // The one wait: polls the request, the failure receive, this process's abort and the clock.
    void waitOn(MPI_Request& r, const char* what)
    {
        const auto start = Clock::now();
        auto pause = std::chrono::microseconds(1);
        for (;;) {
            int done = 0;
            {
                std::lock_guard lock(m_mpi);
                const int code = MPI_Test(&r, &done, MPI_STATUS_IGNORE);
                if (code != MPI_SUCCESS)
                    throw ProcessFailed(-1, std::string("MPI failed while ") + what + ": " +
                                                mpiError(code));
                if (done) return;
                throwIfFailedLocked();
            }
            throwIfAborted();
            const double waited = std::chrono::duration<double>(Clock::now() - start).count();
            if (waited > m_timeout)
                throw ProcessFailed(-1, "no answer from the other processes for " +
                                            std::to_string(int(waited)) + " s while " + what +
                                            " (rank " + std::to_string(m_rank) + " on " + m_host +
                                            "; TOWERS_MPI_TIMEOUT sets the limit)");
            // Spin briefly (a bucket's gather between processes on one machine takes
            // microseconds), then back off to at most a millisecond.
            std::this_thread::sleep_for(pause);
            pause = std::min(pause * 2, std::chrono::microseconds(1000));
        }
    }

    bool m_initialised = false;
    int m_rank = 0, m_size = 1, m_localRank = 0, m_localSize = 1;
    double m_timeout = 300;
    std::string m_host, m_library;
    MPI_Comm m_control = MPI_COMM_NULL, m_gradients = MPI_COMM_NULL, m_failures = MPI_COMM_NULL;
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
