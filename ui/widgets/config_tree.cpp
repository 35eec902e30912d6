#include "ui/widgets/config_tree.h"

#include <QHeaderView>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include "app/runs/config_difference.h"

namespace towers::ui {

ConfigTree::ConfigTree(QWidget* parent) : QTreeWidget(parent)
{
    setColumnCount(2);
    setHeaderLabels({tr("Setting"), tr("Value")});
    setRootIsDecorated(false);
    setAlternatingRowColors(true);
    setUniformRowHeights(true);
    setTextElideMode(Qt::ElideMiddle); // a path keeps its both ends
    header()->setSectionResizeMode(0, QHeaderView::ResizeToContents);
}

bool ConfigTree::addItems(QTreeWidgetItem* parent, const QJsonObject& o)
{
    bool branches = false;
    for (auto it = o.begin(); it != o.end(); ++it) {
        auto* item = parent ? new QTreeWidgetItem(parent) : new QTreeWidgetItem(this);
        item->setText(0, it.key());
        if (it->isObject() && !it->toObject().isEmpty()) {
            addItems(item, it->toObject());
            // A model file's network is long: folded, its name and layer count beside it.
            const bool network = it.key() == QLatin1String("modelDefinition");
            if (network) {
                const auto layers = it->toObject().value(QLatin1String("layers")).toArray().size();
                const QString name = it->toObject().value(QLatin1String("name")).toString();
                item->setText(
                    1, tr("%1: %n layer(s), from a model file", nullptr, int(layers)).arg(name));
            }
            item->setExpanded(!network);
            branches = true;
            continue;
        }
        const QString text = app::configValueText(*it);
        item->setText(1, text);
        item->setToolTip(1, text);
    }
    return branches;
}

void ConfigTree::showConfig(const QString& json)
{
    clear();
    setColumnCount(2);
    setHeaderLabels({tr("Setting"), tr("Value")});
    setToolTip(tr("The run's configuration, from config.json in its folder"));
    setRootIsDecorated(false);
    if (json.isEmpty()) return;
    QJsonParseError error{};
    const QJsonDocument doc = QJsonDocument::fromJson(json.toUtf8(), &error);
    if (!doc.isObject()) {
        auto* item = new QTreeWidgetItem(this);
        item->setText(0, QStringLiteral("config.json"));
        item->setText(
            1, error.error != QJsonParseError::NoError
                   ? tr("not readable: %1 at byte %2").arg(error.errorString()).arg(error.offset)
                   : tr("not readable: not a JSON object"));
        return;
    }
    setRootIsDecorated(addItems(nullptr, doc.object()));
}

void ConfigTree::showDifferences(const QStringList& names, const QStringList& headers,
                                 const QStringList& configs)
{
    clear();
    setRootIsDecorated(false);
    setColumnCount(1 + int(headers.size()));
    setHeaderLabels(QStringList{tr("Setting")} + headers);
    for (int i = 0; i < names.size(); ++i) headerItem()->setToolTip(1 + i, names[i]);
    setToolTip(tr("What differs between the configurations of the runs selected together "
                  "(towers-cli runs RUN RUN…)"));
    const auto differences = app::configDifferences(configs);
    if (differences.empty()) {
        auto* item = new QTreeWidgetItem(this);
        item->setText(0, tr("(the same configuration, but for each run's id)"));
        item->setFirstColumnSpanned(true);
    }
    for (const auto& d : differences) {
        auto* item = new QTreeWidgetItem(this);
        item->setText(0, d.setting);
        for (int i = 0; i < d.values.size(); ++i) {
            item->setText(1 + i, d.values[i].isEmpty() ? QStringLiteral("–") : d.values[i]);
            item->setToolTip(1 + i, names.value(i) + QStringLiteral(": ") + d.values[i]);
        }
    }
}

} // namespace towers::ui
