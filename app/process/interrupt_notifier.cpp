#include "app/process/interrupt_notifier.h"

#include <QSocketNotifier>
#include <cerrno>
#include <csignal>
#include <sys/socket.h>
#include <unistd.h>

#include "engine/errors.h"

namespace towers::app {

namespace {

// The self-pipe of Qt's "Calling Qt Functions From Unix Signal Handlers": the handler writes one
// byte, the event loop reads it.
int g_fds[2] = {-1, -1};
volatile sig_atomic_t g_pending = 0;
struct sigaction g_oldInt, g_oldTerm, g_oldHup, g_oldPipe;

extern "C" void onSignal(int sig)
{
    if (g_pending && sig == SIGPIPE) return; // one more write to the closed output
    if (g_pending) {                         // the second one: give up on a clean stop
        ::signal(sig, SIG_DFL);
        ::raise(sig);
        return;
    }
    g_pending = 1;
    const int savedErrno = errno;
    const char byte = char(sig);
    [[maybe_unused]] const ssize_t n = ::write(g_fds[0], &byte, 1);
    errno = savedErrno;
}

} // namespace

InterruptNotifier::InterruptNotifier(ClosedOutput closedOutput, QObject* parent)
    : QObject(parent), m_pipe(closedOutput == ClosedOutput::Interrupts)
{
    if (g_fds[0] >= 0) throw engine::Error("only one InterruptNotifier may exist at a time");
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, g_fds) != 0)
        throw engine::Error("cannot create the socket pair for signal handling");
    g_pending = 0;
    m_notifier = new QSocketNotifier(g_fds[1], QSocketNotifier::Read, this);
    connect(m_notifier, &QSocketNotifier::activated, this, &InterruptNotifier::onReadable);
    struct sigaction sa = {};
    sa.sa_handler = onSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    // SIGINT and SIGHUP the process was started with ignored stay ignored (the convention): nohup
    // ignores SIGHUP so that a run outlives its terminal, and a shell ignores SIGINT for the
    // background jobs of a script. SIGTERM is always handled: it is how a scheduler preempts a job
    // (then SIGKILL), and a SIGTERM ignored by accident would cost the run its last checkpoint.
    const auto unlessIgnored = [&sa](int sig, struct sigaction* old) {
        ::sigaction(sig, nullptr, old);
        if (old->sa_handler != SIG_IGN) ::sigaction(sig, &sa, nullptr);
    };
    unlessIgnored(SIGINT, &g_oldInt);
    unlessIgnored(SIGHUP, &g_oldHup); // a closed terminal or a dropped ssh session: stop cleanly
    ::sigaction(SIGTERM, &sa, &g_oldTerm);
    // A closed output stops the run whatever: ignoring SIGPIPE is rarely the user's choice, and
    // with it ignored a run would go on writing into nothing.
    if (m_pipe) ::sigaction(SIGPIPE, &sa, &g_oldPipe);
}

InterruptNotifier::~InterruptNotifier()
{
    ::sigaction(SIGINT, &g_oldInt, nullptr);
    ::sigaction(SIGTERM, &g_oldTerm, nullptr);
    ::sigaction(SIGHUP, &g_oldHup, nullptr);
    if (m_pipe) ::sigaction(SIGPIPE, &g_oldPipe, nullptr);
    delete m_notifier;
    ::close(g_fds[0]);
    ::close(g_fds[1]);
    g_fds[0] = g_fds[1] = -1;
}

void InterruptNotifier::onReadable()
{
    char byte = 0;
    if (::read(g_fds[1], &byte, 1) != 1) return;
    if (m_received == 0) m_received = byte;
    emit interrupted(byte);
}

} // namespace towers::app
