#pragma once
// Turns SIGINT, SIGTERM and SIGHUP into a Qt signal, so Ctrl-C can cancel work cleanly through the
// event loop (a signal handler itself may do almost nothing). A second signal while the first is
// being handled ends the process the default way, so a stuck cancel never traps the user.
#include <QObject>

class QSocketNotifier;

namespace towers::app {

class InterruptNotifier : public QObject
{
    Q_OBJECT
public:
    // Installs the handlers; at most one notifier exists at a time (a second one throws
    // engine::Error). The previous handlers come back when it is destroyed.
    explicit InterruptNotifier(QObject* parent = nullptr);
    ~InterruptNotifier() override;

    // The signal that arrived first, or 0.
    int received() const { return m_received; }

signals:
    void interrupted(int signalNumber);

private:
    void onReadable();

    QSocketNotifier* m_notifier = nullptr;
    int m_received = 0;
};

} // namespace towers::app
