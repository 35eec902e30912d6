#pragma once
// What differs between runs' configurations (config.json): the settings `towers-cli runs A B`
// lists side by side, and the Runs page shows for the runs selected together.
#include <QJsonValue>
#include <QString>
#include <QStringList>

#include <vector>

namespace towers::app {

// A config.json value as the Runs page and `towers-cli runs` show it: a whole number without a
// decimal point, another with up to 10 significant digits, true/false, and arrays and objects as
// compact JSON.
QString configValueText(const QJsonValue& v);

// One setting that differs between runs: its path in config.json ("optimizer/momentum") and each
// run's value as configValueText writes it ("" where a run's configuration lacks it).
struct ConfigDifference
{
    QString setting;
    QStringList values;
};

// The settings whose values differ among `configs` (each a run's config.json; text that is not a
// JSON object counts as no settings): the first configuration's settings by name (as QJsonObject
// orders them), then those only the later ones have; never runId, which differs between any two
// runs. A model file's network (modelDefinition) is one setting: "<name>: N layers (#digest)";
// so is the record of what a run trained on (datasetContent): "N classes, T training and E test
// examples (#digest)".
std::vector<ConfigDifference> configDifferences(const QStringList& configs);

} // namespace towers::app
