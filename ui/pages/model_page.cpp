#include "ui/pages/model_page.h"

#include <QComboBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLocale>
#include <QScrollArea>
#include <QScrollBar>
#include <QTableView>
#include <QVBoxLayout>

#include "engine/models/registry.h"
#include "ui/models/layer_table_model.h"
#include "ui/widgets/hyperparameter_form.h"

namespace towers::ui {

ModelPage::ModelPage(QWidget* parent)
    : QWidget(parent), m_layers(new LayerTableModel(this)), m_form(new HyperparameterForm)
{
    auto* top = new QHBoxLayout(this);
    auto* modelBox = new QGroupBox(tr("Model"), this);
    auto* modelLayout = new QVBoxLayout(modelBox);
    auto* form = new QFormLayout;
    m_modelCombo = new QComboBox(modelBox);
    for (const auto& info : engine::modelRegistry())
        m_modelCombo->addItem(QString::fromStdString(info.name), QString::fromStdString(info.name));
    form->addRow(tr("&Model:"), m_modelCombo);
    m_total = new QLabel(modelBox);
    form->addRow(tr("Parameters:"), m_total);
    modelLayout->addLayout(form);
    m_description = new QLabel(modelBox);
    m_description->setWordWrap(true);
    modelLayout->addWidget(m_description);
    m_table = new QTableView(modelBox);
    m_table->setModel(m_layers);
    m_table->verticalHeader()->hide();
    // Rows as tall as their text (a model of twenty layers fits without scrolling).
    m_table->verticalHeader()->setDefaultSectionSize(m_table->fontMetrics().height() + 6);
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_table->setWordWrap(false);
    m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    m_table->horizontalHeader()->setStretchLastSection(true);
    modelLayout->addWidget(m_table, 1);
    top->addWidget(modelBox, 3);

    auto* scroll = new QScrollArea(this);
    scroll->setWidget(m_form);
    scroll->setWidgetResizable(true);
    scroll->setFrameShape(QFrame::NoFrame);
    scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    // Never narrower than the form: with no horizontal scroll bar, its fields' right edge would be
    // cut off.
    scroll->setMinimumWidth(std::max(430, m_form->minimumSizeHint().width() +
                                              scroll->verticalScrollBar()->sizeHint().width() + 4));
    top->addWidget(scroll, 2);

    connect(m_modelCombo, &QComboBox::currentIndexChanged, this, [this] {
        showModel();
        emit modelChanged(modelName());
    });
    showModel();
}

ModelPage::~ModelPage() = default;

QString ModelPage::modelName() const
{
    return m_modelCombo->currentData().toString();
}

void ModelPage::setModelName(const QString& name)
{
    const int i = m_modelCombo->findData(name);
    if (i >= 0) m_modelCombo->setCurrentIndex(i);
}

qint64 ModelPage::totalParameters() const
{
    return m_layers->totalParameters();
}

void ModelPage::setClasses(int classes)
{
    if (classes == m_classes) return;
    m_classes = classes;
    showModel();
}

void ModelPage::showModel()
{
    const auto& info = engine::findModel(modelName().toStdString());
    const int classes = m_classes >= 2 ? m_classes : info.numClasses;
    // Building allocates the parameters (no initialisation): quick even for the 20M-parameter net.
    const auto model = info.build(classes);
    m_layers->setRows(model->layerTable());
    m_description->setText(
        tr("%1<br>Input %2 × %3 × %4, %5 classes; meant for <b>%6</b>; %7 MFLOP per "
           "training example.")
            .arg(QString::fromStdString(info.description).toHtmlEscaped())
            .arg(info.inputShape[0])
            .arg(info.inputShape[1])
            .arg(info.inputShape[2])
            .arg(classes)
            .arg(QString::fromStdString(info.defaultDataset))
            .arg(QLocale().toString(model->trainingFlopsPerExample() * 1e-6, 'f', 1)));
    m_total->setText(tr("<b>%1</b> trainable").arg(QLocale().toString(model->parameterCount())));
}

} // namespace towers::ui
