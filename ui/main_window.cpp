#include "ui/main_window.h"

#include <QAction>
#include <QCloseEvent>
#include <QDateTime>
#include <QDockWidget>
#include <QHBoxLayout>
#include <QListWidget>
#include <QPlainTextEdit>
#include <QStackedWidget>
#include <QStyle>
#include <QVBoxLayout>

#include "app/settings/app_settings.h"
#include "ui/pages/data_page.h"
#include "ui/pages/devices_page.h"
#include "ui/pages/model_page.h"
#include "ui/widgets/error_banner.h"

namespace towers::ui {

MainWindow::MainWindow(app::AppSettings& settings, QWidget* parent)
    : QMainWindow(parent), m_settings(settings), m_banner(new ErrorBanner(this)), m_sidebar(new QListWidget(this)),
      m_stack(new QStackedWidget(this)), m_log(new QPlainTextEdit(this))
{
    setWindowTitle(tr("Towers"));
    auto* central = new QWidget(this);
    auto* outer = new QVBoxLayout(central);
    outer->setContentsMargins(6, 6, 6, 6);
    outer->addWidget(m_banner);
    auto* row = new QHBoxLayout;
    m_sidebar->setFocusPolicy(Qt::StrongFocus);
    m_sidebar->setIconSize(QSize(20, 20));
    m_sidebar->setSpacing(2);
    row->addWidget(m_sidebar);
    row->addWidget(m_stack, 1);
    outer->addLayout(row, 1);
    setCentralWidget(central);

    m_log->setReadOnly(true);
    m_log->setMaximumBlockCount(5000);
    m_log->setLineWrapMode(QPlainTextEdit::NoWrap);
    auto* dock = new QDockWidget(tr("Log"), this);
    dock->setObjectName(QStringLiteral("logDock"));
    dock->setWidget(m_log);
    dock->setFeatures(QDockWidget::DockWidgetMovable | QDockWidget::DockWidgetClosable);
    addDockWidget(Qt::BottomDockWidgetArea, dock);
    resizeDocks({dock}, {110}, Qt::Vertical);

    buildPages();

    connect(m_sidebar, &QListWidget::currentRowChanged, m_stack, &QStackedWidget::setCurrentIndex);
    connect(m_sidebar, &QListWidget::currentRowChanged, this, [this](int p) { m_settings.setLastPage(p); });
    for (int p = 0; p < PageCount; ++p) {
        auto* action = new QAction(this);
        action->setShortcut(QKeySequence(Qt::CTRL | Qt::Key(Qt::Key_1 + p)));
        connect(action, &QAction::triggered, this, [this, p] { showPage(p); });
        addAction(action);
    }
    const int width = m_sidebar->sizeHintForColumn(0) + 2 * m_sidebar->frameWidth() + 16;
    m_sidebar->setFixedWidth(std::max(width, 150));

    if (!restoreGeometry(m_settings.windowGeometry())) resize(1280, 800);
    showPage(std::clamp(m_settings.lastPage(), 0, PageCount - 1));
    appendLog(tr("Towers %1 started").arg(QStringLiteral(TOWERS_VERSION)));
}

MainWindow::~MainWindow() = default;

QString MainWindow::pageTitle(int page)
{
    switch (page) {
    case Data: return tr("Data");
    case Model: return tr("Model && hyperparameters");
    case Devices: return tr("Devices");
    default: return {};
    }
}

void MainWindow::buildPages()
{
    m_data = new DataPage(m_settings, m_stack);
    m_model = new ModelPage(m_stack);
    m_devices = new DevicesPage(m_stack);
    const QStyle::StandardPixmap icons[] = {QStyle::SP_DirOpenIcon, QStyle::SP_FileDialogDetailedView,
                                            QStyle::SP_ComputerIcon};
    QWidget* pages[] = {m_data, m_model, m_devices};
    for (int p = 0; p < PageCount; ++p) {
        m_stack->addWidget(pages[p]);
        auto* item = new QListWidgetItem(style()->standardIcon(icons[p]), pageTitle(p).replace(QStringLiteral("&&"), QStringLiteral("&")));
        item->setToolTip(tr("%1 (Ctrl+%2)").arg(item->text()).arg(p + 1));
        m_sidebar->addItem(item);
    }

    connect(m_data, &DataPage::errorOccurred, this, &MainWindow::showError);
    connect(m_data, &DataPage::logMessage, this, &MainWindow::appendLog);
}

void MainWindow::showPage(int page)
{
    if (page < 0 || page >= PageCount) return;
    m_sidebar->setCurrentRow(page);
    m_stack->setCurrentIndex(page);
}

int MainWindow::currentPage() const { return m_stack->currentIndex(); }

QWidget* MainWindow::page(int page) const { return m_stack->widget(page); }

void MainWindow::showError(const QString& message)
{
    m_banner->showMessage(message);
    appendLog(tr("error: %1").arg(message));
}

void MainWindow::appendLog(const QString& line)
{
    m_log->appendPlainText(QStringLiteral("%1  %2").arg(QTime::currentTime().toString(QStringLiteral("HH:mm:ss")), line));
}

void MainWindow::closeEvent(QCloseEvent* event)
{
    m_settings.setWindowGeometry(saveGeometry());
    m_settings.sync();
    event->accept();
}

} // namespace towers::ui
