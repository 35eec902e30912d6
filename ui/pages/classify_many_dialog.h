#pragma once
// The Classify page's "Classify many" window, NVIDIA DIGITS' "Classify Many": every image of a
// batch of files with its thumbnail (what the model saw), its most probable class and
// probability and the runner-up; a file that could not be read says why in its row. A summary
// counts the classes; "Save CSV…" writes the table (app::answersCsv); double-clicking a row shows
// that image on the page, where Layers… looks inside. Progress and Cancel while the files are read.
#include <QDialog>

#include <atomic>
#include <memory>
#include <vector>

#include "app/inference/classify_files.h"

class QLabel;
class QProgressBar;
class QPushButton;
class QTableWidget;
class QTimer;

namespace towers::ui {

class ClassifyManyDialog : public QDialog
{
    Q_OBJECT
public:
    // `classNames` by label; `k`: how many classes each answer holds (the CSV's columns).
    ClassifyManyDialog(std::vector<std::string> classNames, int k, QWidget* parent = nullptr);

    void setProgress(int done, int total);
    // Shows `done` of `total` a few times a second until setAnswers() (the job's counter).
    void watchProgress(std::shared_ptr<std::atomic<int>> done, int total);
    // The answers (the job finished, or was cancelled with these done).
    void setAnswers(std::vector<app::FileAnswer> answers, bool cancelled);
    const std::vector<app::FileAnswer>& answers() const { return m_answers; }
    QTableWidget* table() const { return m_table; }
    QString summaryText() const;
    bool isRunning() const { return !m_finished; }
    // Writes the table as CSV to `path`; false with `error` set when it cannot.
    bool saveCsv(const QString& path, QString* error = nullptr);

signals:
    void cancelRequested();
    // A row was double-clicked: show that file on the page.
    void imageChosen(const QString& path);

private:
    std::vector<std::string> m_classNames;
    int m_k;
    bool m_finished = false;
    std::vector<app::FileAnswer> m_answers;
    QLabel* m_summary;
    QLabel* m_saveNote;
    QProgressBar* m_progress;
    QPushButton* m_cancel;
    QPushButton* m_save;
    QTableWidget* m_table;
    QTimer* m_poll;
};

} // namespace towers::ui
