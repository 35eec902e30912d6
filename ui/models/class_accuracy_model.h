#pragma once
// Per-class results of classifying a test set: class, images, correct, accuracy (recall: its
// images found), top 5 (its images with their class among the five most probable: precision @ 5's
// share of the class), precision (its answers right) and F1 (engine::classScores).
#include <QAbstractTableModel>
#include <QStringList>

#include "app/inference/test_set_predictions.h"

namespace towers::ui {

class ClassAccuracyModel : public QAbstractTableModel
{
    Q_OBJECT
public:
    enum Column
    {
        Class,
        Images,
        Correct,
        Accuracy,
        Top5,
        Precision,
        F1,
        ColumnCount
    };
    explicit ClassAccuracyModel(QObject* parent = nullptr);

    void setResults(const QStringList& classNames, const app::TestSetPredictions& predictions);
    void clear();
    // Whether the top 5 are worth showing (engine::reportsTopFive: more than 10 classes).
    bool hasTop5() const { return engine::reportsTopFive(int(m_counts.size())); }

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation,
                        int role = Qt::DisplayRole) const override;

private:
    QStringList m_names;
    std::vector<std::int64_t> m_counts, m_correct, m_top5;
    std::vector<engine::ClassScores> m_scores;
};

} // namespace towers::ui
