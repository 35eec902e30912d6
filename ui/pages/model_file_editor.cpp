#include "ui/pages/model_file_editor.h"

#include <QCoreApplication>
#include <QDialogButtonBox>
#include <QDir>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QFontDatabase>
#include <QLabel>
#include <QLocale>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QPointer>
#include <QPushButton>
#include <QTextBlock>
#include <QThreadPool>
#include <QTimer>
#include <QVBoxLayout>

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
    try {
        if (engine::canonicalModelDefinition(text.toStdString(), path.toStdString()) ==
            from.definition)
            return text;
    } catch (const std::exception&) {
    }
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

    QString text = fileText(from, path);
    if (!text.isEmpty()) m_path = path;
    if (text.isEmpty()) text = writtenText(from);
    setText(text);
    m_savedText = text;
    resize(820, 640);
}

QString ModelFileEditor::text() const
{
    return m_text->toPlainText();
}

void ModelFileEditor::setText(const QString& text)
{
    m_text->setPlainText(text);
    check();
}

std::string ModelFileEditor::where() const
{
    return m_path.isEmpty() ? "the network" : m_path.toStdString();
}

ModelFileEditor::Checked ModelFileEditor::read(const std::string& source, const std::string& where)
{
    Checked c;
    try {
        engine::ModelInfo info = engine::modelFromDefinition(source, where);
        (void)engine::defaultConfigFor(info); // its recipe, as train checks it
        c.network = std::move(info);
    } catch (const std::exception& e) {
        c.status = tr("✗ %1").arg(QString::fromUtf8(e.what()));
        c.line = engine::mistakeLine(source, where, e.what());
    }
    return c;
}

ModelFileEditor::Checked ModelFileEditor::counted(engine::ModelInfo info, const std::string& source,
                                                  const std::string& where)
{
    Checked c;
    try {
        const auto model = engine::buildModel(info);
        c.status = tr("✓ %1: %2 layers, %3 trainable parameters")
                       .arg(QString::fromStdString(info.name))
                       .arg(model->layerTable().size())
                       .arg(QLocale().toString(qint64(model->parameterCount())));
        c.network = std::move(info);
    } catch (const std::exception& e) { // out of memory, say
        c.status = tr("✗ %1").arg(QString::fromUtf8(e.what()));
        c.line = engine::mistakeLine(source, where, e.what());
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

bool ModelFileEditor::check()
{
    m_checkTimer->stop();
    ++m_generation;       // a background build under way answers too late
    m_buildAgain = false; // and need not build again: this answer is the text's
    const std::string source = text().toStdString();
    Checked c = read(source, where());
    if (c.network) c = counted(std::move(*c.network), source, where());
    showChecked(std::move(c));
    return bool(m_network);
}

void ModelFileEditor::checkInBackground()
{
    m_checkTimer->stop();
    if (m_building) { // one build at a time: the next begins when this one ends
        m_buildAgain = true;
        m_use->setEnabled(false);
        return;
    }
    const quint64 generation = ++m_generation;
    const std::string source = text().toStdString();
    Checked c = read(source, where());
    if (!c.network) {
        showChecked(std::move(c));
        return;
    }
    m_network.reset();
    m_status->setText(tr("Checking…"));
    m_status->setStyleSheet(QString());
    markLine(0);
    m_use->setEnabled(false);
    m_building = true;
    QPointer<ModelFileEditor> self(this);
    QThreadPool::globalInstance()->start(
        [self, generation, info = std::move(*c.network), source, where = where()]() mutable {
            Checked done = counted(std::move(info), source, where);
            // Back on the GUI thread (through the application: the window may be gone by then).
            QMetaObject::invokeMethod(qApp, [self, generation, done = std::move(done)]() mutable {
                if (!self) return;
                self->m_building = false;
                if (self->m_buildAgain) {
                    self->m_buildAgain = false;
                    self->checkInBackground();
                } else if (generation == self->m_generation) {
                    self->showChecked(std::move(done));
                }
            });
        });
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
    m_path = path;
    m_savedText = text;
    if (!m_network) check(); // its mistake names the file now (a network's status names none)
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
