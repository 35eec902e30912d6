#pragma once
// English plural forms for the messages that count: tr("%n tower(s)", nullptr, n) reads "1 tower"
// and "2 towers". Qt's numerus translation does it (the source language's own plural forms, from
// ui/i18n/towers_en.ts, made with lupdate -pluralonly and embedded as :/i18n/towers_en.qm).
class QCoreApplication;

namespace towers::ui {

// Installs the plural forms on `app` (whatever the user's locale: the messages are English);
// false where the embedded file did not load (the messages then read "1 tower(s)").
bool installPluralForms(QCoreApplication& app);

} // namespace towers::ui
