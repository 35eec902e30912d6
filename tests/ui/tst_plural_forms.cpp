// The English plural forms of the desktop's counting messages (ui/plural_forms.h): installed, they
// make "%n tower(s)" read "1 tower" and "2 towers" in the real widgets; and ui/i18n/towers_en.ts
// holds a finished entry for every such message in the sources (lupdate run again over them finds
// nothing new and nothing gone), so a new tr("… %n …(s)", nullptr, n) cannot go without one.
#include <QCoreApplication>
#include <QDirIterator>
#include <QFile>
#include <QMap>
#include <QProcess>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QXmlStreamReader>
#include <QtTest>

#include "ui/plural_forms.h"
#include "ui/widgets/hyperparameter_form.h"

using namespace towers::ui;

namespace {

// A .ts file's numerus messages: "context\nsource" -> the forms ("" and unfinished counted).
struct TsFile
{
    QMap<QString, QStringList> forms;
    int unfinished = 0;
};

TsFile readTs(const QString& path)
{
    TsFile ts;
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) return ts;
    QXmlStreamReader xml(&f);
    QString context, source;
    QStringList forms;
    while (!xml.atEnd()) {
        xml.readNext();
        if (!xml.isStartElement()) {
            if (xml.isEndElement() && xml.name() == QLatin1String("message"))
                ts.forms.insert(context + QLatin1Char('\n') + source, forms);
            continue;
        }
        if (xml.name() == QLatin1String("name")) {
            context = xml.readElementText();
        } else if (xml.name() == QLatin1String("message")) {
            source.clear();
            forms.clear();
        } else if (xml.name() == QLatin1String("source")) {
            source = xml.readElementText();
        } else if (xml.name() == QLatin1String("translation")) {
            if (xml.attributes().value(QLatin1String("type")) == QLatin1String("unfinished"))
                ++ts.unfinished;
        } else if (xml.name() == QLatin1String("numerusform")) {
            forms << xml.readElementText();
        }
    }
    return ts;
}

QString sourceDir()
{
    return qEnvironmentVariable("TOWERS_SOURCE_DIR");
}

} // namespace

class TestPluralForms : public QObject
{
    Q_OBJECT

private slots:
    void initTestCase() { QVERIFY(installPluralForms(*QCoreApplication::instance())); }

    void countsReadAsEnglishWritesThem()
    {
        // The contexts are the classes' names with their namespace, as tr() asks.
        const auto towers = [](int n) {
            return QCoreApplication::translate("towers::ui::DevicesPage", "%n tower(s)", nullptr,
                                               n);
        };
        QCOMPARE(towers(1), QStringLiteral("1 tower"));
        QCOMPARE(towers(2), QStringLiteral("2 towers"));
        QCOMPARE(towers(0), QStringLiteral("0 towers"));
        QCOMPARE(QCoreApplication::translate(
                     "towers::ui::MainWindow",
                     "%n run(s) wait in the queue and will not start. Close anyway?", nullptr, 1),
                 QStringLiteral("1 run waits in the queue and will not start. Close anyway?"));
        QCOMPARE(QCoreApplication::translate(
                     "towers::app::TrainingWorker",
                     "stopped early at step %1 of %2: %n evaluation(s) in a row without a "
                     "better one",
                     nullptr, 3),
                 QStringLiteral("stopped early at step %1 of %2: 3 evaluations in a row without "
                                "a better one"));
        QCOMPARE(QCoreApplication::translate("towers::ui::ClassifyPage",
                                             "Classified %1 of %n file(s)", nullptr, 1)
                     .arg(0),
                 QStringLiteral("Classified 0 of 1 file"));
        // A message that does not count is left as written.
        QCOMPARE(QCoreApplication::translate("towers::ui::DevicesPage", "Devices"),
                 QStringLiteral("Devices"));
    }

    // A real widget: the early-stop field's suffix follows its count.
    void theEarlyStopFieldSaysOneEvaluation()
    {
        HyperparameterForm form;
        auto* patience = form.findChild<QSpinBox*>(QStringLiteral("patience"));
        QVERIFY(patience);
        patience->setValue(1);
        QCOMPARE(patience->suffix(), QStringLiteral(" evaluation without gain"));
        patience->setValue(3);
        QCOMPARE(patience->suffix(), QStringLiteral(" evaluations without gain"));
    }

    void everyCountingMessageHasItsForms()
    {
        const QString committed = sourceDir() + QStringLiteral("/ui/i18n/towers_en.ts");
        const TsFile before = readTs(committed);
        QVERIFY2(!before.forms.isEmpty(), qPrintable(committed));
        QCOMPARE(before.unfinished, 0);
        for (auto it = before.forms.cbegin(); it != before.forms.cend(); ++it) {
            QCOMPARE(it.value().size(), 2); // English: one, and every other count
            for (const QString& form : it.value())
                QVERIFY2(!form.isEmpty() && !form.contains(QLatin1String("(s)")),
                         qPrintable(it.key() + QStringLiteral(" -> ") + form));
        }

        // lupdate over the sources CMake gives it (ui/i18n's comment in ui/CMakeLists.txt), into
        // a copy: what it would add or drop. With the include path, as CMake's run has: without
        // it lupdate misses the classes' namespaces and names the contexts "TrainPage".
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const QString copy = dir.filePath(QStringLiteral("towers_en.ts"));
        QVERIFY(QFile::copy(committed, copy));
        QStringList sources;
        QDirIterator files(sourceDir() + QStringLiteral("/ui"),
                           {QStringLiteral("*.cpp"), QStringLiteral("*.h")}, QDir::Files,
                           QDirIterator::Subdirectories);
        while (files.hasNext()) sources << files.next();
        sources.sort();
        sources << sourceDir() + QStringLiteral("/app/train/training_worker.h")
                << sourceDir() + QStringLiteral("/app/train/training_worker.cpp");
        QProcess lupdate;
        lupdate.start(QStringLiteral(TOWERS_LUPDATE),
                      QStringList{QStringLiteral("-I"), sourceDir(), QStringLiteral("-pluralonly"),
                                  QStringLiteral("-source-language"), QStringLiteral("en"),
                                  QStringLiteral("-target-language"), QStringLiteral("en"),
                                  QStringLiteral("-no-obsolete"), QStringLiteral("-locations"),
                                  QStringLiteral("none")} +
                          sources + QStringList{QStringLiteral("-ts"), copy});
        QVERIFY2(lupdate.waitForFinished(120000), TOWERS_LUPDATE);
        QCOMPARE(lupdate.exitCode(), 0);
        const TsFile after = readTs(copy);
        QStringList missing, gone;
        for (auto it = after.forms.cbegin(); it != after.forms.cend(); ++it)
            if (!before.forms.contains(it.key())) missing << it.key();
        for (auto it = before.forms.cbegin(); it != before.forms.cend(); ++it)
            if (!after.forms.contains(it.key())) gone << it.key();
        QVERIFY2(missing.isEmpty() && after.unfinished == 0,
                 qPrintable(QStringLiteral("messages that count without their English forms in "
                                           "ui/i18n/towers_en.ts (cmake --build --target "
                                           "update_translations, then fill them in):\n") +
                            missing.join(QStringLiteral("\n\n"))));
        QVERIFY2(gone.isEmpty(),
                 qPrintable(QStringLiteral("ui/i18n/towers_en.ts has forms of messages no longer "
                                           "in the sources:\n") +
                            gone.join(QStringLiteral("\n\n"))));
    }
};

QTEST_MAIN(TestPluralForms)
#include "tst_plural_forms.moc"
