#pragma once
// The main window: a sidebar of pages (Data, Model & hyperparameters, Devices, Train, Runs &
// checkpoints, Classify; Ctrl+1..Ctrl+6 or the arrow keys in the sidebar), an error banner over
// them, and the application log in a dock. It wires the pages together: the chosen dataset, model,
// towers and hyperparameters make the run's configuration (remembered between sessions), a run's
// tower times feed the Devices page, finished runs appear under Runs, a checkpoint opens in
// Classify. Closing the window during a run asks, then stops the run cleanly (its checkpoint is
// written) before closing.
#include <QIcon>
#include <QMainWindow>
#include <QPointer>

#include <functional>
#include <optional>

#include "engine/train/training_session.h"

class QListWidget;
class QPlainTextEdit;
class QStackedWidget;
class QToolButton;

namespace towers::app {
class AppSettings;
}

namespace towers::ui {

class ClassifyPage;
class DataPage;
class DevicesPage;
class ErrorBanner;
class LrFinderDialog;
class ModelPage;
class RunsPage;
class TrainPage;

class MainWindow : public QMainWindow
{
    Q_OBJECT
public:
    enum Page
    {
        Data,
        Model,
        Devices,
        Train,
        Runs,
        Classify,
        PageCount
    };

    explicit MainWindow(app::AppSettings& settings, QWidget* parent = nullptr);
    ~MainWindow() override;

    void showPage(int page);
    int currentPage() const;
    QWidget* page(int page) const;
    static QString pageTitle(int page);
    // The application's icon: the desktop theme's (installed by the package under the app id),
    // else the SVG built into the program.
    static QIcon applicationIcon();

    DataPage* dataPage() const { return m_data; }
    ModelPage* modelPage() const { return m_model; }
    DevicesPage* devicesPage() const { return m_devices; }
    TrainPage* trainPage() const { return m_train; }
    RunsPage* runsPage() const { return m_runs; }
    ClassifyPage* classifyPage() const { return m_classify; }
    ErrorBanner* banner() const { return m_banner; }
    QPlainTextEdit* log() const { return m_log; }
    QToolButton* logButton() const { return m_logButton; }

    // The configuration of a new run from the pages, or why there is none (`error`).
    std::optional<engine::SessionOptions> newRunOptions(QString* error) const;
    // The options that continue the run in `folder` from its newest good checkpoint.
    std::optional<engine::SessionOptions> resumeOptions(const QString& folder,
                                                        QString* error) const;
    // Closing during a run asks first; tests and the screenshot tour answer for the user.
    void setCloseQuestionAnswer(std::optional<bool> stopAndClose) { m_closeAnswer = stopAndClose; }
    // Resuming a run none of whose checkpoints loads asks whether to start it over (its files set
    // aside); tests answer for the user. The number of times it was asked.
    void setRestartQuestionAnswer(std::optional<bool> startOver) { m_restartAnswer = startOver; }
    int restartQuestionsAsked() const { return m_restartQuestions; }

public slots:
    // Shows `message` in the banner and appends it to the log.
    void showError(const QString& message);
    // Says that the settings are not being saved (`error`: AppSettings::saveError()'s), in the
    // banner and the log: at start (towers_main) and when a later write fails.
    void sayUnsavedSettings(const QString& error);
    void appendLog(const QString& line);
    void resumeRun(const QString& folder);
    void classifyWith(const QString& checkpoint);
    // The Model page set for a new run from `checkpoint`'s weights, with its run's `model`.
    void fineTuneFrom(const QString& checkpoint, const QString& model);
    // The pages set for a new run like the one in `folder` (DIGITS' "Clone job";
    // app::likeRunConfig): its dataset and data folder, model, hyperparameters and towers, shown
    // on the Model & hyperparameters page to change and start. False, with the reason in the
    // banner, when its configuration cannot be read.
    bool newRunLike(const QString& folder);
    // "Find…" beside the learning rate: the range test with the pages' configuration on the
    // loaded dataset, in a window of its own (nullptr, with the reason in the banner, while a run
    // trains or before a dataset is loaded); its suggestion, used, goes into the form.
    LrFinderDialog* findLearningRate();
    // Closes without asking, as SIGTERM or Ctrl-C in the terminal ask for: a training run stops
    // after its current step and writes its checkpoint first. `why` goes to the log.
    void closeWithoutAsking(const QString& why);

protected:
    void closeEvent(QCloseEvent* event) override;

private:
    // The model `dataset` trains with by default: the table's, or an imported one's found along
    // the Data page's search path (engine::defaultModelFor). Throws as it does.
    std::string defaultModelOf(const std::string& dataset) const;
    // The run configuration the pages show: the hyperparameters, the model, the dataset and the
    // Devices page's options (not the GPUs, nor the data folder).
    engine::TrainConfig pagesConfig() const;
    void buildPages();
    void connectPages();
    void restoreConfig();
    // The Model and Devices pages set to `c` (not the dataset, nor the GPUs).
    void applyConfig(const engine::TrainConfig& c);
    void onModelChosen(const QString& model, bool keepHyperparameters);
    void onDatasetLoaded();
    void configChanged();

    app::AppSettings& m_settings;
    ErrorBanner* m_banner;
    QListWidget* m_sidebar;
    QStackedWidget* m_stack;
    QPlainTextEdit* m_log;
    QToolButton* m_logButton; // shows or hides the log's dock
    DataPage* m_data = nullptr;
    ModelPage* m_model = nullptr;
    DevicesPage* m_devices = nullptr;
    TrainPage* m_train = nullptr;
    RunsPage* m_runs = nullptr;
    ClassifyPage* m_classify = nullptr;
    // The learning-rate range test's window while it is open: one at a time, and no run starts
    // while its test trains (they would share the cores).
    QPointer<LrFinderDialog> m_lrFinder;
    std::function<bool()> m_lrTestRunning; // the last test's, which outlives its window
    QString lrTestBusy() const;
    bool m_restoring = false;
    // First start (no saved configuration): the model is the default of the first dataset that
    // loads, whichever the Data page finds, until the user or a run chooses one.
    bool m_modelFromFirstDataset = false;
    std::string m_firstConfigJson; // the Model page's configuration then
    bool m_choosingModel = false;  // the window sets the model, not the user
    bool m_closeAfterStop = false;
    std::optional<bool> m_closeAnswer;
    std::optional<bool> m_restartAnswer;
    int m_restartQuestions = 0;
};

} // namespace towers::ui
