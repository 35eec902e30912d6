#pragma once
// One page of a dataset's images for the Data page's grid (and the Classify page's "images of
// this confusion cell"): a split, an optional class filter or explicit list of indices, paging,
// and optionally each image as the training distortions turn it into model input (drawn with
// the engine's own drawDistortion/applyPreprocessing, shown rescaled to 0..255).
#include <QAbstractListModel>
#include <QPixmap>
#include <QStringList>

#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "engine/data/dataset.h"
#include "engine/data/preprocessing.h"

namespace towers::ui {

class SampleImageModel : public QAbstractListModel
{
    Q_OBJECT
public:
    enum Role
    {
        LabelRole = Qt::UserRole + 1, // int: the image's class
        DatasetIndexRole,             // qint64: its index in the split
        ImageRole,                    // QImage: what the tile shows, at its own resolution
    };
    enum class Split
    {
        Train,
        Test,
        Validation // the images setValidationSet gave: a run's held-out share of Train
    };

    explicit SampleImageModel(QObject* parent = nullptr);

    void setDataset(std::shared_ptr<const engine::Dataset> dataset);
    const engine::Dataset* dataset() const { return m_dataset.get(); }
    void setSplit(Split split);
    Split split() const { return m_split; }
    // The images Split::Validation shows (engine::splitValidation's of the dataset's training
    // set, the class names the dataset's); nullptr: none.
    void setValidationSet(std::shared_ptr<const engine::ImageSet> images);
    // -1: every class.
    void setClassFilter(int label);
    int classFilter() const { return m_classFilter; }
    // Shows exactly these indices of the split, in this order (the class filter then applies
    // within them); nullopt goes back to the whole split.
    void setIndexList(std::optional<std::vector<std::int64_t>> indices);
    // A line added to the tooltip of these indices of the split ("predicted Shirt, 97 %"); until
    // the next call (or an empty map).
    void setNotes(std::map<std::int64_t, QString> notes);
    void setPageSize(int size);
    int pageSize() const { return m_pageSize; }
    void setPage(int page); // clamped to [0, pageCount() - 1]
    int page() const { return m_page; }
    int pageCount() const;
    // Images that pass the filter, over all pages.
    std::int64_t matchCount() const { return std::int64_t(m_matches.size()); }
    // Dataset index of the i-th match.
    std::int64_t matchAt(std::int64_t i) const { return m_matches.at(std::size_t(i)); }

    // The recipe whose training distortions setDistorted shows. Returns an error message (and
    // turns distortion off) when the recipe does not fit the dataset's images.
    QString setRecipe(std::optional<engine::Preprocessing> recipe);
    bool hasRecipe() const { return m_recipe.has_value(); }
    void setDistorted(bool on);
    bool isDistorted() const { return m_distorted; }
    // A new seed draws new distortions (the same seed always draws the same ones).
    void setDistortionSeed(std::uint64_t seed);
    std::uint64_t distortionSeed() const { return m_seed; }

    // Tile size in device-independent pixels (the images are scaled without smoothing, so pixels
    // stay crisp).
    void setTileSize(int pixels);
    int tileSize() const { return m_tile; }
    // Whether tiles are captioned with their class name (DisplayRole).
    void setShowLabels(bool on);

    // The image a tile shows (original or distorted) for dataset index `index` of the split.
    QImage imageAt(std::int64_t index) const;

    int rowCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;

signals:
    // Paging or filtering changed what the pages hold.
    void pagingChanged();

private:
    const engine::ImageSet* set() const;
    void rebuildMatches();
    void resetPage();

    std::shared_ptr<const engine::Dataset> m_dataset;
    Split m_split = Split::Test;
    std::shared_ptr<const engine::ImageSet> m_validation;
    int m_classFilter = -1;
    std::optional<std::vector<std::int64_t>> m_indexList;
    std::map<std::int64_t, QString> m_notes;
    std::vector<std::int64_t> m_matches;
    int m_pageSize = 48;
    int m_page = 0;
    std::optional<engine::Preprocessing> m_recipe;
    bool m_distorted = false;
    std::uint64_t m_seed = 1;
    int m_tile = 72;
    bool m_labels = true;
    mutable std::vector<QPixmap> m_cache; // per row of the current page
};

} // namespace towers::ui
