#include "ui/pages/model_file_editor.h"

#include <QCoreApplication>
#include <QDialogButtonBox>
#include <QDir>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QFontDatabase>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLocale>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QTextBlock>
#include <QTimer>
#include <QVBoxLayout>

#include <atomic>
#include <thread>

#include "engine/io/output_file.h"
#include "engine/models/model_file.h"
#include "engine/train/recipe.h"

namespace towers::ui {

namespace {

// The file's text, laid out as its author wrote it, when it still describes `from`; else "".
QString fileText(const engine::ModelInfo& from, const QString& path)
{
    if (path.isEmpty()) return {};
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) return {};
    const QString text = QString::fromUtf8(f.readAll());
    // The same JSON as the network's definition (its canonical text: the file's object, keys
    // sorted). Compared as JSON, not read as a network (which makes its layers) on the GUI thread
    // as the window opens.
    const QJsonDocument file = QJsonDocument::fromJson(text.toUtf8());
    const QJsonDocument definition =
        QJsonDocument::fromJson(QByteArray::fromStdString(from.definition));
    if (file.isObject() && definition.isObject() && file.object() == definition.object())
        return text;
    return {};
}

// `from` written as a model file: a built-in model under "my-<name>" with its whole recipe, a
// model file's network under its own name with its own recipe.
QString writtenText(const engine::ModelInfo& from)
{
    const bool builtIn = from.definition.empty();
    const std::string name = builtIn ? engine::modelNameForFile("", from.name) : from.name;
    return QString::fromStdString(engine::modelFileText(
        from, name, builtIn ? engine::modelFileRecipeFields(from) : from.recipeJson));
}

} // namespace

ModelFileEditor::ModelFileEditor(const engine::ModelInfo& from, const QString& path,
                                 QWidget* parent)
    : QDialog(parent), m_text(new QPlainTextEdit(this)), m_status(new QLabel(this)),
      m_checkTimer(new QTimer(this))
{
    setWindowTitle(tr("Edit the network — %1").arg(QString::fromStdString(from.name)));
    auto* layout = new QVBoxLayout(this);
    auto* intro = new QLabel(
        tr("The network as a model file: its layers in order, its augmentation and its recipe "
           "(docs/models.md describes every field). It is checked as you type."),
        this);
    intro->setWordWrap(true);
    layout->addWidget(intro);
    m_text->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    m_text->setLineWrapMode(QPlainTextEdit::NoWrap);
    layout->addWidget(m_text, 1);
    m_status->setWordWrap(true);
    m_status->setTextInteractionFlags(Qt::TextSelectableByMouse);
    layout->addWidget(m_status);

    auto* buttons = new QDialogButtonBox(this);
    m_use = buttons->addButton(tr("Use this network"), QDialogButtonBox::AcceptRole);
    m_use->setToolTip(tr("Choose the edited network for the next run (the run keeps its "
                         "definition: no file is needed)"));
    auto* save = buttons->addButton(tr("Save"), QDialogButtonBox::ActionRole);
    auto* saveAs = buttons->addButton(tr("Save as…"), QDialogButtonBox::ActionRole);
    buttons->addButton(QDialogButtonBox::Cancel);
    layout->addWidget(buttons);
    connect(m_use, &QPushButton::clicked, this, [this] {
        // Enabled once the text, as it is, was checked; clicked before a pause's check: accepted
        // when that check, off the GUI thread, finds the network.
        if (m_network && !m_checkTimer->isActive() && !m_building) {
            accept();
        } else {
            m_acceptWhenChecked = true;
            checkInBackground();
        }
    });
    connect(save, &QPushButton::clicked, this, &ModelFileEditor::save);
    connect(saveAs, &QPushButton::clicked, this, &ModelFileEditor::chooseSaveFile);
    connect(buttons, &QDialogButtonBox::rejected, this, &ModelFileEditor::reject);

    m_checkTimer->setSingleShot(true);
    m_checkTimer->setInterval(300);
    connect(m_checkTimer, &QTimer::timeout, this, &ModelFileEditor::checkInBackground);
    connect(m_text, &QPlainTextEdit::textChanged, m_checkTimer, qOverload<>(&QTimer::start));

    m_link = std::make_shared<Link>();
    m_link->editor = this;
    QString text = fileText(from, path);
    if (!text.isEmpty()) m_path = path;
    if (text.isEmpty()) text = writtenText(from);
    // Checked as typing is: a large network's build would hold the window up as it opens.
    setText(text);
    m_savedText = text;
    resize(820, 640);
}

ModelFileEditor::~ModelFileEditor()
{
    // A build still running answers no one: what it posted already goes with this object.
    const std::lock_guard<std::mutex> lock(m_link->mutex);
    m_link->editor = nullptr;
}

namespace {
std::atomic<int> g_buildsRunning{0};
} // namespace

int ModelFileEditor::buildsRunning()
{
    return g_buildsRunning.load();
}

bool ModelFileEditor::isChecking() const
{
    return m_building || m_checkTimer->isActive();
}

QString ModelFileEditor::text() const
{
    return m_text->toPlainText();
}

void ModelFileEditor::setText(const QString& text)
{
    m_text->setPlainText(text);
    checkInBackground();
}

std::string ModelFileEditor::where() const
{
    return m_path.isEmpty() ? "the network" : m_path.toStdString();
}

ModelFileEditor::Examined ModelFileEditor::examine(const std::string& source,
                                                   const std::string& where)
{
    Examined e;
    try {
        // Reading works the layers' shapes out by making them, building counts their parameters:
        // quick and small even for a huge network, whose parameters take memory only when
        // initialised (Tensor::zeros).
        engine::ModelInfo info = engine::modelFromDefinition(source, where);
        (void)engine::defaultConfigFor(info); // its recipe, as train checks it
        const auto model = engine::buildModel(info);
        e.layers = model->layerTable().size();
        e.parameters = model->parameterCount();
        e.network = std::move(info);
    } catch (const std::exception& x) { // a mistake in the text, or out of memory
        e.error = x.what();
    }
    return e;
}

ModelFileEditor::Checked ModelFileEditor::checked(Examined examined, const std::string& source,
                                                  const std::string& where)
{
    Checked c;
    if (examined.network) {
        c.status = tr("✓ %1: %2 layers, %3 trainable parameters")
                       .arg(QString::fromStdString(examined.network->name))
                       .arg(examined.layers)
                       .arg(QLocale().toString(qint64(examined.parameters)));
        c.network = std::move(examined.network);
    } else {
        c.status = tr("✗ %1").arg(QString::fromStdString(examined.error));
        c.line = engine::mistakeLine(source, where, examined.error);
    }
    return c;
}

void ModelFileEditor::showChecked(Checked checked)
{
    m_network = std::move(checked.network);
    m_status->setText(checked.status);
    m_status->setStyleSheet(m_network ? QString() : QStringLiteral("color: #c62828"));
    markLine(checked.line);
    m_use->setEnabled(bool(m_network));
    if (m_acceptWhenChecked) {
        m_acceptWhenChecked = false;
        if (m_network) accept();
    }
}

void ModelFileEditor::checkInBackground()
{
    m_checkTimer->stop();
    if (m_building) { // one check at a time: the next begins when this one ends
        m_buildAgain = true;
        m_use->setEnabled(false);
        return;
    }
    const quint64 generation = ++m_generation;
    m_network.reset();
    m_status->setText(tr("Checking…"));
    m_status->setStyleSheet(QString());
    markLine(0);
    m_use->setEnabled(false);
    m_building = true;
    // A thread of its own, not the global pool's: the application waits for the pool's work as
    // it quits, and a long text's check takes its time and cannot be stopped. Nothing waits
    // for this thread; its answer reaches the editor only while the editor lives.
    ++g_buildsRunning;
    std::thread([link = m_link, generation, source = text().toStdString(),
                 where = where()]() mutable {
        Examined examined = examine(source, where);
        {
            const std::lock_guard<std::mutex> lock(link->mutex);
            if (ModelFileEditor* editor = link->editor)
                // Queued to the editor's thread: dropped with the editor if it goes first.
                QMetaObject::invokeMethod(
                    editor,
                    [editor, generation, examined = std::move(examined), source = std::move(source),
                     where = std::move(where)]() mutable {
                        editor->m_building = false;
                        if (editor->m_buildAgain) {
                            editor->m_buildAgain = false;
                            editor->checkInBackground();
                        } else if (generation == editor->m_generation) {
                            editor->showChecked(checked(std::move(examined), source, where));
                        }
                    },
                    Qt::QueuedConnection);
        }
        --g_buildsRunning;
    }).detach();
}

void ModelFileEditor::markLine(int line)
{
    m_mistakeLine = line;
    QList<QTextEdit::ExtraSelection> marks;
    const QTextBlock block = m_text->document()->findBlockByNumber(line - 1);
    if (line > 0 && block.isValid()) {
        QTextEdit::ExtraSelection mark;
        mark.cursor = QTextCursor(block);
        mark.format.setBackground(QColor(198, 40, 40, 48)); // the status's red, faint
        mark.format.setProperty(QTextFormat::FullWidthSelection, true);
        marks.append(mark);
    }
    m_text->setExtraSelections(marks);
}

QString ModelFileEditor::status() const
{
    return m_status->text();
}

bool ModelFileEditor::isModified() const
{
    return text() != m_savedText;
}

bool ModelFileEditor::saveAs(const QString& path, QString* error)
{
    const QString text = this->text();
    try {
        engine::writeOutputFile(path.toStdString(), text.toStdString(), true);
    } catch (const std::exception& e) {
        if (error) *error = QString::fromUtf8(e.what());
        return false;
    }
    m_path = m_savedPath = path;
    m_savedText = text;
    // Its mistake names the file now (a network's status names none): checked again, as typing
    // is (a large network's build would hold the window up); a check under way, of the old
    // place, is followed by another.
    if (!m_network) checkInBackground();
    return true;
}

bool ModelFileEditor::openFile(const QString& path, QString* error)
{
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) {
        if (error) *error = tr("%1: %2").arg(path, f.errorString());
        return false;
    }
    const QString text = QString::fromUtf8(f.readAll());
    m_path = path;
    setText(text); // checked, its mistake naming the file
    m_savedText = text;
    return true;
}

void ModelFileEditor::save()
{
    if (m_path.isEmpty()) {
        chooseSaveFile();
        return;
    }
    QString error;
    if (!saveAs(m_path, &error))
        QMessageBox::warning(this, tr("Not saved"),
                             tr("The model file was not saved: %1").arg(error));
}

void ModelFileEditor::chooseSaveFile()
{
    QString start = m_path;
    if (start.isEmpty()) {
        const QString name = m_network ? QString::fromStdString(m_network->name) : tr("my-net");
        start = QDir::home().filePath(name + QStringLiteral(".json"));
    }
    QFileDialog dialog(this, tr("Save the model file"), start, tr("Model files (*.json)"));
    dialog.setAcceptMode(QFileDialog::AcceptSave);
    dialog.setDefaultSuffix(QStringLiteral("json"));
    if (dialog.exec() != QDialog::Accepted || dialog.selectedFiles().isEmpty()) return;
    QString error;
    if (!saveAs(dialog.selectedFiles().first(), &error))
        QMessageBox::warning(this, tr("Not saved"),
                             tr("The model file was not saved: %1").arg(error));
}

void ModelFileEditor::reject()
{
    if (isModified() &&
        QMessageBox::question(this, tr("Drop your edits?"),
                              tr("The network's text has edits that are neither saved nor in "
                                 "use. Drop them?"),
                              QMessageBox::Discard | QMessageBox::Cancel,
                              QMessageBox::Cancel) != QMessageBox::Discard)
        return;
    QDialog::reject();
}

} // namespace towers::ui
