#pragma once
// The Classify page: open a checkpoint (it names its model, classes and preprocessing), then
// classify an image file (opened, or dropped on the image) or an image of the checkpoint's
// dataset, with the five most probable classes as a bar chart beside it, and what each layer made
// of it (Layers…: LayersDialog); or classify a whole set: accuracy, per-class accuracy and a
// confusion-matrix heat map whose cells, clicked, show their images. The set is the dataset's test
// set, or, for a checkpoint whose run held a validation set out of its training images, that
// validation set (as `towers-cli eval --set validation`), so that a run's mistakes can be studied
// without looking at the test set. Loading and classifying run off the UI thread; results of
// superseded jobs are dropped. Image files (opened, or dropped: a file, or a folder, which is
// refused) are read by app::readImageFile, as towers-cli reads them: a file that is not a regular
// one, or an image over the size limits, is refused before it is decoded, and the reason shows on
// the page (and in errorOccurred).
#include <QImage>
#include <QWidget>

#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "app/inference/classify_files.h"
#include "app/inference/test_set_predictions.h"
#include "app/jobs/latest_job.h"
#include "engine/data/dataset.h"
#include "engine/train/classifier.h"

class QCheckBox;
class QComboBox;
class QGroupBox;
class QHBoxLayout;
class QLabel;
class QListView;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QSplitter;
class QTableView;
class QTimer;

namespace towers::ui {

class BarChart;
class ClassifyManyDialog;
class ClassAccuracyModel;
class HeatMap;
class ImageDropArea;
class LayersDialog;
class SampleImageModel;

class ClassifyPage : public QWidget
{
    Q_OBJECT
public:
    // The images the page's dataset actions use.
    enum class EvalSet
    {
        Test,
        Validation, // the share of the training images the checkpoint's run held out
        Train       // the training images, undistorted (as towers-cli eval --set train)
    };

    // Where the images of a dataset come from: the one already in memory (the Data page's)
    // when it is that dataset, else loaded from the search path.
    struct DatasetSource
    {
        std::shared_ptr<const engine::Dataset> loaded;
        std::vector<std::filesystem::path> searchPath;
    };
    using DatasetProvider = std::function<DatasetSource(const std::string& name)>;

    explicit ClassifyPage(QWidget* parent = nullptr);
    ~ClassifyPage() override;

    void setDatasetProvider(DatasetProvider provider) { m_datasetProvider = std::move(provider); }

    // Where the network runs: the CPU, then each GPU this build can run on (app::listDevices'
    // trainable GPUs), an item each of "Run on", which shows where there is more than one.
    struct RunOn
    {
        QString name; // "CPU", "GPU 0, NVIDIA H200"
        engine::InferenceDevice device;
    };
    // Replaces the choices (tests: a stand-in GPU) and chooses the first, loading the checkpoint
    // open (or opening) again there.
    void setRunOnChoices(std::vector<RunOn> choices);
    // Chooses choice `index`: the checkpoint open (or opening) is loaded again there. Where that
    // fails (the GPU's memory, its driver), the page says so and goes on with the classifier it
    // had, "Run on" showing that one's device again.
    void setRunOn(int index);
    int runOn() const { return m_runOnIndex; }
    QComboBox* runOnChoice() const { return m_runOn; }
    // "Average with the mirror image": test-time augmentation (towers-cli eval --tta mirror) for
    // every answer the page gives after it is chosen; enabled only for a checkpoint whose run
    // trained on mirror images (the tooltip says why not). Choosing it again classifies the image
    // shown again and forgets the whole set's results.
    QCheckBox* mirrorChoice() const { return m_mirror; }
    bool averagesMirror() const;

    bool hasClassifier() const { return m_classifier != nullptr; }
    QString checkpointPath() const { return m_checkpointPath; }
    QStringList classNames() const { return m_classNames; }
    bool isBusy() const;
    // The latest single-image answer: (class name, probability), most probable first.
    const std::vector<std::pair<QString, double>>& topClasses() const { return m_top; }
    // The latest whole-set run; nullopt before one finished.
    const std::optional<app::TestSetPredictions>& predictions() const { return m_predictions; }
    std::shared_ptr<const engine::Dataset> dataset() const { return m_dataset; }
    EvalSet evalSet() const { return m_set; }
    // The checkpoint's run's validation share (TrainConfig::validation); 0: none, and only the
    // test set is offered.
    double validationShare() const { return m_classifier ? m_classifier->validationShare : 0; }
    // The chosen set's images, once the dataset is loaded (else nullptr).
    std::shared_ptr<const engine::ImageSet> images() const { return m_images; }

    BarChart* topChart() const { return m_topChart; }
    HeatMap* heatMap() const { return m_heatMap; }
    // The whole set's results class by class (ClassAccuracyModel).
    QTableView* classTable() const { return m_classTable; }
    SampleImageModel* cellImages() const { return m_cellImages; }
    QString summaryText() const;
    // The line about the loaded checkpoint: its file, model, dataset, steps, classes, image size
    // and the precision it is evaluated in when that is not plain float32.
    QString checkpointText() const;
    // Its tooltip: why a checkpoint trained in bf16 is evaluated in float32 here ("" otherwise).
    QString checkpointToolTip() const;
    // The line under the image: its name and answer, or why it could not be classified.
    QString captionText() const;
    // "Layers…": what each layer made of the latest classified image (nullptr before one was);
    // a window of its own, non-modal.
    LayersDialog* openLayers();

public slots:
    void openCheckpoint(const QString& path);
    void chooseCheckpoint();
    void classifyFile(const QString& path);
    // "Classify many": every file in a window of its own (ClassifyManyDialog), read and
    // classified off the UI thread; the window (nullptr without a checkpoint).
    ClassifyManyDialog* classifyFiles(const QStringList& paths);
    void chooseImage();
    void classifyImage(const QImage& image, const QString& caption);
    // The set the dataset actions use; the validation set only where the checkpoint's run held
    // one out (else ignored). Clears the results of the other set.
    void setEvalSet(EvalSet set);
    // Image `index` of the chosen set of the checkpoint's dataset (loaded on first use).
    void classifySetImage(qint64 index);
    void classifyRandomSetImage();
    void classifyWholeSet();
    void cancelWholeSet();
    // Shows the set's images of true class `truth` predicted as `predicted`, the surest first.
    void showCell(int truth, int predicted);
    // Shows the kSurestMistakes wrong answers the network was surest of, the surest first.
    void showSurestMistakes();

public:
    static constexpr std::size_t kSurestMistakes = 200;

signals:
    void checkpointLoaded(bool ok);
    void imageClassified();
    void wholeSetClassified(bool ok);
    void errorOccurred(const QString& message);
    void logMessage(const QString& line);

private:
    // The classifier is used by one job at a time.
    struct Shared
    {
        std::mutex mutex;
        std::unique_ptr<engine::Classifier> classifier;
        std::vector<engine::LayerView> filters; // every convolution's, read once
        double validationShare = 0;             // of the run's configuration
        QString noValidation; // why there is no validation set, when there is none
        int runOn = 0;        // the choice of "Run on" it runs on
    };
    struct ImageAnswer
    {
        QImage input; // what the model sees, before normalisation
        std::vector<engine::ClassScore> top;
        std::vector<engine::LayerView> layers; // the input and every layer's output
    };
    // Image 0 of `one` through the classifier: the five most probable classes and every layer.
    static ImageAnswer answerFor(engine::Classifier& classifier, const engine::ImageSet& one);
    // `classifier` (its job holding its mutex) set to average with the mirror image or not.
    static void useMirror(engine::Classifier& classifier, bool mirror);
    // The mirror choice's state and tooltip for the loaded checkpoint.
    void updateMirrorChoice();
    void onMirrorToggled();
    void buildUi();
    // buildUi's steps, in order. The checkpoint's row: Open checkpoint, the line about the
    // checkpoint and "Run on".
    QHBoxLayout* makeCheckpointRow();
    // One image and its top 5: the image, what the model sees, the caption, the image's buttons
    // and the chart.
    QWidget* makeSingleImage(QSplitter* split);
    // A whole set: the set's choice, Classify, Cancel, the progress, the summary and the results.
    QGroupBox* makeSetBox(QSplitter* split);
    // The per-class table, the confusion matrix and the chosen cell's images, side by side.
    QSplitter* makeSetResults(QGroupBox* all);
    // The chosen cell's images, under their label and Surest mistakes.
    QWidget* makeCellBox(QSplitter* results);
    // The image, its buttons, the whole set's buttons, the set's choice and the matrix's cells.
    void connectSignals();
    // Shows choice `index` of "Run on" as chosen, without loading anything again.
    void setRunOnChoiceShown(int index);
    void onCheckpoint(const app::JobResult<std::shared_ptr<Shared>>& r, const QString& path);
    // Runs `then` once the checkpoint's dataset is loaded (m_dataset); when it cannot be, says
    // why in the error banner, or with `failed` (no banner) when given. Calls while the dataset
    // loads wait for that load, each `then` in turn.
    void withDataset(std::function<void()> then, std::function<void(const QString&)> failed = {});
    // withDataset, then the chosen set's images drawn (m_images) before `then`.
    void withImages(std::function<void()> then);
    // What the page calls the chosen set's images, in each sentence that names them.
    struct SetWords
    {
        QString title, imagePrefix, random, classifyAll;
        QString caption;     // %1 the image's index, %2 its true class
        QString classifying; // %1 the count
        QString failed;      // %1 the error
        QString accuracy;    // %1 the accuracy, %2 right, %3 of
        QString logged;      // %1 the accuracy, %2 the checkpoint
        QString noMistakes;
    };
    SetWords setWords() const;
    // The chosen set's texts: the group's title, the buttons, the image number's prefix.
    void updateSetTexts();
    // Forgets the whole-set results (they were of another set or checkpoint).
    void clearWholeSetResults();
    // Counts the dead channels of every layer over the first test images into `dialog`.
    void countDeadChannels(LayersDialog* dialog);
    void showAnswer(const ImageAnswer& answer, const QString& caption);
    // `message` in the caption, in place of the previous image and its answer; errorOccurred.
    void showImageError(const QString& message);
    void updateControls();
    // Images of the set in the cell view, each with what it was taken for in its tooltip.
    void showSetImages(const std::vector<std::int64_t>& indices);

    DatasetProvider m_datasetProvider;
    std::vector<RunOn> m_runOnChoices;
    int m_runOnIndex = 0;
    QWidget* m_runOnBox = nullptr; // "Run on" and its choice
    QComboBox* m_runOn = nullptr;
    QCheckBox* m_mirror = nullptr;
    // Classifies the image shown again (the mirror choice changed); empty where none is shown.
    std::function<void()> m_classifyShownAgain;
    std::shared_ptr<Shared> m_classifier;
    QString m_checkpointPath;
    QString m_requestedPath; // the checkpoint last opened, loaded or loading
    QStringList m_classNames;
    engine::Shape m_source;
    std::shared_ptr<const engine::Dataset> m_dataset;
    EvalSet m_set = EvalSet::Test;
    // The chosen set of m_dataset (its test set, or the validation set drawn from its training
    // images as the run drew it); reset when the dataset, the checkpoint or the set changes.
    std::shared_ptr<const engine::ImageSet> m_images;
    // m_images' image files, index by index, for a dataset imported from image files (its
    // towers-files.json, app::readImportedFiles); empty for others. Made with m_images.
    QStringList m_imageFiles;
    std::vector<std::pair<QString, double>> m_top;
    std::vector<engine::LayerView> m_layers; // of the image the page shows
    std::optional<app::TestSetPredictions> m_predictions;
    // The checkpoint's dead channels over its first test images, once counted (the Layers window).
    std::optional<std::vector<engine::LayerActivity>> m_activity;
    struct ActivityWatchers // of the count m_activityJob runs
    {
        const Shared* classifier = nullptr; // whose count
        int open = 0;                       // Layers windows waiting for it (the UI thread's)
        std::atomic<bool> unwatched{false};
    };
    std::shared_ptr<ActivityWatchers> m_activityWatchers = std::make_shared<ActivityWatchers>();
    std::shared_ptr<std::atomic<bool>> m_cancel;
    std::shared_ptr<std::atomic<std::int64_t>> m_done;
    std::function<void()> m_afterDataset;

    app::LatestJob<std::shared_ptr<Shared>> m_load{this};
    app::LatestJob<std::shared_ptr<const engine::Dataset>> m_datasetJob{this};
    // What waits for the dataset m_datasetJob loads (withDataset calls during the load, each
    // then run in order), and the dataset it loads.
    struct DatasetWaiter
    {
        std::function<void()> then;
        std::function<void(const QString&)> failed;
    };
    std::vector<DatasetWaiter> m_datasetWaiters;
    std::string m_loadingDataset;
    app::LatestJob<ImageAnswer> m_imageJob{this};
    app::LatestJob<app::TestSetPredictions> m_wholeSetJob{this};
    app::LatestJob<std::vector<app::FileAnswer>> m_manyJob{this};
    app::LatestJob<std::vector<engine::LayerActivity>> m_activityJob{this};
    std::shared_ptr<std::atomic<bool>> m_manyCancel;

    QLabel* m_info;
    QComboBox* m_setChoice;
    QGroupBox* m_setBox;
    ImageDropArea* m_image;
    QLabel* m_inputView;
    QLabel* m_caption;
    QPushButton* m_openImage;
    QSpinBox* m_imageIndex;
    QPushButton* m_classifyIndex;
    QPushButton* m_randomImage;
    QCheckBox* m_invert;
    QPushButton* m_layersButton;
    BarChart* m_topChart;
    QPushButton* m_classifyAll;
    QPushButton* m_cancelAll;
    QProgressBar* m_progress;
    QTimer* m_progressTimer;
    QLabel* m_summary;
    QTableView* m_classTable;
    ClassAccuracyModel* m_classModel;
    HeatMap* m_heatMap;
    QLabel* m_cellLabel;
    QPushButton* m_surestMistakes;
    QListView* m_cellView;
    SampleImageModel* m_cellImages;
};

} // namespace towers::ui
