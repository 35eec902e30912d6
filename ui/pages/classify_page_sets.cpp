// The Classify page's dataset sets (classify_page.h): the chosen set (test, validation,
// training) and the words for it, the checkpoint's dataset loaded, an image of the set classified,
// the whole set classified and its confusion cells shown, and the dead channels counted over the
// test images; the rest of the page is in classify_page.cpp.
#include "ui/pages/classify_page.h"

#include <QComboBox>
#include <QGroupBox>
#include <QLabel>
#include <QLocale>
#include <QPointer>
#include <QProgressBar>
#include <QPushButton>
#include <QRandomGenerator>
#include <QSpinBox>
#include <QTableView>
#include <QTimer>

#include <algorithm>
#include <map>
#include <utility>

#include "app/data/image_folder_import.h"
#include "app/inference/image_files.h"
#include "app/runs/run_builder.h"
#include "engine/data/validation_split.h"
#include "ui/models/class_accuracy_model.h"
#include "ui/models/sample_image_model.h"
#include "ui/pages/layers_dialog.h"
#include "ui/plots/heat_map.h"
#include "ui/widgets/image_drop_area.h"

namespace towers::ui {

ClassifyPage::SetWords ClassifyPage::setWords() const
{
    switch (m_set) {
    case EvalSet::Validation:
        return {tr("Validation set"),
                tr("validation image "),
                tr("&Random validation image"),
                tr("Classify the &whole validation set"),
                tr("validation image %1, truly %2"),
                tr("Classifying %1 validation images…"),
                tr("Classifying the validation set failed: %1"),
                tr("<b>Accuracy %1 %</b>: %2 of %3 validation images right."),
                tr("Validation set: accuracy %1 % with %2"),
                tr("No validation image is classified wrongly.")};
    case EvalSet::Train:
        return {tr("Training set"),
                tr("training image "),
                tr("&Random training image"),
                tr("Classify the &whole training set"),
                tr("training image %1, truly %2"),
                tr("Classifying %1 training images…"),
                tr("Classifying the training set failed: %1"),
                tr("<b>Accuracy %1 %</b>: %2 of %3 training images right."),
                tr("Training set: accuracy %1 % with %2"),
                tr("No training image is classified wrongly.")};
    case EvalSet::Test:
        break;
    }
    return {tr("Test set"),
            tr("test image "),
            tr("&Random test image"),
            tr("Classify the &whole test set"),
            tr("test image %1, truly %2"),
            tr("Classifying %1 test images…"),
            tr("Classifying the test set failed: %1"),
            tr("<b>Accuracy %1 %</b>: %2 of %3 test images right."),
            tr("Test set: accuracy %1 % with %2"),
            tr("No test image is classified wrongly.")};
}

void ClassifyPage::updateSetTexts()
{
    const SetWords words = setWords();
    m_setChoice->setCurrentIndex(m_setChoice->findData(int(m_set)));
    m_setBox->setTitle(words.title);
    m_imageIndex->setPrefix(words.imagePrefix);
    m_randomImage->setText(words.random);
    m_classifyAll->setText(words.classifyAll);
    const QString train = tr("the training images as the network learnt from them, undistorted "
                             "(as towers-cli eval --set train: far above the test set's "
                             "accuracy, it learnt them by heart)");
    if (validationShare() > 0) {
        m_setChoice->setToolTip(
            tr("The test set; the %1 % of the training images the checkpoint's run held out for "
               "validation (as towers-cli eval --set validation): a run's mistakes studied "
               "without looking at the test set; or %2")
                .arg(QLocale().toString(100 * validationShare(), 'g', 4), train));
    } else {
        m_setChoice->setToolTip(
            hasClassifier()
                ? tr("The test set or %1; no validation set: %2")
                      .arg(train, m_classifier->noValidation)
                : tr("The test set, the validation set the checkpoint's run held out of its "
                     "training images, or %1")
                      .arg(train));
    }
}

void ClassifyPage::setEvalSet(EvalSet set)
{
    if (set == EvalSet::Validation && validationShare() <= 0) set = EvalSet::Test;
    if (set != m_set) {
        cancelWholeSet();
        m_set = set;
        m_images.reset();
        clearWholeSetResults();
    }
    updateSetTexts();
    updateControls();
}

void ClassifyPage::clearWholeSetResults()
{
    m_predictions.reset();
    m_classModel->clear();
    m_heatMap->clear();
    m_cellImages->setDataset(nullptr);
    m_cellImages->setValidationSet(nullptr);
    m_summary->clear();
    m_progress->setValue(0);
}

void ClassifyPage::withImages(std::function<void()> then)
{
    withDataset([this, then = std::move(then)] {
        if (!m_images) {
            // The image files of a dataset imported from them, as the import recorded them.
            if (m_set == EvalSet::Validation) {
                engine::ValidationSplit split = engine::splitValidation(
                    m_dataset->train, int(m_dataset->classNames.size()), validationShare());
                m_imageFiles =
                    app::importedImageFiles(*m_dataset, false, false, &split.validationIndex);
                m_images = std::make_shared<const engine::ImageSet>(std::move(split.validation));
            } else {
                // The dataset's own test or training set, kept alive with it.
                const bool train = m_set == EvalSet::Train;
                m_images = std::shared_ptr<const engine::ImageSet>(
                    m_dataset, train ? &m_dataset->train : &m_dataset->test);
                m_imageFiles = app::importedImageFiles(*m_dataset, train, !train);
            }
            m_imageIndex->setRange(0, int(std::max<std::int64_t>(0, m_images->count - 1)));
        }
        then();
    });
}

void ClassifyPage::withDataset(std::function<void()> then,
                               std::function<void(const QString&)> failed)
{
    if (!hasClassifier()) return;
    const std::string name = m_classifier->classifier->info().dataset;
    if (m_dataset && m_dataset->name == name) {
        then();
        return;
    }
    if (name.empty()) {
        const QString why =
            tr("This checkpoint does not name its dataset, so it has no test images here");
        if (failed)
            failed(why);
        else
            emit errorOccurred(why);
        return;
    }
    DatasetSource source;
    if (m_datasetProvider) source = m_datasetProvider(name);
    if (source.loaded && source.loaded->name == name) {
        if (m_dataset != source.loaded) m_images.reset();
        m_dataset = source.loaded;
        then();
        return;
    }
    // A load of this dataset under way: this waits for it too, rather than starting another that
    // would drop what the first one was for.
    if (m_datasetJob.isRunning() && m_loadingDataset == name) {
        m_datasetWaiters.push_back({std::move(then), std::move(failed)});
        return;
    }
    m_datasetWaiters.clear(); // a load of another dataset: theirs is superseded
    m_datasetWaiters.push_back({std::move(then), std::move(failed)});
    m_loadingDataset = name;
    m_summary->setText(tr("Loading %1…").arg(QString::fromStdString(name)));
    auto path = source.searchPath.empty() ? engine::defaultSearchPath() : source.searchPath;
    // The folder the checkpoint's run found its dataset in first: its images are those.
    if (const QString runData = app::runDataDirOf(m_checkpointPath); !runData.isEmpty())
        path.insert(path.begin(), runData.toStdString());
    m_datasetJob.start(
        [name, path] {
            return std::shared_ptr<const engine::Dataset>(
                std::make_shared<engine::Dataset>(engine::loadDataset(name, path)));
        },
        [this, name](const app::JobResult<std::shared_ptr<const engine::Dataset>>& r) {
            const std::vector<DatasetWaiter> waiters = std::exchange(m_datasetWaiters, {});
            m_loadingDataset.clear();
            m_summary->clear();
            if (!r.ok()) {
                const QString why = tr("The dataset is not available: %1").arg(r.error);
                bool reported = false; // one banner for all that wait without their own answer
                for (const DatasetWaiter& w : waiters) {
                    if (w.failed) {
                        w.failed(why);
                    } else if (!reported) {
                        emit errorOccurred(why);
                        reported = true;
                    }
                }
                updateControls();
                return;
            }
            m_dataset = *r.value;
            m_images.reset();
            // Another checkpoint, of another dataset, since: what waited was for the former one.
            if (!hasClassifier() || m_classifier->classifier->info().dataset != name) {
                updateControls();
                return;
            }
            for (const DatasetWaiter& w : waiters) w.then();
        });
    updateControls();
}

void ClassifyPage::classifySetImage(qint64 index)
{
    withImages([this, index] {
        const auto images = m_images;
        if (index < 0 || index >= images->count) return;
        m_imageIndex->setValue(int(index));
        const auto shared = m_classifier;
        m_image->setImage(app::toQImage(*images, index));
        const QString truly = m_classNames.value(images->labels[std::size_t(index)]);
        const QString caption = setWords().caption.arg(index).arg(truly);
        m_classifyShownAgain = [this, images, index] {
            if (images == m_images) classifySetImage(index);
        };
        m_imageJob.start(
            [shared, images, index, mirror = averagesMirror()] {
                std::lock_guard lock(shared->mutex);
                useMirror(*shared->classifier, mirror);
                const auto& t = *images;
                engine::ImageSet one;
                one.count = 1;
                one.height = t.height;
                one.width = t.width;
                one.channels = t.channels;
                one.pixels.assign(t.image(index), t.image(index) + t.imageBytes());
                one.labels = {t.labels[std::size_t(index)]};
                return answerFor(*shared->classifier, one);
            },
            [this, caption](const app::JobResult<ImageAnswer>& r) {
                if (!r.ok()) {
                    emit errorOccurred(tr("Classifying failed: %1").arg(r.error));
                    return;
                }
                showAnswer(*r.value, caption);
            });
    });
}

void ClassifyPage::classifyRandomSetImage()
{
    withImages([this] {
        if (m_images->count > 0)
            classifySetImage(qint64(QRandomGenerator::global()->bounded(quint64(m_images->count))));
    });
}

void ClassifyPage::classifyWholeSet()
{
    withImages([this] {
        if (m_cancel) m_cancel->store(true);
        m_cancel = std::make_shared<std::atomic<bool>>(false);
        m_done = std::make_shared<std::atomic<std::int64_t>>(0);
        const auto shared = m_classifier;
        const auto images = m_images;
        const auto cancel = m_cancel;
        const auto done = m_done;
        const SetWords words = setWords();
        m_progress->setValue(0);
        m_progressTimer->start();
        m_summary->setText(words.classifying.arg(QLocale().toString(qint64(images->count))));
        m_wholeSetJob.start(
            [shared, images, cancel, done, mirror = averagesMirror()] {
                std::lock_guard lock(shared->mutex);
                useMirror(*shared->classifier, mirror);
                return app::classifyTestSet(*shared->classifier, *images, cancel.get(), done.get());
            },
            [this, images, words,
             mirror = averagesMirror()](const app::JobResult<app::TestSetPredictions>& r) {
                m_progressTimer->stop();
                if (images != m_images) { // of a set or checkpoint chosen away from since
                    emit wholeSetClassified(false);
                    updateControls();
                    return;
                }
                if (!r.ok()) {
                    const bool cancelled = m_cancel && m_cancel->load();
                    m_summary->setText(cancelled ? tr("Cancelled.")
                                                 : tr("Failed: %1").arg(r.error));
                    m_progress->setValue(0);
                    if (!cancelled) emit errorOccurred(words.failed.arg(r.error));
                    emit wholeSetClassified(false);
                    updateControls();
                    return;
                }
                m_predictions = *r.value;
                const auto& p = *m_predictions;
                m_progress->setValue(1000);
                const QString accuracy = QLocale().toString(p.accuracy() * 100, 'f', 2);
                const QString correct = QLocale().toString(qint64(p.correct));
                const QString examples = QLocale().toString(qint64(p.examples()));
                // The top 5 beside the accuracy for many classes, as towers-cli eval says it; and
                // said where the answers are the mean of each image's and its mirror image's.
                const QString top5 =
                    p.hasTop5() ? tr(" Top 5: %1 %.")
                                      .arg(QLocale().toString(p.accuracyTop5() * 100, 'f', 2))
                                : QString();
                m_summary->setText(
                    words.accuracy.arg(accuracy, correct, examples) + top5 +
                    (mirror ? tr(" Each image averaged with its mirror image.") : QString()));
                m_classModel->setResults(m_classNames, p);
                m_classTable->setColumnHidden(ClassAccuracyModel::Top5, !p.hasTop5());
                m_heatMap->setMatrix(m_classNames,
                                     QVector<std::int64_t>(p.confusion.begin(), p.confusion.end()));
                showSetImages({});
                emit logMessage(
                    words.logged.arg(p.accuracy() * 100, 0, 'f', 2).arg(m_checkpointPath) +
                    (mirror ? tr(", each image averaged with its mirror image") : QString()));
                emit wholeSetClassified(true);
                updateControls();
            });
        updateControls();
    });
}

void ClassifyPage::cancelWholeSet()
{
    if (m_cancel) m_cancel->store(true);
}

void ClassifyPage::showSetImages(const std::vector<std::int64_t>& indices)
{
    const auto& p = *m_predictions;
    std::map<std::int64_t, QString> notes;
    for (const std::int64_t i : indices) {
        notes[i] = tr("predicted %1 with %2 %")
                       .arg(m_classNames.value(p.predicted[std::size_t(i)]),
                            QLocale().toString(100.0 * p.confidence[std::size_t(i)], 'f', 1));
        // An imported image's file, to find (and relabel or remove) it where it came from.
        if (i < m_imageFiles.size())
            notes[i] += QLatin1Char('\n') + app::quotedPath(m_imageFiles[qsizetype(i)]);
    }
    m_cellImages->setDataset(m_dataset);
    const bool validation = m_set == EvalSet::Validation;
    m_cellImages->setValidationSet(validation ? m_images : nullptr);
    m_cellImages->setSplit(validation                ? SampleImageModel::Split::Validation
                           : m_set == EvalSet::Train ? SampleImageModel::Split::Train
                                                     : SampleImageModel::Split::Test);
    m_cellImages->setIndexList(indices);
    m_cellImages->setNotes(std::move(notes));
}

void ClassifyPage::showCell(int truth, int predicted)
{
    if (!m_predictions || !m_dataset) return;
    const auto indices = m_predictions->cell(truth, predicted);
    showSetImages(indices);
    m_cellLabel->setText(tr("True <b>%1</b>, predicted <b>%2</b>: %n image(s), the surest first",
                            nullptr, int(indices.size()))
                             .arg(m_classNames.value(truth).toHtmlEscaped(),
                                  m_classNames.value(predicted).toHtmlEscaped()));
}

void ClassifyPage::showSurestMistakes()
{
    if (!m_predictions || !m_dataset) return;
    const auto indices = m_predictions->confidentMistakes(kSurestMistakes);
    showSetImages(indices);
    m_cellLabel->setText(
        indices.empty()
            ? setWords().noMistakes
            : tr("The %n wrong answer(s) the network was surest of, the surest first (each "
                 "image's tooltip says what it was taken for): mislabelled images and look-alike "
                 "classes show here.",
                 nullptr, int(indices.size())));
}

void ClassifyPage::countDeadChannels(LayersDialog* dialog)
{
    if (m_activity) { // counted for this checkpoint already: it does not depend on the image
        dialog->setActivity(*m_activity);
        return;
    }
    // Enough images that a channel silent on all is dead, not just quiet on one image; about a
    // second for the small models on two cores.
    constexpr std::int64_t kImages = 1000;
    // The count ends early when every Layers window is closed: a flag shared with the worker,
    // set when the last window watching it goes. A window opened during a count watches it too.
    const auto watch = [this](LayersDialog* w) {
        ++m_activityWatchers->open;
        connect(w, &QObject::destroyed, this, [watchers = m_activityWatchers] {
            if (--watchers->open <= 0) watchers->unwatched.store(true);
        });
    };
    if (m_activityJob.isRunning() && !m_activityWatchers->unwatched.load() &&
        m_activityWatchers->classifier == m_classifier.get()) {
        watch(dialog); // its answer goes to every window open then
        return;
    }
    m_activityWatchers = std::make_shared<ActivityWatchers>();
    m_activityWatchers->classifier = m_classifier.get();
    watch(dialog);
    const QPointer<LayersDialog> shown(dialog);
    withDataset(
        [this] {
            const auto shared = m_classifier;
            const auto dataset = m_dataset;
            const auto watchers = m_activityWatchers;
            m_activityJob.start(
                [shared, dataset, watchers] {
                    std::lock_guard lock(shared->mutex);
                    return shared->classifier->layerActivity(
                        dataset->test, kImages, 100,
                        [watchers] { return watchers->unwatched.load(); });
                },
                [this, watchers](const app::JobResult<std::vector<engine::LayerActivity>>& r) {
                    // Another checkpoint since: its windows wait for their own count.
                    if (watchers->classifier != m_classifier.get()) return;
                    if (r.ok() && !watchers->unwatched.load()) m_activity = *r.value;
                    for (LayersDialog* w : findChildren<LayersDialog*>()) {
                        if (r.ok() && m_activity)
                            w->setActivity(*m_activity);
                        else if (!r.ok())
                            w->setActivityNote(
                                tr("Counting the dead channels failed: %1").arg(r.error));
                    }
                });
        },
        [shown](const QString& why) {
            if (shown)
                shown->setActivityNote(
                    tr("Dead channels are counted over the checkpoint's test images. %1").arg(why));
        });
}

} // namespace towers::ui
