#pragma once
// A run's config.json as settings and values (a nested object as a branch, a model file's
// network folded under its name and layer count), or what differs between the configurations of
// several runs, a column each (app::configDifferences): the Runs page's configuration pane.
#include <QStringList>
#include <QTreeWidget>

namespace towers::ui {

class ConfigTree : public QTreeWidget
{
    Q_OBJECT
public:
    explicit ConfigTree(QWidget* parent = nullptr);

    // One run's configuration (`json`: its config.json's text; "" for none). Text that is not a
    // JSON object shows why instead.
    void showConfig(const QString& json);
    // What differs between the runs' configurations: `names` the runs' names (the headers'
    // tooltips), `headers` what the columns say (shortened names), `configs` their config.json
    // texts.
    void showDifferences(const QStringList& names, const QStringList& headers,
                         const QStringList& configs);

private:
    // Adds o's members under parent (the top level when null); true when one is a branch.
    bool addItems(QTreeWidgetItem* parent, const QJsonObject& o);
};

} // namespace towers::ui
