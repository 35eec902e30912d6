#include "ui/pages/runs_page_export_dialog.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QPushButton>
#include <QSpinBox>
#include <QtEndian>

namespace towers::ui {

bool checkpointHasEma(const QString& checkpoint)
{
    QFile f(checkpoint);
    if (!f.open(QIODevice::ReadOnly)) return false;
    const QByteArray size = f.read(8);
    if (size.size() != 8) return false;
    const quint64 n = qFromLittleEndian<quint64>(size.constData());
    constexpr quint64 kMaxHeader = 64ull << 20;
    if (n == 0 || n > kMaxHeader || n > quint64(f.size()) - 8) return false;
    const QJsonObject header = QJsonDocument::fromJson(f.read(qint64(n))).object();
    for (auto it = header.begin(); it != header.end(); ++it)
        if (it.key().startsWith(QLatin1String("ema."))) return true;
    return false;
}

ExportOnnxDialog::ExportOnnxDialog(const QString& checkpoint, bool hasEma, QWidget* parent)
    : QDialog(parent), m_checkpoint(checkpoint)
{
    setWindowTitle(tr("Export ONNX"));
    auto* form = new QFormLayout;
    auto* source = new QLabel(QFileInfo(checkpoint).fileName(), this);
    source->setToolTip(checkpoint);
    source->setTextInteractionFlags(Qt::TextSelectableByMouse);
    form->addRow(tr("Checkpoint:"), source);

    m_output = new QLineEdit(
        QString::fromStdString(engine::defaultOnnxPath(checkpoint.toStdString()).string()), this);
    m_output->setMinimumWidth(420);
    auto* browseButton = new QPushButton(tr("&Browse…"), this);
    auto* outputRow = new QHBoxLayout;
    outputRow->addWidget(m_output, 1);
    outputRow->addWidget(browseButton);
    auto* outputLabel = new QLabel(tr("&Output file:"), this);
    outputLabel->setBuddy(m_output);
    form->addRow(outputLabel, outputRow);

    m_layout = new QComboBox(this);
    m_layout->addItem(tr("NHWC: [batch, H, W, C], as Towers feeds the model"),
                      int(engine::OnnxLayout::Nhwc));
    m_layout->addItem(tr("NCHW: [batch, C, H, W]"), int(engine::OnnxLayout::Nchw));
    m_layout->setToolTip(tr("The layout of the file's input, preprocessed float32 images "
                            "(towers-cli export --layout)"));
    auto* layoutLabel = new QLabel(tr("Input &layout:"), this);
    layoutLabel->setBuddy(m_layout);
    form->addRow(layoutLabel, m_layout);

    m_opset = new QSpinBox(this);
    m_opset->setRange(engine::kOnnxMinOpset, engine::onnxMaxOpset());
    m_opset->setValue(engine::onnxDefaultOpset());
    m_opset->setToolTip(tr("The ONNX operator set the file is written for, %1 to %2 (the newest "
                           "this build's ONNX library knows, the default); an older one for older "
                           "runtimes (towers-cli export --opset)")
                            .arg(engine::kOnnxMinOpset)
                            .arg(engine::onnxMaxOpset()));
    auto* opsetLabel = new QLabel(tr("O&pset:"), this);
    opsetLabel->setBuddy(m_opset);
    auto* opsetRow = new QHBoxLayout;
    opsetRow->addWidget(m_opset);
    opsetRow->addWidget(new QLabel(tr("%1 to %2 (the newest this build's ONNX library knows)")
                                       .arg(engine::kOnnxMinOpset)
                                       .arg(engine::onnxMaxOpset()),
                                   this),
                        1);
    form->addRow(opsetLabel, opsetRow);

    m_ema = new QCheckBox(tr("Use &EMA weights"), this);
    m_ema->setChecked(hasEma);
    m_ema->setEnabled(hasEma);
    m_ema->setToolTip(
        hasEma ? tr("Export the moving averages of the weights, as classify and evaluation use "
                    "them; unchecked: the raw weights (towers-cli export --no-ema)")
               : tr("This checkpoint holds no moving averages (its run had no EMA): the raw "
                    "weights are exported"));
    if (!hasEma) m_ema->setText(tr("Use &EMA weights (this checkpoint has none)"));
    form->addRow(QString(), m_ema);

    m_buttons = new QDialogButtonBox(QDialogButtonBox::Cancel, this);
    m_buttons->addButton(tr("E&xport"), QDialogButtonBox::AcceptRole);
    auto* top = new QVBoxLayout(this);
    top->addLayout(form);
    top->addWidget(m_buttons);

    connect(browseButton, &QPushButton::clicked, this, &ExportOnnxDialog::browse);
    connect(m_output, &QLineEdit::textChanged, this, &ExportOnnxDialog::updateOk);
    connect(m_buttons, &QDialogButtonBox::accepted, this, &ExportOnnxDialog::accept);
    connect(m_buttons, &QDialogButtonBox::rejected, this, &ExportOnnxDialog::reject);
    updateOk();
}

QString ExportOnnxDialog::output() const
{
    return m_output->text().trimmed();
}

engine::OnnxExportOptions ExportOnnxDialog::options() const
{
    engine::OnnxExportOptions o;
    o.layout = engine::OnnxLayout(m_layout->currentData().toInt());
    o.opset = m_opset->value();
    o.useEma = m_ema->isEnabled() && m_ema->isChecked();
    o.overwrite = !output().isEmpty() && output() == m_confirmed;
    return o;
}

void ExportOnnxDialog::browse()
{
    // The file dialog asks before choosing an existing file.
    const QString chosen =
        QFileDialog::getSaveFileName(this, tr("Export ONNX"), output(), tr("ONNX models (*.onnx)"));
    if (chosen.isEmpty()) return;
    m_output->setText(chosen);
    m_confirmed = QFileInfo::exists(chosen) ? chosen : QString();
}

void ExportOnnxDialog::updateOk()
{
    for (QAbstractButton* b : m_buttons->buttons())
        if (m_buttons->buttonRole(b) == QDialogButtonBox::AcceptRole)
            b->setEnabled(!output().isEmpty());
}

void ExportOnnxDialog::accept()
{
    const QString file = output();
    if (file.isEmpty()) return;
    if (QFileInfo::exists(file) && file != m_confirmed) {
        const auto answer = QMessageBox::question(
            this, tr("Export ONNX"), tr("%1 already exists. Replace it?").arg(file),
            QMessageBox::Yes | QMessageBox::No, QMessageBox::No);
        if (answer != QMessageBox::Yes) return;
        m_confirmed = file;
    }
    QDialog::accept();
}

} // namespace towers::ui
