// python/towers_torch.py knows exactly the registered models: the same names, each with the same
// input shape (PyTorch's C, H, W for the engine's H, W, C). tests/torch_models.py reads the
// module's MODELS and INPUT_SHAPES from its source, so this runs without PyTorch; the check itself
// is shown to fail when either side gains a model. (tst_torch_crosscheck then compares each pair's
// numbers where PyTorch is installed.)
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

#include <map>

#include "engine/models/registry.h"
#include "python_oracle.h"

using namespace towers::engine;
using namespace towers::test;

namespace {

using ModelShapes = std::map<QString, QString>; // name -> "HxWxC"

QString shapeText(std::int64_t h, std::int64_t w, std::int64_t c)
{
    return QStringLiteral("%1x%2x%3").arg(h).arg(w).arg(c);
}

ModelShapes engineModels()
{
    ModelShapes models;
    for (const ModelInfo& m : modelRegistry())
        models[QString::fromStdString(m.name)] =
            shapeText(m.inputShape[0], m.inputShape[1], m.inputShape[2]);
    return models;
}

// What is wrong between the two lists, one line each; empty when they agree.
QStringList mismatches(const ModelShapes& engine, const ModelShapes& python)
{
    QStringList problems;
    for (const auto& [name, shape] : engine) {
        const auto it = python.find(name);
        if (it == python.end())
            problems << QStringLiteral("'%1' is registered in engine/models/registry.cpp but "
                                       "python/towers_torch.py has no twin for it (MODELS, "
                                       "INPUT_SHAPES)")
                            .arg(name);
        else if (it->second != shape)
            problems << QStringLiteral("'%1' takes %2 images in the engine but %3 in "
                                       "python/towers_torch.py (INPUT_SHAPES is C, H, W)")
                            .arg(name, shape, it->second);
    }
    for (const auto& [name, shape] : python)
        if (!engine.count(name))
            problems << QStringLiteral("python/towers_torch.py has '%1', which is not a "
                                       "registered model (engine/models/registry.cpp)")
                            .arg(name);
    return problems;
}

} // namespace

class TestTorchModels : public QObject
{
    Q_OBJECT

    QString m_script, m_module;

    // The models of a towers_torch.py, as tests/torch_models.py reads them; false with the
    // script's message in `why` when it cannot read them.
    bool pythonModels(const QString& module, ModelShapes& models, QString& why)
    {
        const OracleRun r = runOracle(m_script, {module});
        if (r.exitCode != 0) {
            why = QStringLiteral("tests/torch_models.py %1 failed (exit %2): %3")
                      .arg(module)
                      .arg(r.exitCode)
                      .arg(r.output);
            return false;
        }
        const QJsonObject o = QJsonDocument::fromJson(r.output.toUtf8()).object();
        const QJsonObject shapes = o.value(QStringLiteral("input_shapes")).toObject();
        models.clear();
        for (const QJsonValue& v : o.value(QStringLiteral("models")).toArray()) {
            const QJsonArray chw = shapes.value(v.toString()).toArray();
            models[v.toString()] =
                shapeText(chw.at(1).toInteger(), chw.at(2).toInteger(), chw.at(0).toInteger());
        }
        if (models.empty()) {
            why = QStringLiteral("tests/torch_models.py %1 listed no model: %2")
                      .arg(module, r.output);
            return false;
        }
        return true;
    }

private slots:
    void initTestCase()
    {
        m_script = oracleScript(QStringLiteral("torch_models.py"));
        QVERIFY2(!m_script.isEmpty(), "tests/torch_models.py not found ($TOWERS_SOURCE_DIR)");
        m_module =
            qEnvironmentVariable("TOWERS_SOURCE_DIR") + QStringLiteral("/python/towers_torch.py");
        QVERIFY2(QFile::exists(m_module), qPrintable(m_module));
    }

    // The real thing: the twin module and the registry agree, model for model.
    void sameModels()
    {
        ModelShapes python;
        QString why;
        QVERIFY2(pythonModels(m_module, python, why), qPrintable(why));
        const ModelShapes engine = engineModels();
        QVERIFY(engine.size() >= 5);
        const QStringList problems = mismatches(engine, python);
        QVERIFY2(problems.isEmpty(), qPrintable(problems.join(QLatin1Char('\n'))));
        QCOMPARE(python.size(), engine.size());
    }

    // The check fails when either side gains a model, or a shape differs.
    void detectsEitherSideGainingAModel()
    {
        const ModelShapes engine = engineModels();
        ModelShapes python, extended;
        QString why;
        QVERIFY2(pythonModels(m_module, python, why), qPrintable(why));
        // A copy of towers_torch.py with one more model in its MODELS and INPUT_SHAPES.
        QFile original(m_module);
        QVERIFY(original.open(QIODevice::ReadOnly));
        QString text = QString::fromUtf8(original.readAll());
        QVERIFY(text.contains(QLatin1String("MODELS = {\n")));
        QVERIFY(text.contains(QLatin1String("INPUT_SHAPES = {\n")));
        text.replace(QLatin1String("MODELS = {\n"),
                     QLatin1String("MODELS = {\n    \"python-only\": FashionFast,\n"));
        text.replace(QLatin1String("INPUT_SHAPES = {\n"),
                     QLatin1String("INPUT_SHAPES = {\n    \"python-only\": (1, 28, 28),\n"));
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const QString copy = dir.filePath(QStringLiteral("towers_torch.py"));
        QFile out(copy);
        QVERIFY(out.open(QIODevice::WriteOnly));
        out.write(text.toUtf8());
        out.close();
        QVERIFY2(pythonModels(copy, extended, why), qPrintable(why));
        QStringList problems = mismatches(engine, extended);
        QCOMPARE(problems.size(), 1);
        QVERIFY2(problems[0].contains(QLatin1String("'python-only', which is not a registered")),
                 qPrintable(problems[0]));

        ModelShapes gained = engine;
        gained[QStringLiteral("engine-only")] = shapeText(28, 28, 1);
        problems = mismatches(gained, python);
        QCOMPARE(problems.size(), 1);
        QVERIFY2(problems[0].contains(QLatin1String("'engine-only' is registered")),
                 qPrintable(problems[0]));

        ModelShapes reshaped = engine;
        reshaped.begin()->second = shapeText(1, 2, 3);
        problems = mismatches(reshaped, python);
        QCOMPARE(problems.size(), 1);
        QVERIFY2(problems[0].contains(QLatin1String("images in the engine")),
                 qPrintable(problems[0]));
    }

    // A model added to the module outside its literal lists is refused, not missed.
    void refusesAModelAddedOutsideTheLiteral()
    {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const QString copy = dir.filePath(QStringLiteral("towers_torch.py"));
        QVERIFY(QFile::copy(m_module, copy));
        QFile f(copy);
        QVERIFY(f.open(QIODevice::Append));
        f.write("\nMODELS[\"late\"] = FashionFast\n");
        f.close();
        const OracleRun r = runOracle(m_script, {copy});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.output.contains(QLatin1String("MODELS is changed outside its literal")),
                 qPrintable(r.output));
    }
};

QTEST_APPLESS_MAIN(TestTorchModels)
#include "tst_torch_models.moc"
