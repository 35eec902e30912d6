#pragma once
// The Model & hyperparameters page: the model picker with its layer table (layer, output shape,
// parameters) and total parameter count, beside the run's hyperparameters.
#include <QWidget>

class QComboBox;
class QLabel;
class QTableView;

namespace towers::ui {

class HyperparameterForm;
class LayerTableModel;

class ModelPage : public QWidget
{
    Q_OBJECT
public:
    explicit ModelPage(QWidget* parent = nullptr);
    ~ModelPage() override;

    QString modelName() const;
    void setModelName(const QString& name);
    LayerTableModel* layerModel() const { return m_layers; }
    // Trainable parameters of the chosen model (the layer table's total).
    qint64 totalParameters() const;
    HyperparameterForm* form() const { return m_form; }
    // The classes the model is built with: the loaded dataset's (0: the model's default). The
    // layer table, parameter count and description follow.
    void setClasses(int classes);
    int classes() const { return m_classes; }

signals:
    void modelChanged(const QString& name);

private:
    void showModel();

    int m_classes = 0;
    QComboBox* m_modelCombo;
    QLabel* m_description;
    QLabel* m_total;
    QTableView* m_table;
    LayerTableModel* m_layers;
    HyperparameterForm* m_form;
};

} // namespace towers::ui
