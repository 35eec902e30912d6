#include "ui/widgets/wheel_guard.h"

#include <QAbstractSpinBox>
#include <QComboBox>
#include <QCoreApplication>
#include <QEvent>
#include <QPointer>
#include <QWidget>

namespace towers::ui {

namespace {

class WheelGuard : public QObject
{
public:
    using QObject::QObject;

    static WheelGuard* instance()
    {
        static QPointer<WheelGuard> guard; // gone with the application that owns it
        if (!guard) guard = new WheelGuard(QCoreApplication::instance());
        return guard;
    }

protected:
    bool eventFilter(QObject* watched, QEvent* event) override
    {
        if (event->type() != QEvent::Wheel) return false;
        auto* w = qobject_cast<QWidget*>(watched);
        if (!w || w->hasFocus()) return false;
        // Not handled here: QApplication passes the wheel on to the parents (the scroll area).
        event->ignore();
        return true;
    }
};

void guardOne(QWidget* w)
{
    w->setFocusPolicy(Qt::StrongFocus);
    w->installEventFilter(WheelGuard::instance()); // installed twice: moved to the front, once
}

} // namespace

void guardWheel(QWidget* root)
{
    if (!root) return;
    if (qobject_cast<QAbstractSpinBox*>(root) || qobject_cast<QComboBox*>(root)) guardOne(root);
    for (auto* box : root->findChildren<QAbstractSpinBox*>()) guardOne(box);
    for (auto* box : root->findChildren<QComboBox*>()) guardOne(box);
}

} // namespace towers::ui
