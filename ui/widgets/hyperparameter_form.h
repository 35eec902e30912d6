#pragma once
// The run's hyperparameters, edited as a TrainConfig: optimizer and its constants, learning rate
// and schedule (with a plot of the rate over the whole run), batch per tower, the batches each
// tower accumulates per step and the resulting global batch, length in steps or epochs, the
// classes sampled equally or not, weight decay, EMA, seed, checkpoint, evaluation and log
// intervals, the validation set held out and the patience of an early stop. Values are refused at
// the field with the reason; rules between fields come from TrainConfig::validate() and are shown
// under the form.
#include <QWidget>

#include <cstdint>
#include <vector>

#include "engine/train/train_config.h"
#include "ui/widgets/validated_field.h"

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QGroupBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QRadioButton;
class QSpinBox;
class QStackedWidget;

namespace towers::ui {

class PlotWidget;

class HyperparameterForm : public QWidget
{
    Q_OBJECT
public:
    explicit HyperparameterForm(QWidget* parent = nullptr);

    // Fills every field from `config` (fields the form does not edit are kept as they are).
    void setConfig(const engine::TrainConfig& config);
    // The configuration the fields describe, on top of the last setConfig(). Only meaningful when
    // isValid().
    engine::TrainConfig config() const;
    // False while any field refuses its value or validate() refuses the whole.
    bool isValid() const { return m_error.isEmpty(); }
    // Whether config() is worth keeping as the last configuration: valid but perhaps for the
    // "Start from" checkpoint (one that cannot be read today: a drive not mounted), so that the
    // other fields' edits are kept meanwhile.
    bool isSavable() const { return m_savable; }
    // Another network for the same fields (an edited one): only the model changes, every field
    // stays as typed (a round trip through config() would rewrite refused or empty ones).
    void setModel(const std::string& name, const std::string& definition);
    // The first reason, "learning rate: must be greater than 0"; empty when valid.
    QString error() const { return m_error; }

    // What the global batch and the schedule plot depend on, set by the other pages.
    void setTowers(int towers);
    // The training set's size (0: unknown) and, when known, its images per class, which tell
    // exactly how many a validation share holds out (else it is estimated from the size).
    void setTrainingSetSize(std::int64_t examples, std::vector<std::int64_t> classCounts = {});
    // The images the run trains on: the set less the validation share's.
    std::int64_t trainingImages() const;
    std::int64_t stepsPerEpoch() const; // 0 when the set size is unknown
    std::int64_t totalSteps() const;    // 0 when it cannot be told yet

    PlotWidget* schedulePlot() const { return m_plot; }
    ValidatedField* field(const QString& name) const; // "lr", "momentum", ... (tests)
    // Puts `lr` in the learning-rate field (the range test's suggestion).
    void setLearningRate(double lr);
    QPushButton* findLearningRateButton() const { return m_findLr; }
    // The checkpoint a new run starts from (--init-from); empty: the seed's draw.
    void setInitFrom(const QString& checkpoint);

signals:
    void changed();
    // "Find…" beside the learning rate: run the range test with the pages' configuration.
    void findLearningRateRequested();
    // A checkpoint was chosen in the file dialog as the start; `model` is its model ("" when its
    // header cannot be read).
    void initFromChosen(const QString& checkpoint, const QString& model);

private:
    void buildUi();
    // A field named `name` (field() finds it) with `tip` as its hint; an edit updates the form.
    ValidatedField* makeField(const char* name, ValidatedField::Syntax syntax,
                              ValidatedField::Check check, const QString& tip);
    // The form's group boxes, top to bottom, each with its fields made and connected; buildUi()
    // lays them out.
    QGroupBox* buildOptimizerBox();    // the optimizer and its constants
    QGroupBox* buildLearningRateBox(); // the rate, the schedule, its constants and its plot
    // Batch per tower, accumulation, global batch, length, the classes sampled equally.
    QGroupBox* buildRunBox();
    QGroupBox* buildRegularisationBox(); // weight decay, EMA, seed, "Start from"
    QGroupBox* buildCheckpointBox();     // checkpoints, evaluation, validation, early stop, log
    void update();
    // The examples of a step: towers × batch per tower × accumulated batches.
    std::int64_t globalBatch() const;
    void updatePlot(const engine::TrainConfig& c);
    void fitScheduleParams();
    // Reads the header of the "Start from" checkpoint into m_initInfo; returns its model ("" when
    // none or unreadable).
    QString describeInitFrom();

    engine::TrainConfig m_base;
    int m_towers = 1;
    std::int64_t m_trainCount = 0;
    std::vector<std::int64_t> m_classCounts;
    QString m_error;
    bool m_loading = false;

    QComboBox* m_optimizer;
    ValidatedField* m_momentum;
    ValidatedField* m_beta1;
    ValidatedField* m_beta2;
    QWidget* m_momentumRow;
    QWidget* m_adamRow;
    ValidatedField* m_lr;
    QPushButton* m_findLr;
    QComboBox* m_schedule;
    QStackedWidget* m_scheduleParams;
    ValidatedField* m_decayRate;
    ValidatedField* m_decayEpochs;
    QCheckBox* m_staircase;
    ValidatedField* m_gamma;
    ValidatedField* m_milestones;
    ValidatedField* m_warmupEpochs;
    ValidatedField* m_minLr;
    ValidatedField* m_warmupFraction;
    ValidatedField* m_divFactor;
    QCheckBox* m_cosineAnneal;
    QSpinBox* m_batch;
    QString m_batchTip;     // its tooltip
    QLabel* m_batchMessage; // under it: why the global batch is refused
    QSpinBox* m_accumulate; // TrainConfig::accumulate: batches each tower runs per step
    QString m_accumulateTip;
    QLabel* m_globalBatch;
    QRadioButton* m_bySteps;
    QRadioButton* m_byEpochs;
    ValidatedField* m_steps;
    ValidatedField* m_epochs;
    QCheckBox* m_balanced; // TrainConfig::sampling: "balanced" when checked, else "uniform"
    QCheckBox* m_weightDecayOn;
    ValidatedField* m_weightDecay;
    QCheckBox* m_emaOn;
    ValidatedField* m_emaDecay;
    ValidatedField* m_labelSmoothing;
    ValidatedField* m_clipGradNorm;
    ValidatedField* m_seed;
    QLineEdit* m_initFrom;  // TrainConfig::initFrom: a checkpoint file, or empty
    QLabel* m_initInfo;     // what that checkpoint is (its header), or why it cannot be read
    QString m_initError;    // why the "Start from" checkpoint cannot start a run ("": it can)
    bool m_savable = false; // isSavable()
    ValidatedField* m_checkpointEvery;
    QSpinBox* m_keep;
    ValidatedField* m_evalEvery;
    QDoubleSpinBox* m_validation; // TrainConfig::validation, in percent
    QSpinBox* m_patience;
    QDoubleSpinBox* m_minDelta; // TrainConfig::minDelta, in points of accuracy
    ValidatedField* m_logEvery;
    QLabel* m_summary;
    PlotWidget* m_plot;
};

} // namespace towers::ui
