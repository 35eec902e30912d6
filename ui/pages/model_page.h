#pragma once
// The Model & hyperparameters page: the model picker (the built-in models, and networks of the
// user's own opened from model files, or saved as one from a built-in model to start from) with
// its layer table (layer, output shape, parameters) and total parameter count, beside the run's
// hyperparameters.
#include <QHash>
#include <QWidget>

#include <memory>
#include <optional>

#include "engine/train/memory_need.h"

class QComboBox;
class QPushButton;
class QLabel;
class QScrollArea;
class QTableView;

namespace towers::engine {
struct ModelInfo;
}

namespace towers::ui {

class HyperparameterForm;
class LayerTableModel;
class ModelFileEditor;

class ModelPage : public QWidget
{
    Q_OBJECT
public:
    explicit ModelPage(QWidget* parent = nullptr);
    ~ModelPage() override;

    // The chosen model: a built-in one, or a model file's network (engine::ModelInfo::definition
    // set), which a run's configuration carries.
    const engine::ModelInfo& model() const;
    QString modelName() const;
    // Chooses a built-in model, or a model file's network listed already, by name (nothing for a
    // name not listed).
    void setModelName(const QString& name);
    // Chooses `info`; a model file's network is listed as "<name> (model file)", in place of an
    // earlier one of its name.
    void setModel(const engine::ModelInfo& info);
    // Reads a model file (engine::readModelFile, its recipe checked too) and chooses its network;
    // false with `error` saying why not (the file, the layer and the field).
    bool openModelFile(const QString& path, QString* error);
    // Writes the chosen model as the model file `path` (engine::saveModelFile: its layers,
    // augmentation and recipe, the network named after the file unless that is a built-in
    // model's name: engine::modelNameForFile), replacing an existing file (the save dialog has
    // asked), and chooses the saved network, so that the user's edits start from it; false with
    // `error` saying why not, the choice unchanged.
    bool saveModelFile(const QString& path, QString* error);
    // Chooses the network an editor (the Edit… window) has checked, and remembers the editor's
    // file for it when the file holds that text; nothing while its text has a mistake.
    void useEdited(const ModelFileEditor& editor);
    // An editor of the chosen network cancelled ("do not use it"): the network stays, but a file
    // the editor saved is said in the log, and the next Edit… of this network opens that file
    // (its text and path) rather than the network's text, so that the saved work is not lost
    // from sight.
    void editorCancelled(const ModelFileEditor& editor);
    // The model file the chosen network was opened from or saved to ("" for none, or when it
    // came from elsewhere: a checkpoint, an edit not saved).
    QString modelFilePath() const;
    LayerTableModel* layerModel() const { return m_layers; }
    // Trainable parameters of the chosen model (the layer table's total).
    qint64 totalParameters() const;
    HyperparameterForm* form() const { return m_form; }
    // The classes the model is built with: the loaded dataset's (0: the model's default). The
    // layer table, parameter count and description follow.
    void setClasses(int classes);
    int classes() const { return m_classes; }
    // Whether the towers are GPUs (the Devices page's choice): the memory row then says that the
    // host's memory is not what bounds them.
    void setGpuTowers(bool gpus);
    // The memory row's text ("at least 1.2 GiB for 2 towers x 64, 20.3 GiB free").
    QString memoryText() const;

signals:
    // `keepHyperparameters`: a network with the shown one's recipe (edited, saved as a model file,
    // its file read again): the form's values stay; another recipe (another model, a recipe
    // edited in the file) brings its own.
    void modelChanged(const QString& name, bool keepHyperparameters);
    void errorOccurred(const QString& message);
    // What the page did, for the window's log (a model file saved).
    void logMessage(const QString& message);

protected:
    bool eventFilter(QObject* watched, QEvent* event) override;

private:
    // Drops the saved-not-chosen file `path` from every network's entry: it is chosen now.
    void forgetSavedNotChosen(const QString& path);
    bool m_sameRecipe = false; // setModel: the new network trains with the shown one's recipe
    // The form's column as wide as the form's minimum (its fields' texts change it).
    void fitFormColumn();
    void showModel();
    // What the chosen network needs of the host's memory with the form's towers, batch, optimizer,
    // moving average and gradient accumulation (engine::hostMemoryNeed and addAccumulation of the
    // network showModel built), against what this process may take: in red, saying so, where a
    // run could not start.
    void showMemory();
    void chooseModelFile();
    void chooseSaveFile();
    void editModel();
    // The Edit… window for the chosen network: its own file's text, or the file an earlier
    // Edit… of it saved and did not choose (editorCancelled).
    std::unique_ptr<ModelFileEditor> makeEditor();
    // The picker's text for a model file's network: "<name> (model file)".
    static QString modelFileItem(const QString& name);

    int m_classes = 0;
    bool m_gpuTowers = false;
    // What the memory row follows of the chosen network, or why it could not be built.
    std::optional<engine::NetworkBytes> m_networkBytes;
    QString m_buildError;
    QComboBox* m_modelCombo;
    QPushButton* m_openFile;
    QPushButton* m_saveFile;
    QPushButton* m_edit;
    // The file each model file's network was opened from or saved to (the networks are kept for
    // the process: engine::keepModel).
    QHash<const engine::ModelInfo*, QString> m_paths;
    // The file an Edit… of each network saved and then cancelled (editorCancelled), until that
    // file is chosen (forgetSavedNotChosen).
    QHash<const engine::ModelInfo*, QString> m_savedNotChosen;
    QString m_lastFolder; // where the last model file was opened or saved
    QLabel* m_description;
    QLabel* m_total;
    QLabel* m_memory;
    QTableView* m_table;
    LayerTableModel* m_layers;
    HyperparameterForm* m_form;
    QScrollArea* m_formScroll;
};

} // namespace towers::ui
