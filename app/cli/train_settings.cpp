// towers-cli train's settings as the processes of a run compare them (train_settings.h); the
// command itself is in train_command.cpp.
#include "app/cli/train_settings.h"

#include <QDir>
#include <QStringList>

#include "app/cli/command.h"
#include "app/runs/run_builder.h"
#include "app/version/build_info.h"
#include "engine/errors.h"
#include "engine/gpu/gpu_backend.h"
#include "engine/ops/precision.h"
#include "engine/train/train_config.h"

namespace towers::app {

std::vector<engine::Setting> settingsGiven(const QCommandLineParser& p)
{
    static const QStringList integers{QStringLiteral("towers"),
                                      QStringLiteral("threads-per-tower"),
                                      QStringLiteral("batch-size"),
                                      QStringLiteral("steps"),
                                      QStringLiteral("seed"),
                                      QStringLiteral("checkpoint-every"),
                                      QStringLiteral("keep-checkpoints"),
                                      QStringLiteral("eval-every"),
                                      QStringLiteral("patience"),
                                      QStringLiteral("log-every"),
                                      QStringLiteral("histogram-every"),
                                      QStringLiteral("loader-workers")};
    static const QStringList numbers{QStringLiteral("epochs"),    QStringLiteral("lr"),
                                     QStringLiteral("momentum"),  QStringLiteral("weight-decay"),
                                     QStringLiteral("ema-decay"), QStringLiteral("bucket-mb")};
    static const QStringList paths{QStringLiteral("run-dir"), QStringLiteral("init-from"),
                                   QStringLiteral("like"), QStringLiteral("model")};
    const auto number = [](double v) { return QString::number(v, 'g', 17); };
    const auto meaning = [&](const QString& name, const QString& given) -> QString {
        bool ok = false;
        const QString t = given.trimmed();
        if (integers.contains(name)) {
            const qint64 v = t.toLongLong(&ok);
            if (ok) return QString::number(v);
        } else if (numbers.contains(name)) {
            const double v = t.toDouble(&ok);
            if (ok) return number(v);
        } else if (name == QLatin1String("validation")) {
            if (const auto v = validationShare(given)) return number(*v);
        } else if (name == QLatin1String("min-delta")) {
            if (const auto v = shareOf(given, engine::kMaxMinDelta)) return number(*v);
        } else if (name == QLatin1String("lr-schedule")) {
            return scheduleName(given);
        } else if (name == QLatin1String("augment")) {
            if (!given.isEmpty()) return augmentName(given);
        } else if (name == QLatin1String("precision")) {
            try {
                return QString::fromStdString(std::string(
                    engine::precisionName(engine::parsePrecision(given.toStdString()))));
            } catch (const engine::Error&) {
            }
        } else if (name == QLatin1String("gpus")) {
            if (t == QLatin1String("all")) return t;
            QStringList gpus;
            for (const QString& item : given.split(QLatin1Char(','))) {
                const int g = item.trimmed().toInt(&ok);
                if (!ok) return given;
                gpus << QString::number(g);
            }
            return gpus.join(QLatin1Char(','));
        } else if (paths.contains(name)) {
            // Rank 0's to read or make, wherever the others started (another machine need not
            // see the file): the same path, however spelt ("runs/a/" and "runs/./a").
            if (!given.isEmpty()) return QDir::cleanPath(given);
        }
        return given;
    };
    const std::string build =
        (versionLine(QStringLiteral("towers-cli")) + QStringLiteral(", GPU backend ") +
         QString::fromLatin1(engine::gpuBackendBuildId()))
            .toStdString();
    std::vector<engine::Setting> out{{"the Towers build", build, build}};
    QStringList names = p.optionNames();
    names.removeDuplicates();
    names.sort();
    for (const QString& name : names) {
        if (name == QLatin1String("data-dir")) continue;
        const QStringList values = p.values(name);
        engine::Setting s;
        s.name = QStringLiteral("--%1").arg(name).toStdString();
        if (values.isEmpty()) { // a switch
            s.canonical = "on";
            s.given = "given";
        } else {
            const QString canonical = meaning(name, values.back());
            s.canonical = canonical.toStdString();
            s.given = shellWord(values.back()).toStdString();
        }
        out.push_back(std::move(s));
    }
    return out;
}

} // namespace towers::app
