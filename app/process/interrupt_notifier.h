#pragma once
// Turns SIGINT, SIGTERM and SIGHUP into a Qt signal, so Ctrl-C can cancel work cleanly through the
// event loop (a signal handler itself may do almost nothing). A second signal while the first is
// being handled ends the process the default way, so a stuck cancel never traps the user.
// A command whose output goes to a pipe may ask for SIGPIPE too (its reader went away: `towers-cli
// train | head`): the first one cancels as Ctrl-C does, later ones (the next writes to the closed
// pipe) are ignored rather than ending the process while it finishes cleanly.
// SIGINT and SIGHUP that the process was started with ignored (nohup, a script's background job)
// stay ignored; SIGTERM and SIGPIPE are handled whatever.
#include <QObject>

class QSocketNotifier;

namespace towers::app {

class InterruptNotifier : public QObject
{
    Q_OBJECT
public:
    // Installs the handlers; at most one notifier exists at a time (a second one throws
    // engine::Error). The previous handlers come back when it is destroyed.
    enum class ClosedOutput
    {
        Default,
        Interrupts
    };
    explicit InterruptNotifier(ClosedOutput closedOutput = ClosedOutput::Default,
                               QObject* parent = nullptr);
    ~InterruptNotifier() override;

    // The signal that arrived first, or 0.
    int received() const { return m_received; }

signals:
    void interrupted(int signalNumber);

private:
    void onReadable();

    QSocketNotifier* m_notifier = nullptr;
    bool m_pipe = false;
    int m_received = 0;
};

} // namespace towers::app
