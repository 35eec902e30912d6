#include "ui/pages/classify_many_dialog.h"

#include <QDialogButtonBox>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLocale>
#include <QPixmap>
#include <QProgressBar>
#include <QPushButton>
#include <QTableWidget>
#include <QTimer>
#include <QVBoxLayout>

#include <algorithm>
#include <map>

#include "engine/io/output_file.h"

namespace towers::ui {

namespace {

enum Column
{
    Image,
    File,
    Class,
    Probability,
    RunnerUp,
    ColumnCount
};

constexpr int kThumb = 40;
constexpr int kFileRole = Qt::UserRole + 1; // on the File column: the path, for a double-click
constexpr int kSortRole = Qt::UserRole + 2; // what a column sorts by, where not its text

// An item that sorts by kSortRole when it has one (probabilities as numbers).
class SortedItem : public QTableWidgetItem
{
public:
    using QTableWidgetItem::QTableWidgetItem;
    bool operator<(const QTableWidgetItem& other) const override
    {
        const QVariant a = data(kSortRole), b = other.data(kSortRole);
        if (a.isValid() && b.isValid()) return a.toDouble() < b.toDouble();
        if (a.isValid() != b.isValid()) return b.isValid(); // unreadable files first
        return QTableWidgetItem::operator<(other);
    }
};

} // namespace

ClassifyManyDialog::ClassifyManyDialog(std::vector<std::string> classNames, int k, QWidget* parent)
    : QDialog(parent), m_classNames(std::move(classNames)), m_k(k)
{
    setWindowTitle(tr("Classify many"));
    auto* top = new QVBoxLayout(this);
    auto* progressRow = new QHBoxLayout;
    m_summary = new QLabel(tr("Reading the images…"), this);
    m_summary->setWordWrap(true);
    m_summary->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_progress = new QProgressBar(this);
    m_cancel = new QPushButton(tr("Cancel"), this);
    progressRow->addWidget(m_progress, 1);
    progressRow->addWidget(m_cancel);
    top->addWidget(m_summary);
    top->addLayout(progressRow);
    m_table = new QTableWidget(0, ColumnCount, this);
    m_table->setHorizontalHeaderLabels(
        {tr("Image"), tr("File"), tr("Class"), tr("Probability"), tr("Runner-up")});
    m_table->verticalHeader()->hide();
    m_table->verticalHeader()->setDefaultSectionSize(kThumb + 4);
    m_table->setIconSize(QSize(kThumb, kThumb));
    m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_table->setTextElideMode(Qt::ElideMiddle);
    m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    m_table->horizontalHeader()->setSectionResizeMode(Class, QHeaderView::Stretch);
    m_table->setToolTip(tr("Click a column's header to sort by it (the least probable first, "
                           "say); double-click a row to show the image on the Classify page"));
    top->addWidget(m_table, 1);
    m_saveNote = new QLabel(this); // where the answers were saved, or why not
    m_saveNote->setWordWrap(true);
    m_saveNote->setTextFormat(Qt::PlainText);
    m_saveNote->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_saveNote->hide();
    top->addWidget(m_saveNote);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, this);
    m_save = buttons->addButton(tr("&Save CSV…"), QDialogButtonBox::ActionRole);
    m_save->setEnabled(false);
    top->addWidget(buttons);

    connect(m_cancel, &QPushButton::clicked, this, [this] {
        m_cancel->setEnabled(false);
        emit cancelRequested();
    });
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::close);
    connect(m_save, &QPushButton::clicked, this, [this] {
        // Beside the images (the working folder meant nothing to a window's user).
        const QString folder =
            m_answers.empty() ? QDir::homePath() : QFileInfo(m_answers.front().file).absolutePath();
        const QString path = QFileDialog::getSaveFileName(
            this, tr("Save the answers"), QDir(folder).filePath(QStringLiteral("classified.csv")),
            tr("CSV files (*.csv);;All files (*)"));
        if (path.isEmpty()) return;
        QString error;
        // Said under the table: the summary of the answers stays.
        m_saveNote->setText(saveCsv(path, &error) ? tr("Saved to %1").arg(path)
                                                  : QStringLiteral("⚠ ") + error);
        m_saveNote->show();
    });
    connect(m_table, &QTableWidget::cellDoubleClicked, this, [this](int row) {
        const QTableWidgetItem* file = m_table->item(row, File);
        const QTableWidgetItem* probability = m_table->item(row, Probability);
        if (file && probability && probability->data(kSortRole).isValid())
            emit imageChosen(file->data(kFileRole).toString());
    });
    m_poll = new QTimer(this);
    m_poll->setInterval(100);
    resize(820, 560);
}

void ClassifyManyDialog::watchProgress(std::shared_ptr<std::atomic<int>> done, int total)
{
    setProgress(0, total);
    connect(m_poll, &QTimer::timeout, this, [this, done, total] {
        if (!m_finished) setProgress(done->load(), total);
    });
    m_poll->start();
}

void ClassifyManyDialog::setProgress(int done, int total)
{
    m_progress->setRange(0, std::max(total, 1));
    m_progress->setValue(done);
    m_summary->setText(tr("Reading and classifying %1 of %2 images…")
                           .arg(QLocale().toString(done), QLocale().toString(total)));
}

void ClassifyManyDialog::setAnswers(std::vector<app::FileAnswer> answers, bool cancelled)
{
    m_answers = std::move(answers);
    m_finished = true;
    m_poll->stop();
    m_progress->hide();
    m_cancel->hide();
    m_save->setEnabled(!m_answers.empty());
    const QLocale locale;
    const auto className = [this](int label) {
        return std::size_t(label) < m_classNames.size()
                   ? QString::fromStdString(m_classNames[std::size_t(label)])
                   : QString::number(label);
    };
    m_table->setSortingEnabled(false); // rows stay where they are put while filling
    m_table->setRowCount(int(m_answers.size()));
    std::map<QString, int> counts;
    int failed = 0;
    for (int r = 0; r < int(m_answers.size()); ++r) {
        const app::FileAnswer& a = m_answers[std::size_t(r)];
        auto* image = new SortedItem;
        if (!a.input.isNull())
            image->setIcon(QPixmap::fromImage(
                a.input.scaled(kThumb, kThumb, Qt::KeepAspectRatio, Qt::FastTransformation)));
        auto* file = new SortedItem(QFileInfo(a.file).fileName());
        file->setToolTip(a.file);
        file->setData(kFileRole, a.file);
        m_table->setItem(r, Image, image);
        m_table->setItem(r, File, file);
        if (!a.error.isEmpty()) {
            ++failed;
            // The row names the file: the reason alone, the whole message as the tooltip.
            QString reason = a.error;
            if (reason.startsWith(a.file + QStringLiteral(": ")))
                reason = reason.mid(a.file.size() + 2);
            auto* why = new SortedItem(QStringLiteral("⚠ ") + reason);
            why->setToolTip(a.error);
            m_table->setItem(r, Class, why);
            m_table->setItem(r, Probability, new SortedItem);
            m_table->setItem(r, RunnerUp, new SortedItem);
            continue;
        }
        const auto& best = a.top.front();
        ++counts[className(best.label)];
        m_table->setItem(r, Class, new SortedItem(className(best.label)));
        auto* p =
            new SortedItem(locale.toString(100 * best.probability, 'f', 1) + QStringLiteral(" %"));
        p->setData(kSortRole, best.probability);
        p->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
        m_table->setItem(r, Probability, p);
        if (a.top.size() > 1)
            m_table->setItem(r, RunnerUp,
                             new QTableWidgetItem(
                                 QStringLiteral("%1 (%2 %)")
                                     .arg(className(a.top[1].label),
                                          locale.toString(100 * a.top[1].probability, 'f', 1))));
    }
    // In the files' order until a header is clicked.
    m_table->horizontalHeader()->setSortIndicator(-1, Qt::AscendingOrder);
    m_table->setSortingEnabled(true);
    // "12 images classified: Shirt (5), Coat (3), …; 1 could not be read."
    std::vector<std::pair<QString, int>> byCount(counts.begin(), counts.end());
    std::stable_sort(byCount.begin(), byCount.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
    QStringList parts;
    for (const auto& [name, n] : byCount) parts << QStringLiteral("%1 (%2)").arg(name).arg(n);
    const int classified = int(m_answers.size()) - failed;
    QString text = tr("%n image(s) classified", nullptr, classified);
    if (!parts.isEmpty()) text += QStringLiteral(": ") + parts.join(QStringLiteral(", "));
    if (failed) text += tr("; %1 could not be read").arg(failed);
    if (cancelled) text += tr("; cancelled before the rest");
    m_summary->setText(text + QLatin1Char('.'));
}

QString ClassifyManyDialog::summaryText() const
{
    return m_summary->text();
}

bool ClassifyManyDialog::saveCsv(const QString& path, QString* error)
{
    // Replacing what the file dialog confirmed, but never a checkpoint or a run's own record.
    try {
        engine::writeOutputFile(path.toStdString(),
                                app::answersCsv(m_answers, m_classNames, m_k).toStdString(),
                                /*overwrite=*/true);
        return true;
    } catch (const std::exception& e) {
        if (error) *error = tr("Not saved: %1").arg(QString::fromUtf8(e.what()));
        return false;
    }
}

} // namespace towers::ui
