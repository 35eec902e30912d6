#include "app/runs/config_difference.h"

#include <QCryptographicHash>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <cmath>
#include <map>

namespace towers::app {

namespace {

// A model file's network in one line: its name, its layer count and a digest of its definition,
// so that two versions of one file differ at a glance ("my-net: 9 layers (#1f0c2a9b)").
QString networkText(const QJsonObject& definition)
{
    const QByteArray text = QJsonDocument(definition).toJson(QJsonDocument::Compact);
    return QStringLiteral("%1: %2 layers (#%3)")
        .arg(definition.value(QLatin1String("name")).toString())
        .arg(definition.value(QLatin1String("layers")).toArray().size())
        .arg(QString::fromLatin1(
            QCryptographicHash::hash(text, QCryptographicHash::Sha256).toHex().left(8)));
}

// What a run trained on (config.json's datasetContent) in one line: its classes, its examples and
// a digest of the record, so that a dataset imported again differs at a glance ("10 classes, 60000
// training and 10000 test examples (#5e1d03aa)").
QString datasetContentText(const QJsonObject& record)
{
    const QByteArray text = QJsonDocument(record).toJson(QJsonDocument::Compact);
    return QStringLiteral("%1 classes, %2 training and %3 test examples (#%4)")
        .arg(record.value(QLatin1String("classes")).toArray().size())
        .arg(record.value(QLatin1String("train"))
                 .toObject()
                 .value(QLatin1String("examples"))
                 .toInteger())
        .arg(record.value(QLatin1String("test"))
                 .toObject()
                 .value(QLatin1String("examples"))
                 .toInteger())
        .arg(QString::fromLatin1(
            QCryptographicHash::hash(text, QCryptographicHash::Sha256).toHex().left(8)));
}

// The leaves of `o` as (path, text), in its order; a non-empty object is a branch ("a/b"), except
// a model file's network and the record of the dataset's content, one setting each.
void flatten(const QJsonObject& o, const QString& prefix,
             std::vector<std::pair<QString, QString>>& out)
{
    for (auto it = o.begin(); it != o.end(); ++it) {
        const QString path = prefix.isEmpty() ? it.key() : prefix + QLatin1Char('/') + it.key();
        if (prefix.isEmpty() && it.key() == QLatin1String("modelDefinition") && it->isObject())
            out.emplace_back(path, networkText(it->toObject()));
        else if (prefix.isEmpty() && it.key() == QLatin1String("datasetContent") && it->isObject())
            out.emplace_back(path, datasetContentText(it->toObject()));
        else if (it->isObject() && !it->toObject().isEmpty())
            flatten(it->toObject(), path, out);
        else
            out.emplace_back(path, configValueText(*it));
    }
}

} // namespace

QString configValueText(const QJsonValue& v)
{
    switch (v.type()) {
    case QJsonValue::String:
        return v.toString();
    case QJsonValue::Double: {
        const double d = v.toDouble();
        if (d == std::trunc(d) && std::abs(d) < 1e15)
            return QString::number(static_cast<qint64>(d));
        return QString::number(d, 'g', 10);
    }
    case QJsonValue::Bool:
        return v.toBool() ? QStringLiteral("true") : QStringLiteral("false");
    case QJsonValue::Null:
        return QStringLiteral("null");
    case QJsonValue::Array:
        return QString::fromUtf8(QJsonDocument(v.toArray()).toJson(QJsonDocument::Compact));
    case QJsonValue::Object:
        return QString::fromUtf8(QJsonDocument(v.toObject()).toJson(QJsonDocument::Compact));
    case QJsonValue::Undefined:
        break;
    }
    return {};
}

std::vector<ConfigDifference> configDifferences(const QStringList& configs)
{
    std::vector<QString> order;            // every setting, first seen first
    std::map<QString, QStringList> values; // setting -> each run's text
    for (qsizetype run = 0; run < configs.size(); ++run) {
        std::vector<std::pair<QString, QString>> leaves;
        flatten(QJsonDocument::fromJson(configs[run].toUtf8()).object(), {}, leaves);
        for (auto& [setting, text] : leaves) {
            auto [it, added] = values.try_emplace(setting);
            if (added) {
                order.push_back(setting);
                for (qsizetype i = 0; i < configs.size(); ++i) it->second << QString();
            }
            it->second[run] = std::move(text);
        }
    }
    std::vector<ConfigDifference> out;
    for (const QString& setting : order) {
        if (setting == QLatin1String("runId")) continue;
        const QStringList& v = values.at(setting);
        if (v.count(v.front()) != v.size()) out.push_back({setting, v});
    }
    return out;
}

} // namespace towers::app
