#include "ui/plural_forms.h"

#include <QCoreApplication>
#include <QTranslator>

namespace towers::ui {

bool installPluralForms(QCoreApplication& app)
{
    auto* forms = new QTranslator(&app);
    if (!forms->load(QStringLiteral(":/i18n/towers_en.qm")) ||
        !QCoreApplication::installTranslator(forms)) {
        delete forms;
        return false;
    }
    return true;
}

} // namespace towers::ui
