#include "ui/models/sample_image_model.h"

#include <QImage>

#include "app/image/image_convert.h"
#include "engine/tensor/rng.h"

namespace towers::ui {

SampleImageModel::SampleImageModel(QObject* parent) : QAbstractListModel(parent) {}

const engine::ImageSet* SampleImageModel::set() const
{
    if (!m_dataset) return nullptr;
    switch (m_split) {
    case Split::Train:
        return &m_dataset->train;
    case Split::Validation:
        return m_validation.get();
    case Split::Test:
        break;
    }
    return &m_dataset->test;
}

void SampleImageModel::setValidationSet(std::shared_ptr<const engine::ImageSet> images)
{
    m_validation = std::move(images);
    if (m_split != Split::Validation) return;
    m_page = 0;
    resetPage();
}

void SampleImageModel::setDataset(std::shared_ptr<const engine::Dataset> dataset)
{
    m_dataset = std::move(dataset);
    m_classFilter = -1;
    m_indexList.reset();
    m_page = 0;
    if (m_recipe) setRecipe(m_recipe); // re-check the fit
    resetPage();
}

void SampleImageModel::setSplit(Split split)
{
    if (m_split == split) return;
    m_split = split;
    m_page = 0;
    resetPage();
}

void SampleImageModel::setClassFilter(int label)
{
    if (m_classFilter == label) return;
    m_classFilter = label;
    m_page = 0;
    resetPage();
}

void SampleImageModel::setNotes(std::map<std::int64_t, QString> notes)
{
    m_notes = std::move(notes);
    if (rowCount() > 0) emit dataChanged(index(0), index(rowCount() - 1), {Qt::ToolTipRole});
}

void SampleImageModel::setIndexList(std::optional<std::vector<std::int64_t>> indices)
{
    m_indexList = std::move(indices);
    m_page = 0;
    resetPage();
}

void SampleImageModel::setPageSize(int size)
{
    m_pageSize = std::max(1, size);
    m_page = 0;
    resetPage();
}

void SampleImageModel::setPage(int page)
{
    page = std::clamp(page, 0, std::max(0, pageCount() - 1));
    if (page == m_page) return;
    m_page = page;
    resetPage();
}

int SampleImageModel::pageCount() const
{
    return int((std::int64_t(m_matches.size()) + m_pageSize - 1) / m_pageSize);
}

QString SampleImageModel::setRecipe(std::optional<engine::Preprocessing> recipe)
{
    QString error;
    if (recipe && set() && set()->count > 0) {
        try {
            recipe->validateFor(set()->imageShape());
        } catch (const std::exception& e) {
            error = QString::fromUtf8(e.what());
            recipe.reset();
        }
    }
    m_recipe = std::move(recipe);
    if (!m_recipe) m_distorted = false;
    if (m_distorted || !error.isEmpty()) resetPage();
    return error;
}

void SampleImageModel::setDistorted(bool on)
{
    on = on && m_recipe.has_value();
    if (on == m_distorted) return;
    m_distorted = on;
    resetPage();
}

void SampleImageModel::setDistortionSeed(std::uint64_t seed)
{
    m_seed = seed;
    if (m_distorted) resetPage();
}

void SampleImageModel::setTileSize(int pixels)
{
    m_tile = std::max(16, pixels);
    resetPage();
}

void SampleImageModel::setShowLabels(bool on)
{
    m_labels = on;
    resetPage();
}

void SampleImageModel::rebuildMatches()
{
    m_matches.clear();
    const auto* s = set();
    if (!s) return;
    auto passes = [&](std::int64_t i) {
        return i >= 0 && i < s->count &&
               (m_classFilter < 0 || s->labels[std::size_t(i)] == m_classFilter);
    };
    if (m_indexList) {
        for (auto i : *m_indexList)
            if (passes(i)) m_matches.push_back(i);
    } else {
        m_matches.reserve(std::size_t(s->count));
        for (std::int64_t i = 0; i < s->count; ++i)
            if (passes(i)) m_matches.push_back(i);
    }
}

void SampleImageModel::resetPage()
{
    beginResetModel();
    rebuildMatches();
    m_page = std::clamp(m_page, 0, std::max(0, pageCount() - 1));
    m_cache.assign(std::size_t(rowCount()), QPixmap());
    endResetModel();
    emit pagingChanged();
}

QImage SampleImageModel::imageAt(std::int64_t index) const
{
    const auto* s = set();
    if (!s || index < 0 || index >= s->count) return {};
    const int h = int(s->height), w = int(s->width), c = int(s->channels);
    if (!m_distorted || !m_recipe) return app::imageFromHwc(s->image(index), h, w, c);
    // Seeded by (seed, index): the same tile always shows the same draw until the seed changes.
    engine::Rng rng(m_seed * 0x9E3779B97F4A7C15ULL + std::uint64_t(index));
    const auto d = engine::drawDistortion(*m_recipe, s->imageShape(), rng);
    std::vector<float> out(std::size_t(m_recipe->height) * std::size_t(m_recipe->width) *
                           std::size_t(m_recipe->channels));
    engine::applyPreprocessing(*m_recipe, s->image(index), s->imageShape(), d, out.data());
    return app::imageFromFloats(out.data(), m_recipe->height, m_recipe->width, m_recipe->channels);
}

int SampleImageModel::rowCount(const QModelIndex& parent) const
{
    if (parent.isValid()) return 0;
    const std::int64_t first = std::int64_t(m_page) * m_pageSize;
    return int(std::clamp<std::int64_t>(std::int64_t(m_matches.size()) - first, 0, m_pageSize));
}

QVariant SampleImageModel::data(const QModelIndex& index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
        return {};
    const std::int64_t i = m_matches[std::size_t(std::int64_t(m_page) * m_pageSize + index.row())];
    const auto* s = set();
    const int label = s->labels[std::size_t(i)];
    const QString name = label < int(m_dataset->classNames.size())
                             ? QString::fromStdString(m_dataset->classNames[std::size_t(label)])
                             : QString::number(label);
    switch (role) {
    case Qt::DisplayRole:
        return m_labels ? name : QString();
    case Qt::ToolTipRole: {
        const QString split = m_split == Split::Train        ? tr("Training")
                              : m_split == Split::Validation ? tr("Validation")
                                                             : tr("Test");
        QString text = tr("%1 image %2: %3").arg(split).arg(i).arg(name);
        if (const auto note = m_notes.find(i); note != m_notes.end())
            text += QLatin1Char('\n') + note->second;
        return text;
    }
    case Qt::DecorationRole: {
        QPixmap& cached = m_cache[std::size_t(index.row())];
        if (cached.isNull())
            cached = QPixmap::fromImage(
                imageAt(i).scaled(m_tile, m_tile, Qt::KeepAspectRatio, Qt::FastTransformation));
        return cached;
    }
    case ImageRole:
        return imageAt(i);
    case LabelRole:
        return label;
    case DatasetIndexRole:
        return qint64(i);
    default:
        return {};
    }
}

} // namespace towers::ui
