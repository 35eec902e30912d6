#include "ui/widgets/hyperparameter_form.h"

#include <QButtonGroup>
#include <QCheckBox>
#include <QComboBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QLocale>
#include <QPushButton>
#include <QRadioButton>
#include <QSpinBox>
#include <QStackedWidget>
#include <QVBoxLayout>

#include <cmath>

#include "engine/data/validation_split.h"
#include "engine/errors.h"
#include "engine/optim/optimizer.h"
#include "engine/train/checkpoint.h"
#include "ui/plots/plot_widget.h"
#include "ui/widgets/validated_field.h"
#include "ui/widgets/wheel_guard.h"

namespace towers::ui {

namespace {

QString num(double v)
{
    return QString::number(v, 'g', 10);
}

// A form page of its own for one schedule kind's constants.
QWidget* formPage(QWidget* parent, std::initializer_list<std::pair<QString, QWidget*>> rows)
{
    auto* page = new QWidget(parent);
    auto* form = new QFormLayout(page);
    form->setContentsMargins(0, 0, 0, 0);
    for (const auto& [label, w] : rows) form->addRow(label, w);
    return page;
}

// One line of a form made of several widgets side by side, without margins; each widget with its
// stretch factor (0: its own size).
QWidget* rowOf(QWidget* parent, std::initializer_list<std::pair<QWidget*, int>> widgets)
{
    auto* row = new QWidget(parent);
    auto* layout = new QHBoxLayout(row);
    layout->setContentsMargins(0, 0, 0, 0);
    for (const auto& [w, stretch] : widgets) layout->addWidget(w, stretch);
    return row;
}

} // namespace

HyperparameterForm::HyperparameterForm(QWidget* parent) : QWidget(parent)
{
    buildUi();
    setConfig(engine::TrainConfig{});
}

ValidatedField* HyperparameterForm::field(const QString& name) const
{
    return findChild<ValidatedField*>(name);
}

ValidatedField* HyperparameterForm::makeField(const char* name, ValidatedField::Syntax syntax,
                                              ValidatedField::Check check, const QString& tip)
{
    using F = ValidatedField;
    auto* f = new F(syntax, std::move(check), this);
    f->setObjectName(QString::fromLatin1(name));
    f->setHint(tip);
    connect(f, &F::edited, this, &HyperparameterForm::update);
    return f;
}

void HyperparameterForm::buildUi()
{
    auto* top = new QVBoxLayout(this);
    top->setContentsMargins(0, 0, 0, 0);

    // Optimizer
    top->addWidget(buildOptimizerBox());

    // Learning rate and schedule
    top->addWidget(buildLearningRateBox());

    // Batch and length
    top->addWidget(buildRunBox());

    // Regularisation and seed
    top->addWidget(buildRegularisationBox());

    // Checkpoints and logging
    top->addWidget(buildCheckpointBox());

    m_summary = new QLabel(this);
    m_summary->setObjectName(QStringLiteral("summary"));
    m_summary->setWordWrap(true);
    m_summary->setTextFormat(Qt::PlainText); // messages with "<" and ">" shown as they are
    top->addWidget(m_summary);
    top->addStretch(1);

    connect(m_optimizer, &QComboBox::currentIndexChanged, this, &HyperparameterForm::update);
    connect(m_schedule, &QComboBox::currentIndexChanged, this, [this] {
        m_scheduleParams->setCurrentIndex(m_schedule->currentIndex());
        update();
    });
    // The stack takes the height of the page shown, not of its tallest page.
    connect(m_scheduleParams, &QStackedWidget::currentChanged, this,
            &HyperparameterForm::fitScheduleParams);
    fitScheduleParams();
    guardWheel(this); // the form scrolls: the wheel turns a box only once it has the focus
}

QGroupBox* HyperparameterForm::buildOptimizerBox()
{
    using F = ValidatedField;
    auto* optBox = new QGroupBox(tr("Optimizer"), this);
    auto* optForm = new QFormLayout(optBox);
    m_optimizer = new QComboBox(optBox);
    for (const auto& k : engine::optimizerKinds())
        m_optimizer->addItem(QString::fromStdString(k), QString::fromStdString(k));
    m_optimizer->setToolTip(
        tr("sgd: the tutorial's plain gradient descent; momentum and nesterov: PyTorch's SGD; "
           "adam: PyTorch's Adam; adamw: PyTorch's AdamW, Adam with the weight decay applied "
           "to the weights by the update instead of added to the gradient"));
    optForm->addRow(tr("&Optimizer:"), m_optimizer);
    m_momentum = makeField("momentum", F::Syntax::Decimal, F::between(0, true, 1, true),
                           tr("Momentum, in (0, 1)"));
    m_momentumRow = m_momentum;
    optForm->addRow(tr("Momentum:"), m_momentum);
    m_beta1 =
        makeField("beta1", F::Syntax::Decimal, F::between(0, false, 1, true), tr("Adam's beta1"));
    m_beta2 =
        makeField("beta2", F::Syntax::Decimal, F::between(0, false, 1, true), tr("Adam's beta2"));
    m_adamRow = rowOf(optBox, {{new QLabel(QStringLiteral("β₁"), optBox), 0},
                               {m_beta1, 0},
                               {new QLabel(QStringLiteral("β₂"), optBox), 0},
                               {m_beta2, 0}});
    optForm->addRow(tr("Betas:"), m_adamRow);
    return optBox;
}

QGroupBox* HyperparameterForm::buildLearningRateBox()
{
    using F = ValidatedField;
    auto* lrBox = new QGroupBox(tr("Learning rate"), this);
    auto* lrForm = new QFormLayout(lrBox);
    m_lr = makeField("lr", F::Syntax::Decimal, F::between(0, true, 100, false),
                     tr("The base learning rate (the peak for one-cycle)"));
    m_findLr = new QPushButton(tr("&Find…"), lrBox);
    m_findLr->setToolTip(
        tr("The range test: a few steps with the learning rate rising until the loss runs "
           "away, on the loaded dataset with these settings; suggests a learning rate"));
    connect(m_findLr, &QPushButton::clicked, this, &HyperparameterForm::findLearningRateRequested);
    lrForm->addRow(tr("&Learning rate:"), rowOf(lrBox, {{m_lr, 1}, {m_findLr, 0}}));
    m_schedule = new QComboBox(lrBox);
    const std::pair<engine::LrSchedule::Kind, QString> kinds[] = {
        {engine::LrSchedule::Kind::Constant, tr("constant")},
        {engine::LrSchedule::Kind::Exponential, tr("exponential decay (the tutorial's)")},
        {engine::LrSchedule::Kind::Step, tr("step decay at milestones")},
        {engine::LrSchedule::Kind::Cosine, tr("cosine with warm-up")},
        {engine::LrSchedule::Kind::OneCycle, tr("one-cycle")},
    };
    for (const auto& [kind, label] : kinds) m_schedule->addItem(label, int(kind));
    lrForm->addRow(tr("&Schedule:"), m_schedule);
    m_scheduleParams = new QStackedWidget(lrBox);
    m_decayRate = makeField("decayRate", F::Syntax::Decimal, F::between(0, true, 1, false),
                            tr("Factor per decay period"));
    m_decayEpochs =
        makeField("decayEpochs", F::Syntax::Decimal, F::positive(), tr("Epochs per decay period"));
    m_staircase = new QCheckBox(tr("staircase (whole periods)"), lrBox);
    m_gamma = makeField("gamma", F::Syntax::Decimal, F::between(0, true, 1, false),
                        tr("Factor at each milestone"));
    m_milestones =
        makeField("milestones", F::Syntax::IntegerList, F::increasingPositive(),
                  tr("Epochs at which the rate is multiplied by gamma, e.g. 30, 60, 90"));
    m_warmupEpochs = makeField("warmupEpochs", F::Syntax::Decimal, F::atLeast(0),
                               tr("Linear warm-up, in epochs"));
    m_minLr =
        makeField("minLr", F::Syntax::Decimal, F::atLeast(0), tr("The rate at the end of the run"));
    m_warmupFraction = makeField("warmupFraction", F::Syntax::Decimal, F::between(0, true, 1, true),
                                 tr("Share of the run spent rising to the peak"));
    m_divFactor = makeField("divFactor", F::Syntax::Decimal, F::atLeast(1),
                            tr("The start rate is lr / this"));
    m_cosineAnneal = new QCheckBox(tr("cosine way down (else linear)"), lrBox);
    connect(m_staircase, &QCheckBox::toggled, this, &HyperparameterForm::update);
    connect(m_cosineAnneal, &QCheckBox::toggled, this, &HyperparameterForm::update);
    m_scheduleParams->addWidget(new QWidget(m_scheduleParams)); // constant: nothing to set
    m_scheduleParams->addWidget(
        formPage(m_scheduleParams, {{tr("Decay rate:"), m_decayRate},
                                    {tr("Decay every (epochs):"), m_decayEpochs},
                                    {QString(), m_staircase}}));
    m_scheduleParams->addWidget(formPage(
        m_scheduleParams, {{tr("Gamma:"), m_gamma}, {tr("Milestones (epochs):"), m_milestones}}));
    m_scheduleParams->addWidget(
        formPage(m_scheduleParams,
                 {{tr("Warm-up (epochs):"), m_warmupEpochs}, {tr("Final rate:"), m_minLr}}));
    m_scheduleParams->addWidget(
        formPage(m_scheduleParams, {{tr("Warm-up share:"), m_warmupFraction},
                                    {tr("Start divisor:"), m_divFactor},
                                    {QString(), m_cosineAnneal}}));
    lrForm->addRow(m_scheduleParams);
    m_plot = new PlotWidget(tr("Learning rate over the run"), lrBox);
    m_plot->setAxisLabels(tr("step"), tr("learning rate"));
    m_plot->setMinimumHeight(150);
    m_plot->addSeries(tr("learning rate"));
    lrForm->addRow(m_plot);
    return lrBox;
}

QGroupBox* HyperparameterForm::buildRunBox()
{
    using F = ValidatedField;
    auto* runBox = new QGroupBox(tr("Batch and length"), this);
    auto* runForm = new QFormLayout(runBox);
    m_batch = new QSpinBox(runBox);
    m_batch->setObjectName(QStringLiteral("batch"));
    m_batch->setRange(1, 65536);
    m_batchTip = tr("Examples each tower computes at once: per step, or per accumulated batch");
    m_batch->setToolTip(m_batchTip);
    connect(m_batch, &QSpinBox::valueChanged, this, &HyperparameterForm::update);
    // A global batch larger than the training set is refused at this field too, as the fields
    // refuse their values: the field to change.
    m_batchMessage = ValidatedField::newMessageLabel(runBox);
    m_batchMessage->setObjectName(QStringLiteral("batchMessage"));
    auto* batchField = new QWidget(runBox);
    auto* batchLayout = new QVBoxLayout(batchField);
    batchLayout->setContentsMargins(0, 0, 0, 0);
    batchLayout->setSpacing(1);
    batchLayout->addWidget(m_batch);
    batchLayout->addWidget(m_batchMessage);
    batchField->setFocusProxy(m_batch);
    runForm->addRow(tr("&Batch per tower:"), batchField);
    // Gradient accumulation: a global batch larger than the towers' memory holds at once. A global
    // batch too large for the training set is refused at the batch field (the one it names).
    m_accumulate = new QSpinBox(runBox);
    m_accumulate->setObjectName(QStringLiteral("accumulate"));
    m_accumulate->setRange(1, engine::TrainConfig::kMaxAccumulate);
    m_accumulateTip =
        tr("Batches each tower runs one after the other per step, their gradients summed before "
           "one update: a global batch this many times larger, in the memory of one batch "
           "(the layer outputs of the batch per tower). 1: none. (towers-cli train --accumulate)");
    m_accumulate->setToolTip(m_accumulateTip);
    connect(m_accumulate, &QSpinBox::valueChanged, this, &HyperparameterForm::update);
    runForm->addRow(tr("Accumulated batches:"), m_accumulate);
    m_globalBatch = new QLabel(runBox);
    m_globalBatch->setObjectName(QStringLiteral("globalBatch"));
    m_globalBatch->setWordWrap(true); // a large batch's digits do not widen the form
    runForm->addRow(tr("Global batch:"), m_globalBatch);
    m_bySteps = new QRadioButton(tr("s&teps"), runBox);
    m_byEpochs = new QRadioButton(tr("&epochs"), runBox);
    auto* group = new QButtonGroup(runBox);
    group->addButton(m_bySteps);
    group->addButton(m_byEpochs);
    connect(m_bySteps, &QRadioButton::toggled, this, &HyperparameterForm::update);
    m_steps = makeField("steps", F::Syntax::Integer,
                        F::between(1, false, double(engine::TrainConfig::kMaxSteps), false),
                        tr("Global steps of the run"));
    // The configuration's own limit (towers-cli's --epochs too), refused here with the reason.
    m_epochs = makeField("epochs", F::Syntax::Decimal,
                         F::between(0, true, engine::TrainConfig::kMaxEpochs, false),
                         tr("Passes over the training set"));
    runForm->addRow(tr("Length:"),
                    rowOf(runBox, {{m_bySteps, 0}, {m_steps, 1}, {m_byEpochs, 0}, {m_epochs, 1}}));
    // What an epoch is made of, beside its length: a training set whose classes are far apart in
    // size trains on its classes equally often. Its mnemonic is one of the page's few free
    // letters.
    m_balanced = new QCheckBox(tr("Sample the classes e&qually"), runBox);
    m_balanced->setObjectName(QStringLiteral("balanced"));
    m_balanced->setToolTip(
        tr("Every epoch gives every class that has training images an equal share of its "
           "examples: a small class's images are repeated, a large class's drawn afresh each "
           "epoch. For a training set whose classes are far apart in size (the Data page's "
           "Images per class outlines the small ones), so that the network does not learn to "
           "favour the large classes. The epoch keeps the set's length; evaluation counts the "
           "test set as it is. Off: every image once an epoch, in a fresh order. "
           "(towers-cli train --sampling balanced)"));
    connect(m_balanced, &QCheckBox::toggled, this, &HyperparameterForm::update);
    runForm->addRow(QString(), m_balanced);
    return runBox;
}

QGroupBox* HyperparameterForm::buildRegularisationBox()
{
    using F = ValidatedField;
    auto* regBox = new QGroupBox(tr("Regularisation"), this);
    auto* regForm = new QFormLayout(regBox);
    m_weightDecayOn = new QCheckBox(tr("override"), regBox);
    m_weightDecayOn->setToolTip(
        tr("Off: each model's own weight decay (the tutorial's 0.004 on its fc layers)"));
    m_weightDecay = makeField("weightDecay", F::Syntax::Decimal, F::atLeast(0),
                              tr("Coefficient of 0.5·‖w‖² for the weights; with adamw, the "
                                 "decoupled decay (w shrinks by learning rate × this each step)"));
    regForm->addRow(tr("&Weight decay:"),
                    rowOf(regBox, {{m_weightDecayOn, 0}, {m_weightDecay, 1}}));
    m_emaOn = new QCheckBox(tr("on"), regBox);
    m_emaOn->setToolTip(tr("Evaluate with moving averages of the weights (the tutorial's 0.9999)"));
    m_emaDecay = makeField("emaDecay", F::Syntax::Decimal, F::between(0, true, 1, true),
                           tr("Decay of the moving average"));
    regForm->addRow(tr("EM&A:"), rowOf(regBox, {{m_emaOn, 0}, {m_emaDecay, 1}}));
    m_labelSmoothing =
        makeField("labelSmoothing", F::Syntax::Decimal, F::between(0, false, 1, true),
                  tr("Train towards 1 − x on the label and x spread over every class (PyTorch's "
                     "label_smoothing; 0: none, 0.1 is usual). Evaluation's cross-entropy stays "
                     "the plain one. (towers-cli train --label-smoothing)"));
    regForm->addRow(tr("Label smooth&ing:"), m_labelSmoothing);
    m_clipGradNorm =
        makeField("clipGradNorm", F::Syntax::Decimal, F::atLeast(0),
                  tr("Scale the averaged gradients down to this global norm when theirs is larger "
                     "(PyTorch's clip_grad_norm_; 0: no clipping, 1 is usual). With an L2 weight "
                     "decay its term is part of the gradient; with adamw it is not. "
                     "(towers-cli train --clip-grad-norm)"));
    regForm->addRow(tr("Ma&x gradient norm:"), m_clipGradNorm);
    connect(m_weightDecayOn, &QCheckBox::toggled, this, &HyperparameterForm::update);
    connect(m_emaOn, &QCheckBox::toggled, this, &HyperparameterForm::update);
    m_seed = makeField("seed", F::Syntax::Integer, {},
                       tr("Seeds the weights, the data order and the distortions"));
    regForm->addRow(tr("See&d:"), m_seed);
    // Fine-tuning: the weights of another run's checkpoint instead of the seed's draw.
    m_initFrom = new QLineEdit(regBox);
    m_initFrom->setObjectName(QStringLiteral("initFrom"));
    m_initFrom->setClearButtonEnabled(true);
    m_initFrom->setPlaceholderText(tr("the seed's draw"));
    m_initFrom->setToolTip(
        tr("Start from the weights of this checkpoint of the same model (fine-tuning): its moving "
           "averages where it has them; the classifier starts afresh when the dataset's classes "
           "are not the checkpoint's. Empty: the seed's draw. (towers-cli train --init-from)"));
    auto* chooseInit = new QPushButton(tr("C&hoose…"), regBox);
    connect(chooseInit, &QPushButton::clicked, this, [this] {
        const QString file =
            QFileDialog::getOpenFileName(this, tr("Start from a checkpoint"), m_initFrom->text(),
                                         tr("Checkpoints (*.safetensors);;All files (*)"));
        if (file.isEmpty()) return;
        setInitFrom(file);
        emit initFromChosen(file, describeInitFrom());
    });
    // Described as it changes (typed, chosen, cleared by its ✕): a checkpoint that cannot be read,
    // or is another model's, is refused here, not when the run (maybe queued) starts.
    connect(m_initFrom, &QLineEdit::textChanged, this, [this] {
        describeInitFrom();
        update();
    });
    regForm->addRow(tr("Sta&rt from:"), rowOf(regBox, {{m_initFrom, 1}, {chooseInit, 0}}));
    m_initInfo = new QLabel(regBox);
    m_initInfo->setObjectName(QStringLiteral("initInfo"));
    m_initInfo->setWordWrap(true);
    m_initInfo->setTextFormat(Qt::PlainText);
    m_initInfo->hide();
    regForm->addRow(QString(), m_initInfo);
    return regBox;
}

QGroupBox* HyperparameterForm::buildCheckpointBox()
{
    using F = ValidatedField;
    auto* ckBox = new QGroupBox(tr("Checkpoints, evaluation, log"), this);
    auto* ckForm = new QFormLayout(ckBox);
    m_checkpointEvery = makeField("checkpointEvery", F::Syntax::Integer, F::atLeast(0),
                                  tr("Steps between checkpoints; 0 = at the end and on stop only"));
    m_keep = new QSpinBox(ckBox);
    m_keep->setRange(1, 1000);
    m_keep->setPrefix(tr("keep "));
    m_keep->setToolTip(tr("How many of the newest checkpoints to keep; the checkpoint of the best "
                          "evaluation so far (on the validation set when one is held out, else "
                          "on the test set) is kept besides them"));
    connect(m_keep, &QSpinBox::valueChanged, this, &HyperparameterForm::update);
    ckForm->addRow(tr("&Checkpoint every:"), rowOf(ckBox, {{m_checkpointEvery, 1}, {m_keep, 0}}));
    m_evalEvery = makeField("evalEvery", F::Syntax::Integer, F::atLeast(0),
                            tr("Steps between evaluations (on the validation set when one is held "
                               "out, else on the test set); 0 = at the end only"));
    ckForm->addRow(tr("Eval&uate every:"), m_evalEvery);
    m_validation = new QDoubleSpinBox(ckBox);
    m_validation->setObjectName(QStringLiteral("validation"));
    m_validation->setRange(0, 100 * engine::kMaxValidationShare);
    m_validation->setDecimals(1);
    m_validation->setSingleStep(5);
    m_validation->setSuffix(tr(" %"));
    m_validation->setSpecialValueText(tr("none: evaluate on the test set"));
    m_validation->setToolTip(
        tr("The share of each class's training images held out as a validation set: the run "
           "evaluates on it, its best checkpoint is the best on it, and the test set stays "
           "unseen until you measure that checkpoint on it (Classify page, or towers-cli eval "
           "--checkpoint RUN --best). Every run with the same share holds out the same images."));
    connect(m_validation, &QDoubleSpinBox::valueChanged, this, &HyperparameterForm::update);
    ckForm->addRow(tr("&Validation set:"), m_validation);
    m_patience = new QSpinBox(ckBox);
    m_patience->setObjectName(QStringLiteral("patience"));
    m_patience->setRange(0, 99999);
    m_patience->setSpecialValueText(tr("never"));
    // The suffix follows the count (" evaluation" for 1); QSpinBox takes one suffix for all.
    // Set only when it changes: setting it writes the field's text again.
    const auto patienceSuffix = [this](int n) {
        const QString suffix = tr(" evaluation(s) without gain", nullptr, n);
        if (m_patience->suffix() != suffix) m_patience->setSuffix(suffix);
    };
    patienceSuffix(m_patience->value());
    connect(m_patience, &QSpinBox::valueChanged, this, patienceSuffix);
    m_patience->setToolTip(tr("Stop the run early once this many evaluations in a row were no "
                              "better than the best before them (its checkpoint is kept); needs "
                              "evaluations during the run"));
    connect(m_patience, &QSpinBox::valueChanged, this, &HyperparameterForm::update);
    m_minDelta = new QDoubleSpinBox(ckBox);
    m_minDelta->setObjectName(QStringLiteral("minDelta"));
    m_minDelta->setRange(0, 100 * engine::kMaxMinDelta);
    m_minDelta->setDecimals(2);
    m_minDelta->setSingleStep(0.1);
    m_minDelta->setSuffix(tr(" points"));
    m_minDelta->setSpecialValueText(tr("any gain"));
    m_minDelta->setToolTip(
        tr("What an evaluation must gain on the best before it, in points of accuracy, to count "
           "as better for the early stop (Keras' min_delta): a noisy accuracy that creeps up by "
           "hundredths no longer keeps a run going. The best checkpoint is still the highest."));
    connect(m_minDelta, &QDoubleSpinBox::valueChanged, this, &HyperparameterForm::update);
    ckForm->addRow(tr("Sto&p early after:"), m_patience);
    ckForm->addRow(tr("Better by more tha&n:"), m_minDelta);
    m_logEvery = makeField("logEvery", F::Syntax::Integer, F::atLeast(1),
                           tr("Steps between metrics and log lines"));
    ckForm->addRow(tr("Lo&g every:"), m_logEvery);
    return ckBox;
}

void HyperparameterForm::fitScheduleParams()
{
    const int current = m_scheduleParams->currentIndex();
    for (int i = 0; i < m_scheduleParams->count(); ++i) {
        const auto policy = i == current ? QSizePolicy::Preferred : QSizePolicy::Ignored;
        m_scheduleParams->widget(i)->setSizePolicy(policy, policy);
    }
    m_scheduleParams->adjustSize();
}

void HyperparameterForm::setConfig(const engine::TrainConfig& c)
{
    m_loading = true;
    m_base = c;
    m_optimizer->setCurrentIndex(
        std::max(0, m_optimizer->findData(QString::fromStdString(c.optimizer.kind))));
    m_momentum->setText(num(c.optimizer.momentum));
    m_beta1->setText(num(c.optimizer.beta1));
    m_beta2->setText(num(c.optimizer.beta2));
    const auto& s = c.schedule;
    m_lr->setText(num(s.lr));
    m_schedule->setCurrentIndex(std::max(0, m_schedule->findData(int(s.kind))));
    m_scheduleParams->setCurrentIndex(m_schedule->currentIndex());
    m_decayRate->setText(num(s.decayRate));
    m_decayEpochs->setText(num(s.decayEpochs));
    m_staircase->setChecked(s.staircase);
    m_gamma->setText(num(s.gamma));
    QStringList ms;
    for (auto m : s.milestones) ms << QString::number(m);
    m_milestones->setText(ms.join(QStringLiteral(", ")));
    m_warmupEpochs->setText(num(s.warmupEpochs));
    m_minLr->setText(num(s.minLr));
    m_warmupFraction->setText(num(s.warmupFraction));
    m_divFactor->setText(num(s.divFactor));
    m_cosineAnneal->setChecked(s.cosineAnneal);
    m_batch->setValue(c.batchPerTower);
    m_accumulate->setValue(c.accumulate);
    m_towers = c.towers;
    m_bySteps->setChecked(c.steps > 0);
    m_byEpochs->setChecked(c.steps <= 0);
    m_steps->setText(QString::number(c.steps > 0 ? c.steps : 1000));
    m_epochs->setText(num(c.epochs > 0 ? c.epochs : 10));
    m_balanced->setChecked(c.sampling == "balanced");
    m_weightDecayOn->setChecked(c.weightDecay >= 0);
    m_weightDecay->setText(num(c.weightDecay >= 0 ? c.weightDecay : 0.0005));
    m_emaOn->setChecked(c.emaDecay > 0);
    m_emaDecay->setText(num(c.emaDecay > 0 ? c.emaDecay : 0.9999));
    m_labelSmoothing->setText(num(c.labelSmoothing));
    m_clipGradNorm->setText(num(c.clipGradNorm));
    m_seed->setText(QString::number(c.seed));
    m_initFrom->setText(QString::fromStdString(c.initFrom));
    describeInitFrom();
    m_checkpointEvery->setText(QString::number(c.checkpointEvery));
    m_keep->setValue(c.keepCheckpoints);
    m_evalEvery->setText(QString::number(c.evalEvery));
    m_validation->setValue(100 * c.validation);
    m_patience->setValue(c.patience);
    m_minDelta->setValue(100 * c.minDelta);
    m_logEvery->setText(QString::number(c.logEvery));
    m_loading = false;
    update();
}

engine::TrainConfig HyperparameterForm::config() const
{
    engine::TrainConfig c = m_base;
    c.towers = m_towers;
    c.optimizer.kind = m_optimizer->currentData().toString().toStdString();
    // Constants of another optimizer keep their last good value.
    if (m_momentum->isValid()) c.optimizer.momentum = m_momentum->value();
    if (m_beta1->isValid()) c.optimizer.beta1 = m_beta1->value();
    if (m_beta2->isValid()) c.optimizer.beta2 = m_beta2->value();
    auto& s = c.schedule;
    s.kind = engine::LrSchedule::Kind(m_schedule->currentData().toInt());
    s.lr = m_lr->value();
    s.decayRate = m_decayRate->value();
    s.decayEpochs = m_decayEpochs->value();
    s.staircase = m_staircase->isChecked();
    s.gamma = m_gamma->value();
    s.milestones.clear();
    for (auto m : m_milestones->integers()) s.milestones.push_back(m);
    s.warmupEpochs = m_warmupEpochs->value();
    s.minLr = m_minLr->value();
    s.warmupFraction = m_warmupFraction->value();
    s.divFactor = m_divFactor->value();
    s.cosineAnneal = m_cosineAnneal->isChecked();
    c.batchPerTower = m_batch->value();
    c.accumulate = m_accumulate->value();
    c.steps = m_bySteps->isChecked() ? m_steps->integer() : 0;
    c.epochs = m_bySteps->isChecked() ? 0 : m_epochs->value();
    c.sampling = m_balanced->isChecked() ? "balanced" : "uniform";
    c.weightDecay = m_weightDecayOn->isChecked() ? m_weightDecay->value() : -1;
    c.emaDecay = m_emaOn->isChecked() ? m_emaDecay->value() : 0;
    if (m_labelSmoothing->isValid()) c.labelSmoothing = m_labelSmoothing->value();
    if (m_clipGradNorm->isValid()) c.clipGradNorm = m_clipGradNorm->value();
    c.seed = std::uint64_t(m_seed->text().toULongLong());
    c.initFrom = m_initFrom->text().trimmed().toStdString();
    c.checkpointEvery = m_checkpointEvery->integer();
    c.keepCheckpoints = m_keep->value();
    c.evalEvery = m_evalEvery->integer();
    c.validation = m_validation->value() / 100;
    c.patience = m_patience->value();
    c.minDelta = m_minDelta->value() / 100;
    c.logEvery = m_logEvery->integer();
    return c;
}

void HyperparameterForm::setLearningRate(double lr)
{
    m_lr->setText(QString::number(lr, 'g', 6));
    update(); // as an edit: the checks, the summary, the plot and (through changed()) the settings
}

void HyperparameterForm::setInitFrom(const QString& checkpoint)
{
    if (m_initFrom->text() != checkpoint) {
        m_initFrom->setText(checkpoint); // described and checked as it changes (textChanged)
        return;
    }
    describeInitFrom(); // the same file again is checked again: it may read now
    update();
}

void HyperparameterForm::setModel(const std::string& name, const std::string& definition)
{
    m_base.model = name;
    m_base.modelDefinition = definition;
    describeInitFrom(); // its checkpoint against this model
    update();
}

QString HyperparameterForm::describeInitFrom()
{
    const QString file = m_initFrom->text().trimmed();
    m_initInfo->setVisible(!file.isEmpty());
    m_initError.clear();
    if (file.isEmpty()) return {};
    try {
        const engine::CheckpointInfo info = engine::readCheckpointInfo(file.toStdString());
        const QString model = QString::fromStdString(info.model);
        QString text = tr("%1 at step %2 on %3, %4 classes")
                           .arg(model)
                           .arg(info.step)
                           .arg(QString::fromStdString(info.dataset))
                           .arg(info.classNames.size());
        if (info.model != m_base.model) {
            m_initError =
                tr("%1 is a checkpoint of %2, not of this page's model %3")
                    .arg(QFileInfo(file).fileName(), model, QString::fromStdString(m_base.model));
            text += tr(" — not this page's model (%1)").arg(QString::fromStdString(m_base.model));
        }
        m_initInfo->setText(text);
        return model;
    } catch (const std::exception& e) {
        m_initError = QString::fromUtf8(e.what());
        m_initInfo->setText(m_initError);
        return {};
    }
}

void HyperparameterForm::setTowers(int towers)
{
    m_towers = std::max(1, towers);
    update();
}

void HyperparameterForm::setTrainingSetSize(std::int64_t examples,
                                            std::vector<std::int64_t> classCounts)
{
    m_trainCount = std::max<std::int64_t>(0, examples);
    m_classCounts = std::move(classCounts);
    update();
}

std::int64_t HyperparameterForm::trainingImages() const
{
    const double share = m_validation->value() / 100;
    if (!m_classCounts.empty())
        return m_trainCount - engine::validationImages(m_classCounts, share);
    return m_trainCount - std::llround(double(m_trainCount) * share);
}

std::int64_t HyperparameterForm::globalBatch() const
{
    return std::int64_t(m_towers) * m_batch->value() * m_accumulate->value();
}

std::int64_t HyperparameterForm::stepsPerEpoch() const
{
    const std::int64_t images = trainingImages();
    return images > 0 ? images / globalBatch() : 0; // the last partial batch is dropped
}

std::int64_t HyperparameterForm::totalSteps() const
{
    if (m_bySteps->isChecked()) return m_steps->isValid() ? m_steps->integer() : 0;
    const std::int64_t perEpoch = stepsPerEpoch();
    if (perEpoch < 1 || !m_epochs->isValid()) return 0;
    return config().totalSteps(perEpoch);
}

void HyperparameterForm::update()
{
    if (m_loading) return;
    const QString kind = m_optimizer->currentData().toString();
    m_momentum->setEnabled(kind == QLatin1String("momentum") || kind == QLatin1String("nesterov"));
    m_adamRow->setEnabled(kind == QLatin1String("adam") || kind == QLatin1String("adamw"));
    m_steps->setEnabled(m_bySteps->isChecked());
    m_epochs->setEnabled(m_byEpochs->isChecked());
    m_weightDecay->setEnabled(m_weightDecayOn->isChecked());
    m_emaDecay->setEnabled(m_emaOn->isChecked());
    m_minDelta->setEnabled(m_patience->value() > 0);
    m_minLr->setExternalError(
        m_minLr->value() > m_lr->value() ? tr("must not exceed the learning rate") : QString());

    const std::int64_t global = globalBatch();
    const int accumulate = m_accumulate->value();
    m_globalBatch->setText(tr("%n tower(s)", nullptr, m_towers) +
                           (accumulate > 1
                                ? tr(" × %1 × %2 accumulated = <b>%3</b> examples per step")
                                      .arg(m_batch->value())
                                      .arg(accumulate)
                                      .arg(QLocale().toString(global))
                                : tr(" × %1 = <b>%2</b> examples per step")
                                      .arg(m_batch->value())
                                      .arg(QLocale().toString(global))));

    // The first refusal, in form order, among the fields that matter now.
    m_error.clear();
    const std::pair<QString, ValidatedField*> fields[] = {
        {tr("momentum"), m_momentum->isEnabled() ? m_momentum : nullptr},
        {tr("beta1"), m_adamRow->isEnabled() ? m_beta1 : nullptr},
        {tr("beta2"), m_adamRow->isEnabled() ? m_beta2 : nullptr},
        {tr("learning rate"), m_lr},
        {tr("decay rate"), m_scheduleParams->currentIndex() == 1 ? m_decayRate : nullptr},
        {tr("decay epochs"), m_scheduleParams->currentIndex() == 1 ? m_decayEpochs : nullptr},
        {tr("gamma"), m_scheduleParams->currentIndex() == 2 ? m_gamma : nullptr},
        {tr("milestones"), m_scheduleParams->currentIndex() == 2 ? m_milestones : nullptr},
        {tr("warm-up"), m_scheduleParams->currentIndex() == 3 ? m_warmupEpochs : nullptr},
        {tr("final rate"), m_scheduleParams->currentIndex() == 3 ? m_minLr : nullptr},
        {tr("warm-up share"), m_scheduleParams->currentIndex() == 4 ? m_warmupFraction : nullptr},
        {tr("start divisor"), m_scheduleParams->currentIndex() == 4 ? m_divFactor : nullptr},
        {tr("steps"), m_bySteps->isChecked() ? m_steps : nullptr},
        {tr("epochs"), m_byEpochs->isChecked() ? m_epochs : nullptr},
        {tr("weight decay"), m_weightDecayOn->isChecked() ? m_weightDecay : nullptr},
        {tr("EMA decay"), m_emaOn->isChecked() ? m_emaDecay : nullptr},
        {tr("label smoothing"), m_labelSmoothing},
        {tr("gradient clipping"), m_clipGradNorm},
        {tr("seed"), m_seed},
        {tr("checkpoint interval"), m_checkpointEvery},
        {tr("evaluation interval"), m_evalEvery},
        {tr("log interval"), m_logEvery},
    };
    for (const auto& [name, f] : fields)
        if (f && !f->isValid()) {
            m_error = tr("%1: %2").arg(name, f->error());
            break;
        }
    // A batch the training set cannot fill once: no step could be made (the batch loader refuses
    // it at the start). Said at the batch field, and in the accumulation's tooltip: either is the
    // field to change.
    const QString batchError =
        m_trainCount > 0 && global > trainingImages()
            ? tr("a global batch of %1 is larger than the %2 training images")
                  .arg(QLocale().toString(global), QLocale().toString(trainingImages()))
            : QString();
    ValidatedField::showMessage(m_batchMessage, batchError);
    m_batch->setToolTip(ValidatedField::tooltip(batchError, m_batchTip));
    m_accumulate->setToolTip(ValidatedField::tooltip(batchError, m_accumulateTip));
    if (m_error.isEmpty() && !batchError.isEmpty()) m_error = tr("batch: %1").arg(batchError);
    engine::TrainConfig c;
    if (m_error.isEmpty()) {
        c = config();
        try {
            c.validate();
        } catch (const std::exception& e) {
            m_error = QString::fromUtf8(e.what());
        }
    }
    // Worth keeping with a "Start from" that cannot start a run (the rest is the user's).
    m_savable = m_error.isEmpty();
    if (m_error.isEmpty() && !m_initError.isEmpty())
        m_error = tr("start from: %1").arg(m_initError);
    if (m_error.isEmpty()) {
        const std::int64_t total = totalSteps();
        const auto steps = [](std::int64_t n) {
            return n == 1 ? tr("1 step") : tr("%1 steps").arg(QLocale().toString(n));
        };
        const double examples = double(total) * double(global);
        m_summary->setText(
            total > 0
                ? tr("%1, %2 in all%3%4.")
                      .arg(steps(total))
                      .arg(examples == 1
                               ? tr("1 example")
                               : tr("%1 examples").arg(QLocale().toString(examples, 'g', 4)))
                      .arg(stepsPerEpoch() > 0 ? tr(", %1 per epoch").arg(steps(stepsPerEpoch()))
                                               : QString())
                      .arg(c.validation > 0 && m_trainCount > 0
                               ? tr("; %1 of the %2 training images held out for validation")
                                     .arg(QLocale().toString(m_trainCount - trainingImages()))
                                     .arg(QLocale().toString(m_trainCount))
                               : QString())
                : tr("Load the dataset to see how many steps the epochs make."));
        updatePlot(c);
    } else {
        m_summary->setText(QStringLiteral("⚠ ") + m_error);
        m_plot->clearData();
        m_plot->setEmptyMessage(tr("No schedule while a setting is refused (see under the form)"));
    }
    emit changed();
}

void HyperparameterForm::updatePlot(const engine::TrainConfig& c)
{
    const std::int64_t total = totalSteps();
    // Without the set size, plot over the steps with a nominal epoch of 1,000 steps.
    const std::int64_t perEpoch = stepsPerEpoch() > 0 ? stepsPerEpoch() : 1000;
    if (total < 1) {
        m_plot->clearData();
        m_plot->setEmptyMessage(tr("Load the dataset to see the schedule over the epochs"));
        return;
    }
    QVector<double> x, y;
    const std::int64_t points = std::min<std::int64_t>(total, 800);
    try {
        for (std::int64_t i = 0; i < points; ++i) {
            const std::int64_t step = points == total ? i : i * (total - 1) / (points - 1);
            x << double(step);
            y << c.schedule.at(step, perEpoch, total);
        }
    } catch (const engine::Error&) {
        x.clear();
        y.clear();
    }
    m_plot->setData(0, x, y);
}

} // namespace towers::ui
