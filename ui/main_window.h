#pragma once
// The main window: a sidebar of pages (Data, Model & hyperparameters, Devices, Train, Runs &
// checkpoints, Classify; Ctrl+1..Ctrl+6 or the arrow keys in the sidebar), an error banner over
// them, and the application log in a dock. It wires the pages together (the chosen dataset and
// model feed the run configuration, a run's checkpoint feeds Classify) and remembers the window
// and the last page.
#include <QMainWindow>

class QListWidget;
class QPlainTextEdit;
class QStackedWidget;

namespace towers::app {
class AppSettings;
}

namespace towers::ui {

class DataPage;
class DevicesPage;
class ErrorBanner;
class ModelPage;

class MainWindow : public QMainWindow
{
    Q_OBJECT
public:
    enum Page { Data, Model, Devices, PageCount };

    explicit MainWindow(app::AppSettings& settings, QWidget* parent = nullptr);
    ~MainWindow() override;

    void showPage(int page);
    int currentPage() const;
    QWidget* page(int page) const;
    static QString pageTitle(int page);

    DataPage* dataPage() const { return m_data; }
    ModelPage* modelPage() const { return m_model; }
    DevicesPage* devicesPage() const { return m_devices; }
    ErrorBanner* banner() const { return m_banner; }
    QPlainTextEdit* log() const { return m_log; }

public slots:
    // Shows `message` in the banner and appends it to the log.
    void showError(const QString& message);
    void appendLog(const QString& line);

protected:
    void closeEvent(QCloseEvent* event) override;

private:
    void buildPages();

    app::AppSettings& m_settings;
    ErrorBanner* m_banner;
    QListWidget* m_sidebar;
    QStackedWidget* m_stack;
    QPlainTextEdit* m_log;
    DataPage* m_data = nullptr;
    ModelPage* m_model = nullptr;
    DevicesPage* m_devices = nullptr;
};

} // namespace towers::ui
