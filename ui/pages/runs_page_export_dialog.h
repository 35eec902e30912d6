#pragma once
// "Export ONNX…" on the Runs page: the choices of `towers-cli export` for one checkpoint: the
// output file (default beside the checkpoint, as the CLI's), the input layout (NHWC or NCHW), the
// ONNX opset (kOnnxMinOpset to the newest the ONNX library knows, the newest by default) and
// whether to export the moving averages of the weights ("Use EMA weights", checked and enabled
// only when the checkpoint holds them; --no-ema unchecked). Replacing an existing file is
// confirmed, by the file dialog or, for a path typed in, by a question on accept.
#include <QDialog>

#include "engine/export/onnx_export.h"

class QCheckBox;
class QComboBox;
class QDialogButtonBox;
class QLabel;
class QLineEdit;
class QSpinBox;

namespace towers::ui {

// Whether `checkpoint` holds moving averages ("ema." tensors), from its safetensors header alone
// (a few kilobytes, whatever the file's size). False when the header cannot be read: the export
// then says what is wrong with the file.
bool checkpointHasEma(const QString& checkpoint);

class ExportOnnxDialog : public QDialog
{
    Q_OBJECT
public:
    ExportOnnxDialog(const QString& checkpoint, bool hasEma, QWidget* parent = nullptr);

    const QString& checkpoint() const { return m_checkpoint; }
    QString output() const;
    // Layout, opset, useEma from the fields; overwrite when the output exists and replacing it
    // was confirmed (by the file dialog, or on accept).
    engine::OnnxExportOptions options() const;

    QLineEdit* outputEdit() const { return m_output; }
    QComboBox* layoutBox() const { return m_layout; }
    QSpinBox* opsetBox() const { return m_opset; }
    QCheckBox* emaBox() const { return m_ema; }

public slots:
    // Asks before replacing an existing file that the file dialog did not already confirm; stays
    // open when the answer is no.
    void accept() override;

private:
    void browse();
    void updateOk();

    QString m_checkpoint;
    QString m_confirmed; // an existing file whose replacement was confirmed
    QLineEdit* m_output;
    QComboBox* m_layout;
    QSpinBox* m_opset;
    QCheckBox* m_ema;
    QDialogButtonBox* m_buttons;
};

} // namespace towers::ui
