#pragma once
// The mouse wheel over a form that scrolls turns the form, not the spin box or combo box the
// pointer happens to pass over: such boxes take the wheel only once they have the focus (a click
// or Tab), and the wheel never gives them the focus. One event filter serves every box.
class QWidget;

namespace towers::ui {

// Guards every spin box and combo box inside `root` (and `root` itself when it is one): focus
// policy Qt::StrongFocus, wheel events ignored unless the box has the focus, so that they go on
// to the scroll area around it. Calling it again on the same widgets is harmless.
void guardWheel(QWidget* root);

} // namespace towers::ui
